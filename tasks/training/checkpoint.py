"""Training checkpoints shared by the SFT and RL trainers:

    <out>/checkpoints/step-N/   HF weights + tokenizer, optimizer.pt, trainer_state.json (step, scheduler)

Written to `step-N.tmp` then renamed, so a killed run never leaves a half checkpoint under a final name;
only the newest `keep` are kept.

Resume rules (`latest_checkpoint`, `check_checkpoint`, `load_training_state`):
- Only directories named exactly `step-<digits>` that hold trainer_state.json, optimizer.pt, config.json
  and weights are complete; anything else under checkpoints/ (a `step-N.tmp` left by a kill during a
  write, a stray `step-final`) is skipped (logged), and the newest complete one is used.
- A complete-looking checkpoint whose files cannot be read (trainer_state.json not a JSON object with an
  integer step, optimizer.pt not a torch archive, weights whose header or size is wrong) is a
  CheckpointError naming the checkpoint and the file: one line for the user, never a fallback to an older
  step (which would silently retrain steps they believe are done).

Fresh-run rule (`previous_run`, `clear_previous_run`): a run that does not resume must not mix its
checkpoints and metrics with another run's in the same `out`, nor overwrite a model it did not make; the
trainers refuse such an `out` and the CLI's `--force` clears the previous run's state first. (torch is imported where a file is written or
loaded, so the CLI can check an --out before importing it.)
"""
from __future__ import annotations

import json
import logging
import re
import shutil
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

STATE = "trainer_state.json"
OPTIMIZER = "optimizer.pt"
_STEP_DIR = re.compile(r"step-(\d+)")


class CheckpointError(ValueError):
    """A checkpoint or output directory that cannot be used; the message names it."""


def checkpoint_step(path: Path) -> int | None:
    """N for a directory named exactly `step-N`, else None (`step-N.tmp`, `step-x`, ...)."""
    m = _STEP_DIR.fullmatch(Path(path).name)
    return int(m.group(1)) if m else None


def is_complete(ckpt: Path) -> bool:
    """Every file a resume reads is there (not whether it is readable: `check_checkpoint`)."""
    has_weights = any(ckpt.glob("*.safetensors")) or any(ckpt.glob("*.bin"))
    return all((ckpt / f).is_file() for f in (STATE, OPTIMIZER, "config.json")) and has_weights


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete `step-N` checkpoint of `out`, skipping incomplete ones (see module rules)."""
    root = Path(out) / "checkpoints"
    complete = []
    for c in sorted(root.glob("step-*")) if root.is_dir() else []:
        if checkpoint_step(c) is not None and c.is_dir() and is_complete(c):
            complete.append(c)
        else:
            log.info("resume: skipping incomplete checkpoint %s", c)
    return max(complete, key=checkpoint_step, default=None)


def check_checkpoint(ckpt: Path) -> None:
    """Cheap readability checks of a complete checkpoint before a run relies on it: CheckpointError
    naming the checkpoint and file. (The weights header check reads only the file's header.)"""
    from tasks.models.checks import ModelDirError, check_weights

    _read_state(ckpt)
    try:
        with zipfile.ZipFile(ckpt / OPTIMIZER) as z:
            if not any(n.endswith("data.pkl") for n in z.namelist()):
                raise zipfile.BadZipFile("no data.pkl")
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"checkpoint {ckpt}: {OPTIMIZER} is not a readable torch file "
                              f"({type(e).__name__}); the checkpoint is corrupt") from None
    try:
        check_weights(ckpt)
    except ModelDirError as e:
        raise CheckpointError(f"checkpoint {e}") from None


def _read_state(ckpt: Path) -> dict:
    try:
        state = json.loads((ckpt / STATE).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {ckpt}: {STATE} is not readable JSON ({type(e).__name__})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {ckpt}: {STATE} is not a JSON object")
    step = state.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0 or not isinstance(state.get("scheduler"), dict):
        raise CheckpointError(f"checkpoint {ckpt}: {STATE} lacks a valid 'step' or 'scheduler'")
    return state


def resume_checkpoint(out: Path) -> Path | None:
    """`latest_checkpoint(out)` after `check_checkpoint`; None when `out` has no complete checkpoint."""
    ckpt = latest_checkpoint(out)
    if ckpt is not None:
        check_checkpoint(ckpt)
    return ckpt


def previous_run(out: Path, models: bool = False) -> str | None:
    """What in `out` a fresh run would mix with (another run's checkpoint, its training metrics) or, with
    `models`, overwrite (a model: a base model given as --out would be replaced by the trained weights),
    described for a message; None when `out` holds none of them. The CLI asks with `models` (its --force
    clears the run state and lets the model be overwritten at the end); the trainers without."""
    out = Path(out)
    steps = [c for c in (out / "checkpoints").glob("step-*")] if (out / "checkpoints").is_dir() else []
    if steps:
        named = sorted((s for s in steps if checkpoint_step(s) is not None), key=checkpoint_step)
        return f"another run's checkpoint {(named or steps)[-1]}"
    metrics = out / "metrics.jsonl"
    if metrics.is_file() and metrics.stat().st_size > 0:
        return f"another run's metrics {metrics}"
    model = [f for f in (out / "config.json", *sorted(out.glob("*.safetensors"))) if f.is_file()] if models else []
    return f"a model it would overwrite ({model[0]})" if model else None


def clear_previous_run(out: Path) -> None:
    """Remove a previous run's state (checkpoints, metrics, TensorBoard events) and the lineage file (it
    names the old weights), so a new run neither resumes from nor appends to the old one. A model in
    `out` stays until the new run's end overwrites it (it may be the very model the run starts from)."""
    from storage.checkpoints import LINEAGE_FILE

    out = Path(out)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    shutil.rmtree(out / "tb", ignore_errors=True)
    for name in ("metrics.jsonl", LINEAGE_FILE):
        (out / name).unlink(missing_ok=True)


def check_fresh_out(out: Path, resume: bool) -> None:
    """A run that does not resume refuses an `out` holding another run's state (CheckpointError)."""
    if resume:
        return
    found = previous_run(out)
    if found:
        raise CheckpointError(f"{out}: holds {found}; resume it (--resume) or start over (--force)")


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
    """`state_dict`/`optim_state`: whole states gathered from a sharded model (distributed.full_state).
    No room to write it (a full disk, a quota, a file size limit) is DiskFull naming the checkpoint, one
    line for the user: its temp directory is removed and the checkpoints before it are left as they were,
    so `--resume` with room continues from the newest of them."""
    from storage.errors import DiskFull, is_disk_full

    d = Path(out) / "checkpoints" / f"step-{step}"
    tmp = d.with_name(d.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write_checkpoint(model, tok, opt, sched, step, tmp, state_dict, optim_state)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(e) and not isinstance(e, DiskFull):
            raise DiskFull.writing(f"checkpoint {d}", e) from None
        raise
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    done = sorted((c for c in d.parent.glob("step-*") if checkpoint_step(c) is not None), key=checkpoint_step)
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return d


def _write_checkpoint(model, tok, opt, sched, step: int, tmp: Path, state_dict, optim_state) -> None:
    """The checkpoint's files into `tmp`. The optimizer goes through a Python file object, so an OS error
    (no room) reaches the caller as the OSError it is rather than only torch's RuntimeError text."""
    import torch

    save_model(model, tok, tmp, state_dict)
    with open(tmp / OPTIMIZER, "wb") as f:
        torch.save(optim_state if optim_state is not None else opt.state_dict(), f)
    (tmp / STATE).write_text(json.dumps({"step": step, "scheduler": sched.state_dict()}))


def load_training_state(ckpt: Path, opt, sched, device, model=None) -> int:
    """Restore optimizer and scheduler from `ckpt`; returns the step it was taken at. With `model` (the
    trained module, possibly sharded) the optimizer file may come from any strategy (distributed.py).
    A file that cannot be loaded, or does not fit this optimizer, is a CheckpointError naming it."""
    import torch

    state = _read_state(ckpt)
    try:
        optim = torch.load(ckpt / OPTIMIZER, map_location=device, weights_only=True)
    except Exception as e:  # torch raises several types for a truncated or foreign file
        raise CheckpointError(f"checkpoint {ckpt}: {OPTIMIZER} cannot be loaded ({type(e).__name__}); "
                              "the checkpoint is corrupt") from None
    try:
        if model is None:
            opt.load_state_dict(optim)
        else:
            from tasks.training.distributed import load_optimizer_state

            load_optimizer_state(model, opt, optim)
        sched.load_state_dict(state["scheduler"])
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as e:
        raise CheckpointError(f"checkpoint {ckpt}: the optimizer or scheduler state does not fit this run "
                              f"({type(e).__name__}: {str(e)[:120]})") from None
    return state["step"]
