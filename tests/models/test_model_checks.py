"""check_model_dir (tasks/models/checks.py): every way a model directory can be broken is one error
naming the file; init_model into a directory clears the weights and lineage of what was there."""
import json
import shutil

import pytest

from storage.checkpoints import LINEAGE_FILE, checkpoint_id, describe_checkpoint
from tasks.models.checks import ModelDirError, check_model_dir, context_length, existing_model
from tasks.models.factory import init_model

CORPUS = ["What is 1+2? \\boxed{3}"] * 20


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return init_model(tmp_path_factory.mktemp("m") / "tiny", CORPUS, seed=0)


def _break(d, how):
    w = d / "model.safetensors"
    if how == "truncated weights":
        w.write_bytes(w.read_bytes()[:5000])
    elif how == "garbage weights":
        w.write_bytes(b"\x00garbage" * 100)
    elif how == "empty weights":
        w.write_bytes(b"")
    elif how == "no weights":
        w.unlink()
    elif how == "config not JSON":
        (d / "config.json").write_text("{not json")
    elif how == "config a list":
        (d / "config.json").write_text("[1, 2]")
    elif how == "no model type":
        (d / "config.json").write_text('{"hidden_size": 8}')
    elif how == "unknown model type":
        (d / "config.json").write_text('{"model_type": "nope"}')
    elif how == "garbled tokenizer":
        (d / "tokenizer.json").write_text("{garbage")


@pytest.mark.parametrize("how, file, says", [
    ("truncated weights", "model.safetensors", "truncated or corrupt (5,000 bytes; its header says"),
    ("garbage weights", "model.safetensors", "not a safetensors file"),
    ("empty weights", "model.safetensors", "not a safetensors file (0 bytes)"),
    ("no weights", "", "no model weights"),
    ("config not JSON", "config.json", "not valid JSON"),
    ("config a list", "config.json", "not a JSON object"),
    ("no model type", "config.json", "no 'model_type'"),
    ("unknown model type", "config.json", "not a usable model config"),  # deep: transformers' own check
    ("garbled tokenizer", "tokenizer.json", "the tokenizer cannot be loaded"),
])
def test_a_broken_model_directory_is_one_error_naming_the_file(good, tmp_path, how, file, says):
    d = tmp_path / "m"
    shutil.copytree(good, d)
    _break(d, how)
    with pytest.raises(ModelDirError) as e:
        check_model_dir(d, deep=how == "unknown model type")
    msg = str(e.value)
    assert msg.startswith(f"{d / file}: " if file else f"{d}: ") and says in msg and "\n" not in msg


def test_a_good_model_passes_and_reports_its_context(good):
    check_model_dir(good, deep=True)
    assert context_length(good) == 1024


def test_init_into_a_used_directory_leaves_no_stale_weights_or_lineage(good, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(good, d)
    (d / "model-00002-of-00002.safetensors").write_bytes((d / "model.safetensors").read_bytes())
    describe_checkpoint(d, "sft", None, None, {})
    assert existing_model(d)
    init_model(d, CORPUS, seed=1)
    assert sorted(p.name for p in d.glob("*.safetensors")) == ["model.safetensors"]
    assert not (d / LINEAGE_FILE).exists()
    assert checkpoint_id(d) != checkpoint_id(good)
    assert json.loads((d / "klear_model.json").read_text())["seed"] == 1
