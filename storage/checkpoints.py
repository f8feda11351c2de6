"""Checkpoint identity and lineage. A checkpoint id is `ck-` + a hash of its weight files and of what decides
how those weights read and write text (IDENTITY_FILES: the config, the tokenizer and its chat template, the
generation config; JSON ones without the library version that wrote them), so the same model always has
the same id and two models with the same weights but another tokenizer or end-of-turn ids do not. `<dir>/klear_checkpoint.json` records the id and lineage next to the
weights (so a copied checkpoint keeps its history, and readers take the id from it instead of hashing
again: recorded_checkpoint_id); the catalog's `checkpoints` table indexes them."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from storage import paths
from storage.keys import hash_file, hash_json, short_id
from storage.refs import DatasetRef, data_ref

LINEAGE_FILE = "klear_checkpoint.json"
STAGES = ("base", "sft", "rl")


IDENTITY_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "chat_template.jinja", "tokenizer.model", "vocab.json", "merges.txt")
VOLATILE_KEYS = ("transformers_version", "_from_model_config")  # which library wrote it, not what it says


def _weight_files(path: str | Path) -> list[Path]:
    return sorted(Path(path).glob("*.safetensors")) or sorted(Path(path).glob("*.bin"))


def _identity_files(path: str | Path) -> list[Path]:
    return [Path(path) / n for n in IDENTITY_FILES if (Path(path) / n).is_file()]


def _content_hash(f: Path) -> str:
    """A JSON file's canonical content without VOLATILE_KEYS, else the file's bytes."""
    if f.suffix == ".json":
        try:
            value = json.loads(f.read_text())
            if isinstance(value, dict):
                return hash_json({k: v for k, v in value.items() if k not in VOLATILE_KEYS})
        except (OSError, ValueError):
            pass
    return hash_file(str(f))


def checkpoint_id(path: str | Path) -> str:
    """The id by hashing every weight file (seconds for a large model) and the identity files (module
    docstring); recorded_checkpoint_id reads it."""
    files = _weight_files(path)
    if not files:
        raise ValueError(f"{path}: no model weights (*.safetensors) found")
    return short_id("ck", hash_json({"weights": [hash_file(str(f)) for f in files],
                                     "files": {f.name: _content_hash(f) for f in _identity_files(path)}}))


def read_lineage(path: str | Path) -> dict[str, Any] | None:
    f = Path(path) / LINEAGE_FILE
    return json.loads(f.read_text()) if f.exists() else None


def current_lineage_id(path: str | Path) -> str | None:
    """The checkpoint id the lineage file records, when it records one and no weight or identity file is
    newer than it; else None. describe_checkpoint writes the file after the model, so a newer file means a
    model written since (a resumed run's, a replaced tokenizer, a save cut short), which the recorded id may
    not name; and no file means the model was never described, e.g. its save did not finish."""
    lineage, files = Path(path) / LINEAGE_FILE, _weight_files(path) + _identity_files(path)
    try:
        if files and max(f.stat().st_mtime_ns for f in files) <= lineage.stat().st_mtime_ns:
            recorded = json.loads(lineage.read_text()).get("id")
            if isinstance(recorded, str) and recorded.startswith("ck-"):
                return recorded
    except (OSError, ValueError, AttributeError):  # no lineage file, or not the JSON object it should be
        pass
    return None


def recorded_checkpoint_id(path: str | Path) -> str:
    """checkpoint_id(path), read from the lineage file when it is current (current_lineage_id); else hashed."""
    return current_lineage_id(path) or checkpoint_id(path)


def _recorded_data(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its `data` (what the checkpoint trained on, as the user named it: a store,
    `STORE#VERSION` or a canonical file) recorded absolute (paths.recorded; a ref's store, its version
    kept), so the lineage names the same data from any other directory."""
    data = config.get("data")
    if not isinstance(data, str) or not data:
        return config
    try:
        ref = data_ref(data)
    except ValueError:  # a malformed `#VERSION`: the trainer refused it before; recorded as given
        return config
    data = paths.recorded(data) if ref is None else str(DatasetRef(paths.recorded(ref.store), ref.version))
    return {**config, "data": data}


def describe_checkpoint(path: str | Path, stage: str, parent: str | None, dataset: str | None,
                        config: dict[str, Any]) -> dict[str, Any]:
    """Write the lineage file and return the catalog row for this checkpoint."""
    if stage not in STAGES:
        raise ValueError(f"unknown checkpoint stage {stage!r} (known: {', '.join(STAGES)})")
    row = {"id": checkpoint_id(path), "stage": stage, "path": str(Path(path).resolve()), "parent": parent,
           "dataset": dataset, "config": _recorded_data(config),
           "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (Path(path) / LINEAGE_FILE).write_text(json.dumps(row, indent=2, sort_keys=True))
    return row
