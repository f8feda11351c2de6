"""Test-suite strength by mutation. Pure: the settings, the counting rule on given runs, the output the
judge keeps. Docker: hostile problems through the real sandbox, one behaviour per test, and the verify
stage's dataset version (rows in = kept + dropped)."""
import json

import pyarrow as pa
import pytest

from sandbox.testcases import parse_tests
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
    assert _differs(_run(["1\n", None, None, None], ["wrong_answer", "wrong_answer", "wrong_answer", "timeout"]),
                    valid, "stdio", None)
    assert not _differs(_run(["1\n", None, None, None], ["wrong_answer", "timeout", "skipped", "skipped"]),
                        valid, "stdio", None)
    assert _differs(result_row("x", "compile_error", 0, 4, {"reason": "SyntaxError"}), valid, "stdio", None)
    assert not _differs(_run(["1\n", "2\n", None, "5\n"]), {}, "stdio", None)


def test_returned_values_compare_as_values():
    a = {"__set__": [1, 2]}
    assert not _differs(_run([{"__set__": [2, 1]}]), {0: a}, "call", None)
    assert _differs(_run([{"__tuple__": [1, 2]}]), {0: [1, 2, 3]}, "call", None)


def test_the_judge_keeps_outputs_only_when_asked_and_only_what_fits():
    stdio, call = parse_tests({"inputs": ["1\n"], "outputs": ["1\n"]}).mode, "call"
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


# ------------------------------------------------------------------------------- the verify version
def _problem(pid, code, tests):
    return {"id": pid, "source": "s", "domain": "code", "problem": f"problem {pid}",
            "response": f"<think>t</think>\n```python\n{code}\n```", "tests": json.dumps(tests)}


def _parent(store_root):
    from storage.store import DatasetVersion, Store
    from tasks.curation.schema import DROPPED_SCHEMA, PROBLEM_SCHEMA

    rows = [_problem("weak", ADD, TRIVIAL), _problem("strong", COUNT, STRONG),
            _problem("wrong", COUNT.replace("n + 1", "n"), STRONG),
            {"id": "m", "source": "s", "domain": "math", "problem": "1+1", "response": None, "answer": "2",
             "tests": None}]
    dropped = [{"source": "s", "row": 7, "id": None, "reason": "malformed", "detail": "not JSON", "problem": "{"}]
    Store(store_root).write_version(
        DatasetVersion(id="ds-parent", kind="curate", parameters={}, rows_in=5,
                       counts={"kept": 4, "malformed": 1}, inputs={"by_source": {"s": {"rows_in": 5, "kept": 4,
                                                                                        "malformed": 1}}}),
        {"problems": pa.Table.from_pylist(rows, schema=PROBLEM_SCHEMA),
         "dropped": pa.Table.from_pylist(dropped, schema=DROPPED_SCHEMA)})
    return "ds-parent"


@pytest.mark.docker
def test_weak_tests_drop_keeps_rows_in_equal_kept_plus_dropped(verify_config, tmp_path):
    from storage.store import Store
    from tasks.curation.verify_dataset import build_validated_version

    parent = _parent(str(tmp_path))
    v = build_validated_version(str(tmp_path), parent, 1, verify_config, strength=StrengthConfig())
    store = Store(str(tmp_path))
    problems, dropped = store.read_table(v.id, "problems"), store.read_table(v.id, "dropped")
    assert v.rows_in == problems.num_rows + dropped.num_rows == v.rows_kept + v.rows_dropped == 5
    assert sorted(problems.column("id").to_pylist()) == ["m", "strong"]
    reasons = {d["id"]: d for d in dropped.to_pylist()}
    assert reasons["wrong"]["reason"] == "invalid_tests" and reasons["weak"]["reason"] == "weak_tests"
    assert reasons["weak"]["detail"].startswith("tests accept 1 of 1 behaviour-changing mutants")
    assert "`a + b` → `a - b`" in reasons["weak"]["detail"]
    assert v.counts["weak_tests"] == 1 and v.inputs["by_source"]["s"]["weak_tests"] == 1
    ver = {r["problem_id"]: r for r in store.read_table(v.id, "verifications").to_pylist()}
    assert (ver["weak"]["mutants_generated"], ver["weak"]["mutants_changing"], ver["weak"]["mutants_survived"],
            ver["weak"]["weak_tests"]) == (1, 1, 1, True)
    assert ver["strong"]["weak_tests"] is False and ver["strong"]["mutants_survived"] == 0
    assert ver["wrong"]["mutants_generated"] is None  # a failing reference is not scored


@pytest.mark.docker
def test_weak_tests_tag_keeps_the_problem_flagged_in_a_version_of_its_own(verify_config, tmp_path):
    from storage.store import Store
    from tasks.curation.verify_dataset import build_validated_version, validation_version_id

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
