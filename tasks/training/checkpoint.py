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


def save_checkpoint(model, tok, opt, sched, step: int, out: Path, keep: int) -> Path:
    d = Path(out) / "checkpoints" / f"step-{step}"
    tmp = d.with_name(d.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    torch.save(opt.state_dict(), tmp / "optimizer.pt")
    (tmp / STATE).write_text(json.dumps({"step": step, "scheduler": sched.state_dict()}))
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    done = sorted((c for c in d.parent.glob("step-*") if not c.name.endswith(".tmp")),
                  key=lambda p: int(p.name.split("-")[1]))
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return d


def load_training_state(ckpt: Path, opt, sched, device) -> int:
    """Restore optimizer and scheduler from `ckpt`; returns the step it was taken at."""
    state = json.loads((ckpt / STATE).read_text())
    opt.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location=device, weights_only=True))
    sched.load_state_dict(state["scheduler"])
    return state["step"]
