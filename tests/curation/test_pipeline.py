import pytest

from tasks.curation.config import CurateConfig
from tasks.curation.pipeline import curate
from tasks.curation.sources import SourceError
from tests.curation.fixtures import expected, write_corpus


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
    import json

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
