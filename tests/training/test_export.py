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


DAMAGE = {"corrupt": ("state/.metadata", b"garbage"), "config cut short": ("config.json", b'{"x":'),
          "config not an object": ("config.json", b"[1, 2]"),
          "config of no model": ("config.json", b'{"hidden_size": 8}')}


@pytest.mark.parametrize("what, says", [("nothing", "no such directory"),
                                        ("corrupt", "state/.metadata is not readable"),
                                        ("config cut short", "config.json is not readable JSON"),
                                        ("config not an object", "config.json is not a JSON object"),
                                        ("config of no model", "config.json is no model config")])
def test_export_of_what_is_no_checkpoint_is_one_line(trained, tmp_path, what, says):
    ckpt, _ = trained
    path = tmp_path / "missing"
    if what != "nothing":
        path = shutil.copytree(ckpt, tmp_path / "step-1")
        file, content = DAMAGE[what]
        (path / file).write_bytes(content)
    r = klear("model", "export", path, "--out", tmp_path / "hf")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("klear: error: model export: ") and str(path) in lines[0] and says in lines[0]
    assert not (tmp_path / "hf").exists()


def test_export_in_bfloat16_halves_the_files_and_says_so_in_its_config(trained, tmp_path):
    from safetensors.torch import load_file

    ckpt, weights = trained
    r = klear("model", "export", ckpt, "--out", tmp_path / "hf", "--dtype", "bfloat16")
    assert r.returncode == 0, r.stderr[-3000:]
    files = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert files and all(t.dtype == torch.bfloat16 for t in files.values())
    assert all(files[k].equal(weights[k].to(torch.bfloat16)) for k in files)
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["dtype"] == "bfloat16"
    bad = klear("model", "export", ckpt, "--out", tmp_path / "hf2", "--dtype", "int8")
    assert bad.returncode == 2 and bad.stderr.strip() == "klear: error: --dtype 'int8': expected one of float32, bfloat16, float16"
    assert not (tmp_path / "hf2").exists()


@pytest.fixture(scope="module")
def large_checkpoint(tmp_path_factory):
    """A checkpoint of a Llama shape of 56.6M parameters (226 MB in fp32), tied embeddings: big enough that
    holding the whole model stands out of the exporting process's peak memory."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    d = tmp_path_factory.mktemp("large")
    tok = AutoTokenizer.from_pretrained(str(init_model(d / "tok", ["a b c"] * 8, seed=0)))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=16,
                      num_attention_heads=8, num_key_value_heads=8, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ckpt = save_checkpoint(model, tok, opt, sched, 1, d / "run", keep=1)
    model.save_pretrained(str(d / "reference"), max_shard_size="40MB")  # what transformers itself writes
    return ckpt, d / "reference", sum(p.numel() * 4 for p in model.parameters())


EXPORT_PEAK = """
import gc, json, sys, torch
from transformers import AutoConfig, AutoModelForCausalLM
from tasks.training.export import export_checkpoint
def kib(field):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":"))
ckpt, out, size = sys.argv[1:]
with torch.device("meta"):  # the model's modules imported before the measure
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(ckpt))
gc.collect()
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from what is resident now
before = kib("VmRSS")
export_checkpoint(ckpt, out, max_shard_size=size)
print(json.dumps({"peak_rise_bytes": (kib("VmHWM") - before) * 1024}))
"""


@pytest.mark.timeout(300)
def test_export_holds_one_weight_file_at_a_time_and_writes_what_transformers_writes(large_checkpoint, tmp_path):
    ckpt, reference, whole_bytes = large_checkpoint

    def export(size):
        r = subprocess.run([sys.executable, "-c", EXPORT_PEAK, str(ckpt), str(tmp_path / size), size], cwd=ROOT,
                           capture_output=True, text=True, timeout=200)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])["peak_rise_bytes"]

    files_peak, whole_peak = export("40MB"), export("1GB")
    assert files_peak < 0.5 * whole_bytes, (files_peak, whole_bytes)  # ≈ one 40 MB file, not 226 MB
    assert whole_peak > 0.9 * whole_bytes, (whole_peak, whole_bytes)  # the measure sees a whole model
    written = sorted(p.name for p in (tmp_path / "40MB").glob("model*.safetensors*"))
    assert len(written) > 3 and written == sorted(p.name for p in reference.glob("model*.safetensors*"))
    for name in written:  # file for file what save_pretrained writes, index included
        assert (tmp_path / "40MB" / name).read_bytes() == (reference / name).read_bytes(), name
    print({"whole_MB": whole_bytes / 1e6, "one_file_at_a_time_MB": files_peak / 1e6, "one_file_MB": whole_peak / 1e6})
