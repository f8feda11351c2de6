"""Code-aware decontamination and the cutoff date through `curate()`, on the fixtures in code_decontam/
(each source row's expected fate is written next to it in FATES)."""
import json
from pathlib import Path

import pytest

from tasks.curation.code_overlap import CaseOverlapConfig, find_case_overlap
from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import REASONS, curate, load_benchmark_rows

HERE = Path(__file__).parent / "code_decontam"
CUTOFF = "2024-08-01"
FATES = {1: "contaminated", 2: "kept", 3: "kept", 4: "after_cutoff", 5: "after_cutoff", 6: "kept", 7: "kept",
         8: "contaminated", 9: "contaminated", 10: "kept"}  # row → fate (rows 7 and 10 carry no date)


def _curate(**kw):
    return curate(CurateConfig(sources=[{"name": "code", "path": str(HERE / "code.jsonl")}],
                               benchmarks={"codebench": str(HERE / "bench_code.jsonl")}, **kw))


def _dropped(result) -> dict[int, dict]:
    return {d["row"]: d for d in result.dropped.to_pylist()}


@pytest.fixture(scope="module")
def result():
    return _curate(cutoff_date=CUTOFF)


def test_rows_in_equal_kept_plus_dropped_and_each_row_lands_where_expected(result):
    lines = (HERE / "code.jsonl").read_text().splitlines()
    assert result.rows_in == len(lines) == result.problems.num_rows + result.dropped.num_rows
    fates = {row: d["reason"] for row, d in _dropped(result).items()}
    assert fates == {r: f for r, f in FATES.items() if f != "kept"}
    kept = {json.loads(lines[r - 1])["problem"] for r, f in FATES.items() if f == "kept"}
    assert set(result.problems.column("problem").to_pylist()) == kept


def test_counts_and_by_source_account_for_every_row(result):
    assert result.counts == {"kept": 5, **{r: 0 for r in REASONS}, "contaminated": 3, "after_cutoff": 2}
    by = result.by_source["code"]
    assert by["rows_in"] == by["kept"] + sum(by[r] for r in REASONS) == 10


def test_undated_rows_are_kept_and_counted(result):
    assert result.undated_kept == 2


def test_contaminated_details_name_benchmark_problem_and_a_shared_test(result):
    d = _dropped(result)
    assert d[1]["detail"] == ("benchmark codebench row 1: tests share 3 of 3 cases, "
                              "e.g. input '3 4' -> output '7'")
    assert d[8]["detail"] == "benchmark codebench row 4: tests share 3 of 3 cases, e.g. args [12,18] -> 6"
    assert d[9]["detail"].startswith("benchmark codebench: shares 9-gram 'a robot starts at the origin")


def test_after_cutoff_details_give_the_date_and_the_cutoff(result):
    d = _dropped(result)
    assert d[4]["detail"] == "dated 2024-09-15, on or after cutoff 2024-08-01"
    assert d[5]["detail"] == "dated 2024-08-01, on or after cutoff 2024-08-01"


def test_undated_drop_drops_undated_rows_as_after_cutoff():
    r = _curate(cutoff_date=CUTOFF, undated="drop")
    d = _dropped(r)
    assert {row for row, x in d.items() if x["reason"] == "after_cutoff"} == {4, 5, 7, 10}
    assert d[7]["detail"] == "no date (cutoff 2024-08-01, undated rows dropped)"
    assert r.undated_kept == 0 and r.rows_in == r.problems.num_rows + r.dropped.num_rows


def test_without_a_cutoff_no_row_is_after_cutoff_and_tests_still_decontaminate():
    r = _curate()
    assert r.counts["after_cutoff"] == 0 and r.undated_kept is None
    assert {row for row, x in _dropped(r).items()} == {1, 8, 9}


def test_row_3_is_kept_only_because_its_shared_cases_are_trivial():
    """Row 3 shares only the trivial cases ("1" -> "1", empty input -> "0", in every stdin benchmark
    problem): 2 of min(4, 5) = 50%, so were they not trivial (bench_min_docs out of reach) it would be
    contaminated; the fixture exercises the frequency rule, not a weak overlap."""
    bench = load_benchmark_rows({"b": str(HERE / "bench_code.jsonl")})["b"]
    row3 = json.loads((HERE / "code.jsonl").read_text().splitlines()[2])["tests"]
    assert find_case_overlap([row3], {"b": bench.tests}) == [None]
    assert find_case_overlap([row3], {"b": bench.tests}, CaseOverlapConfig(bench_min_docs=99))[0] is not None
