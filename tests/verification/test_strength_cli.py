"""Mutant-scoring flags of `klear curate --verify-code`: a bad value is one line naming the flag, exit 2,
before any work starts."""
import pytest

from tests.flows.test_bad_input import assert_one_line, klear


@pytest.mark.parametrize("flag, value, msg", [
    ("--mutants", "-1", "mutants (--mutants) must be at least 0 (got -1)"),
    ("--max-survival", "1.5", "max_survival (--max-survival) must be at most 1.0 (got 1.5)"),
    ("--weak-tests", "keep", "weak_tests (--weak-tests) must be one of drop, tag (got 'keep')"),
    ("--mutant-seed", "-2", "mutant_seed (--mutant-seed) must be at least 0 (got -2)"),
])
def test_bad_strength_flag_is_one_line_exit_2(flag, value, msg):
    r = klear("curate", "--source", "a=/no/such.jsonl", "--verify-code", flag, value,
              timeout=120)
    assert_one_line(r, msg)


def test_curate_strength_flags_default_to_the_config():
    from typer.main import get_command

    from flows.cli import app
    from tasks.verification.strength import StrengthConfig

    params = {p.name: p.default for p in get_command(app).commands["curate"].params}
    for name in ("mutants", "max_survival", "weak_tests", "mutant_seed"):
        assert params[name] == getattr(StrengthConfig(), name), name
