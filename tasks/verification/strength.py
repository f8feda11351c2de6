"""Test-suite strength by mutation: do a code problem's tests reject programs that behave differently from
its reference? Tests that accept such a program reward a wrong answer as surely as a sandbox hole does.

    scores = score_test_strength([Subject(id, reference_code, tests, cpu_s)], StrengthConfig(), verify_config)
    scores[id] -> Strength(generated=6, changing=5, survived=2, unjudged=0, example="line 2: ...", weak=True)

For each problem whose reference passed all its tests (steps 2-4 are sandbox passes, each ONE
verify_rows call for all mutants of all problems):
1. Mutants: up to `mutants` one-edit variants of the reference (tasks/verification/mutants.py: arithmetic,
   comparison, logical, constant and boundary operators; deterministic in (seed, problem id)).
2. Screen: every mutant runs on `screen_tests` of its problem's tests (a seeded sample, the same for all
   mutants of a problem). A mutant rejected there is rejected by the whole suite: behaviour-changing
   (the reference passes that test, so their outputs differ) and killed.
3. Full suite: the mutants the screen let through run on ALL the tests (skipped when the screen already
   ran them all).
4. Probes: the mutants every test accepts run on the problem's probe inputs (tasks/verification/
   probes.py: inputs near the tests' inputs), as does the reference, twice; the sandbox reports what
   each program printed or returned (JudgeConfig.output_chars) and the host compares.
Counting rule (equivalent mutants never count; see the one way weakness can be overstated):
- behaviour-changing: the tests reject the mutant, or it answers differently from the reference (or
  crashes, or runs out of time) on at least one probe where the reference's two runs succeeded and
  agreed (two runs: a reference whose answer follows set or dict order, or randomness, is no yardstick
  there). Equality is the judge's own (compare_stdout for stdout, values_equal for returned values, with
  the judge's float tolerance), so a difference the tests could never see is no difference.
- survived: behaviour-changing, yet accepted by every test.
- a mutant the tests accept and no probe tells apart from the reference is left out of both counts: it
  may be an equivalent program (`x < 0` → `x <= 0` where x = 0 gives the same answer), and counting it
  would call good tests weak. So only mutants shown to be wrong count; weakness is never overstated by
  equivalent mutants. It can be overstated only where a probe lies outside the problem's stated domain
  and the mutant differs only there (probes.py keeps sizes and signs to keep that rare).
- weak: survived / behaviour-changing > `max_survival` (no behaviour-changing mutant: not weak; there
  is no evidence either way).
- unjudged: a mutant whose runs hit a sandbox fault (counted, never scored; the caller decides).
All runs are sandbox runs through verify_rows with the caller's VerifyConfig (pool, Dask, limits); no
mutant or reference runs on the host. Each mutant run gets a CPU limit of max(1 s, 4 × the reference's
slowest test) capped by the judge's limit, and stops at its first timeout: a mutant looping forever
costs one deadline. On a test, a mutant that much slower than its reference counts as rejected (which
can only hide weakness, never invent it); on a probe, running out of that time is a difference.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable

from sandbox.compare import compare_stdout, decode_value, values_equal
from sandbox.testcases import STDIO, count_tests, parse_tests
from sandbox.verdicts import ACCEPTED, SANDBOX_ERROR, SKIPPED, WRONG_ANSWER
from tasks.verification.mutants import Mutant, generate_mutants
from tasks.verification.probes import derive_probes

__all__ = ["Strength", "StrengthConfig", "Subject", "WEAK_TESTS_ACTIONS", "score_test_strength"]

log = logging.getLogger(__name__)

WEAK_TESTS_ACTIONS = ("drop", "tag")
OUTPUT_CHARS = 65_536  # a probe's output kept for comparison; a longer one is a difference when the
#   other program's fits, and the probe is discarded when the reference's does not
TIME_FACTOR = 4.0  # a mutant's CPU limit per test: this many times the reference's slowest test ...
MIN_TIME_S = 1.0  # ... but at least this (a Python program's start-up alone is ~0.05 s)
RAN = (ACCEPTED, WRONG_ANSWER)  # a probe's run produced an output (its placeholder verdict is meaningless)


@dataclass(frozen=True)
class StrengthConfig:
    """Mutant scoring in the verify stage. Every default carries its reason."""

    mutants: int = 6  # mutants per problem; 0 turns scoring off. 6 gives each of the 5 operator kinds a
    #   turn; the cost is what bounds it: on the demo (145 problems, 16-20 tests) scoring about doubles the
    #   verify stage (23 s → 45 s at load 5-8 on 2 cores), and each further mutant costs its screen plus,
    #   if the tests accept it, the full suite and the probes. Raise it for a finer fraction on real data
    max_survival: float = 0.2  # weak when MORE than this fraction of behaviour-changing mutants pass all
    #   tests: 1 survivor of 5-6 may be a mutant that differs only on an input outside the problem's domain
    #   (see the module's rule), 1 of 3 or 2 of 6 is a suite that lets wrong programs through. Measured
    #   (bench/strength.py): 3 of 157 HumanEval and 1 of 30 MBPP problems weak at 0.2, 8 and 5 at 0 (any
    #   survivor); each weak one's survivor, checked by hand, is a wrong program on an in-domain input
    weak_tests: str = "drop"  # "drop": weak problems become dropped rows (reason `weak_tests`), since a
    #   problem whose tests reward wrong programs poisons RL the same way a sandbox hole does, and a user
    #   who asked for verified data expects none of it; "tag": keep them, flagged in `verifications`
    probes: int = 8  # derived inputs per problem that tell a surviving mutant from an equivalent one;
    #   each costs one run of every mutant the tests accept (and two of the reference)
    screen_tests: int = 2  # tests per mutant in the first pass: most mutants fail one of a few tests, so
    #   only the survivors of the screen pay for the full suite (16+ tests) and the probes. Measured on the
    #   demo's 145 problems (466 mutants): 1 test lets 117 through (2,577 runs in all), 2 let 80 through
    #   (2,373 runs), 4 let 55 through (2,861 runs)
    mutant_seed: int = 0  # which mutants, probes and screen tests are drawn (with the problem id)

    def __post_init__(self) -> None:
        """Ranges and names, checked when the config is made (CLI, flow parameters and pipeline alike)."""
        from tasks.config_checks import ConfigError, check_float, check_int

        check_int(self, "mutants", 0, high=1000)
        check_float(self, "max_survival", 0.0, 1.0)
        if self.weak_tests not in WEAK_TESTS_ACTIONS:
            raise ConfigError("weak_tests", f"must be one of {', '.join(WEAK_TESTS_ACTIONS)} (got {self.weak_tests!r})")
        check_int(self, "probes", 1, high=1000)
        check_int(self, "screen_tests", 1)
        check_int(self, "mutant_seed", 0)

    @property
    def enabled(self) -> bool:
        return self.mutants > 0


@dataclass(frozen=True)
class Subject:
    """A problem to score: its id, reference code (accepted on all tests), tests, slowest test's CPU."""

    id: str
    code: str
    tests: Any
    cpu_s: float = 0.0


@dataclass
class Strength:
    generated: int = 0  # mutants made (at most StrengthConfig.mutants)
    changing: int = 0  # shown to behave differently from the reference
    survived: int = 0  # of those, accepted by every test
    unjudged: int = 0  # hit a sandbox fault (in neither count)
    example: str | None = None  # one surviving mutation, "line 2: `a + b` → `a - b` (arithmetic)"
    weak: bool = False


def _time_limit(judge, cpu_s: float) -> float:
    """CPU seconds per test for a problem's mutant and probe runs."""
    return min(judge.limits.time_limit_s, max(MIN_TIME_S, TIME_FACTOR * cpu_s))


def _same(mode: str, a: Any, b: Any, tolerance: float | None) -> bool:
    if a is None or b is None:
        return False
    if mode == STDIO:
        return compare_stdout(a, b, tolerance)[0]
    return values_equal(decode_value(a), decode_value(b), tolerance)


def _outputs(result: dict) -> dict[int, dict]:
    return {e["index"]: e for e in (result.get("details") or {}).get("tests", []) if "index" in e}


def _valid_probes(ref_runs: list[dict], mode: str, tolerance) -> dict[int, Any]:
    """Probe index -> the reference's output, where both runs ran, produced an output and agree."""
    if any(r["verdict"] == SANDBOX_ERROR for r in ref_runs):
        return {}
    first, second = (_outputs(r) for r in ref_runs)
    valid = {}
    for i, e in first.items():
        f = second.get(i)
        if f and e["verdict"] in RAN and f["verdict"] in RAN and _same(mode, e.get("output"), f.get("output"),
                                                                        tolerance):
            valid[i] = e["output"]
    return valid


def _differs(result: dict, valid: dict[int, Any], mode: str, tolerance) -> bool:
    """Does a mutant's probe run answer differently from the reference on some valid probe? A probe the
    mutant skipped (after a timeout elsewhere) tells nothing; one where it crashed or timed out differs."""
    runs = _outputs(result)
    if not runs:  # the program never ran a probe (a compile error): it answers nothing
        return bool(valid)
    for i, want in valid.items():
        e = runs.get(i)
        if e is None or e["verdict"] == SKIPPED:
            continue
        if e["verdict"] not in RAN or not _same(mode, e.get("output"), want, tolerance):
            return True
    return False


class _Runs:
    """verify_rows calls with one running progress count across the passes."""

    def __init__(self, base, progress):
        self.base, self.progress, self.done = base, progress, 0

    def __call__(self, rows: list[dict], judge) -> list[dict]:
        if not rows:
            return []
        from tasks.verification.verify import verify_rows

        done, progress = self.done, self.progress
        staged = (lambda d, t: progress(done + d, done + t)) if progress else None
        results = verify_rows(rows, dataclasses.replace(self.base, judge=judge), progress=staged)
        self.done += len(rows)
        return results


def _row(s: Subject, suffix: str, code: str, tests: Any, time_limit: float) -> dict:
    """A Submission row; the tests object is shared, not copied (Submission.as_row deep-copies it, and a
    problem's tests go into one row per mutant)."""
    return {"id": f"{s.id}#{suffix}", "code": code, "tests": tests, "time_limit": time_limit, "problem_id": s.id}


def score_test_strength(subjects: list[Subject], config: StrengthConfig, verify_config=None,
                        progress: Callable[[int, int], None] | None = None) -> dict[str, Strength]:
    """Strength of each subject's tests (see the module's rules); {} when scoring is off. Three sandbox
    passes, each one verify_rows call for all problems: the screen, the full suite for the mutants the
    screen let through, the probes for those the full suite let through (and the reference)."""
    from tasks.verification.verify import VerifyConfig

    if not config.enabled or not subjects:
        return {}
    base = verify_config or VerifyConfig()
    runs = _Runs(base, progress)
    out = {s.id: Strength() for s in subjects}
    limit = {s.id: _time_limit(base.judge, s.cpu_s) for s in subjects}
    alive: list[tuple[Subject, int, Mutant]] = []  # not rejected by any test run so far
    for s in subjects:
        made = generate_mutants(s.code, config.mutants, config.mutant_seed, s.id)
        out[s.id].generated = len(made)
        alive += [(s, j, m) for j, m in enumerate(made)]

    def sift(batch, results):
        """The batch's mutants every test accepted; the others counted (rejected: behaviour-changing)."""
        kept = []
        for (s, j, m), res in zip(batch, results):
            if res["verdict"] == SANDBOX_ERROR:
                out[s.id].unjudged += 1
            elif res["verdict"] != ACCEPTED:
                out[s.id].changing += 1  # rejected by a test the reference passes: their outputs differ
            else:
                kept.append((s, j, m))
        return kept

    limits = dataclasses.replace(base.judge.limits, max_timeouts=1)
    judge = dataclasses.replace(base.judge, max_tests=config.screen_tests, limits=limits, output_chars=0)
    alive = sift(alive, runs([_row(s, f"m{j}", m.code, s.tests, limit[s.id]) for s, j, m in alive], judge))
    judge = dataclasses.replace(judge, max_tests=0)  # every test
    screened_all = {s.id for s in subjects if count_tests(s.tests) <= config.screen_tests}
    partial = [a for a in alive if a[0].id not in screened_all]
    alive = [a for a in alive if a[0].id in screened_all] + sift(
        partial, runs([_row(s, f"m{j}", m.code, s.tests, limit[s.id]) for s, j, m in partial], judge))

    probes = {s.id: derive_probes(s.tests, s.code, config.probes, config.mutant_seed, s.id)
              for s in {a[0].id: a[0] for a in alive}.values()}
    rows, what = [], []
    for s in {a[0].id: a[0] for a in alive}.values():
        if probes[s.id]:
            rows += [_row(s, f"ref{r}", s.code, probes[s.id], limit[s.id]) for r in range(2)]
            what += [("ref", s.id, 0), ("ref", s.id, 1)]
    for s, j, m in alive:
        if probes[s.id]:
            rows.append(_row(s, f"m{j}#probe", m.code, probes[s.id], limit[s.id]))
            what.append(("mutant", s.id, j))
    results = dict(zip(what, runs(rows, dataclasses.replace(judge, output_chars=OUTPUT_CHARS))))

    tolerance = base.judge.float_tolerance
    for s, j, m in alive:  # accepted by every test: a survivor if some probe tells it from the reference
        run = results.get(("mutant", s.id, j))
        if run is None:
            continue  # no probe input: nothing shows it is not equivalent
        if run["verdict"] == SANDBOX_ERROR:
            out[s.id].unjudged += 1
            continue
        mode = parse_tests(probes[s.id]).mode
        valid = _valid_probes([results[("ref", s.id, 0)], results[("ref", s.id, 1)]], mode, tolerance)
        if _differs(run, valid, mode, tolerance):
            out[s.id].changing += 1
            out[s.id].survived += 1
            if out[s.id].example is None:
                out[s.id].example = f"{m.description} ({m.operator})"
    for st in out.values():
        st.weak = st.changing > 0 and st.survived / st.changing > config.max_survival
    log.info("test strength: %d problems, %d mutants, %d behaviour-changing, %d survived, %d weak",
             len(out), sum(s.generated for s in out.values()), sum(s.changing for s in out.values()),
             sum(s.survived for s in out.values()), sum(s.weak for s in out.values()))
    return out
