"""Training checkpoints shared by the SFT and RL trainers:

    <out>/checkpoints/step-N/   HF weights + tokenizer, optimizer.pt, trainer_state.json (step, scheduler)

Written to `step-N.tmp` then renamed, so a killed run never leaves a half checkpoint that `--resume`
would pick; only the newest `keep` are kept.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

STATE = "trainer_state.json"


def latest_checkpoint(out: Path) -> Path | None:
    ckpts = [c for c in (Path(out) / "checkpoints").glob("step-*") if (c / STATE).exists()]
    return max(ckpts, key=lambda p: int(p.name.split("-")[1]), default=None)


def save_model(model, tok, path: Path | str, state_dict=None) -> None:
    """`save_pretrained` of weights and tokenizer. `state_dict`: the whole weights gathered from a sharded
    (FSDP) model, whose class FSDP renamed: the config keeps the original architecture name, so
    transformers and vLLM load the checkpoint as any other."""
    arch = type(model).__name__
    model.save_pretrained(str(path), state_dict=state_dict)
    if arch.startswith("FSDP"):
        model.config.architectures = [arch[len("FSDP"):]]
        model.config.save_pretrained(str(path))
    tok.save_pretrained(str(path))


def save_checkpoint(model, tok, opt, sched, step: int, out: Path, keep: int, state_dict=None,
                    optim_state=None) -> Path:
    """`state_dict`/`optim_state`: whole states gathered from a sharded model (distributed.full_state)."""
    d = Path(out) / "checkpoints" / f"step-{step}"
    tmp = d.with_name(d.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tok, tmp, state_dict)
    torch.save(optim_state if optim_state is not None else opt.state_dict(), tmp / "optimizer.pt")
    (tmp / STATE).write_text(json.dumps({"step": step, "scheduler": sched.state_dict()}))
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    done = sorted((c for c in d.parent.glob("step-*") if not c.name.endswith(".tmp")),
                  key=lambda p: int(p.name.split("-")[1]))
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return d


def load_training_state(ckpt: Path, opt, sched, device, model=None) -> int:
    """Restore optimizer and scheduler from `ckpt`; returns the step it was taken at. With `model` (the
    trained module, possibly sharded) the optimizer file may come from any strategy (distributed.py)."""
    state = json.loads((ckpt / STATE).read_text())
    optim = torch.load(ckpt / "optimizer.pt", map_location=device, weights_only=True)
    if model is None:
        opt.load_state_dict(optim)
    else:
        from tasks.training.distributed import load_optimizer_state

        load_optimizer_state(model, opt, optim)
    sched.load_state_dict(state["scheduler"])
    return state["step"]
