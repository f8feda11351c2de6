"""read_problems: a store (current version), `STORE#VERSION` (a pinned one) or a canonical file."""
import json

import pyarrow as pa
import pytest

from storage.refs import DatasetRef
from storage.store import DatasetVersion, Store
from tasks.training.sft_data import read_problems


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
