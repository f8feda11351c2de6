"""DatasetRef: the `STORE#VERSION` syntax in one place, and what a `--data` value names."""
import dataclasses
from pathlib import Path

import pytest

from storage.refs import DatasetRef, data_ref


@pytest.mark.parametrize("text, store, version", [
    ("./klear-store", "./klear-store", None),
    ("./klear-store#ds-0123456789abcdef", "./klear-store", "ds-0123456789abcdef"),
    ("/abs/store#ds-1", "/abs/store", "ds-1"),
    ("s3://bucket/store#ds-1", "s3://bucket/store", "ds-1"),
    ("/tmp/a#b/store#ds-1", "/tmp/a#b/store", "ds-1"),  # the last '#' splits
])
def test_parse_and_str_round_trip(text, store, version):
    ref = DatasetRef.parse(text)
    assert (ref.store, ref.version) == (store, version)
    assert str(ref) == text
    assert DatasetRef.parse(str(ref)) == ref


def test_constructed_from_parts():
    assert str(DatasetRef("./klear-store", "ds-abc")) == "./klear-store#ds-abc"
    assert str(DatasetRef(Path("/x/store"), "ds-abc")) == "/x/store#ds-abc"  # a Path is kept as its string
    assert DatasetRef(Path("/x/store")).store == "/x/store"


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DatasetRef("s").version = "ds-1"


@pytest.mark.parametrize("text, message", [
    ("./klear-store#", "./klear-store#: an empty dataset version (expected STORE or STORE#VERSION)"),
    ("#ds-1", "#ds-1: no store before '#' (expected STORE or STORE#VERSION)"),
    ("./s#ds 1", "./s#ds 1: a malformed dataset version 'ds 1' (expected STORE or STORE#VERSION)"),
    ("./s#a/b", "./s#a/b: a malformed dataset version 'a/b' (expected STORE or STORE#VERSION)"),
    ("", "dataset reference has an empty store"),
])
def test_bad_references_are_one_line_value_errors(text, message):
    with pytest.raises(ValueError) as e:
        DatasetRef.parse(text)
    assert str(e.value) == message and "\n" not in str(e.value)


def test_data_ref_tells_a_store_from_a_file(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    odd = tmp_path / "rows#1.jsonl"  # a file with '#' in its name is still a file
    odd.write_text("{}\n")
    assert data_ref(str(store)) == DatasetRef(str(store))
    assert data_ref(f"{store}#ds-0123") == DatasetRef(str(store), "ds-0123")
    assert data_ref(str(rows)) is None
    assert data_ref(str(odd)) is None
    assert data_ref(str(tmp_path / "missing.jsonl")) is None  # not a store: the file reader reports it
    assert data_ref(f"{tmp_path}/nostore#ds-1") is None
    with pytest.raises(ValueError, match="an empty dataset version"):
        data_ref(f"{store}#")
