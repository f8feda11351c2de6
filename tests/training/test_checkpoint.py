"""Checkpoint rules (tasks/training/checkpoint.py): resume skips what a kill leaves, names what is corrupt,
and a fresh run never mixes with another run's state. Checkpoints here are real: save_checkpoint of a
tiny model, its AdamW state and scheduler, or a real train_sft run."""
import json
import shutil

import pytest
import torch

from tasks.models.factory import init_model
from tasks.training.checkpoint import (CheckpointError, check_checkpoint, check_fresh_out, clear_previous_run,
                                       latest_checkpoint, load_training_state, previous_run, resume_checkpoint,
                                       save_checkpoint)

ROWS = [{"problem": f"What is {a} plus {b}?", "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"}
        for a in range(4) for b in range(4)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = tmp_path_factory.mktemp("ck")
    path = init_model(d / "base", [r["problem"] + r["response"] for r in ROWS], seed=0)
    model = AutoModelForCausalLM.from_pretrained(str(path))
    return str(path), model, AutoTokenizer.from_pretrained(str(path))


def _opt(model):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    opt.step()
    sched.step()
    return opt, sched


@pytest.fixture
def run(tiny, tmp_path):
    """An output directory with real checkpoints step-2 and step-4, as a run leaves them."""
    _, model, tok = tiny
    opt, sched = _opt(model)
    for step in (2, 4):
        save_checkpoint(model, tok, opt, sched, step, tmp_path, keep=3)
    return tmp_path, model, opt, sched


def test_a_leftover_tmp_checkpoint_is_skipped_for_the_last_complete_one(run):
    """What a kill during a checkpoint write leaves: step-6.tmp with trainer_state.json already in it."""
    out, *_ = run
    shutil.copytree(out / "checkpoints" / "step-4", out / "checkpoints" / "step-6.tmp")
    assert latest_checkpoint(out).name == "step-4"
    assert resume_checkpoint(out).name == "step-4"


@pytest.mark.parametrize("damage", ["no shard metadata", "no trainer state", "no config", "stray name"])
def test_an_incomplete_checkpoint_is_skipped(run, damage):
    out, *_ = run
    newest = out / "checkpoints" / "step-4"
    if damage == "no shard metadata":
        (newest / "state" / ".metadata").unlink()
    elif damage == "no trainer state":
        (newest / "trainer_state.json").unlink()
    elif damage == "no config":
        (newest / "config.json").unlink()
    else:
        newest.rename(out / "checkpoints" / "step-final")
    assert latest_checkpoint(out).name == "step-2"


@pytest.mark.parametrize("file, content, says", [
    ("state/.metadata", b"garbage", "state/.metadata is not readable checkpoint metadata"),
    ("trainer_state.json", b"{broken", "trainer_state.json is not readable JSON"),
    ("trainer_state.json", b'{"step": "four", "scheduler": {}}', "lacks a valid 'step'"),
    ("state/__0_0.distcp", None, "state/__0_0.distcp is truncated"),
    ("state/__0_0.distcp", b"", "state/__0_0.distcp is missing"),
])
def test_a_corrupt_checkpoint_is_one_error_naming_it(run, file, content, says):
    out, *_ = run
    f = out / "checkpoints" / "step-4" / file
    if content == b"":
        f.unlink()
    else:
        f.write_bytes(content if content is not None else f.read_bytes()[:4000])
    with pytest.raises(CheckpointError) as e:
        resume_checkpoint(out)
    assert str(out / "checkpoints" / "step-4") in str(e.value) and says in str(e.value)
    assert "\n" not in str(e.value)


def test_a_garbled_shard_fails_loading_with_the_checkpoint_named(run):
    """Past the cheap checks (a shard of the right size whose bytes are garbage): loading names it too."""
    out, model, opt, sched = run
    f = out / "checkpoints" / "step-4" / "state" / "__0_0.distcp"
    f.write_bytes(b"\x07" * f.stat().st_size)
    check_checkpoint(out / "checkpoints" / "step-4")  # sizes are right
    with pytest.raises(CheckpointError, match="step-4: state cannot be loaded into this run") as e:
        load_training_state(out / "checkpoints" / "step-4", model, opt, sched)
    assert "\n" not in str(e.value)


def test_a_checkpoint_restores_weights_optimizer_and_schedule_exactly(tiny, run):
    """The sharded layout in one process: a fresh model, optimizer and scheduler loaded from step-4 equal
    the ones saved, tensor for tensor (AdamW moments and step counts included)."""
    from transformers import AutoModelForCausalLM

    path, *_ = tiny
    out, model, opt, sched = run
    fresh = AutoModelForCausalLM.from_pretrained(path)
    opt2 = torch.optim.AdamW(fresh.parameters(), lr=5e-2)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: 1.0)
    assert load_training_state(out / "checkpoints" / "step-4", fresh, opt2, sched2) == 4
    saved, loaded = model.state_dict(), fresh.state_dict()
    assert saved.keys() == loaded.keys() and all(saved[k].equal(loaded[k]) for k in saved)
    a, b = opt.state_dict(), opt2.state_dict()
    assert a["param_groups"][0]["lr"] == b["param_groups"][0]["lr"] == 1e-3
    assert a["state"].keys() == b["state"].keys()
    assert all(a["state"][i][k].equal(b["state"][i][k]) for i in a["state"] for k in a["state"][i])
    assert sched2.state_dict()["last_epoch"] == sched.state_dict()["last_epoch"]


def test_a_checkpoint_of_the_earlier_whole_state_layout_is_refused_in_one_line(tiny, tmp_path):
    """HF weights + optimizer.pt (what earlier versions wrote): never skipped for an older step or a fresh
    start, refused by name with what to do instead."""
    path, *_ = tiny
    old = shutil.copytree(path, tmp_path / "checkpoints" / "step-3")
    torch.save({"state": {}, "param_groups": []}, old / "optimizer.pt")
    (old / "trainer_state.json").write_text(json.dumps({"step": 3, "scheduler": {}}))
    assert latest_checkpoint(tmp_path) == old
    with pytest.raises(CheckpointError) as e:
        resume_checkpoint(tmp_path)
    assert str(e.value).startswith(f"checkpoint {old}: written in the earlier whole-state layout (optimizer.pt")
    assert f"--model {old}" in str(e.value) and "\n" not in str(e.value)


def test_a_fresh_run_refuses_another_runs_state_and_clear_removes_it(run):
    out, *_ = run
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(CheckpointError, match="another run's checkpoint .*step-4.*--resume.*--force"):
        check_fresh_out(out, resume=False)
    check_fresh_out(out, resume=True)
    clear_previous_run(out)
    assert previous_run(out) is None and not (out / "checkpoints").exists()


def test_pruning_ignores_stray_names(tiny, tmp_path):
    _, model, tok = tiny
    opt, sched = _opt(model)
    (tmp_path / "checkpoints" / "step-x").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-9.tmp").mkdir()
    for step in (1, 2, 3):
        save_checkpoint(model, tok, opt, sched, step, tmp_path, keep=2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-2", "step-3", "step-9.tmp", "step-x"]


@pytest.mark.slow  # trains a tiny model for a few steps, twice
def test_resume_after_a_kill_mid_write_continues_from_the_last_complete_checkpoint(tiny, tmp_path):
    from tasks.training.sft import SFTConfig, train_sft

    base, *_ = tiny
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    cfg = SFTConfig(max_steps=3, batch_size=2, micro_batch_size=2, seq_len=64, save_every=1, keep_checkpoints=5)
    out = tmp_path / "run"
    full = train_sft(base, str(data), str(out), cfg)
    ckpts = out / "checkpoints"
    (ckpts / "step-3").rename(ckpts / "step-3.tmp")  # killed between writing step 3 and renaming it
    resumed = train_sft(base, str(data), str(out), cfg, resume=True)
    assert resumed.steps == 3 and (ckpts / "step-3").is_dir()
    assert resumed.losses == pytest.approx(full.losses, rel=1e-5)


def test_a_model_in_out_counts_for_the_cli_not_for_the_trainer(tiny, tmp_path):
    base, *_ = tiny
    out = shutil.copytree(base, tmp_path / "base-as-out")
    assert previous_run(out) is None  # the trainers' question: no run state to mix with
    assert "a model it would overwrite" in previous_run(out, models=True)  # the CLI's: --force to replace it
