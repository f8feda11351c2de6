"""`--layout` presets of public reasoning datasets: each fixture (tests/curation/layouts/, toy problems in
the dataset's documented field names and nesting) goes through the real curation path; every row is
kept or dropped with a reason that names the layout and the field. One hostile shape per test below."""
import base64
import json
import os
import pickle
import subprocess
import sys
import zlib
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sandbox.testcases import count_tests, parse_test_suite
from storage.store import Store
from tasks.curation import layouts
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.curation.layouts import LAYOUTS, apply_layout
from tasks.curation.pipeline import curate
from tasks.curation.schema import Malformed, to_problem

FIXTURES = Path(__file__).parent / "layouts"

# fixture → (layout, rows kept, {row: (reason, detail)} for the rows dropped)
EXPECTED = {
    "openr1-math": ("openr1-math", 2, {
        3: ("malformed", "layout openr1-math: field 'correctness_math_verify' has 1 flags for 2 generations"),
        4: ("malformed", "layout openr1-math: missing field 'problem' (row has: question, answer, generations, "
                         "source; map one with --map x.FIELD=problem)")}),
    "numina": ("numina", 3, {4: ("malformed", "layout numina: missing field 'problem' (row has: question, solution, "
                                         "answer, source, synthetic; map one with --map x.FIELD=problem)")}),
    "deepscaler": ("deepscaler", 2, {3: ("malformed", "layout deepscaler: missing field 'answer' (row has: problem, "
                                                 "solution; map one with --map x.FIELD=answer)")}),
    "skywork-or1-math": ("skywork-or1", 2, {
        3: ("malformed", "layout skywork-or1: missing field 'reward_model.ground_truth' (row has: data_source, "
                         "prompt, ability, reward_model.style, extra_info.index)")}),
    "skywork-or1-code": ("skywork-or1", 4, {
        5: ("malformed", "layout skywork-or1: field 'reward_model.ground_truth' has no tests (inputs/outputs, "
                         "assert_case or test_code with entry_point)")}),
    "openthoughts": ("openthoughts", 4, {
        5: ("malformed", "layout openthoughts: field 'domain' is 'biology': only math and code problems are curated"),
        6: ("malformed", "layout openthoughts: missing field 'conversations' (row has: system, messages)")}),
    "taco": ("taco", 2, {
        3: ("malformed", "layout taco: missing field 'input_output' (row has: question, solutions, starter_code, "
                         "difficulty, source, date)"),
        4: ("malformed", "layout taco: field 'date' must be an ISO date (YYYY-MM-DD), got 'sometime in 2019'")}),
    "apps": ("apps", 3, {4: ("malformed", "layout apps: missing field 'question' (row has: problem_id, solutions, "
                                     "input_output, difficulty, url, starter_code)")}),
    "code-contests": ("code-contests", 2, {
        2: ("invalid_tests", "layout code-contests: field 'input_file' is 'input.txt': file I/O is not judged, "
                             "only stdin/stdout"),
        3: ("malformed", "layout code-contests: missing field 'private_tests' (row has: name, description, "
                         "public_tests.input, public_tests.output, generated_tests.input, generated_tests.output, "
                         "source, difficulty, +16 more)")}),
    "livecodebench": ("livecodebench", 2, {
        3: ("malformed", "layout livecodebench: field 'private_test_cases' is neither JSON nor base64 of "
                         "zlib-compressed data"),
        4: ("malformed", "layout livecodebench: missing field 'question_content' (row has: question_title, "
                         "platform, question_id, contest_id, contest_date, starter_code, difficulty, public_test_cases, "
                         "+2 more)")}),
    "opencodereasoning": ("opencodereasoning", 2, {
        3: ("malformed", "layout opencodereasoning: field 'input' is the placeholder '-': the question is row "
                         "'1234' of 'taco' split 'train'; fill it in before curating")}),
}


def _curate(fixture: str, path: Path | None = None):
    layout = EXPECTED[fixture][0]
    return curate(CurateConfig(sources=[{"name": "x", "path": str(path or FIXTURES / f"{fixture}.jsonl"),
                                         "layout": layout}]))


def _kept(fixture: str) -> list[dict]:
    return _curate(fixture).problems.to_pylist()


def _rows(fixture: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{fixture}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_fixture_rows_in_equal_kept_plus_dropped_with_reasons(fixture):
    _, n_kept, drops = EXPECTED[fixture]
    result = _curate(fixture)
    assert result.rows_in == len(_rows(fixture)) == result.problems.num_rows + result.dropped.num_rows
    assert result.problems.num_rows == n_kept
    assert {d["row"]: (d["reason"], d["detail"]) for d in result.dropped.to_pylist()} == drops
    for row in result.problems.to_pylist():
        assert row["id"] and row["source"] == "x" and row["problem"].strip() and row["domain"] in ("math", "code")
        if row["solutions"]:
            assert row["response"] == row["solutions"][0]
        if row["tests"]:
            assert count_tests(row["tests"]) > 0
        assert row["meta"] is None or isinstance(json.loads(row["meta"]), dict)


def test_every_layout_has_a_fixture_and_its_rule_in_a_docstring():
    covered = {layout for layout, _, _ in EXPECTED.values()}
    assert covered == set(LAYOUTS) - {"canonical"}
    for name, fn in LAYOUTS.items():
        assert fn.__doc__ and ("→" in fn.__doc__ or "←" in fn.__doc__), name


def test_openr1_keeps_every_verified_generation():
    first, none_correct = _kept("openr1-math")
    generations = _rows("openr1-math")[0]["generations"]
    assert first["solutions"] == [generations[0], generations[2]] and first["answer"] == "100"
    assert json.loads(first["meta"]) == {"problem_type": "Algebra", "question_type": "math-word-problem",
                                         "origin": "olympiads", "uuid": "0b5a4c3e-toy-0001", "correctness_count": 2}
    assert none_correct["response"] is None and none_correct["solutions"] is None and none_correct["answer"] == "8"


def test_numina_placeholder_answers_are_none_and_cot_rows_take_the_boxed_answer():
    plain, proof, cot = _kept("numina")
    assert plain["answer"] == "12" and proof["answer"] is None and cot["answer"] == "72"
    assert json.loads(proof["meta"])["question_type"] == "proof" and json.loads(plain["meta"])["synthetic"] is False


def test_skywork_math_answer_is_the_first_accepted_one():
    single, several = _kept("skywork-or1-math")
    assert single["answer"] == "42" and several["answer"] == "\\frac{1}{2}"
    meta = json.loads(several["meta"])
    assert meta["answers"] == ["\\frac{1}{2}", "0.5"]
    assert meta["model_difficulty"]["DeepSeek-R1-Distill-Qwen-1.5B"] == 9


def test_skywork_code_ground_truth_becomes_each_tests_form():
    stdio, call, asserts, check = (json.loads(r["tests"]) for r in _kept("skywork-or1-code"))
    assert stdio == {"inputs": ["3\n1 2 3\n", "1\n-5\n"], "outputs": ["6\n", "-5\n"]}
    assert call == {"fn_name": "add", "inputs": [[2, 3], [-1, 1]], "outputs": [5, 0]}
    assert asserts == {"assert_code": ["assert mul(2, 3) == 6", "assert mul(0, 5) == 0"]}
    assert check["assert_code"].startswith("import math\ndef check(candidate):")
    assert check["assert_code"].endswith("check(isqrt_floor)\n")
    assert [parse_test_suite(t).mode for t in (stdio, call, asserts, check)] == ["stdio", "call", "assert", "assert"]
    assert count_tests(check) == 2


def test_openthoughts_chat_and_metadata_rows():
    chat, code, math_row, ot3 = _kept("openthoughts")
    assert chat["problem"].endswith("What is the cube root of 512?") and chat["domain"] == "math"
    assert chat["response"] == ("<think>\n8 times 8 is 64 and 64 times 8 is 512.\n</think>\n\n"
                                "The cube root is \\boxed{8}.")
    assert code["domain"] == "code" and json.loads(code["tests"])["outputs"] == ["4\n", "0\n"]
    assert code["response"].startswith("<think>\nMax minus min") and "```python" in code["response"]
    assert math_row["answer"] == "25" and ot3["answer"] is None
    assert json.loads(ot3["meta"]) == {"origin": "ai2-adapt-dev/openmath-2-math", "difficulty": 6}


def test_taco_and_apps_keep_all_solutions_dates_and_starter_code():
    stdin_problem, call_problem = _kept("taco")
    assert len(stdin_problem["solutions"]) == 2 and stdin_problem["date"] == "2021-02-23"
    assert all(s.startswith("```python\n") and s.endswith("\n```") for s in stdin_problem["solutions"])
    meta = json.loads(stdin_problem["meta"])
    assert meta["difficulty"] == "EASY" and meta["tags"] == ["Mathematics"] and meta["origin"] == "codeforces"
    assert call_problem["problem"].endswith("Starter code:\n```python\ndef rotate(s, k):\n```")
    assert call_problem["date"] is None and json.loads(call_problem["tests"])["fn_name"] == "rotate"
    reversed_word, double_all, no_tests = _kept("apps")
    assert len(reversed_word["solutions"]) == 2 and json.loads(reversed_word["meta"])["problem_id"] == 4001
    assert "Starter code:" in double_all["problem"]
    assert no_tests["tests"] is None and no_tests["response"] is None  # empty input_output and solutions


def test_code_contests_joins_its_three_test_sets_and_keeps_python3_solutions():
    toy_max, cpp_only = _kept("code-contests")
    assert json.loads(toy_max["tests"]) == {"inputs": ["1 2\n", "5 3\n", "-1 -4\n", "0 0\n"],
                                            "outputs": ["2\n", "5\n", "-1\n", "0\n"]}
    programs = _rows("code-contests")[0]["solutions"]["solution"]
    assert toy_max["solutions"] == [f"```python\n{p.rstrip()}\n```" for p in programs[1:3]]  # C++, Python 2 left out
    meta = json.loads(toy_max["meta"])
    assert (meta["origin"], meta["difficulty"], meta["cf_rating"], meta["time_limit_seconds"]) == \
        ("CODEFORCES", "A", 800, 2)
    assert cpp_only["solutions"] is None and json.loads(cpp_only["meta"])["origin"] == "ATCODER"


def test_livecodebench_private_tests_are_decoded_and_the_contest_date_kept():
    stdin_row = _rows("livecodebench")[0]
    packed = base64.b64decode(stdin_row["private_test_cases"])
    private = json.loads(pickle.loads(zlib.decompress(packed)))  # the fixture's own (trusted) blob
    stdio, functional = _kept("livecodebench")
    assert json.loads(stdio["tests"]) == {"inputs": ["1 2\n"] + [c["input"] for c in private],
                                          "outputs": ["3\n"] + [c["output"] for c in private]}
    assert stdio["date"] == "2023-08-21" and functional["date"] == "2024-03-02"
    assert json.loads(functional["tests"]) == {"fn_name": "maxGap", "inputs": [[[1, 5, 2]], [[3, 9, 4]], [[2, 2]]],
                                               "outputs": [4, 6, 0]}
    assert "class Solution:" in functional["problem"]
    assert json.loads(stdio["meta"]) == {"title": "Toy Sum", "question_id": "abc900_a", "platform": "atcoder",
                                         "contest_id": "abc900", "difficulty": "easy"}


CALLED = []


def _would_run():  # what a hostile pickle asks the loader to call
    CALLED.append(True)


class _Hostile:
    def __reduce__(self):
        return (_would_run, ())


def _lcb_row(private) -> dict:
    return {"question_content": "Print 1.", "public_test_cases": "[]", "private_test_cases": private,
            "contest_date": "2024-01-01T00:00:00"}


def test_livecodebench_pickle_that_names_a_function_is_refused_not_run():
    blob = base64.b64encode(zlib.compress(pickle.dumps(_Hostile()))).decode()
    with pytest.raises(Malformed, match="layout livecodebench: field 'private_test_cases' is not a plain-data "
                                        r"pickle \(it refers to tests.curation.test_layouts._would_run"):
        apply_layout(_lcb_row(blob), "livecodebench")
    assert not CALLED


def test_livecodebench_tests_that_expand_past_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(layouts, "MAX_DECODED_TESTS", 1024)
    blob = base64.b64encode(zlib.compress(pickle.dumps("[" + " " * 10_000 + "]"))).decode()
    with pytest.raises(Malformed, match="field 'private_test_cases' expands past 1,024 bytes"):
        apply_layout(_lcb_row(blob), "livecodebench")


@pytest.mark.parametrize("layout, row, why", [
    ("taco", {"question": 5, "input_output": "{}"}, "layout taco: field 'question' must be a string, got int"),
    ("taco", {"question": "q", "input_output": " "}, "layout taco: empty field 'input_output'"),  # required
    ("apps", {"question": "  "}, "layout apps: empty field 'question'"),
    ("skywork-or1", {"prompt": "hi", "ability": "math", "reward_model": {"ground_truth": "[1]"}},
     "layout skywork-or1: field 'prompt': must be a list of chat turns, got str"),
    ("skywork-or1", {"prompt": [{"role": "system", "content": "be brief"}], "ability": "math"},
     "layout skywork-or1: field 'prompt': no user turn"),
    ("openthoughts", {"conversations": [{"from": "user"}]},
     "layout openthoughts: field 'conversations': turn 0 needs a role and text content"),
    ("code-contests", {"description": "d", "public_tests": {"input": ["1"], "output": ["1"]},
                       "private_tests": {"input": "1", "output": "1"}},
     "layout code-contests: field 'private_tests' must be an object with input and output lists"),
    ("code-contests", {"description": "d", "public_tests": {"input": [], "output": []},
                       "private_tests": {"input": [], "output": []}, "solutions": {"language": [3], "solution": []}},
     "layout code-contests: field 'solutions' must be an object with language and solution lists of one length"),
    ("code-contests", {"description": "d", "public_tests": {"input": [], "output": []},
                       "private_tests": {"input": [], "output": []}, "time_limit": {"seconds": "2"}},
     "layout code-contests: unusable row (TypeError: "),
    ("livecodebench", {"question_content": "q", "public_test_cases": "[{\"input\": \"1\", \"output\": \"1\", "
                       "\"testtype\": \"functional\"}]"},
     "layout livecodebench: functional tests need field 'metadata' to name func_name"),
    ("livecodebench", {"question_content": "q", "public_test_cases": json.dumps(
        [{"input": "1", "output": "1", "testtype": "stdin"},
         {"input": "[1]", "output": "1", "testtype": "functional"}])},
     "layout livecodebench: test cases mix or lack testtype"),
    ("livecodebench", {"question_content": "q", "public_test_cases": "[{oops"},
     "layout livecodebench: field 'public_test_cases' is not valid JSON"),
    ("livecodebench", {"question_content": "q", "public_test_cases": "[]", "contest_date": "21/08/2023"},
     "layout livecodebench: field 'contest_date' must be an ISO date"),
    ("openr1-math", {"problem": "p", "generations": "<think>x</think>"},
     "layout openr1-math: field 'generations' must be a list of strings"),
])
def test_layout_errors_are_one_line_naming_the_layout_and_the_field(layout, row, why):
    with pytest.raises(Malformed) as exc:
        to_problem(apply_layout(row, layout), "s")
    assert str(exc.value).startswith(why) and "\n" not in str(exc.value), str(exc.value)


def test_canonical_takes_a_chat_list_when_the_row_has_no_problem():
    row = apply_layout({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"},
                                     {"role": "assistant", "content": "A."}]}, "canonical")
    assert (row["problem"], row["response"]) == ("Q?", "A.")
    broken = apply_layout({"conversations": [{"from": "gpt"}]}, "canonical")  # never raises: schema reports
    with pytest.raises(Malformed, match="missing 'problem'"):
        to_problem(broken, "s")


def test_schema_keeps_solutions_date_and_meta():
    p = to_problem({"problem": "p", "solutions": json.dumps(["a", " ", "b"]), "date": "2024-05-06T07:08:09",
                    "meta": {"b": 1, "a": [2]}}, "s")
    assert (p.solutions, p.response, p.date, p.meta) == (["a", "b"], "a", "2024-05-06", '{"a": [2], "b": 1}')
    assert to_problem({"problem": "p", "response": "r", "solutions": ["a"]}, "s").response == "r"


def _write_parquet(fixture: str, path: Path) -> Path:
    pq.write_table(pa.Table.from_pylist(_rows(fixture)), path)
    return path


@pytest.mark.parametrize("fixture", ["code-contests", "skywork-or1-code", "openr1-math", "livecodebench"])
def test_parquet_with_nested_columns_maps_as_the_jsonl_does(tmp_path, fixture):
    """HF datasets ship Parquet: structs (tests, reward_model), lists (generations) typed by Arrow."""
    from_jsonl = _curate(fixture)
    from_parquet = _curate(fixture, _write_parquet(fixture, tmp_path / f"{fixture}.parquet"))
    assert from_parquet.problems.equals(from_jsonl.problems)
    # a missing field's detail ends with the fields the row has, which the files differ in (from_pylist takes
    # the first row's columns, in their order): the rest of the detail is the same
    assert ([(d["row"], d["reason"], d["detail"].split(" (row has: ")[0]) for d in from_parquet.dropped.to_pylist()]
            == [(d["row"], d["reason"], d["detail"].split(" (row has: ")[0]) for d in from_jsonl.dropped.to_pylist()])


def test_new_columns_reach_the_catalog(tmp_path):
    """The store writes solutions (a list column), date and meta; DuckDB reads them from `problems`."""
    config = CurateConfig(sources=[{"name": "taco", "path": str(FIXTURES / "taco.jsonl"), "layout": "taco"},
                                   {"name": "lcb", "path": str(FIXTURES / "livecodebench.jsonl"),
                                    "layout": "livecodebench"}],
                          store=str(tmp_path / "store"))
    version_id, inputs = plan_curation(config)
    build_curated_version(config, version_id, inputs)
    store = Store(config.store)
    store.publish(version_id)
    rows = store.catalog.query("select source, len(solutions), date, meta->>'difficulty' "
                               "from problems where date >= '2021-01-01' order by date")  # typed: DATE, JSON
    assert rows == [("taco", 2, date(2021, 2, 23), "EASY"), ("lcb", None, date(2023, 8, 21), "easy"),
                    ("lcb", None, date(2024, 3, 2), "medium")]
    assert store.catalog.query("select count(*) from dropped where detail like 'layout %'") == [(4,)]


@pytest.mark.slow  # an ephemeral Prefect server in a subprocess, as a user runs it
def test_klear_curate_takes_a_layout_preset(tmp_path):
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "flows.cli", "curate", "--layout", "lcb=livecodebench",
                        "--source", f"lcb={FIXTURES / 'livecodebench.jsonl'}", "--store", str(tmp_path / "store")],
                       capture_output=True, text=True, cwd=root, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    total = next(line for line in r.stdout.splitlines() if "TOTAL" in line)
    cells = [c.strip() for c in total.split("│") if c.strip()]
    assert cells[:4] == ["TOTAL", "4", "2", "2"], r.stdout  # rows in, kept, malformed
