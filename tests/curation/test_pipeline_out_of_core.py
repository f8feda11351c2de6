"""The out-of-core pipeline writes what the in-memory pipeline returns: the same problems (rows, order,
columns) and the same dropped rows with the same reasons and details, on the hostile fixtures, the code
decontamination fixtures with a cutoff date, with --top-sources, and with parts of a few rows."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.curation import out_of_core as oc
from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate
from tasks.curation.pipeline_out_of_core import curate_out_of_core
from tests.curation.fixtures import write_corpus

CODE = Path(__file__).parent / "code_decontam"


def _both(config: CurateConfig, tmp_path: Path, batch_rows: int | None = None):
    want = curate(config)
    with oc.Workspace(oc.OutOfCoreConfig(memory_limit="256MB", batch_rows=batch_rows, work_dir=str(tmp_path / "w"))) as ws:
        got = curate_out_of_core(config, ws)
        problems, dropped = pq.read_table(got.problems), pq.read_table(got.dropped)
    assert problems.schema == want.problems.schema
    assert problems.to_pylist() == want.problems.to_pylist()
    assert dropped.to_pylist() == want.dropped.to_pylist()
    assert (got.rows_in, got.counts, got.by_source) == (want.rows_in, want.counts, want.by_source)
    assert got.source_scores == want.source_scores
    assert got.undated_kept == want.undated_kept
    return got


@pytest.mark.parametrize("batch_rows", [None, 3])
def test_hostile_corpus_same_as_in_memory(tmp_path, batch_rows):
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                          benchmarks={"bench": str(files["bench"])})
    got = _both(config, tmp_path, batch_rows)
    assert got.counts["duplicate"] and got.counts["near_duplicate"] and got.counts["contaminated"]


def test_top_sources_same_as_in_memory(tmp_path):
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                          benchmarks={"bench": str(files["bench"])}, top_sources=1)
    assert _both(config, tmp_path).counts["excluded_source"] > 0


def test_code_overlap_and_cutoff_same_as_in_memory(tmp_path):
    config = CurateConfig(sources=[{"name": "code", "path": str(CODE / "code.jsonl")}],
                          benchmarks={"codebench": str(CODE / "bench_code.jsonl")}, cutoff_date="2024-08-01")
    got = _both(config, tmp_path, batch_rows=4)
    assert got.counts["after_cutoff"] and got.counts["contaminated"]


def test_a_source_with_no_valid_row_same_as_in_memory(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n[1, 2]\n")
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "bad", "path": str(bad)}, {"name": "a", "path": str(files["a"])}],
                          benchmarks={"bench": str(files["bench"])})
    assert _both(config, tmp_path).by_source["bad"]["malformed"] == 2
    assert _both(CurateConfig(sources=[{"name": "bad", "path": str(bad)}]), tmp_path / "alone").counts["kept"] == 0


def test_parts_are_cut_by_bytes_of_long_rows(tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps({"problem": f"Problem {i}: find the sum of {i} and {i + 1}.",
                                        "response": "<think>" + "step " * 400 + f"</think> \\boxed{{{2 * i + 1}}}",
                                        "answer": str(2 * i + 1)}) + "\n" for i in range(12)))
    config = CurateConfig(sources=[{"name": "long", "path": str(long)}])
    want = curate(config)
    with oc.Workspace(oc.OutOfCoreConfig(batch_bytes=5_000, work_dir=str(tmp_path / "w"))) as ws:
        got = curate_out_of_core(config, ws)
        assert len(list((ws.root / "rows").glob("*.parquet"))) == 4  # ~2.1 KB a row: cut after three rows
        assert pq.read_table(got.problems).to_pylist() == want.problems.to_pylist()


def test_undated_drop_and_several_benchmarks_same_as_in_memory(tmp_path):
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "code", "path": str(CODE / "code.jsonl")},
                                   {"name": "a", "path": str(files["a"])}],
                          benchmarks={"codebench": str(CODE / "bench_code.jsonl"), "bench": str(files["bench"])},
                          cutoff_date="2024-08-01", undated="drop")
    assert _both(config, tmp_path, batch_rows=5).counts["after_cutoff"] > 0


def test_a_reused_work_dir_holds_nothing_of_an_earlier_run(tmp_path):
    files = write_corpus(tmp_path)
    two = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}])
    one = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}])
    for config in (two, one):
        with oc.Workspace(oc.OutOfCoreConfig(work_dir=str(tmp_path / "w"))) as ws:
            got = curate_out_of_core(config, ws)
            assert set(got.by_source) == {s.name for s in config.sources}
    assert list((tmp_path / "w").iterdir()) == []  # each run's directory is removed


def test_a_work_dir_with_glob_characters_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"must not contain \[ \]"):
        oc.Workspace(oc.OutOfCoreConfig(work_dir=str(tmp_path / "run[1]")))
