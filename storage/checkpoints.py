"""Checkpoint identity and lineage. A checkpoint id is `ck-` + a hash of its weight files, so the same
weights always have the same id. `<dir>/klear_checkpoint.json` records the id and lineage next to the
weights (so a copied checkpoint keeps its history, and readers take the id from it instead of hashing
again: recorded_checkpoint_id); the catalog's `checkpoints` table indexes them."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from storage.keys import hash_file, hash_json, short_id

LINEAGE_FILE = "klear_checkpoint.json"
STAGES = ("base", "sft", "rl")


def _weight_files(path: str | Path) -> list[Path]:
    return sorted(Path(path).glob("*.safetensors")) or sorted(Path(path).glob("*.bin"))


def checkpoint_id(path: str | Path) -> str:
    """The id by hashing every weight file (seconds for a large model); recorded_checkpoint_id reads it."""
    files = _weight_files(path)
    if not files:
        raise ValueError(f"{path}: no model weights (*.safetensors) found")
    return short_id("ck", hash_json([hash_file(str(f)) for f in files]))


def read_lineage(path: str | Path) -> dict[str, Any] | None:
    f = Path(path) / LINEAGE_FILE
    return json.loads(f.read_text()) if f.exists() else None


def recorded_checkpoint_id(path: str | Path) -> str:
    """checkpoint_id(path), read from the lineage file when it records one and no weight file is newer
    than it; else hashed. describe_checkpoint writes the file after the weights, so a newer weight file
    means weights written since (a resumed run's), which the recorded id may not name."""
    lineage, files = Path(path) / LINEAGE_FILE, _weight_files(path)
    try:
        if files and max(f.stat().st_mtime_ns for f in files) <= lineage.stat().st_mtime_ns:
            recorded = json.loads(lineage.read_text()).get("id")
            if isinstance(recorded, str) and recorded.startswith("ck-"):
                return recorded
    except (OSError, ValueError, AttributeError):  # no lineage file, or not the JSON object it should be
        pass
    return checkpoint_id(path)


def describe_checkpoint(path: str | Path, stage: str, parent: str | None, dataset: str | None,
                        config: dict[str, Any]) -> dict[str, Any]:
    """Write the lineage file and return the catalog row for this checkpoint."""
    if stage not in STAGES:
        raise ValueError(f"unknown checkpoint stage {stage!r} (known: {', '.join(STAGES)})")
    row = {"id": checkpoint_id(path), "stage": stage, "path": str(Path(path).resolve()), "parent": parent,
           "dataset": dataset, "config": config,
           "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (Path(path) / LINEAGE_FILE).write_text(json.dumps(row, indent=2, sort_keys=True))
    return row
