"""HF export of a sharded training checkpoint (`klear model export CHECKPOINT --out DIR`):

    checkpoints/step-N/ (state/ DCP shards + config, tokenizer)  →  DIR/ model.safetensors, config, tokenizer

The model is built from the checkpoint's own config on CPU (random init, fp32: the dtype training keeps
its weights in), its weights read from the DCP shards (any world size wrote them; only the model's
entries are read, never the optimizer's), and saved with `save_pretrained`; config.json, the generation
config and the tokenizer files are the checkpoint's own, copied, so the base model is not needed. The same
weights give the same files as the run's final model, hence the same checkpoint id (storage/checkpoints.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tasks.training.checkpoint import (SHARDS, STATE, CheckpointError, check_checkpoint, checkpoint_step,
                                       is_complete, latest_checkpoint)

NOT_COPIED = {STATE, SHARDS}  # training-only entries of a checkpoint directory


def find_checkpoint(path: Path) -> Path:
    """`path` itself when it is a checkpoint directory, else the newest complete checkpoint of the run
    directory `path`; CheckpointError naming `path` when it is neither."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such directory")
    if is_complete(path):
        return path
    newest = latest_checkpoint(path)
    if newest is not None:
        return newest
    hint = " (a checkpoint's write was cut short: it has no state/.metadata)" if checkpoint_step(path) else ""
    raise CheckpointError(f"{path}: not a training checkpoint (trainer_state.json, config.json and "
                          f"state/.metadata) nor a run directory holding one{hint}")


def export_checkpoint(ckpt: Path, out: Path) -> Path:
    """Write the HF folder of checkpoint `ckpt` (a checkpoint or a run directory: `find_checkpoint`) to
    `out`; returns `out`. A checkpoint that fails `check_checkpoint` or whose shards do not load is a
    CheckpointError naming it."""
    import torch
    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModelForCausalLM

    ckpt = find_checkpoint(ckpt)
    check_checkpoint(ckpt)
    config = AutoConfig.from_pretrained(str(ckpt))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = {"model": model.state_dict()}
    from tasks.training.distributed import quiet_single_process_dcp

    try:
        with quiet_single_process_dcp():
            dcp.load(state, checkpoint_id=str(ckpt / SHARDS), no_dist=True)
    except BaseException as e:  # torch's CheckpointException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise CheckpointError(f"checkpoint {ckpt}: {SHARDS} does not hold this config's model weights "
                              f"({type(e).__name__}); the checkpoint is corrupt") from None
    model.load_state_dict(state["model"])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    for f in ckpt.iterdir():  # the checkpoint's own config, generation config and tokenizer
        if f.name not in NOT_COPIED and f.is_file():
            shutil.copy2(f, out / f.name)
    return out
