"""hf:DATASET[:SPLIT] sources (the `hf` extra, which `make test` installs): a local folder of Parquet shards
read through `datasets`, and keyed by what it holds, not by its name: a dataset changed under the same name
is a new curation input, never the old version served again."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

datasets = pytest.importorskip("datasets")

from tasks.curation.config import CurateConfig  # noqa: E402
from tasks.curation.dataset import plan_curation  # noqa: E402
from tasks.curation.versioning import input_hash  # noqa: E402
from tasks.records.sources import read_source  # noqa: E402


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def _write(folder, problems):
    folder.mkdir(exist_ok=True)
    pq.write_table(pa.table({"problem": problems, "answer": [str(i) for i in range(len(problems))],
                             "domain": ["math"] * len(problems)}), folder / "train.parquet")


def test_a_local_hf_folder_is_read_row_by_row(tmp_path):
    _write(tmp_path / "d", ["What is 1 + 1?", "What is 2 + 2?"])
    rows = list(read_source(f"hf:{tmp_path / 'd'}"))
    assert [r.value["problem"] for r in rows] == ["What is 1 + 1?", "What is 2 + 2?"] and rows[0].row == 1


def test_a_changed_hf_dataset_is_a_new_input_and_a_new_version(tmp_path):
    path = f"hf:{tmp_path / 'd'}"
    _write(tmp_path / "d", ["What is 1 + 1?"])
    config = CurateConfig(sources=[{"name": "h", "path": path}])
    first, again = input_hash(path), input_hash(path)
    version = plan_curation(config)[0]
    _write(tmp_path / "d", ["What is 1 + 1?", "What is 3 + 3?"])
    assert first == again                       # the same content: the same key, nothing recomputed
    assert input_hash(path) != first            # the same name, other rows: another key
    assert plan_curation(config)[0] != version
