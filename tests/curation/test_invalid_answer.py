"""Curation drops a math row whose reference answer the grader cannot parse (`invalid_answer`), so RL never
meets one; in one part or many alike, with rows in = kept + dropped."""
from __future__ import annotations

import json

import pytest

from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import ALL_REASONS, curate
from tests.curation.test_pipeline import in_parts

ROWS = [  # (row, expected fate)
    ({"problem": "What is 2 + 3?", "answer": "5"}, "kept"),
    ({"problem": "Half of one, as a fraction?", "answer": "\\frac{1}{2}"}, "kept"),
    ({"problem": "Solve x^2 < 9 for x.", "answer": "(-3, 3)"}, "kept"),
    ({"problem": "A fraction left unfinished by the dataset author.", "answer": "\\frac{1}{"}, "invalid_answer"),
    ({"problem": "Braces the wrong way round in the reference.", "answer": "}{"}, "invalid_answer"),
    ({"problem": "A proof with no final answer to check."}, "kept"),
    ({"problem": "Write add(a, b).", "domain": "code", "answer": "}{",
      "tests": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}}, "kept"),
]


@pytest.fixture
def config(tmp_path):
    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r, _ in ROWS))
    return CurateConfig(sources=[{"name": "m", "path": str(src)}])


def test_a_math_row_with_an_unparsable_answer_is_dropped_invalid_answer(config):
    res = curate(config)
    dropped = res.dropped.to_pylist()
    assert [(d["row"], d["reason"]) for d in dropped] == [(4, "invalid_answer"), (5, "invalid_answer")]
    # the answer as written (one backslash), not its repr: answer '\frac{1}{': ...
    assert dropped[0]["detail"] == "answer '\\frac{1}{': math-verify finds no mathematical expression in it"
    assert all(d["id"] and d["problem"] for d in dropped)
    kept = [r["problem"] for r in res.problems.to_pylist()]
    assert kept == [r["problem"] for r, fate in ROWS if fate == "kept"]
    assert res.counts["invalid_answer"] == 2 and res.by_source["m"]["invalid_answer"] == 2
    assert res.rows_in == len(ROWS) == res.problems.num_rows + res.dropped.num_rows
    assert "invalid_answer" in ALL_REASONS


def test_parts_of_two_rows_drop_the_same_rows(config, tmp_path):
    want = curate(config)
    got, _ = in_parts(config, tmp_path / "w", batch_rows=2)
    assert got.dropped.to_pylist() == want.dropped.to_pylist()
    assert got.problems.to_pylist() == want.problems.to_pylist()
    assert (got.rows_in, got.counts) == (want.rows_in, want.counts)


def test_rows_come_out_in_order_across_batches():
    from types import SimpleNamespace

    from tasks.curation.validate_math import drop_invalid_answers

    items = [(k, SimpleNamespace(domain="math", answer=a, problem=f"p{k}", id=f"i{k}"), None)
             for k, a in enumerate(["1", "}{", "x+1", "", "2"], start=1)]
    out = list(drop_invalid_answers(items, lambda row, p, detail: {"row": row, "detail": detail}, batch=2))
    assert [(row, p is None, d and d["row"]) for row, p, d in out] == [
        (1, False, None), (2, True, 2), (3, False, None), (4, True, 4), (5, False, None)]
