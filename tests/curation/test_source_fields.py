"""A user's own file read with the wrong field names (tasks/curation/source_fields.py): a row missing a field
says which fields it has and how to map one; a --map reads a nested field by its dotted path, and one no
row has is refused before any work, as an empty source is."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate
from tasks.records.sources import SourceError

NESTED = [{"data": {"question": f"What is {i} plus {i} in round {i}?"}, "label": {"answer": str(2 * i)}}
          for i in range(1, 4)]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _config(name, path, **spec):
    return CurateConfig(sources=[{"name": name, "path": path, **spec}])


def check_sources(sources):
    from tasks.curation.source_fields import check_sources

    return check_sources(sources)


def test_a_row_missing_its_problem_names_the_fields_it_has_and_the_map_to_give(tmp_path):
    typo = _jsonl(tmp_path / "typo.jsonl", [{"questoin": "What is 1 plus 3?", "answer": "4", "note": None}])
    nested = _jsonl(tmp_path / "nested.jsonl", NESTED[:1])
    (t,) = curate(_config("wc", typo)).dropped.to_pylist()
    (n,) = curate(_config("nest", nested)).dropped.to_pylist()
    assert (t["reason"], t["detail"]) == (  # a null field is no field the row has
        "malformed", "missing 'problem' (row has: questoin, answer; map one with --map wc.FIELD=problem)")
    assert n["detail"] == "missing 'problem' (row has: data.question, label.answer; map one with --map nest.FIELD=problem)"


def test_a_dotted_map_reads_a_nested_field(tmp_path):
    path = _jsonl(tmp_path / "nested.jsonl", NESTED)
    result = curate(_config("n", path, field_map={"data.question": "problem", "label.answer": "answer"}))
    assert result.dropped.num_rows == 0
    assert [(r["problem"], r["answer"]) for r in result.problems.to_pylist()] == [
        (r["data"]["question"], r["label"]["answer"]) for r in NESTED]


def test_a_map_no_row_has_is_refused_naming_the_map_and_the_fields_rows_have(tmp_path):
    rows = [{"problem": f"What is {i} plus {i}?", "final": str(2 * i), "solution": "easy"} for i in range(3)]
    path = _jsonl(tmp_path / "noans.jsonl", rows)
    from tasks.curation.source_fields import UnmatchedMap

    for field_map, wrong in (({"finall": "answer"}, "finall"), ({"final": "answer", "data.question": "problem"},
                                                                 "data.question")):
        with pytest.raises(UnmatchedMap) as e:
            check_sources(_config("na", path, field_map=field_map).sources)
        assert isinstance(e.value, SourceError) and e.value.map == f"na.{wrong}={field_map[wrong]}"
        assert str(e.value) == (f"na.{wrong}={field_map[wrong]}: no row of source 'na' has field {wrong!r} "
                                "(its rows have: problem, final, solution)")


def test_a_map_one_late_row_has_passes_and_the_first_row_comes_back(tmp_path):
    rows = [{"problem": "What is 1 plus 1?"}] * 3 + [{"problem": "What is 2 plus 2?", "final": "4"}]
    path = _jsonl(tmp_path / "late.jsonl", rows)
    assert check_sources(_config("l", path, field_map={"final": "answer"}).sources) == {"l": rows[0]}


def test_a_map_over_rows_none_of_which_parse_is_left_to_the_malformed_drops(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text("{oops\nnot json\n")
    assert check_sources(_config("b", str(path), field_map={"q": "problem"}).sources) == {"b": None}


@pytest.mark.parametrize("name, write", [
    ("zero.jsonl", lambda p: p.write_bytes(b"")),
    ("blank.jsonl", lambda p: p.write_text("\n  \n\n")),
    ("zero.parquet", lambda p: pq.write_table(pa.table({"problem": pa.array([], pa.string())}), p)),
])
def test_an_empty_source_is_refused_naming_its_file(tmp_path, name, write):
    from tasks.curation.source_fields import EmptySource

    path = tmp_path / name
    write(path)
    with pytest.raises(EmptySource) as e:
        check_sources(_config("e", str(path)).sources)
    assert str(e.value) == f"{path}: source 'e' has no rows" and (e.value.name, e.value.path) == ("e", str(path))


@pytest.mark.parametrize("row", [
    {"question": "Full statement: what is 7+7?", "problem": "Title E", "answer": "14"},
    {"problem": "Title E", "question": "Full statement: what is 7+7?", "answer": "14"},
    {"problem": "Title E", "data": {"question": "Full statement: what is 7+7?"}, "answer": "14"},
])
def test_a_map_wins_over_the_rows_own_field_of_its_name_in_any_key_order(row):
    from tasks.curation.layouts import apply_field_map

    field_map = {"data.question" if "data" in row else "question": "problem"}
    mapped = apply_field_map(row, field_map)
    assert mapped["problem"] == "Full statement: what is 7+7?" and mapped["answer"] == "14"


def test_a_row_without_the_mapped_field_keeps_its_own():
    from tasks.curation.layouts import apply_field_map

    field_map = {"question": "problem", "q2": "problem"}
    assert apply_field_map({"problem": "own", "question": None}, field_map) == {"problem": "own"}
    assert apply_field_map({"q2": "second", "problem": "own"}, field_map) == {"problem": "second"}
    assert apply_field_map({"q2": "second", "question": "first"}, field_map) == {"problem": "first"}


def test_a_map_over_a_parquet_column_wins_over_a_problem_column(tmp_path):
    path = tmp_path / "map.parquet"
    pq.write_table(pa.table({"question": ["Full statement: what is 7+7?"], "problem": ["Title E"],
                             "answer": ["14"]}), path)
    (kept,) = curate(_config("q", str(path), field_map={"question": "problem"})).problems.to_pylist()
    assert (kept["problem"], kept["answer"]) == ("Full statement: what is 7+7?", "14")
