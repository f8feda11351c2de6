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
