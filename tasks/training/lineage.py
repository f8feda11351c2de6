"""Register a trained checkpoint with its lineage: parent checkpoint (registering the parent too when it
is new to the catalog), dataset version and config. Without a store only the lineage file is written."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.checkpoints import describe_checkpoint, read_lineage, recorded_checkpoint_id
from storage.store import Store


def parent_row(parent_dir: str) -> dict[str, Any]:
    """The parent's lineage row: its own lineage file if it has one, else it is a base model."""
    known = read_lineage(parent_dir)
    if known and known.get("id") == recorded_checkpoint_id(parent_dir):
        return known
    return describe_checkpoint(parent_dir, "base", None, None, {"source": str(Path(parent_dir).resolve())})


def register_checkpoint(out: str, stage: str, parent_dir: str, dataset: str | None, config: dict,
                        store_root: str | None) -> dict[str, Any]:
    parent = parent_row(parent_dir)
    row = describe_checkpoint(out, stage, parent["id"], dataset, config)
    if store_root:
        cat = Store(store_root).catalog
        cat.insert_once("checkpoints", parent)
        cat.insert_once("checkpoints", row)
    return row
