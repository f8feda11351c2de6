"""Test-suite strength by mutation: do a code problem's tests reject programs that behave differently from
its reference? Tests that accept such a program reward a wrong answer as surely as a sandbox hole does.

    scores = score_test_strength([Subject(id, reference_code, tests, cpu_s)], StrengthConfig(), verify_config)
    scores[id] -> Strength(generated=6, changing=5, survived=2, undetermined=0, unjudged=0,
                           example="line 2: ...", weak=True)

For each problem whose reference passed all its tests (steps 2-4 are sandbox passes, each ONE
verify_rows call for all mutants of all problems):
1. Mutants: up to `mutants` one-edit variants of the reference (tasks/verification/mutants.py: arithmetic,
   comparison, logical, constant and boundary operators; deterministic in (seed, problem id)). A reference
   that cannot be mutated (it does not parse, or is nested too deeply) gets none, with the reason in
   Strength.note; it never fails the stage.
2. Screen: every mutant runs on `screen_tests` of its problem's tests (a seeded sample, the same for all
   mutants of a problem). A mutant rejected there is rejected by the whole suite: behaviour-changing
   (the reference passes that test, so their outputs differ) and killed.
3. Full suite: the mutants the screen let through run on ALL the tests (skipped when the screen already
   ran them all).
4. Probes: the mutants every test accepts run on the problem's probe inputs (tasks/verification/
   probes.py: inputs near the tests' inputs, of the same shape), as does the reference, twice; the sandbox
   reports what each program printed or returned (JudgeConfig.output_chars) and the host compares.
   The reference run here is its `ast.unparse` text (mutants.reference_text), the form every mutant is
   printed in, so nothing that depends on the source text (a docstring, `inspect.getsource`, a line
   number in a message) can make a mutant differ.
   ONE sandbox job holds all the probe runs of a problem: the reference first, each mutant, the reference
   again (one program that runs the k-th of them, given k; for stdin the probe input is handed to the
   chosen program as its whole stdin, unchanged). A job runs in one container, every program of it forked
   from that container's runner, so all of them share its str-hash secret (each container's runner has
   its own, `python -I`) and any other per-container state: set and dict order over strings is the same
   for the reference and every mutant, and an equivalent mutant cannot differ from the reference because
   they ran in different containers. The reference's two runs then catch what still varies from run to
   run inside one container (the `random` module, the clock, object addresses). A probe's program that
   loops costs one deadline per probe (the job skips no run after a timeout; the tests already accepted
   the mutant within the same limit, so this is rare).
Counting rule (equivalent mutants never count; see the one way weakness can be overstated):
- behaviour-changing: the tests reject the mutant, or it answers differently from the reference (or
  crashes, or runs out of time) on at least one probe where the reference's two runs succeeded and
  agreed (two runs: a reference whose answer follows randomness is no yardstick there). Equality is the
  judge's own (compare_stdout for stdout, values_equal for returned values, with the judge's float
  tolerance), so a difference the tests could never see is no difference. Running out of time counts
  only when the mutant, when stopped, had spent over TIME_FACTOR times the CPU of the reference's slower
  run on that probe (the factor a test applies, below): so never where the reference itself took more
  than 1/TIME_FACTOR of the limit (a mutant as fast as a reference that barely made it is no different),
  nor for a wall-clock kill of a program that a loaded host starved of CPU (it was waiting, not
  looping). Such a timeout leaves that probe out of the mutant's judgement, either way.
- survived: behaviour-changing, yet accepted by every test.
- equivalent as far as the probes show (in no count): accepted by every test, and answering as the
  reference does on every probe that judged it (at least one). It may be an equivalent program
  (`x < 0` → `x <= 0` where x = 0 gives the same answer), and counting it would call good tests weak.
- undetermined: accepted by every test, and judged by no probe: none could be derived (probes.py returns
  None: `Solution().f(...)` asserts, non-literal arguments, stdin of single letters), the reference failed
  or disagreed with itself on every probe, or every probe's verdict on it was a timeout the margin above
  does not count. Nothing shows it differs or agrees, so it is in neither count, but it is counted.
- weak (the verdict): with c behaviour-changing mutants, s of them surviving and u undetermined, the
  survival fraction lies between s/c (every undetermined mutant equivalent) and (s + u)/(c + u) (every
  one a survivor). None when no mutant was generated (the reference cannot be mutated): nothing tried
  the tests, so the problem is not scored (Strength.scored False; the verify stage writes its columns
  null, never False). True when even the low end exceeds `max_survival`; False when even the high end
  does not (mutants ran but none of either kind: False, nothing accepted differs); otherwise None,
  undetermined: the tests accept mutants that no probe could judge, and those could make the suite weak. An
  undetermined problem is NOT dropped (nothing shows its tests accept a wrong program) but flagged: the
  verify stage writes weak_tests null and mutants_undetermined > 0 in `verifications`, never False.
  Weakness is overstated only where a probe lies outside the problem's stated domain and the mutant
  differs only there (probes.py keeps counts, sizes, signs and sorted order to keep that rare).
- unjudged: a mutant whose runs hit a sandbox fault (counted, never scored; the caller decides).
All runs are sandbox runs through verify_rows with the caller's VerifyConfig (pool, Dask, limits); no
mutant or reference runs on the host. Each mutant run gets a CPU limit of max(1 s, 4 × the reference's
slowest test) capped by the judge's limit, and on tests stops at its first timeout: a mutant looping
forever costs one deadline there. On a test, a mutant that much slower than its reference counts as
rejected (which can only hide weakness, never invent it); on a probe, see the timeout rule above.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from sandbox.compare import compare_stdout, decode_value, values_equal
from sandbox.testcases import STDIO, count_tests, parse_test_suite
from sandbox.verdicts import ACCEPTED, SANDBOX_ERROR, SKIPPED, TIMEOUT, WRONG_ANSWER
from tasks.config_checks import STRICT_KEYS, ConfigError, check_float, check_int
from tasks.progress import Progress, Shifted
from tasks.verification.mutants import Mutant, generate_mutants, reference_text
from tasks.verification.probes import derive_probes
from tasks.verification.verify import VerifyConfig, verify_rows

__all__ = ["Strength", "StrengthConfig", "Subject", "WEAK_TESTS_ACTIONS", "probe_bundle", "score_test_strength",
           "verdict"]

log = logging.getLogger(__name__)

WEAK_TESTS_ACTIONS = ("drop", "tag")
OUTPUT_CHARS = 65_536  # a probe's output kept for comparison; a longer one is a difference when the
#   other program's fits, and the probe is discarded when the reference's does not
TIME_FACTOR = 4.0  # a mutant's CPU limit per test: this many times the reference's slowest test ...
MIN_TIME_S = 1.0  # ... but at least this (a Python program's start-up alone is ~0.05 s). On a probe, a
#   mutant's timeout is a difference only after over TIME_FACTOR times the reference's CPU there
RAN = (ACCEPTED, WRONG_ANSWER)  # a probe's run produced an output (its placeholder verdict is meaningless)


@dataclass(frozen=True)
class StrengthConfig:
    """Mutant scoring in the verify stage. Every default carries its reason."""
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)

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
    #   who asked for verified data expects none of it; "tag": keep them, flagged in `verifications`.
    #   Undetermined problems (weak=None: mutants no probe could judge) are kept and flagged either way
    probes: int = 8  # derived inputs per problem that tell a surviving mutant from an equivalent one;
    #   each costs one run of every mutant the tests accept (and two of the reference)
    screen_tests: int = 2  # tests per mutant in the first pass: most mutants fail one of a few tests, so
    #   only the survivors of the screen pay for the full suite (16+ tests) and the probes. Measured on the
    #   demo's 145 problems (466 mutants): 1 test lets 117 through (2,577 runs in all), 2 let 80 through
    #   (2,373 runs), 4 let 55 through (2,861 runs)
    mutant_seed: int = 0  # which mutants, probes and screen tests are drawn (with the problem id)

    def __post_init__(self) -> None:
        """Ranges and names, checked when the config is made (CLI, flow parameters and pipeline alike)."""
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
    weak: bool | None = False  # the verdict (module rule); None: not scored (no mutant) or undetermined
    undetermined: int = 0  # accepted by every test, judged by no probe (in neither count)
    note: str | None = None  # why no mutant was made (mutants.Mutants.reason), when none was

    @property
    def scored(self) -> bool:
        """Whether any mutant tried the tests: one was generated (module rule)."""
        return self.generated > 0

    @property
    def undetermined_verdict(self) -> bool:
        """Scored, and weak is None: accepted mutants no probe judged could make the tests weak."""
        return self.scored and self.weak is None


def verdict(st: Strength, max_survival: float) -> bool | None:
    """weak: True, False or None (not scored: no mutant generated; or undetermined), by the module's rule
    (bounds on the survival fraction)."""
    if not st.scored:
        return None
    if st.changing and st.survived / st.changing > max_survival:
        return True
    u = st.undetermined
    if u and (st.survived + u) / (st.changing + u) > max_survival:
        return None
    return False


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


def _reference_cpu(ref_runs: list[dict]) -> dict[int, float]:
    """Probe index -> CPU seconds of the reference's slower run (where both runs said)."""
    cpu: dict[int, float] = {}
    seen = [_outputs(r) for r in ref_runs]
    for i in seen[0]:
        times = [runs.get(i, {}).get("cpu") for runs in seen]
        if all(isinstance(t, (int, float)) for t in times):
            cpu[i] = float(max(times))
    return cpu


def _differs(result: dict, valid: dict[int, Any], mode: str, tolerance,
             ref_cpu: dict[int, float] | None = None) -> bool | None:
    """Does a mutant's probe run answer differently from the reference on some valid probe? True: on one it
    answered differently, crashed, or timed out having spent over TIME_FACTOR times the CPU of the
    reference's slower run there (`ref_cpu`); False: it agreed on every probe that judged it, and one
    did; None: no probe judged it (none valid, or each skipped or a timeout short of that factor: a
    reference near the limit, or a wall-clock kill of a program starved on a loaded host)."""
    runs = _outputs(result)
    if not runs:  # the program never ran a probe (a compile error): it answers nothing
        return True if valid else None
    ref_cpu = ref_cpu or {}
    judged = False
    for i, want in valid.items():
        e = runs.get(i)
        if e is None or e["verdict"] == SKIPPED:
            continue
        if e["verdict"] == TIMEOUT:
            cpu = e.get("cpu")
            if i in ref_cpu and isinstance(cpu, (int, float)) and cpu > TIME_FACTOR * ref_cpu[i]:
                return True
            continue
        if e["verdict"] not in RAN or not _same(mode, e.get("output"), want, tolerance):
            return True
        judged = True
    return False if judged else None


PROBE_FN = "__klear_probe__"  # the bundle's call-based entry point (its first argument picks the program;
#   for stdin, the first line of the input does)
_STDIO_BUNDLE = """\
def __klear_probe__():
    import os
    programs = {programs}
    data = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data += chunk
    which, _, rest = data.partition(b"\\n")
    fd = os.memfd_create("stdin")
    view = memoryview(rest)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    return compile(programs[int(which)], "solution.py", "exec")


exec(globals().pop("__klear_probe__")())
"""
_CALL_BUNDLE = """\
def __klear_probe__(which, *args):
    import sys
    import types
    programs = {programs}
    module = types.ModuleType("solution")
    module.__file__ = __file__
    module.__builtins__ = __builtins__
    sys.modules["solution"] = module
    ns = module.__dict__
    try:
        exec(compile(programs[which], "solution.py", "exec"), ns)
    except SystemExit:
        pass
    target = ns.get("Solution")
    if isinstance(target, type) and hasattr(target, {name!r}):
        fn = getattr(target(), {name!r})
    elif {name!r} in ns:
        fn = ns[{name!r}]
    else:
        raise NameError("function {name!r} is not defined")
    return fn(*args)
"""


def probe_bundle(probes: dict, programs: list[str]) -> tuple[str, dict]:
    """(code, tests) of the ONE job that runs each of `programs` on each probe, program-major: test
    k * len(probes) + i is program k on probe i. The code runs the program its test names as that program
    would run alone: for stdin as the main script, with the probe input (and nothing else) on its stdin,
    which it reads by fd, sys.stdin or /dev/stdin alike; call-based imported as a module `solution`, the
    function taken from a `Solution` class first, as the runner does."""
    mode = parse_test_suite(probes).mode
    inputs = probes["inputs"]
    if mode == STDIO:
        code = _STDIO_BUNDLE.format(programs=repr(tuple(programs)))
        return code, {"inputs": [f"{k}\n{x}" for k in range(len(programs)) for x in inputs],
                      "outputs": [""] * (len(programs) * len(inputs))}
    code = _CALL_BUNDLE.format(programs=repr(tuple(programs)), name=probes["fn_name"])
    return code, {"fn_name": PROBE_FN, "inputs": [[k, *args] for k in range(len(programs)) for args in inputs],
                  "outputs": [None] * (len(programs) * len(inputs))}


def _split(result: dict, programs: int, probes: int) -> list[dict]:
    """A bundle's result as one result per program, its entries indexed by probe."""
    out = [{"verdict": result["verdict"], "details": {"tests": []}} for _ in range(programs)]
    for e in (result.get("details") or {}).get("tests", []):
        k, i = divmod(e.get("index", -1), probes)
        if 0 <= k < programs:
            out[k]["details"]["tests"].append({**e, "index": i})
    return out


class _Runs:
    """verify_rows calls with one running progress count across the passes (each pass `Shifted` by the rows
    of the passes before it)."""

    def __init__(self, base, progress):
        self.base, self.progress, self.done = base, progress, 0

    def __call__(self, rows: list[dict], judge) -> list[dict]:
        if not rows:
            return []
        staged = Shifted(self.progress, self.done) if self.progress is not None else None
        results = verify_rows(rows, dataclasses.replace(self.base, judge=judge), progress=staged)
        self.done += len(rows)
        return results


def _row(s: Subject, suffix: str, code: str, tests: Any, time_limit: float) -> dict:
    """A Submission row; the tests object is shared, not copied (Submission.as_row deep-copies it, and a
    problem's tests go into one row per mutant)."""
    return {"id": f"{s.id}#{suffix}", "code": code, "tests": tests, "time_limit": time_limit, "problem_id": s.id}


def _probes(s: Subject, config: StrengthConfig) -> dict | None:
    try:
        return derive_probes(s.tests, s.code, config.probes, config.mutant_seed, s.id)
    except Exception:  # a probe that cannot be derived leaves the mutants undetermined, never fails the stage
        log.exception("deriving probes for %s", s.id)
        return None


def score_test_strength(subjects: list[Subject], config: StrengthConfig, verify_config=None,
                        progress: Progress | None = None) -> dict[str, Strength]:
    """Strength of each subject's tests (see the module's rules); {} when scoring is off. Three sandbox
    passes, each one verify_rows call for all problems: the screen, the full suite for the mutants the
    screen let through, the probes for those the full suite let through (one job per problem, with the
    reference)."""
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
        out[s.id].note = made.reason
        alive += [(s, j, m) for j, m in enumerate(made)]
    unmade = [s.id for s in subjects if not out[s.id].generated and out[s.id].note]
    if unmade:
        log.info("test strength: no mutants for %d problems (e.g. %s: %s)", len(unmade), unmade[0],
                 out[unmade[0]].note)

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

    # One probe job per problem: the reference (as printed like its mutants), each accepted mutant, the
    # reference again; see the module's rule for why they must share a job.
    problems = {a[0].id: a[0] for a in alive}
    accepted = {pid: [(j, m) for s, j, m in alive if s.id == pid] for pid in problems}
    probes = {pid: _probes(s, config) for pid, s in problems.items()}
    rows, jobs = [], []
    for pid, s in problems.items():
        if not probes[pid]:
            continue
        programs = [reference_text(s.code) or s.code, *(m.code for _, m in accepted[pid]), ]
        programs.append(programs[0])
        code, tests = probe_bundle(probes[pid], programs)
        rows.append(_row(s, "probes", code, tests, limit[pid]))
        jobs.append(pid)
    n_runs = max([len(r["tests"]["inputs"]) for r in rows] + [1])
    probe_judge = dataclasses.replace(judge, output_chars=OUTPUT_CHARS,
                                      limits=dataclasses.replace(judge.limits, max_timeouts=n_runs))
    results = dict(zip(jobs, runs(rows, probe_judge)))

    tolerance = base.judge.float_tolerance
    for pid, s in problems.items():  # accepted by every test: a survivor if some probe tells it apart
        st, mutants = out[pid], accepted[pid]
        if pid not in results:
            st.undetermined += len(mutants)  # no probe input: nothing shows whether it differs
            continue
        res = results[pid]
        if res["verdict"] == SANDBOX_ERROR:
            st.unjudged += len(mutants)
            continue
        mode = parse_test_suite(probes[pid]).mode
        split = _split(res, len(mutants) + 2, len(probes[pid]["inputs"]))
        refs = [split[0], split[-1]]
        valid = _valid_probes(refs, mode, tolerance)
        ref_cpu = _reference_cpu(refs)
        for (j, m), run in zip(mutants, split[1:-1]):
            differs = _differs(run, valid, mode, tolerance, ref_cpu)
            if differs is None:
                st.undetermined += 1
            elif differs:
                st.changing += 1
                st.survived += 1
                if st.example is None:
                    st.example = f"{m.description} ({m.operator})"
    for st in out.values():
        st.weak = verdict(st, config.max_survival)
    log.info("test strength: %d problems, %d mutants, %d behaviour-changing, %d survived, %d undetermined; "
             "%d weak, %d undetermined problems", len(out), sum(s.generated for s in out.values()),
             sum(s.changing for s in out.values()), sum(s.survived for s in out.values()),
             sum(s.undetermined for s in out.values()), sum(s.weak is True for s in out.values()),
             sum(s.undetermined_verdict for s in out.values()))
    return out
