"""Training checkpoints shared by the SFT and RL trainers:

    <out>/checkpoints/step-N/
        state/                .metadata + one __<rank>_0.distcp per rank: model and AdamW state, sharded
        trainer_state.json    step, scheduler, the world size that wrote it
        config.json, generation_config.json, tokenizer files     what `export_checkpoint` needs

The model and optimizer state go through torch.distributed.checkpoint (DCP): every rank writes the part it
holds (under FSDP its shards; under DDP each replicated tensor is written once, by one rank) and on resume
reads only the slices it needs, whatever the world size or strategy that wrote them (DCP reshards by
parameter name). No rank gathers or loads the whole optimizer state. One process writes the same layout.
The weights become an HF folder with `tasks/training/export.py` (`klear model export`); the run's final
model in `<out>` is an HF folder as before.

Written to `step-N.tmp` then renamed by rank 0 once every rank's shards are in, so a killed run never
leaves a half checkpoint under a final name; only the newest `keep` are kept.

Resume rules (`latest_checkpoint`, `check_checkpoint`, `load_training_state`):
- Only directories named exactly `step-<digits>` that hold trainer_state.json, config.json and
  state/.metadata are complete; anything else under checkpoints/ (a `step-N.tmp` left by a kill during a
  write, a stray `step-final`) is skipped (logged), and the newest complete one is used.
- A complete-looking checkpoint whose files cannot be read (trainer_state.json not a JSON object with an
  integer step, state/.metadata not DCP metadata, a shard file missing or shorter than the metadata says,
  a shard whose tensors cannot be loaded) is a CheckpointError naming the checkpoint and the file: one line
  for the user, never a fallback to an older step (which would silently retrain steps they believe are done).
- A checkpoint of the earlier whole-state layout (HF weights + optimizer.pt) counts as complete, so it is
  never skipped silently, and is refused in one line: its folder is an HF model, which a new run can
  start from (--model); its optimizer state is not read.

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
from pathlib import Path

log = logging.getLogger(__name__)

STATE = "trainer_state.json"
SHARDS = "state"                 # the DCP directory of a checkpoint
METADATA = ".metadata"           # DCP's index of every saved tensor: which file, offset and length
LEGACY_OPTIMIZER = "optimizer.pt"  # the earlier whole-state layout's optimizer file
HF_SHARD_SIZE = "5GB"  # largest weight file of a saved model: the Hub's custom, and the export's peak memory
_STEP_DIR = re.compile(r"step-(\d+)")


class CheckpointError(ValueError):
    """A checkpoint or output directory that cannot be used; the message names it."""


def checkpoint_step(path: Path) -> int | None:
    """N for a directory named exactly `step-N`, else None (`step-N.tmp`, `step-x`, ...)."""
    m = _STEP_DIR.fullmatch(Path(path).name)
    return int(m.group(1)) if m else None


def is_complete(ckpt: Path) -> bool:
    """Every file a resume reads is there (not whether it is readable: `check_checkpoint`); a checkpoint of
    the earlier layout counts too, so that it is refused by name rather than skipped (module rules)."""
    if not all((ckpt / f).is_file() for f in (STATE, "config.json")):
        return False
    return (ckpt / SHARDS / METADATA).is_file() or is_legacy(ckpt)


def is_legacy(ckpt: Path) -> bool:
    """The earlier whole-state layout: HF weights and optimizer.pt, no DCP state."""
    has_weights = any(ckpt.glob("*.safetensors")) or any(ckpt.glob("*.bin"))
    return not (ckpt / SHARDS / METADATA).is_file() and (ckpt / LEGACY_OPTIMIZER).is_file() and has_weights


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
    naming the checkpoint and file. Reads trainer_state.json and the DCP metadata, and checks each shard
    file the metadata names is at least as long as the data it indexes in it (a cut-short write)."""
    _read_state(ckpt)
    if is_legacy(ckpt):
        raise CheckpointError(f"checkpoint {ckpt}: written in the earlier whole-state layout ({LEGACY_OPTIMIZER} "
                              "beside HF weights), which --resume no longer reads; the folder is an HF model: "
                              f"start a new run from it (--model {ckpt})")
    meta = _read_metadata(ckpt)
    need: dict[str, int] = {}
    for info in (getattr(meta, "storage_data", None) or {}).values():
        need[info.relative_path] = max(need.get(info.relative_path, 0), info.offset + info.length)
    for name, size in sorted(need.items()):
        f = ckpt / SHARDS / name
        have = f.stat().st_size if f.is_file() else None
        if have is None or have < size:
            what = "is missing" if have is None else f"is truncated ({have:,} of {size:,} bytes)"
            raise CheckpointError(f"checkpoint {ckpt}: {SHARDS}/{name} {what}; the checkpoint is corrupt")


def _read_metadata(ckpt: Path):
    from torch.distributed.checkpoint import FileSystemReader

    try:
        return FileSystemReader(str(ckpt / SHARDS)).read_metadata()
    except Exception as e:  # unpickling garbage raises many types
        raise CheckpointError(f"checkpoint {ckpt}: {SHARDS}/{METADATA} is not readable checkpoint metadata "
                              f"({type(e).__name__}); the checkpoint is corrupt") from None


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
    (FSDP) model (distributed.full_model_state)."""
    model.save_pretrained(str(path), state_dict=state_dict, max_shard_size=HF_SHARD_SIZE)
    save_model_files(model, tok, path)


def save_model_files(model, tok, path: Path | str) -> None:
    """Everything of an HF folder but the weights: config (FSDP renames the model's class; the config
    keeps the original architecture name, so transformers and vLLM load it as any other), generation
    config, tokenizer with its chat template."""
    arch = type(model).__name__
    if arch.startswith("FSDP"):
        model.config.architectures = [arch[len("FSDP"):]]
    model.config.save_pretrained(str(path))
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(str(path))
    tok.save_pretrained(str(path))


def save_checkpoint(model, tok, opt, sched, step: int, out: Path, keep: int, ctx=None) -> Path:
    """Every rank calls it (a collective under torchrun; `ctx` the DistContext, None for one process): each
    writes its own shards, rank 0 the other files, the rename and the pruning. No room to write it (a full
    disk, a quota, a file size limit) on any rank is DiskFull naming the checkpoint on every rank, one line
    for the user: its temp directory is removed and the checkpoints before it are left as they were, so
    `--resume` with room continues from the newest of them."""
    from storage.errors import DiskFull, is_disk_full
    from tasks.training.distributed import DistContext, all_reduce_sum, barrier

    ctx = ctx or DistContext(0, 1, None)
    d = Path(out) / "checkpoints" / f"step-{step}"
    tmp = d.with_name(d.name + ".tmp")
    if ctx.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
    barrier(ctx)  # no rank writes into the temp directory before rank 0 has cleared it
    error = None
    try:
        _write_checkpoint(model, tok, opt, sched, step, tmp, ctx)
    except BaseException as e:  # torch's CheckpointException is a BaseException
        error = _checkpoint_failure(e)
    if all_reduce_sum(int(error is not None), ctx):  # every rank learns whether any failed
        if ctx.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
        if error is None:
            raise CheckpointError(f"checkpoint {d}: another rank failed to write its part")
        if is_disk_full(error) and not isinstance(error, DiskFull):
            raise DiskFull.writing(f"checkpoint {d}", error) from None
        raise error
    if ctx.is_main:
        shutil.rmtree(d, ignore_errors=True)
        tmp.rename(d)
        done = sorted((c for c in d.parent.glob("step-*") if checkpoint_step(c) is not None), key=checkpoint_step)
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    barrier(ctx)  # every rank returns with the checkpoint under its final name
    return d


def _checkpoint_failure(e: BaseException) -> BaseException:
    """The error behind a DCP CheckpointException (which wraps each failed rank's exception), else `e`;
    KeyboardInterrupt and SystemExit are re-raised at once."""
    from torch.distributed.checkpoint import CheckpointException

    if isinstance(e, CheckpointException) and e.failures:
        e = next(iter(e.failures.values()))[0]
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        raise e
    return e


def _write_checkpoint(model, tok, opt, sched, step: int, tmp: Path, ctx) -> None:
    """The checkpoint's files into `tmp`: every rank its DCP shards, then rank 0 the rest."""
    import torch.distributed.checkpoint as dcp

    from tasks.training.distributed import quiet_single_process_dcp, sharded_state

    with quiet_single_process_dcp():
        dcp.save(sharded_state(model, opt), checkpoint_id=str(tmp / SHARDS), no_dist=ctx.world_size == 1)
    if ctx.is_main:
        save_model_files(model, tok, tmp)
        (tmp / STATE).write_text(json.dumps({"step": step, "scheduler": sched.state_dict(),
                                             "world_size": ctx.world_size}))


def load_training_state(ckpt: Path, model, opt, sched) -> int:
    """Restore the model's weights, the optimizer and the scheduler from `ckpt` (every rank: a collective
    under torchrun; each rank reads its own slices, distributed.load_sharded_state); returns the step it
    was taken at. State that cannot be loaded, or does not fit this model or optimizer, is a
    CheckpointError naming the checkpoint."""
    state = _read_state(ckpt)
    check_checkpoint(ckpt)
    from tasks.training.distributed import load_sharded_state

    try:
        load_sharded_state(model, opt, ckpt / SHARDS)
        sched.load_state_dict(state["scheduler"])
    except BaseException as e:  # torch's CheckpointException is a BaseException
        e = _checkpoint_failure(e)
        if not isinstance(e, Exception):
            raise
        why = " ".join(str(e).split())[:160]
        raise CheckpointError(f"checkpoint {ckpt}: {SHARDS} cannot be loaded into this run ({type(e).__name__}: "
                              f"{why}); the checkpoint is corrupt or of another model") from None
    return state["step"]
