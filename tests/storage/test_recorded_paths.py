"""A path a user names relative to their working directory is recorded absolute (storage/paths.recorded), so
the catalog, a manifest and a lineage file still name the file from any other directory: a dataset version's
source and benchmark files, a checkpoint's training data. URLs and `hf:` specs are recorded as given."""
import json
import os

import pyarrow as pa

from storage import paths
from storage.checkpoints import LINEAGE_FILE, describe_checkpoint
from storage.store import DatasetVersion, Store


def test_a_relative_path_is_recorded_absolute_and_a_url_or_spec_as_given(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()  # as recorded: symlinks resolved
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path / "data")
    assert paths.recorded("b.jsonl") == str(tmp_path / "data" / "b.jsonl")
    assert paths.recorded("../x/../b.jsonl") == str(tmp_path / "b.jsonl")
    for given in ("hf:openai/gsm8k:test", "s3://bucket/b.parquet", "file:///abs/b.jsonl", "gs://b/x.jsonl"):
        assert paths.recorded(given) == given


def test_a_version_records_its_input_files_absolute(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()  # as recorded: symlinks resolved
    (tmp_path / "work" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    inputs = {"sources": [{"name": "m", "path": "data/math.jsonl", "sha256": "ab", "field_map": {"path": "problem"}},
                          {"name": "h", "path": "hf:org/set:train", "sha256": "hf:org/set:train"}],
              "benchmarks": {"bench": {"path": "data/bench.jsonl", "sha256": "cd"}}}
    v = DatasetVersion(id="ds-00000000000000aa", kind="curate", parameters={}, counts={"kept": 1}, rows_in=1,
                       inputs=inputs)
    store = Store("store")
    store.write_version(v, {"problems": pa.table({"id": ["a"]}), "dropped": pa.table({"id": pa.array([], "string")})})
    os.chdir(tmp_path)  # another directory: what is recorded does not depend on it
    want = {"sources": [{"name": "m", "path": str(tmp_path / "work/data/math.jsonl"), "sha256": "ab",
                         "field_map": {"path": "problem"}},  # a raw field named `path` is no file
                        {"name": "h", "path": "hf:org/set:train", "sha256": "hf:org/set:train"}],
            "benchmarks": {"bench": {"path": str(tmp_path / "work/data/bench.jsonl"), "sha256": "cd"}}}
    store = Store(str(tmp_path / "work/store"))
    assert store.load_version(v.id).inputs == want
    [(recorded,)] = store.catalog.query("SELECT inputs FROM datasets")
    assert json.loads(recorded) == want


def test_a_checkpoint_records_its_training_data_absolute(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()  # as recorded: symlinks resolved
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"w")
    (tmp_path / "klear-store").mkdir()
    (tmp_path / "train.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    for given, want in [("train.jsonl", tmp_path / "train.jsonl"), ("klear-store", tmp_path / "klear-store"),
                        ("./klear-store#ds-0123456789abcdef", f"{tmp_path / 'klear-store'}#ds-0123456789abcdef"),
                        ("s3://bucket/store", "s3://bucket/store")]:
        row = describe_checkpoint("m", "sft", None, None, {"data": given, "sft": {"lr": 1e-4}})
        assert row["config"] == {"data": str(want), "sft": {"lr": 1e-4}}, given
        assert json.loads((tmp_path / "m" / LINEAGE_FILE).read_text())["config"]["data"] == str(want)
