"""`klear model export CHECKPOINT --out DIR`: a sharded training checkpoint becomes an HF folder that
transformers loads with the checkpoint's weights, without the run's base model; what is no checkpoint is
one line naming it, exit 2."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.models.factory import init_model
from tasks.training.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # runs the CLI in a subprocess


def klear(*args):
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run directory with checkpoint step-1 of a model one AdamW step away from its base (the base is
    deleted afterwards: export must not need it), and the weights it holds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = tmp_path_factory.mktemp("export")
    base = init_model(d / "base", ["What is 1 plus 1? <think>1 + 1 = 2</think> \\boxed{2}"] * 8, seed=0)
    model, tok = AutoModelForCausalLM.from_pretrained(str(base)), AutoTokenizer.from_pretrained(str(base))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model(input_ids=torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]])).loss.backward()
    opt.step()
    ckpt = save_checkpoint(model, tok, opt, sched, 1, d / "run", keep=2)
    shutil.rmtree(base)
    return ckpt, {k: v.clone() for k, v in model.state_dict().items()}


def test_export_gives_an_hf_folder_with_the_checkpoint_weights(trained, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt, weights = trained
    r = klear("model", "export", ckpt.parent.parent, "--out", tmp_path / "hf")  # the run directory: its newest
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"model": str(tmp_path / "hf"), "checkpoint": str(ckpt)}
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf")).state_dict()
    assert loaded.keys() == weights.keys() and all(loaded[k].equal(weights[k]) for k in weights)
    assert AutoTokenizer.from_pretrained(str(tmp_path / "hf")).chat_template
    assert not (tmp_path / "hf" / "state").exists() and not (tmp_path / "hf" / "trainer_state.json").exists()


@pytest.mark.parametrize("what, says", [("nothing", "no such directory"), ("corrupt", "state/.metadata is not readable")])
def test_export_of_what_is_no_checkpoint_is_one_line(trained, tmp_path, what, says):
    ckpt, _ = trained
    path = tmp_path / "missing"
    if what != "nothing":
        path = shutil.copytree(ckpt, tmp_path / "step-1")
        (path / "state" / ".metadata").write_bytes(b"garbage")
    r = klear("model", "export", path, "--out", tmp_path / "hf")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("klear: error: model export: ") and str(path) in lines[0] and says in lines[0]
    assert not (tmp_path / "hf").exists()
