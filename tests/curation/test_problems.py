"""read_problems: a store (current version), `STORE#VERSION` (a pinned one) or a canonical file."""
import json

import pyarrow as pa
import pytest

from storage.refs import DatasetRef
from storage.store import DatasetVersion, Store
from tasks.curation.problems import read_problems


def _write(store: Store, vid: str, problems: list[str]) -> None:
    rows = [{"id": p, "problem": p, "domain": "math"} for p in problems]
    store.write_version(DatasetVersion(id=vid, kind="curate", parameters={}, counts={"kept": len(rows)},
                                       rows_in=len(rows)), {"problems": pa.Table.from_pylist(rows)})


def test_store_ref_pins_a_version_and_plain_store_reads_the_current_one(tmp_path):
    store = Store(str(tmp_path / "store"))
    _write(store, "ds-old", ["a"])
    _write(store, "ds-new", ["b", "c"])
    store.publish("ds-new")
    rows, dataset = read_problems(str(DatasetRef(str(tmp_path / "store"), "ds-old")))
    assert dataset == "ds-old" and [r["problem"] for r in rows] == ["a"]
    rows, dataset = read_problems(str(tmp_path / "store"))
    assert dataset == "ds-new" and [r["problem"] for r in rows] == ["b", "c"]
    with pytest.raises(ValueError, match="no dataset version ds-gone"):
        read_problems(f"{tmp_path}/store#ds-gone")
    with pytest.raises(ValueError, match="an empty dataset version"):
        read_problems(f"{tmp_path}/store#")


def test_a_file_with_hash_in_its_name_is_read_as_a_file(tmp_path):
    f = tmp_path / "rows#2.jsonl"
    f.write_text(json.dumps({"problem": "1+1?", "response": "2", "answer": "2"}) + "\n")
    rows, dataset = read_problems(str(f))
    assert dataset.startswith("file:") and rows[0]["problem"] == "1+1?"


@pytest.mark.parametrize("line, why", [
    (rb'{"problem": "x \ud800", "response": "r"}', "lone surrogate"),
    (b"[" * 100_000, "nested deeper than"),
    (b'{"problem": "0/0?", "response": "r", "answer": NaN}', "answer must be a finite number"),
    (b'{"problem": "1+1?", "response": "r"', "not JSON"),
])
def test_a_bad_file_row_is_named_by_file_and_row(tmp_path, line, why):
    f = tmp_path / "sft.jsonl"
    good = json.dumps({"problem": "1+1?", "response": "2"}).encode()
    f.write_bytes(good + b"\n" + line + b"\n" + good.replace(b"1+1", b"2+2") + b"\n")
    with pytest.raises(ValueError) as exc:
        read_problems(str(f))
    assert str(exc.value).startswith(f"{f} row 2: ") and why in str(exc.value) and "\n" not in str(exc.value)
    bad = []  # with on_bad: reported and skipped, the rest read
    rows, _ = read_problems(str(f), on_bad=bad.append)
    assert [r["problem"] for r in rows] == ["1+1?", "2+2?"] and len(bad) == 1 and str(bad[0]) == str(exc.value)


def test_bare_cr_inside_a_line_keeps_it_one_row(tmp_path):
    f = tmp_path / "sft.jsonl"
    f.write_bytes(b'{"problem": "1+1?",\r "response": "2"}\n')
    rows, _ = read_problems(str(f))
    assert [(r["problem"], r["response"]) for r in rows] == [("1+1?", "2")]


def test_training_files_and_benchmarks_read_the_same_aliases(tmp_path):
    """One alias table (the canonical layout's) for every command: a row that `klear eval --benchmark` reads
    (question, input_output, solution) is read the same by `klear sft/rl --data`."""
    from tasks.curation.problems import benchmark_problem, file_problem

    row = {"question": "Print the sum of two integers.", "solution": "a, b = map(int, input().split())",
           "input_output": {"inputs": ["1 2\n"], "outputs": ["3\n"]}, "domain": "code"}
    as_file, as_bench = file_problem(row), benchmark_problem(row)
    assert as_file["problem"] == as_bench["problem"] == row["question"]
    assert as_file["tests"] == as_bench["tests"] and as_file["response"] == row["solution"]


def test_a_raw_datasets_row_names_the_layout_to_curate_it_with(tmp_path):
    path = tmp_path / "taco.jsonl"
    path.write_text(json.dumps({"solutions": "[]", "input_output": "{}"}) + "\n")  # no question: not a problem
    with pytest.raises(ValueError, match=r"row 1: missing 'problem' \(a raw dataset's row: it carries `solutions`; "
                                         r"curate it with its layout, klear curate --source NAME=FILE --layout NAME=taco\)"):
        read_problems(str(path))


def test_a_raw_datasets_readable_rows_warn_once_what_is_left_out(tmp_path, caplog):
    path = tmp_path / "r1.jsonl"
    path.write_text("".join(json.dumps({"problem": f"{i}+1?", "solution": str(i + 1), "answer": str(i + 1),
                                        "generations": [f"<think>long</think> {i + 1}"]}) + "\n" for i in range(3)))
    rows, _ = read_problems(str(path))
    assert [r["response"] for r in rows] == ["1", "2", "3"]   # read, as the canonical fields say
    warned = [r.message for r in caplog.records if "generations" in r.message]
    assert len(warned) == 1 and "--layout NAME=openr1-math" in warned[0]
