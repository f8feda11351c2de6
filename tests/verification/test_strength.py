"""Test-suite strength by mutation. Pure: the settings, the counting rule on given runs, the output the
judge keeps. Docker: hostile problems through the real sandbox, one behaviour per test, and the verify
stage's dataset version (rows in = kept + dropped)."""
import json
import re

import pyarrow as pa
import pytest

from sandbox.testcases import parse_test_suite
from sandbox.verdicts import program_output, result_row
from tasks.config_checks import ConfigError
from tasks.verification.strength import StrengthConfig, Subject, _differs, _valid_probes, score_test_strength
from tests.verification.test_verify import _docker_ok


# ------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("kwargs, flag", [
    ({"mutants": -1}, "--mutants"), ({"max_survival": 1.5}, "--max-survival"),
    ({"weak_tests": "keep"}, "--weak-tests"), ({"probes": 0}, "--probes"), ({"screen_tests": 0}, "--screen-tests"),
    ({"mutant_seed": -3}, "--mutant-seed"), ({"mutants": True}, "--mutants"),
])
def test_bad_settings_name_their_flag(kwargs, flag):
    with pytest.raises(ConfigError) as e:
        StrengthConfig(**kwargs)
    assert e.value.flag == flag


def test_scoring_off_scores_nothing():
    assert score_test_strength([Subject("p", "print(1)", {"inputs": ["\n"], "outputs": ["1\n"]})],
                               StrengthConfig(mutants=0)) == {}


# ----------------------------------------------------------------------------- counting rule (pure)
def _run(outputs, verdicts=None, verdict="wrong_answer"):
    verdicts = verdicts or ["wrong_answer"] * len(outputs)
    tests = [{"index": i, "verdict": v, "output": o} for i, (o, v) in enumerate(zip(outputs, verdicts))]
    return result_row("x", verdict, 0, len(tests), {"tests": tests})


def test_probes_where_the_reference_disagrees_with_itself_or_crashes_are_discarded():
    runs = [_run(["1\n", "2\n", None, "4\n"], ["wrong_answer", "wrong_answer", "runtime_error", "accepted"]),
            _run(["1\n", "3\n", None, "4\n"])]
    assert _valid_probes(runs, "stdio", None) == {0: "1\n", 3: "4\n"}


def test_a_mutant_differs_by_its_answer_or_its_crash_never_by_a_skipped_or_discarded_probe():
    valid = {0: "1\n", 3: "4\n"}
    assert not _differs(_run(["1 \n", "9\n", "9\n", "4\n"]), valid, "stdio", None)  # judge's own equality
    assert _differs(_run(["1\n", "2\n", None, "5\n"]), valid, "stdio", None)
    assert _differs(_run(["1\n", None, None, None], ["wrong_answer", "wrong_answer", "wrong_answer", "runtime_error"]),
                    valid, "stdio", None)
    assert not _differs(_run(["1\n", None, None, None], ["wrong_answer", "timeout", "skipped", "skipped"]),
                        valid, "stdio", None)
    assert _differs(result_row("x", "compile_error", 0, 4, {"reason": "SyntaxError"}), valid, "stdio", None)
    assert _differs(_run(["1\n", "2\n", None, "5\n"]), {}, "stdio", None) is None  # nothing judged it


def test_a_timeout_counts_only_after_four_times_the_references_cpu():
    # the limit is 1 s; the reference took 0.05 s on probe 0 and 0.6 s (> 1 s / 4) on probe 1
    from tasks.verification.strength import _reference_cpu

    refs = [_run(["1\n", "2\n"]), _run(["1\n", "2\n"])]
    for run, cpus in zip(refs, ([0.05, 0.6], [0.04, 0.2])):
        for e, cpu in zip(run["details"]["tests"], cpus):
            e["cpu"] = cpu
    ref_cpu = _reference_cpu(refs)
    assert ref_cpu == {0: 0.05, 1: 0.6}
    valid = {0: "1\n", 1: "2\n"}

    def timed_out(cpus):
        run = _run([None, None], ["timeout", "timeout"])
        for e, cpu in zip(run["details"]["tests"], cpus):
            e["cpu"] = cpu
        return run

    assert _differs(timed_out([1.0, 1.0]), valid, "stdio", None, ref_cpu) is True  # 20x the reference on probe 0
    assert _differs(timed_out([0.06, 1.0]), valid, "stdio", None, ref_cpu) is None  # a starved program; a close call
    agrees_then_times_out = _run(["1\n", None], ["wrong_answer", "timeout"])
    agrees_then_times_out["details"]["tests"][1]["cpu"] = 1.0
    assert _differs(agrees_then_times_out, valid, "stdio", None, ref_cpu) is False


@pytest.mark.parametrize("generated, changing, survived, undetermined, weak", [
    (0, 0, 0, 0, None),  # no mutant generated: not scored, never claimed strong
    (1, 0, 0, 0, False),  # a mutant ran and behaved as the reference: nothing accepted differs
    (2, 0, 0, 2, None),  # the tests accept mutants no probe could judge: not shown strong
    (6, 5, 0, 1, False),  # even if the undetermined one differs: 1 of 6 <= 0.2
    (5, 4, 0, 1, False),  # at worst 1 of 5, not more than 0.2
    (4, 3, 0, 1, None),  # 1 of 4 > 0.2 if it differs, 0 of 3 if not
    (4, 3, 1, 1, True),  # 1 of 3 > 0.2 whatever the undetermined one is
])
def test_the_verdict_is_undetermined_only_when_unjudged_mutants_could_make_the_tests_weak(
        generated, changing, survived, undetermined, weak):
    from tasks.verification.strength import Strength, verdict

    st = Strength(generated=generated, changing=changing, survived=survived, undetermined=undetermined)
    assert verdict(st, 0.2) is weak


def test_returned_values_compare_as_values():
    a = {"__set__": [1, 2]}
    assert not _differs(_run([{"__set__": [2, 1]}]), {0: a}, "call", None)
    assert _differs(_run([{"__tuple__": [1, 2]}]), {0: [1, 2, 3]}, "call", None)


def test_all_probe_runs_of_a_problem_are_one_sandbox_job(monkeypatch):
    """Each container's runner has its own str-hash secret (`python -I`), so set order may differ between
    containers: the reference's two probe runs and every mutant's must share ONE job (one container), or
    an equivalent mutant could differ from a reference whose two runs agreed in another container."""
    import tasks.verification.strength as strength

    jobs = []

    def fake_verify_rows(rows, config, progress=None):
        jobs.append(rows)
        out = []
        for r in rows:
            n = len(parse_test_suite(r["tests"]))
            entries = [{"index": i, "verdict": "wrong_answer", "output": "x\n", "cpu": 0.01} for i in range(n)]
            out.append(result_row(r["id"], "accepted", n, n, {"tests": entries}))
        return out

    monkeypatch.setattr(strength, "verify_rows", fake_verify_rows)
    code = "a, b = input().split()\nunused = 0\nprint(b)"  # one mutant (`0` → `1`), equivalent
    tests = {"inputs": [f"{n} {n + 10}\n" for n in range(3, 9)], "outputs": [f"{n + 10}\n" for n in range(3, 9)]}
    st = score_test_strength([Subject("p", code, tests)], StrengthConfig(probes=4))["p"]
    probe_rows = jobs[-1]
    assert len(probe_rows) == 1 and probe_rows[0]["problem_id"] == "p"
    chosen = [x.split("\n", 1)[0] for x in probe_rows[0]["tests"]["inputs"]]
    assert chosen == ["0"] * 4 + ["1"] * 4 + ["2"] * 4  # the reference, the mutant, the reference again
    assert (st.generated, st.changing, st.survived, st.undetermined, st.weak) == (1, 0, 0, 0, False)


def test_a_reference_that_cannot_be_mutated_is_not_scored_with_the_reason_not_an_exception():
    """No mutant, no measurement: weak is None (not scored), never False (strong tests nobody measured)."""
    deep = "x = " + " + ".join(["a"] * 1000)
    st = score_test_strength([Subject("deep", deep, {"inputs": ["\n"] * 2, "outputs": ["\n"] * 2})],
                             StrengthConfig())["deep"]
    assert st.generated == 0 and st.weak is None and not st.scored and "too deeply nested" in st.note


def test_the_judge_keeps_outputs_only_when_asked_and_only_what_fits():
    stdio, call = parse_test_suite({"inputs": ["1\n"], "outputs": ["1\n"]}).mode, "call"
    raw = {"stdout_b64": "aGkK", "report": {"value": [1, 2]}}
    assert program_output(raw, stdio, 10) == "hi\n" and program_output(raw, stdio, 2) is None
    assert program_output(raw, call, 10) == [1, 2] and program_output(raw, call, 3) is None
    assert program_output({"report": {"exc": "ValueError"}}, call, 10) is None


# ---------------------------------------------------------------------------------- real sandboxes
@pytest.fixture(scope="module")
def verify_config():
    if not _docker_ok():
        pytest.skip("no Docker engine")
    from tasks.verification.verify import VerifyConfig
    from tasks.verification.worker import close_pools

    yield VerifyConfig(executor="threads", workers=2, pool_owner="test-strength")
    close_pools("test-strength")  # no warm container may outlive the module


ADD = "a, b = map(int, input().split())\nprint(a + b)"
TRIVIAL = {"inputs": ["0 0\n"] * 16, "outputs": ["0\n"] * 16}  # any program printing 0 passes
COUNT = "def count(n, k):\n    return sum(1 for i in range(1, n + 1) if i % k == 0)"
STRONG = {"fn_name": "count", "inputs": [[n, k] for n in (0, 1, 2, 5, 6, 9, 12) for k in (1, 2, 3)],
          "outputs": [sum(1 for i in range(1, n + 1) if i % k == 0) for n in (0, 1, 2, 5, 6, 9, 12) for k in (1, 2, 3)]}
CLAMP = "def clamp(x):\n    return x if x >= 0 else 0"  # `>=` → `>` and `0` → `1` in the test change nothing
CLAMP_TESTS = {"assert_code": [f"assert clamp({x}) == {max(x, 0)}" for x in (-7, -1, 0, 2, 9)]}


def _score(verify_config, subject, **settings):
    return score_test_strength([subject], StrengthConfig(**settings), verify_config)[subject.id]


@pytest.mark.docker
def test_a_trivial_test_is_weak(verify_config):
    st = _score(verify_config, Subject("add", ADD, TRIVIAL))
    assert st.weak and st.survived == st.changing == st.generated == 1
    assert st.example == "line 2: `a + b` → `a - b` (arithmetic)"


@pytest.mark.docker
def test_a_strong_suite_is_not_weak(verify_config):
    st = _score(verify_config, Subject("count", COUNT, STRONG))
    assert not st.weak and st.survived == 0 and st.changing == st.generated == 6 and st.unjudged == 0


@pytest.mark.docker
def test_an_equivalent_mutant_is_not_counted(verify_config):
    st = _score(verify_config, Subject("clamp", CLAMP, CLAMP_TESTS))
    assert (st.generated, st.changing, st.survived, st.weak) == (3, 1, 0, False)  # `else 1` is the only change


@pytest.mark.docker
def test_a_mutant_that_never_stops_is_rejected_at_one_deadline(verify_config):
    import time

    loop = "n = int(input())\ni = 0\nwhile i < n:\n    i += 1\nprint(i)"  # `i -= 1`, `i += 0` never stop
    tests = {"inputs": [f"{n}\n" for n in range(1, 9)], "outputs": [f"{n}\n" for n in range(1, 9)]}
    started = time.monotonic()
    st = _score(verify_config, Subject("loop", loop, tests, cpu_s=0.05), mutants=20)
    # the two loops and `i <= n` are rejected; `i = 1` is the same program for every n >= 1
    assert (st.generated, st.changing, st.survived, st.unjudged) == (4, 3, 0, 0)
    assert time.monotonic() - started < 60  # each looping mutant costs one 1 s CPU deadline, not 8 × 4 s


@pytest.mark.docker
def test_set_order_that_differs_between_containers_makes_no_equivalent_mutant_count(verify_config):
    # the reviewer's case: each test holds one distinct word, so the tests pin no order, but a probe holds
    # two, whose set order follows the str-hash secret of the container that ran it (1 of 16 weak before)
    import random

    code = "def f(words):\n    unused = 0\n    return list(set(words))"
    words = ["apple", "banana", "cherry", "grape", "lemon", "mango", "peach", "plum", "kiwi", "melon", "olive",
             "pear", "fig", "date", "lime", "guava"]
    subjects = []
    for p in range(16):
        rng = random.Random(p)
        tests = {"fn_name": "f", "inputs": [[[w] * rng.randint(2, 4)] for w in words], "outputs": [[w] for w in words]}
        subjects.append(Subject(f"set{p}", code, tests))
    scores = score_test_strength(subjects, StrengthConfig(), verify_config)
    assert [(st.generated, st.changing, st.survived, st.weak) for st in scores.values()] == [(1, 0, 0, False)] * 16
    assert all(st.undetermined == 0 for st in scores.values())  # judged equivalent, not left undetermined


@pytest.mark.docker
def test_a_mutant_that_differs_only_on_malformed_input_is_not_counted(verify_config):
    # `[:n]` → `[:n + 1]` is the same program on every input where n is the length of the list; before,
    # a probe moved n and made it "survive" (generated 2, changing 2, survived 1: weak)
    import random

    code = "n = int(input())\na = list(map(int, input().split()))[:n]\nprint(sum(a))"
    rng = random.Random(7)
    lists = [[rng.randint(-50, 50) for _ in range(rng.randint(1, 8))] for _ in range(16)]
    tests = {"inputs": [f"{len(a)}\n{' '.join(map(str, a))}\n" for a in lists],
             "outputs": [f"{sum(a)}\n" for a in lists]}
    st = _score(verify_config, Subject("prefix", code, tests))
    assert (st.generated, st.changing, st.survived, st.weak) == (2, 1, 0, False) and st.undetermined == 0


@pytest.mark.docker
def test_every_mutant_that_loops_on_a_probe_is_judged_in_the_shared_job(verify_config):
    # the probe job runs the reference and both looping mutants: a timeout must not skip the runs after it
    code = "def f(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i"
    tests = {"assert_code": ["assert f(0) == 0"] * 4}  # `i -= 1` and `i += 0` pass, then loop on f(1)
    st = _score(verify_config, Subject("loops", code, tests, cpu_s=0.01))
    assert (st.generated, st.changing, st.survived, st.weak) == (4, 4, 2, True) and st.undetermined == 0


SOLUTION = "class Solution:\n    def add(self, a, b):\n        return a + b"
SOLUTION_TESTS = {"assert_code": ["assert Solution().add(0, 0) == 0"] * 16}  # no probe derives from these


@pytest.mark.docker
def test_mutants_that_no_probe_can_judge_leave_the_verdict_undetermined(verify_config):
    st = _score(verify_config, Subject("solution", SOLUTION, SOLUTION_TESTS))
    assert (st.generated, st.changing, st.survived, st.weak) == (1, 0, 0, None) and st.undetermined == 1


@pytest.mark.docker
def test_the_reference_is_compared_as_its_mutants_are_printed(verify_config):
    # the program's answer on a 4-letter word is its own line number, which ast.unparse moves up by
    # dropping the comment and the blank lines: the mutants (printed so) must meet the reference printed so
    code = ("import sys\n# a comment that ast.unparse drops\n\n\ns = input()\nunused = 0\n"
            "print(sys._getframe().f_lineno if len(s) == 4 else s)")
    words = ["hello", "world", "apple", "mango", "peach", "lemon", "grape", "melon"]
    tests = {"inputs": [w + "\n" for w in words], "outputs": [w + "\n" for w in words]}
    st = _score(verify_config, Subject("lineno", code, tests))
    # `== 4` → `!= 4` and `4` → `5` print a line number on a test; `unused = 1` is the same program
    assert (st.generated, st.changing, st.survived, st.weak) == (3, 2, 0, False) and st.undetermined == 0


@pytest.mark.docker
def test_a_probe_bundle_runs_each_program_as_it_runs_alone(verify_config):
    import dataclasses

    from tasks.verification.strength import OUTPUT_CHARS, probe_bundle
    from tasks.verification.verify import verify_rows

    judge = dataclasses.replace(verify_config.judge, output_chars=OUTPUT_CHARS, max_tests=0)
    config = dataclasses.replace(verify_config, judge=judge)
    stdin_programs = ["import sys\nprint(sys.stdin.buffer.read().split()[::-1])",
                      "print(open('/dev/stdin').read().split(), __name__)",
                      "import os\nprint(os.read(0, 100), input())"]
    call_programs = ["class Solution:\n    def f(self, x):\n        return [x, __name__]",
                     "import sys\ndef f(x):\n    return [x * 2, sys.modules[__name__].__name__]"]
    for probes, programs in (({"inputs": ["1 2\n3\n", "x\n"], "outputs": ["", ""]}, stdin_programs),
                             ({"fn_name": "f", "inputs": [[1], ["a"]], "outputs": [None, None]}, call_programs)):
        code, tests = probe_bundle(probes, programs)
        alone = verify_rows([{"id": f"p{k}", "code": c, "tests": probes} for k, c in enumerate(programs)], config)
        together = verify_rows([{"id": "bundle", "code": code, "tests": tests}], config)[0]
        want = [e["output"] for res in alone for e in res["details"]["tests"]]
        assert [e["output"] for e in together["details"]["tests"]] == want and None not in want


# ------------------------------------------------------------------------------- the verify version
def _problem(pid, code, tests):
    return {"id": pid, "source": "s", "domain": "code", "problem": f"problem {pid}",
            "response": f"<think>t</think>\n```python\n{code}\n```", "tests": json.dumps(tests)}


def _parent(store_root):
    from storage.store import DatasetVersion, Store
    from tasks.curation.schema import STORED_PROBLEM_SCHEMA
    from tasks.records.schema import DROPPED_SCHEMA

    rows = [_problem("weak", ADD, TRIVIAL), _problem("strong", COUNT, STRONG),
            _problem("wrong", COUNT.replace("n + 1", "n"), STRONG),
            {"id": "m", "source": "s", "domain": "math", "problem": "1+1", "response": None, "answer": "2",
             "tests": None}]
    rows = [{**r, "row": line} for r, line in zip(rows, (1, 2, 4, 5))]  # the source's lines, 3 malformed
    dropped = [{"source": "s", "row": 3, "id": None, "reason": "malformed", "detail": "not JSON", "problem": "{"}]
    Store(store_root).write_version(
        DatasetVersion(id="ds-parent", kind="curate", parameters={}, rows_in=5,
                       counts={"kept": 4, "malformed": 1}, inputs={"by_source": {"s": {"rows_in": 5, "kept": 4,
                                                                                        "malformed": 1}}}),
        {"problems": pa.Table.from_pylist(rows, schema=STORED_PROBLEM_SCHEMA),
         "dropped": pa.Table.from_pylist(dropped, schema=DROPPED_SCHEMA)})
    return "ds-parent"


@pytest.mark.docker
def test_weak_tests_drop_keeps_rows_in_equal_kept_plus_dropped(verify_config, tmp_path):
    from storage.store import Store
    from tasks.verification.verify_dataset import build_validated_version

    parent = _parent(str(tmp_path))
    lines = []  # the stage's progress: reference runs, then mutant runs counted on in one line
    v = build_validated_version(str(tmp_path), parent, 1, verify_config, feed=lines.append, strength=StrengthConfig())
    assert lines[0] == "verify code problems 0/3" and lines[-1].fraction == 1.0
    assert re.match(r"verify code problems (\d+)/\1 problems/s [\d,]+ done in ", lines[-1]), lines
    store = Store(str(tmp_path))
    problems, dropped = store.read_table(v.id, "problems"), store.read_table(v.id, "dropped")
    assert v.rows_in == problems.num_rows + dropped.num_rows == v.rows_kept + v.rows_dropped == 5
    assert sorted(problems.column("id").to_pylist()) == ["m", "strong"]
    reasons = {d["id"]: d for d in dropped.to_pylist()}
    assert reasons["wrong"]["reason"] == "invalid_tests" and reasons["weak"]["reason"] == "weak_tests"
    assert (reasons["weak"]["row"], reasons["wrong"]["row"]) == (1, 4), "a verify drop names its source line"
    assert sorted(problems.column("row").to_pylist() + dropped.column("row").to_pylist()) == [1, 2, 3, 4, 5]
    assert reasons["weak"]["detail"].startswith("tests accept 1 of 1 behaviour-changing mutants")
    assert "`a + b` → `a - b`" in reasons["weak"]["detail"]
    assert v.counts["weak_tests"] == 1 and v.inputs["by_source"]["s"]["weak_tests"] == 1
    ver = {r["problem_id"]: r for r in store.read_table(v.id, "verifications").to_pylist()}
    assert (ver["weak"]["mutants_generated"], ver["weak"]["mutants_changing"], ver["weak"]["mutants_survived"],
            ver["weak"]["weak_tests"]) == (1, 1, 1, True)
    assert ver["strong"]["weak_tests"] is False and ver["strong"]["mutants_survived"] == 0
    assert ver["wrong"]["mutants_generated"] is None  # a failing reference is not scored


@pytest.mark.docker
def test_an_undetermined_problem_is_kept_and_flagged_not_reported_strong(verify_config, tmp_path):
    from storage.store import DatasetVersion, Store
    from tasks.curation.schema import PROBLEM_SCHEMA
    from tasks.records.schema import DROPPED_SCHEMA
    from tasks.verification.verify_dataset import build_validated_version

    rows = [_problem("solution", SOLUTION, SOLUTION_TESTS), _problem("strong", COUNT, STRONG)]
    Store(str(tmp_path)).write_version(
        DatasetVersion(id="ds-u", kind="curate", parameters={}, rows_in=2, counts={"kept": 2},
                       inputs={"by_source": {"s": {"rows_in": 2, "kept": 2}}}),
        {"problems": pa.Table.from_pylist(rows, schema=PROBLEM_SCHEMA),
         "dropped": pa.Table.from_pylist([], schema=DROPPED_SCHEMA)})
    v = build_validated_version(str(tmp_path), "ds-u", 1, verify_config, strength=StrengthConfig())
    store = Store(str(tmp_path))
    assert sorted(store.read_table(v.id, "problems").column("id").to_pylist()) == ["solution", "strong"]
    ver = {r["problem_id"]: r for r in store.read_table(v.id, "verifications").to_pylist()}
    assert (ver["solution"]["weak_tests"], ver["solution"]["mutants_undetermined"]) == (None, 1)
    assert (ver["strong"]["weak_tests"], ver["strong"]["mutants_undetermined"]) == (False, 0)
    assert v.inputs["test_strength"]["undetermined"] == 1 and v.inputs["test_strength"]["weak"] == 0


@pytest.mark.docker
def test_weak_tests_tag_keeps_the_problem_flagged_in_a_version_of_its_own(verify_config, tmp_path):
    from storage.store import Store
    from tasks.verification.verify_dataset import build_validated_version, validation_version_id

    parent = _parent(str(tmp_path))
    tag = StrengthConfig(weak_tests="tag")
    assert validation_version_id(parent, 1, verify_config, tag) != validation_version_id(parent, 1, verify_config)
    v = build_validated_version(str(tmp_path), parent, 1, verify_config, strength=tag)
    store = Store(str(tmp_path))
    assert sorted(store.read_table(v.id, "problems").column("id").to_pylist()) == ["m", "strong", "weak"]
    assert v.rows_in == v.rows_kept + v.rows_dropped and "weak_tests" not in v.counts
    ver = {r["problem_id"]: r for r in store.read_table(v.id, "verifications").to_pylist()}
    assert ver["weak"]["weak_tests"] is True and ver["weak"]["verdict"] == "accepted"
    assert v.parameters["test_strength"]["weak_tests"] == "tag" and v.inputs["test_strength"]["weak"] == 1


@pytest.mark.docker
def test_a_problem_without_mutants_is_kept_with_its_scoring_null_never_claimed_strong(verify_config, tmp_path):
    """The walkthrough's `print(max(a, b))`: no mutation site, so no mutant and no measurement. Its
    verifications row says 0 generated and null for the rest (weak_tests null: not scored, as the store's
    docs say, not False), it is kept under weak_tests="drop", and it counts as neither weak nor undetermined."""
    from storage.store import DatasetVersion, Store
    from tasks.curation.schema import PROBLEM_SCHEMA
    from tasks.records.schema import DROPPED_SCHEMA
    from tasks.verification.verify_dataset import build_validated_version

    tests = {"inputs": [f"{a} {b}\n" for a, b in ((1, 2), (5, -3), (0, 0))], "outputs": ["2\n", "5\n", "0\n"]}
    rows = [_problem("max", "a, b = map(int, input().split())\nprint(max(a, b))", tests),
            _problem("strong", COUNT, STRONG)]
    Store(str(tmp_path)).write_version(
        DatasetVersion(id="ds-n", kind="curate", parameters={}, rows_in=2, counts={"kept": 2},
                       inputs={"by_source": {"s": {"rows_in": 2, "kept": 2}}}),
        {"problems": pa.Table.from_pylist(rows, schema=PROBLEM_SCHEMA),
         "dropped": pa.Table.from_pylist([], schema=DROPPED_SCHEMA)})
    v = build_validated_version(str(tmp_path), "ds-n", 1, verify_config, strength=StrengthConfig(weak_tests="drop"))
    store = Store(str(tmp_path))
    assert sorted(store.read_table(v.id, "problems").column("id").to_pylist()) == ["max", "strong"]
    ver = {r["problem_id"]: r for r in store.read_table(v.id, "verifications").to_pylist()}
    scoring = ("mutants_generated", "mutants_changing", "mutants_survived", "weak_tests", "mutant_example",
               "mutants_undetermined")
    assert [ver["max"][c] for c in scoring] == [0, None, None, None, None, None]
    assert ver["strong"]["weak_tests"] is False
    summary = v.inputs["test_strength"]
    assert (summary["scored"], summary["no_mutants"], summary["weak"], summary["undetermined"]) == (1, 1, 0, 0)
