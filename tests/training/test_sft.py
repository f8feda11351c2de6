import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.models.factory import init_model
from tasks.training.checkpoint import latest_checkpoint
from tasks.training.sft import SFTConfig, train_sft
from tasks.training.sft_data import IGNORE, Example, collate, load_sft_rows, pack_examples, tokenize_examples

pytestmark = pytest.mark.slow  # trains or samples a real (tiny) model

ROWS = [{"problem": f"What is {a} plus {b}?", "response": f"<think>\n{a} + {b} = {a + b}\n</think>\n\\boxed{{{a + b}}}"}
        for a in range(8) for b in range(8)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("sft")
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    model = init_model(d / "base", [r["problem"] + r["response"] for r in ROWS], seed=0)
    return str(model), str(data), d


def test_packing_keeps_examples_apart():
    exs = [Example([1, 2, 3], [IGNORE, 2, 3]), Example([4, 5], [IGNORE, 5]), Example([6, 7, 8, 9], [IGNORE, 7, 8, 9])]
    packs, trunc = pack_examples(exs, seq_len=6, pad_id=0, seed=0, epoch=0)
    assert trunc == 0 and all(len(p.input_ids) == 6 for p in packs)
    assert sorted(t for p in packs for t, s in zip(p.input_ids, p.segments) if s >= 0) == list(range(1, 10))
    b = collate(packs, dense_mask=True)
    m = b["attention_mask"][0, 0]
    seg = packs[0].segments
    for i in range(6):
        for j in range(6):
            if seg[i] >= 0 and seg[j] >= 0 and m[i, j]:
                assert seg[i] == seg[j] and j <= i


def test_loss_falls(setup, tmp_path):
    model, data, _ = setup
    res = train_sft(model, data, str(tmp_path / "out"), SFTConfig(epochs=6, batch_size=4, micro_batch_size=2, seq_len=128, save_every=1000))
    assert res.steps > 5 and res.losses[-1] < 0.6 * res.losses[0]
    assert (tmp_path / "out" / "config.json").exists() and (tmp_path / "out" / "loss.png").exists()
    rows = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == res.steps
    assert all(r["tokens"] < r["input_tokens"] <= 4 * 128 for r in rows)  # response ⊂ input ≤ batch × seq_len


def test_packed_attention_kernels_train_as_the_dense_reference(setup, tmp_path):
    """`attention` varlen (the CPU default, auto) trains the loss curve of the dense L×L-mask reference."""
    model, data, _ = setup
    runs = {a: train_sft(model, data, str(tmp_path / a), SFTConfig(max_steps=3, batch_size=4, micro_batch_size=2,
                                                                   seq_len=128, attention=a))
            for a in ("dense", "auto")}
    assert runs["auto"].losses == pytest.approx(runs["dense"].losses, abs=1e-4)
    assert json.loads((tmp_path / "auto" / "sft_config.json").read_text())["config"]["attention"] == "varlen"


def test_micro_batching_does_not_change_the_loss(setup, tmp_path):
    model, data, _ = setup
    a = train_sft(model, data, str(tmp_path / "a"), SFTConfig(max_steps=3, batch_size=4, micro_batch_size=4, seq_len=128))
    b = train_sft(model, data, str(tmp_path / "b"), SFTConfig(max_steps=3, batch_size=4, micro_batch_size=1, seq_len=128))
    assert a.losses == pytest.approx(b.losses, rel=1e-4)


def test_resume_continues_the_same_curve(setup, tmp_path):
    import shutil

    model, data, _ = setup
    cfg = SFTConfig(max_steps=6, batch_size=4, micro_batch_size=2, seq_len=128, save_every=3)
    out = tmp_path / "run"
    full = train_sft(model, data, str(out), cfg)
    assert latest_checkpoint(out).name == "step-6"
    shutil.rmtree(out / "checkpoints" / "step-6")  # as if killed between step 3 and step 6
    resumed = train_sft(model, data, str(out), cfg, resume=True)
    assert resumed.steps == 6
    assert resumed.losses == pytest.approx(full.losses, rel=1e-5)
    assert len(resumed.losses) == 6


def test_two_processes_with_an_uneven_final_batch_match_one(setup, prefect_server, tmp_path):
    """`klear sft --nproc 2` (torchrun, gloo on CPU) whose final global batch does not split evenly: the
    ranks' shares need different micro-batch counts, and DDP's gradient all-reduce would wait forever for the
    rank that has fewer. It must finish, and the loss (a global token mean) must equal a one-process run."""
    from transformers import AutoTokenizer

    model, data, _ = setup
    cfg = SFTConfig(epochs=1, batch_size=7, micro_batch_size=2, seq_len=64, save_every=1000)
    tok = AutoTokenizer.from_pretrained(model)
    examples = tokenize_examples(load_sft_rows(data).rows, tok)
    n_packs = len(pack_examples(examples, cfg.seq_len, tok.pad_token_id, cfg.seed, 0)[0])
    last = n_packs % cfg.batch_size
    micro = [math.ceil(len(range(r, last, 2)) / cfg.micro_batch_size) for r in (0, 1)]
    assert last and micro[0] != micro[1], (n_packs, micro)  # the case under test

    one = train_sft(model, data, str(tmp_path / "one"), cfg)
    args = ["sft", "--model", model, "--data", data, "--out", str(tmp_path / "two"), "--epochs", "1",
            "--batch-size", "7", "--micro-batch-size", "2", "--seq-len", "64", "--save-every", "1000",
            "--seed", "0", "--nproc", "2"]
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}  # the session's server: no ephemeral one
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=Path(__file__).resolve().parents[2],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: a stall kills torchrun's ranks too
    try:
        _, err = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"klear sft --nproc 2 did not finish within 420 s (stalled ranks?)\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    assert json.loads((tmp_path / "two" / "sft_config.json").read_text())["world_size"] == 2
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, one.steps + 1))
    assert [r["loss"] for r in rows] == pytest.approx(one.losses, rel=1e-5)


def test_fsdp_two_processes_match_one_and_resume_across_strategies(setup, tmp_path):
    """`--strategy fsdp --nproc 2` (FSDP2 over 2 gloo ranks, an uneven final batch): the same loss curve as
    one process; its final model is a plain HF folder (gathered to rank 0, original architecture name)
    holding the same weights. Its checkpoints are sharded: each rank wrote its own file holding its half of
    every sharded tensor, no whole optimizer file exists, and the export of the last checkpoint is the final
    model, file for file (same checkpoint id). A run killed after step 3 resumes on 2 ranks to the
    uninterrupted run's weights exactly, and in one process (DCP reshards) to them within float rounding;
    a one-process checkpoint resumes under FSDP on the same curve."""
    import shutil

    import torch
    from safetensors.torch import load_file
    from torch.distributed.checkpoint import FileSystemReader
    from transformers import AutoModelForCausalLM

    from storage.checkpoints import checkpoint_id
    from tasks.training.export import export_checkpoint
    from tasks.training.launch import run_sft

    model, data, _ = setup
    cfg = SFTConfig(max_steps=6, batch_size=7, micro_batch_size=2, seq_len=64, save_every=3)
    fsdp = SFTConfig(**{**cfg.__dict__, "strategy": "fsdp"})
    one = train_sft(model, data, str(tmp_path / "one"), cfg)
    two = run_sft(model, data, str(tmp_path / "two"), fsdp, nproc=2)
    assert two.losses == pytest.approx(one.losses, rel=1e-5)
    assert json.loads((tmp_path / "two" / "sft_config.json").read_text())["world_size"] == 2
    assert json.loads((tmp_path / "two" / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]
    a = AutoModelForCausalLM.from_pretrained(str(tmp_path / "one")).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(tmp_path / "two")).state_dict()
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)

    ckpt = tmp_path / "two" / "checkpoints" / "step-6"
    assert sorted(p.name for p in (ckpt / "state").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert not list(ckpt.glob("*.safetensors")) and not (ckpt / "optimizer.pt").exists()
    meta = FileSystemReader(str(ckpt / "state")).read_metadata()
    for fqn in ("optim.state.model.layers.0.mlp.up_proj.weight.exp_avg", "model.model.layers.0.mlp.up_proj.weight"):
        chunks = meta.state_dict_metadata[fqn].chunks  # one per rank, each half the rows, each in its rank's file
        rows = meta.state_dict_metadata[fqn].size[0]
        assert sorted((c.offsets[0], c.sizes[0]) for c in chunks) == [(0, rows // 2), (rows // 2, rows - rows // 2)]
        files = {info.relative_path for index, info in meta.storage_data.items() if index.fqn == fqn}
        assert files == {"__0_0.distcp", "__1_0.distcp"}, fqn
    exported = export_checkpoint(ckpt, tmp_path / "exported")
    assert checkpoint_id(exported) == checkpoint_id(tmp_path / "two")  # the same weights, the same id
    final = load_file(str(tmp_path / "two" / "model.safetensors"))

    shutil.rmtree(tmp_path / "two" / "checkpoints" / "step-6")  # as if killed between step 3 and step 6
    (tmp_path / "two" / "metrics.jsonl").write_text(
        "".join(line + "\n" for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()[:4]))
    shutil.copytree(tmp_path / "two", tmp_path / "two-single")
    again = run_sft(model, data, str(tmp_path / "two"), fsdp, resume=True, nproc=2)
    assert again.losses == pytest.approx(one.losses, rel=1e-5)
    resumed = load_file(str(tmp_path / "two" / "model.safetensors"))
    assert resumed.keys() == final.keys() and all(resumed[k].equal(final[k]) for k in final)
    single = train_sft(model, data, str(tmp_path / "two-single"), cfg, resume=True)  # FSDP checkpoint, one process
    assert single.losses == pytest.approx(one.losses, rel=1e-5)
    resumed = load_file(str(tmp_path / "two-single" / "model.safetensors"))
    assert all(torch.allclose(resumed[k], final[k], rtol=1e-5, atol=1e-6) for k in final)
    shutil.rmtree(tmp_path / "one" / "checkpoints" / "step-6")  # a one-process checkpoint resumed under FSDP
    (tmp_path / "one" / "metrics.jsonl").write_text(
        "".join(line + "\n" for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()[:3]))
    sharded = run_sft(model, data, str(tmp_path / "one"), fsdp, resume=True, nproc=2)
    assert sharded.losses == pytest.approx(one.losses, rel=1e-5)


def test_sigkill_mid_run_then_resume_gives_the_uninterrupted_curve(setup, tmp_path):
    """A real SIGKILL of a training process (no clean shutdown, possibly mid-write), then `--resume`: the
    loss curve equals an uninterrupted run with the same seed."""
    from dataclasses import asdict

    from tests.training.killing import kill_after_checkpoint

    model, data, _ = setup
    cfg = SFTConfig(epochs=6, batch_size=4, micro_batch_size=2, seq_len=128, save_every=4)
    full = train_sft(model, data, str(tmp_path / "full"), cfg)
    out = tmp_path / "killed"
    code = (f"from tasks.training.sft_main import main; "
            f"main([{model!r}, {data!r}, {str(out)!r}, {json.dumps(asdict(cfg))!r}])")
    killed_at = kill_after_checkpoint(code, out, final_step=full.steps)
    assert 4 <= killed_at < full.steps
    resumed = train_sft(model, data, str(out), cfg, resume=True)
    assert resumed.steps == full.steps
    assert resumed.losses == pytest.approx(full.losses, rel=1e-5)


def test_one_and_two_torch_threads_train_the_same_weights(setup, tmp_path, monkeypatch):
    """The thread count is the machine's or the user's (tasks/cpu_threads.py), so the suite's golden values
    must hold under any of them: at these small shapes it changes no result (at the demo's it does: see that
    module's docstring). The count used is recorded with the run."""
    from safetensors.torch import load_file

    model, data, _ = setup
    weights = {}
    for n in (1, 2):
        monkeypatch.setenv("KLEAR_TORCH_THREADS", str(n))
        train_sft(model, data, str(tmp_path / str(n)), SFTConfig(max_steps=4, batch_size=4, seq_len=128))
        (path,) = (tmp_path / str(n)).glob("*.safetensors")
        weights[n] = load_file(path)
        assert json.loads((tmp_path / str(n) / "sft_config.json").read_text())["torch_threads"] == n
    assert weights[1].keys() == weights[2].keys()
    assert all(weights[1][k].equal(weights[2][k]) for k in weights[1])


def test_a_learning_rate_that_breaks_the_weights_stops_training_with_one_line(setup, tmp_path):
    from tasks.training.metrics import NonFiniteLoss

    model, data, _ = setup
    out = tmp_path / "out"
    with pytest.raises(NonFiniteLoss) as exc:
        train_sft(model, data, str(out), SFTConfig(max_steps=6, batch_size=4, seq_len=128, lr=1e12, grad_clip=1e30,
                                                   warmup_ratio=0.0, save_every=1))
    assert str(exc.value).startswith("SFT step ") and "\n" not in str(exc.value)
    assert not (out / "model.safetensors").exists()      # no final model of broken weights
    for ck in (out / "checkpoints").glob("*"):             # the checkpoints saved are of finite weights
        from safetensors.torch import load_file

        from tasks.training.export import export_checkpoint

        exported = export_checkpoint(ck, tmp_path / "export" / ck.name)
        assert all(t.isfinite().all() for t in load_file(str(exported / "model.safetensors")).values()), ck
