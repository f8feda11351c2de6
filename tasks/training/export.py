"""HF export of a sharded training checkpoint (`klear model export CHECKPOINT --out DIR`):

    checkpoints/step-N/ (state/ DCP shards + config, tokenizer)  →  DIR/ *.safetensors, config, tokenizer

Streamed, one weight file at a time: the model's skeleton is built on the meta device from the
checkpoint's own config (no memory, no random init), the names it saves are those `save_pretrained`
saves (tied weights dropped, transformers' renamings reverted), split into files of at most
`max_shard_size` by huggingface_hub's own rule, and each file's tensors alone are read from the DCP shards
(any world size wrote them; never the optimizer's entries), cast as they are read when asked, and written.
Peak memory is one file's tensors (≤ HF_SHARD_SIZE), not the whole model: 8B in fp32 is 32 GB, a file 5 GB.

Files are written as `save_pretrained` writes them (safetensors with metadata format=pt, the sharded
index with total_parameters), so the export of a run's last checkpoint is its final model file for file,
hence the same checkpoint id (storage/checkpoints.py). config.json, the generation config and the tokenizer
files are the checkpoint's own, copied (config.json's dtype rewritten when `dtype` casts), so the base model
is not needed.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tasks.training.checkpoint import (HF_SHARD_SIZE, SHARDS, STATE, CheckpointError, check_checkpoint,
                                       checkpoint_step, is_complete, latest_checkpoint)

CONFIG = "config.json"  # the model's config, as save_pretrained writes it
NOT_COPIED = {STATE, SHARDS}  # training-only entries of a checkpoint directory
EXPORT_DTYPES = ("float32", "bfloat16", "float16")  # what the weights may be written in (training keeps float32)


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


def export_checkpoint(ckpt: Path, out: Path, dtype: str | None = None,
                      max_shard_size: int | str = HF_SHARD_SIZE) -> Path:
    """Write the HF folder of checkpoint `ckpt` (a checkpoint or a run directory: `find_checkpoint`) to
    `out`, its weights in `dtype` (one of EXPORT_DTYPES; None: as trained); returns `out`. A checkpoint
    that fails `check_export` or whose shards do not hold its config's model is a CheckpointError
    naming it."""
    import torch
    from huggingface_hub import split_torch_state_dict_into_shards
    from transformers import AutoModelForCausalLM

    if dtype is not None and dtype not in EXPORT_DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(EXPORT_DTYPES)}")
    ckpt = find_checkpoint(ckpt)
    config = check_export(ckpt)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    cast = getattr(torch, dtype) if dtype else None
    names = {n: t.to(cast) if cast else t for n, t in saved_names(skeleton).items()}  # meta: shapes and dtypes
    split = split_torch_state_dict_into_shards(names, filename_pattern="model{suffix}.safetensors",
                                               max_shard_size=max_shard_size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for filename, keys in split.filename_to_tensors.items():
        part = _as_saved(skeleton, _read_weights(ckpt, {k: names[k] for k in keys}))
        weight_map.update({k: filename for k in part})
        _save_file(part, out / filename)
        del part
    if split.is_sharded:
        index = {"metadata": {"total_parameters": skeleton.num_parameters(), **split.metadata},
                 "weight_map": weight_map}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    for f in ckpt.iterdir():  # the checkpoint's own config, generation config and tokenizer
        if f.name not in NOT_COPIED and f.is_file():
            shutil.copy2(f, out / f.name)
    if dtype:
        _set_config_dtype(out / CONFIG, dtype)
    return out


def check_export(ckpt: Path):
    """Everything the export reads before it writes, so that a refused checkpoint leaves no --out behind:
    `check_checkpoint`, then its config.json as transformers reads it (returned). CheckpointError naming the
    checkpoint and the file otherwise (a config.json cut short, not a JSON object, no model transformers
    knows)."""
    from transformers import AutoConfig

    check_checkpoint(ckpt)
    f = Path(ckpt) / CONFIG
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {ckpt}: {CONFIG} is not readable JSON ({type(e).__name__}); the "
                              "checkpoint is corrupt") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"checkpoint {ckpt}: {CONFIG} is not a JSON object; the checkpoint is corrupt")
    try:
        return AutoConfig.from_pretrained(str(ckpt))
    except Exception as e:  # an unknown model_type, a value the config class refuses: several types
        why = " ".join(str(e).split())[:160]
        raise CheckpointError(f"checkpoint {ckpt}: {CONFIG} is no model config transformers reads "
                              f"({type(e).__name__}: {why})") from None


def saved_names(skeleton) -> dict:
    """The skeleton's state-dict entries (meta tensors) `save_pretrained` writes: tied copies dropped."""
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    return remove_tied_weights_from_state_dict(skeleton.state_dict(), skeleton)


def _read_weights(ckpt: Path, wanted: dict) -> dict:
    """The tensors `wanted` names (meta tensors giving shape and dtype) read from the checkpoint's DCP
    shards into CPU memory: only their bytes are read, each cast to its dtype as it is read (DCP copies
    every stored piece into its destination), so a cast file never exists in fp32 as a whole."""
    import torch
    import torch.distributed.checkpoint as dcp

    from tasks.training.distributed import quiet_single_process_dcp

    part = {k: torch.empty(t.shape, dtype=t.dtype) for k, t in wanted.items()}
    try:
        with quiet_single_process_dcp():
            dcp.load({"model": part}, checkpoint_id=str(ckpt / SHARDS), no_dist=True)
    except BaseException as e:  # torch's CheckpointException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise CheckpointError(f"checkpoint {ckpt}: {SHARDS} does not hold this config's model weights "
                              f"({type(e).__name__}); the checkpoint is corrupt") from None
    return part


def _as_saved(skeleton, part: dict) -> dict:
    """transformers' renamings reverted, as `save_pretrained` does for a file read back from offload (the
    identity for the dense models trained here)."""
    from transformers.modeling_utils import revert_weight_conversion

    return revert_weight_conversion(skeleton, part)


def _save_file(part: dict, path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: t.contiguous() for k, t in part.items()}, str(path), metadata={"format": "pt"})


def _set_config_dtype(path: Path, dtype: str) -> None:
    """config.json's `dtype` (and the older `torch_dtype`, where present) said what the files now hold."""
    cfg = json.loads(path.read_text())
    cfg["dtype"] = dtype
    if "torch_dtype" in cfg:
        cfg["torch_dtype"] = dtype
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
