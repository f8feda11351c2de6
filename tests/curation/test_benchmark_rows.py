"""Curation's benchmark reading (decontamination): a row without a usable problem is skipped with a warning
naming its file and row; any row with a problem text counts; a benchmark with none is refused."""
import json
import logging

import pytest

from tasks.curation.steps import check_benchmarks, load_benchmark_rows
from tasks.records.sources import SourceError


def test_bad_rows_are_skipped_and_named_the_rest_kept(tmp_path, caplog):
    p = tmp_path / "bench.jsonl"
    tests = {"inputs": ["1\n"], "outputs": ["2\n"]}
    p.write_text("\n".join([json.dumps({"question": "Double it.", "tests": tests}), "{oops", "",
                            json.dumps({"answer": "3"}), json.dumps({"problem": "Add.", "domain": "chess"})]) + "\n")
    with caplog.at_level(logging.WARNING, logger="tasks.curation.steps"):
        bench = load_benchmark_rows({"b": str(p)})["b"]
    assert (bench.problems, bench.tests, bench.rows) == (["Double it.", "Add."], [tests, None], [1, 5])
    assert [m.split(" (")[0] for m in caplog.messages] == [f"benchmark b: skipped {p} row 2: not JSON",
                                                           f"benchmark b: skipped {p} row 4: no problem text"]


def test_a_benchmark_without_a_problem_is_refused(tmp_path):
    p = tmp_path / "bench.jsonl"
    p.write_text(json.dumps({"answer": "3"}) + "\n")
    with pytest.raises(SourceError, match="benchmark 'b' has no rows with a 'problem'"):
        check_benchmarks({"b": str(p)})
    with pytest.raises(SourceError, match="benchmark 'b' has no rows with a 'problem'"):
        load_benchmark_rows({"b": str(p)})
