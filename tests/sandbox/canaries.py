"""What the canary modules share: a job runner and the two judgements every hostile program gets (their
`pool`, one warm container for a whole module, is conftest's)."""
import textwrap

from sandbox import JudgeConfig, Limits, verify_submission
from sandbox.verdicts import SANDBOX_ERROR

FAST = JudgeConfig(limits=Limits(time_limit_s=1.0))


def run(pool, code, tests, config=FAST):
    return verify_submission({"id": "canary", "code": textwrap.dedent(code), "tests": tests}, pool, config)


def refused(out):
    """A scored failure: not accepted, reward 0, never an infrastructure verdict."""
    assert out["verdict"] not in ("accepted", SANDBOX_ERROR), out
    assert out["reward"] == 0.0, out
    return out


def no_faults(pool, before):
    assert pool.stats["faults"] == before, "a program caused an infrastructure fault (container recycled)"
