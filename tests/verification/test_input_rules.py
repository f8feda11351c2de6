"""Input rules of `klear verify` (tasks/verification/input_rules.py): a row that is no submission refuses the
run in one line naming the file and row, before any container starts; missing tests are the row's
invalid_tests. Never sandbox_error for the user's input. No Docker, except one hostile test."""
import json

import pytest

from tasks.verification import BadSubmission, VerifyConfig, verify_rows
from tasks.verification.io import VerifyIOError, read_rows

TESTS = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
GOOD = {"id": "a", "code": "print(sum(map(int, input().split())))", "tests": TESTS}


def _file(tmp_path, *lines) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


def _refusal(path: str) -> str:
    with pytest.raises(VerifyIOError) as exc:
        read_rows(path)
    message = str(exc.value)
    assert "\n" not in message, "one line"
    return message


def test_a_line_that_is_not_json_refuses_the_file_naming_its_row(tmp_path):
    """The walkthrough's vbad.jsonl: it was judged `sandbox_error`, the infrastructure's verdict."""
    path = _file(tmp_path, GOOD, '{"id":"b", broken', dict(GOOD, id="c"))
    assert _refusal(path).startswith(f"{path} row 2: not JSON")


@pytest.mark.parametrize("row, why", [
    ([1, 2], "expected an object, got list"),
    ({"code": "print(3)", "tests": TESTS}, "no id"),
    (dict(GOOD, id=None), "no id"),
    (dict(GOOD, id="  "), "blank id"),
    (dict(GOOD, id=True), "id must be a string or an integer, got bool"),
    (dict(GOOD, id=1.5), "id must be a string or an integer, got float"),
    (dict(GOOD, code=["print(3)"]), "code must be a string, got list"),
    (dict(GOOD, language="cobol"), "unsupported language 'cobol'"),
    (dict(GOOD, time_limit=0), "time_limit 0: must be CPU seconds, 0 < t <= 60"),
    (dict(GOOD, time_limit=1e9), "time_limit 1000000000.0: must be CPU seconds"),
    (dict(GOOD, time_limit="soon"), "time_limit 'soon': must be CPU seconds"),
])
def test_a_row_that_is_no_submission_refuses_the_file_naming_its_row(tmp_path, row, why):
    path = _file(tmp_path, GOOD, row)
    assert _refusal(path).startswith(f"{path} row 2: {why}")


def test_a_duplicate_id_cannot_stand_in_for_an_earlier_rows_result(tmp_path):
    """Hostile: results are known by id, so a second row reusing the id of a wrong submission (with code
    that passes) could cover that row's wrong_answer with its own accepted."""
    wrong = dict(GOOD, code="print(0)")
    path = _file(tmp_path, wrong, dict(GOOD, id="b"), dict(GOOD, id="a"))
    assert _refusal(path) == f"{path} row 3: duplicate id 'a' (first on row 1)"


def test_ids_that_are_written_alike_are_duplicates(tmp_path):
    """Hostile: 1 and "1" are different JSON ids but one id in a Parquet result with mixed ids."""
    path = _file(tmp_path, dict(GOOD, id=1), dict(GOOD, id="1"))
    assert _refusal(path) == f"{path} row 2: duplicate id '1' (first on row 1)"


def test_a_submission_that_makes_its_own_line_unreadable_stops_the_run(tmp_path):
    """Hostile: code holding a lone surrogate makes its line unreadable. That line used to become a
    sandbox_error row, reward null (left out of a score) instead of the wrong answer it is; now nothing
    is scored until the input is fixed."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + rb'{"id": "x", "code": "print(\"\ud800\")", "tests": '
                     + json.dumps(TESTS).encode() + b"}\n")
    assert _refusal(str(path)).startswith(f"{path} row 2: ")


@pytest.mark.parametrize("bad", [[GOOD, dict(GOOD, id="b", code=7)], [GOOD, None], [dict(GOOD, id=None)]])
def test_verify_rows_refuses_a_row_that_is_no_submission_before_any_container(bad):
    """The programmatic entry has the file's rules (duplicates aside: its results are positional). A good
    row may come first: the refusal still comes before any pool starts (the test needs no Docker)."""
    with pytest.raises(BadSubmission, match=r"^row \d"):
        verify_rows(bad, VerifyConfig(executor="threads", workers=1))


@pytest.mark.parametrize("row", [{"id": "d", "code": "print(1)"}, {"id": "d", "code": "print(1)", "tests": None},
                                 {"id": "d", "code": "print(1)", "tests": " "}])
def test_missing_tests_are_invalid_tests_saying_so(row):
    """Settled on the host, no container: the walkthrough got `tests must be an object, got NoneType`."""
    out = verify_rows([row], VerifyConfig(executor="threads", workers=1))
    assert out == [{"id": "d", "verdict": "invalid_tests", "passed": 0, "total": 0, "reward": None,
                    "details": {"reason": "missing 'tests'"}}]


@pytest.mark.docker
def test_a_row_carrying_the_old_bad_row_marker_is_judged_like_any_other():
    """Hostile: a row that says it is an unreadable line (`_error`, the marker rows the reader could not
    parse used to carry) was given sandbox_error, reward null, without running. Its wrong code must
    still be a wrong answer with reward 0."""
    from tests.verification.test_verify import _docker_ok

    if not _docker_ok():
        pytest.skip("no Docker engine")
    row = dict(GOOD, code="print(0)", _error="in.jsonl line 2: not JSON")
    out = verify_rows([row], VerifyConfig(executor="threads", workers=1))
    assert (out[0]["id"], out[0]["verdict"], out[0]["reward"]) == ("a", "wrong_answer", 0.0)
