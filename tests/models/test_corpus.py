"""Tokenizer corpus reading: a bad row is skipped and reported by file and row, the rest is read."""
import json
import logging

from tasks.models.corpus import corpus_texts, source_texts


def _file(tmp_path):
    f = tmp_path / "corpus.jsonl"
    good = json.dumps({"problem": "1+1?", "response": "2"}).encode()
    f.write_bytes(b"\n".join([good, rb'{"problem": "\ud800", "response": "r"}', b"[" * 100_000,
                              b'{"problem": "3+4?",\r "response": "7"}', b""]))
    return f


def test_corpus_texts_skip_and_report_bad_rows(tmp_path):
    f = _file(tmp_path)
    bad = []
    assert corpus_texts(str(f), on_bad=bad.append) == ["1+1?\n2", "3+4?\n7"]
    assert [str(b).split(": ", 1)[0] for b in bad] == [f"{f} row 2", f"{f} row 3"]


def test_source_texts_skip_and_log_bad_rows(tmp_path, caplog):
    f = _file(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tasks.models.corpus"):
        assert source_texts([str(f)]) == ["1+1?", "2", "3+4?", "7"]
    assert "row 2: lone surrogate" in caplog.text and "row 3: nested deeper" in caplog.text


def test_dataset_texts_hold_what_curation_kept_and_nothing_it_dropped(tmp_path):
    """The pipeline's tokenizer corpus: a source row that copies a benchmark problem is dropped as
    contaminated, so its words never reach the vocabulary; nor does a raw field beside the text."""
    from tasks.curation.config import CurateConfig
    from tasks.curation.dataset import build_curated_version, plan_curation
    from tasks.models.corpus import dataset_texts

    leaked = "A train leaves the quiet station at noon carrying exactly forty passengers toward the distant coast"
    src, bench = tmp_path / "src.jsonl", tmp_path / "bench.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [
        {"problem": "What is 1 plus 1?", "answer": "2", "domain": "math", "response": "It is 2.", "url": "http://x"},
        {"problem": leaked + ". How many?", "answer": "40", "domain": "math"},
    ]))
    bench.write_text(json.dumps({"problem": leaked + "?", "answer": "40"}) + "\n")
    config = CurateConfig(sources=[{"name": "s", "path": str(src)}], benchmarks={"b": str(bench)},
                          store=str(tmp_path / "store"))
    version = build_curated_version(config, *plan_curation(config))
    assert version.counts == {"kept": 1, "contaminated": 1} | {k: v for k, v in version.counts.items() if not v}
    assert dataset_texts(str(tmp_path / "store"), version.id) == ["What is 1 plus 1?", "It is 2.", "2"]
