"""The curation pipeline: every row's fate on hostile fixtures, drop details, determinism, and the same
result however the rows are cut into parts and whichever way near dedup runs (one array, or across parts)."""
import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.curation import out_of_core as oc
from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate, run_pipeline
from tasks.records.sources import SourceError
from tests.curation.fixtures import expected, write_corpus

CODE = Path(__file__).parent / "code_decontam"


def _config(files, **kw):
    return CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                        benchmarks={"bench": str(files["bench"])}, **kw)


def _fates(result):
    fates = {}
    for r in result.dropped.to_pylist():
        assert (r["source"], r["row"]) not in fates, "a row dropped twice"
        fates[(r["source"], r["row"])] = r["reason"]
    return fates


def test_every_row_lands_where_expected(tmp_path):
    files = write_corpus(tmp_path)
    result = curate(_config(files))
    exp = expected()
    fates = _fates(result)
    assert {k: v for k, v in exp.items() if v != "kept"} == fates
    kept = [(r["source"], r["row"]) for r in result.problems.select(["source", "row"]).to_pylist()]
    assert sorted(kept) == sorted(k for k, v in exp.items() if v == "kept"), "a kept row names its source line"
    assert result.problems.num_rows == sum(v == "kept" for v in exp.values())
    assert result.rows_in == len(exp) == result.problems.num_rows + result.dropped.num_rows


def test_drop_details_name_the_kept_row_and_the_ngram(tmp_path):
    files = write_corpus(tmp_path)
    result = curate(_config(files))
    kept_ids = set(result.problems.column("id").to_pylist())
    for r in result.dropped.to_pylist():
        if r["reason"] in ("duplicate", "near_duplicate"):
            assert any(k in r["detail"] for k in kept_ids), r
        if r["reason"] == "contaminated":
            assert r["detail"].startswith("benchmark bench: shares 9-gram"), r
        if r["reason"] == "malformed":
            assert r["detail"] and r["problem"] is not None


def test_same_inputs_same_output(tmp_path):
    files = write_corpus(tmp_path)
    a, b = curate(_config(files)), curate(_config(files))
    assert a.problems.equals(b.problems) and a.dropped.equals(b.dropped)


def test_top_sources_excludes_with_reason(tmp_path):
    files = write_corpus(tmp_path)
    result = curate(_config(files, top_sources=1))
    assert result.rows_in == result.problems.num_rows + result.dropped.num_rows
    excluded = [r for r in result.dropped.to_pylist() if r["reason"] == "excluded_source"]
    assert excluded and {r["source"] for r in excluded} == {min(result.source_scores, key=result.source_scores.get)}


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match="nope.jsonl: no such file"):
        curate(CurateConfig(sources=[{"name": "x", "path": str(tmp_path / "nope.jsonl")}]))


def test_unjudgeable_assert_tests_are_dropped_as_invalid_tests_at_ingest(tmp_path):
    rows = [{"problem": "add two numbers", "tests": {"assert_code": "assert add(1, 2) == 3"}},
            {"problem": "add two other numbers", "tests": {"assert_code": "e = 3\nassert 1 + 2 == e"}}]
    src = tmp_path / "code.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"problem": "an unrelated benchmark question about geometry"}) + "\n")
    result = curate(CurateConfig(sources=[{"name": "c", "path": str(src)}], benchmarks={"b": str(bench)}))
    assert result.problems.num_rows == 1 and _fates(result) == {("c", 2): "invalid_tests"}
    assert result.counts["invalid_tests"] == 1 and result.by_source["c"]["invalid_tests"] == 1
    assert "never uses a name the program defines" in result.dropped.column("detail")[0].as_py()


@pytest.mark.parametrize("line, why", [
    (rb'{"problem": "bad \ud800 one", "answer": "3"}', "lone surrogate \\ud800"),
    (b"[" * 100_000, "nested deeper than"),
    (b'{"problem": "What is 0/0?", "answer": NaN}', "answer must be a finite number, got nan"),
    (b'{"problem": "What is 1/0?", "answer": Infinity}', "answer must be a finite number, got inf"),
    (b'{"problem": "What is 9^9999?", "answer": 1e400}', "answer must be a finite number, got inf"),
    (b'{"problem": "Write f.", "tests": "{\\"inputs\\": [\\"\\\\udc00\\"], \\"outputs\\": [\\"1\\"]}"}',
     "lone surrogate \\udc00"),
    (b'{"problem": "What is 2\xff?"}', "not UTF-8"),
])
def test_one_bad_row_is_dropped_malformed_and_the_rest_kept(tmp_path, line, why):
    """One hostile row between two good ones: it lands in `dropped` as malformed with its row number and a
    one-line reason, in the source and as a benchmark, and never stops the run."""
    src = tmp_path / "s.jsonl"
    src.write_bytes(b'{"problem": "What is 1+1?",\r "answer": "2"}\n' + line + b'\n{"problem": "What is 2+3?"}\n')
    bench = tmp_path / "bench.jsonl"
    bench.write_bytes(line + b'\n{"problem": "an unrelated benchmark question about the geometry of cubes"}\n')
    result = curate(CurateConfig(sources=[{"name": "s", "path": str(src)}], benchmarks={"b": str(bench)}))
    assert result.rows_in == 3 == result.problems.num_rows + result.dropped.num_rows
    assert result.problems.column("problem").to_pylist() == ["What is 1+1?", "What is 2+3?"]
    (drop,) = result.dropped.to_pylist()
    assert (drop["row"], drop["reason"]) == (2, "malformed") and why in drop["detail"]
    assert "\n" not in drop["detail"] and drop["problem"].encode("utf-8")
    assert result.counts["malformed"] == 1 and result.by_source["s"]["kept"] == 2


# ------------------------------------------------------------------------------ the same result in parts


def in_parts(config: CurateConfig, work: Path, batch_rows: int | None = None, batch_bytes: int | None = None):
    """The pipeline with rows cut into parts of `batch_rows` rows (or `batch_bytes`) and near dedup across
    parts, never on one array; its tables read back."""
    cfg = oc.OutOfCoreConfig(memory_limit="256MB", batch_rows=batch_rows, batch_bytes=batch_bytes, whole_bytes=0,
                             work_dir=str(work))
    with oc.Workspace(cfg) as ws:
        got = run_pipeline(config, ws)
        parts = len(list((ws.root / "rows").glob("*.parquet")))
        return replace(got, problems=pq.read_table(got.problems), dropped=pq.read_table(got.dropped)), parts


def _same_in_parts(config: CurateConfig, tmp_path: Path, batch_rows: int | None = None):
    want = curate(config)
    got, _ = in_parts(config, tmp_path / "w", batch_rows)
    assert got.problems.schema == want.problems.schema
    assert got.problems.to_pylist() == want.problems.to_pylist()
    assert got.dropped.to_pylist() == want.dropped.to_pylist()
    assert (got.rows_in, got.counts, got.by_source) == (want.rows_in, want.counts, want.by_source)
    assert got.source_scores == want.source_scores
    assert got.undated_kept == want.undated_kept
    return got


@pytest.mark.parametrize("batch_rows", [None, 3])
def test_hostile_corpus_same_in_parts(tmp_path, batch_rows):
    files = write_corpus(tmp_path)
    got = _same_in_parts(_config(files), tmp_path, batch_rows)
    assert got.counts["duplicate"] and got.counts["near_duplicate"] and got.counts["contaminated"]


def test_top_sources_same_in_parts(tmp_path):
    files = write_corpus(tmp_path)
    assert _same_in_parts(_config(files, top_sources=1), tmp_path).counts["excluded_source"] > 0


def test_code_overlap_and_cutoff_same_in_parts(tmp_path):
    config = CurateConfig(sources=[{"name": "code", "path": str(CODE / "code.jsonl")}],
                          benchmarks={"codebench": str(CODE / "bench_code.jsonl")}, cutoff_date="2024-08-01")
    got = _same_in_parts(config, tmp_path, batch_rows=4)
    assert got.counts["after_cutoff"] and got.counts["contaminated"]


def test_undated_drop_and_several_benchmarks_same_in_parts(tmp_path):
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "code", "path": str(CODE / "code.jsonl")},
                                   {"name": "a", "path": str(files["a"])}],
                          benchmarks={"codebench": str(CODE / "bench_code.jsonl"), "bench": str(files["bench"])},
                          cutoff_date="2024-08-01", undated="drop")
    assert _same_in_parts(config, tmp_path, batch_rows=5).counts["after_cutoff"] > 0


def test_a_source_with_no_valid_row_same_in_parts(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n[1, 2]\n")
    files = write_corpus(tmp_path)
    config = CurateConfig(sources=[{"name": "bad", "path": str(bad)}, {"name": "a", "path": str(files["a"])}],
                          benchmarks={"bench": str(files["bench"])})
    assert _same_in_parts(config, tmp_path).by_source["bad"]["malformed"] == 2
    assert _same_in_parts(CurateConfig(sources=[{"name": "bad", "path": str(bad)}]), tmp_path / "alone").counts["kept"] == 0


def test_parts_are_cut_by_bytes_of_long_rows(tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps({"problem": f"Problem {i}: find the sum of {i} and {i + 1}.",
                                        "response": "<think>" + "step " * 400 + f"</think> \\boxed{{{2 * i + 1}}}",
                                        "answer": str(2 * i + 1)}) + "\n" for i in range(12)))
    config = CurateConfig(sources=[{"name": "long", "path": str(long)}])
    got, parts = in_parts(config, tmp_path / "w", batch_bytes=5_000)
    assert parts == 4  # ~2.1 KB a row: cut after three rows
    assert got.problems.to_pylist() == curate(config).problems.to_pylist()


def test_a_reused_work_dir_holds_nothing_of_an_earlier_run(tmp_path):
    files = write_corpus(tmp_path)
    two = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                       work_dir=str(tmp_path / "w"))
    one = CurateConfig(sources=[{"name": "a", "path": str(files["a"])}], work_dir=str(tmp_path / "w"))
    for config in (two, one):
        assert set(curate(config).by_source) == {s.name for s in config.sources}
    assert list((tmp_path / "w").iterdir()) == []  # each run's directory is removed


def test_a_work_dir_with_glob_characters_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"must not contain \[ \]"):
        oc.Workspace(oc.OutOfCoreConfig(work_dir=str(tmp_path / "run[1]")))


def test_the_run_says_its_memory_limit_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KLEAR_PROGRESS", "plain")
    files = write_corpus(tmp_path)
    lines = []
    curate(_config(files), feed=lines.append)
    assert lines[0].startswith("curate memory limit ") and "automatic: 1/4 of " in lines[0], lines[0]
    curate(_config(files, memory_limit="300MB"), feed=lines.append)
    assert [x for x in lines if x.startswith("curate memory limit")][1] == "curate memory limit 0.3 GiB (--memory-limit)"
    assert sum(x.startswith("curate memory limit") for x in capsys.readouterr().err.splitlines()) == 2
