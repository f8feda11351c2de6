"""recorded_checkpoint_id: the id from the lineage file when it is there and no weight file is newer, else
the hash of the weights (checkpoint_id), so a stale or broken lineage file never names other weights."""
import os

import pytest

import storage.checkpoints as ck
from storage.checkpoints import LINEAGE_FILE, checkpoint_id, describe_checkpoint, recorded_checkpoint_id


def _weights(d, data: bytes):
    d.mkdir(exist_ok=True)
    (d / "model.safetensors").write_bytes(data)


def _no_hashing(monkeypatch):
    def refuse(*_):
        raise AssertionError("hashed the weights")

    monkeypatch.setattr(ck, "hash_file", refuse)


def test_without_a_lineage_file_the_weights_are_hashed(tmp_path):
    _weights(tmp_path / "m", b"w1")
    assert recorded_checkpoint_id(tmp_path / "m") == checkpoint_id(tmp_path / "m")


def test_a_recorded_id_is_read_not_hashed(tmp_path, monkeypatch):
    _weights(tmp_path / "m", b"w1")
    row = describe_checkpoint(tmp_path / "m", "base", None, None, {})
    _no_hashing(monkeypatch)
    assert recorded_checkpoint_id(tmp_path / "m") == row["id"]


def test_weights_newer_than_the_lineage_file_are_hashed(tmp_path):
    _weights(tmp_path / "m", b"w1")
    old = describe_checkpoint(tmp_path / "m", "base", None, None, {})["id"]
    _weights(tmp_path / "m", b"w2")
    lineage = tmp_path / "m" / LINEAGE_FILE
    t = lineage.stat().st_mtime_ns
    os.utime(tmp_path / "m" / "model.safetensors", ns=(t + 10**9, t + 10**9))
    assert recorded_checkpoint_id(tmp_path / "m") == checkpoint_id(tmp_path / "m") != old


@pytest.mark.parametrize("text", ["{oops", "[1, 2]", '{"id": null}'])
def test_a_broken_lineage_file_falls_back_to_hashing(tmp_path, text):
    _weights(tmp_path / "m", b"w1")
    (tmp_path / "m" / LINEAGE_FILE).write_text(text)
    assert recorded_checkpoint_id(tmp_path / "m") == checkpoint_id(tmp_path / "m")


def test_no_weights_is_still_an_error(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / LINEAGE_FILE).write_text('{"id": "ck-0123456789abcdef"}')
    with pytest.raises(ValueError, match="no model weights"):
        recorded_checkpoint_id(tmp_path / "m")


def test_the_id_covers_the_tokenizer_chat_template_and_generation_config(tmp_path):
    """Two models with the same weights but another tokenizer, chat template or end-of-turn ids are two
    checkpoints; the library version that wrote a JSON file is no part of the id."""
    base = tmp_path / "a"
    _weights(base, b"w1")
    (base / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (base / "generation_config.json").write_text('{"eos_token_id": 2, "transformers_version": "5.19.0"}')
    first = checkpoint_id(base)
    for name, text in [("tokenizer.json", '{"model": {"vocab": {"b": 0}}}'), ("chat_template.jinja", "{{ x }}"),
                       ("generation_config.json", '{"eos_token_id": [2, 0], "transformers_version": "5.19.0"}')]:
        other = tmp_path / f"b-{name}"
        _weights(other, b"w1")
        for f in ("tokenizer.json", "generation_config.json"):
            (other / f).write_text((base / f).read_text())
        (other / name).write_text(text)
        assert checkpoint_id(other) != first, name
    same = tmp_path / "c"
    _weights(same, b"w1")
    (same / "tokenizer.json").write_text((base / "tokenizer.json").read_text())
    (same / "generation_config.json").write_text('{"eos_token_id": 2, "transformers_version": "5.20.0"}')
    assert checkpoint_id(same) == first


def test_a_tokenizer_newer_than_the_lineage_file_is_hashed(tmp_path):
    _weights(tmp_path / "m", b"w1")
    old = describe_checkpoint(tmp_path / "m", "base", None, None, {})["id"]
    (tmp_path / "m" / "tokenizer.json").write_text("{}")
    t = (tmp_path / "m" / LINEAGE_FILE).stat().st_mtime_ns
    os.utime(tmp_path / "m" / "tokenizer.json", ns=(t + 10**9, t + 10**9))
    assert recorded_checkpoint_id(tmp_path / "m") == checkpoint_id(tmp_path / "m") != old
