"""The dataset store: immutable, content-addressed dataset versions as zstd Parquet plus the DuckDB catalog.

Layout (root is a local directory or an fsspec URL):
    <root>/datasets/<version-id>/<table>.parquet   one file per table (problems, dropped, ...)
    <root>/datasets/<version-id>/manifest.json     written last: a version exists iff its manifest does
    <root>/catalog.duckdb                          the catalog users query: a snapshot, replaced after each write
    <root>/.catalog.record/                        the catalog's record and lock (storage/catalog.py; private)

A version id is `ds-` + the first 16 hex digits of the hash of everything that determines its content
(input file hashes, parameters, code version), so writing the same version twice is a no-op.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from storage import paths
from storage.catalog import Catalog
from storage.refs import data_ref

DEFAULT_STORE = "./klear-store"
PARQUET_COMPRESSION = "zstd"


def resolve_store(root: str | None = None) -> str:
    """`--store` wins, then $KLEAR_STORE, then ./klear-store."""
    return root or os.environ.get("KLEAR_STORE") or DEFAULT_STORE


def store_of(data: str) -> str | None:
    """The store a training `--data` value names: a store directory or `STORE#VERSION`; None for a file."""
    ref = data_ref(data)
    return ref.store if ref else None


@dataclass
class DatasetVersion:
    id: str
    kind: str  # "curate", "difficulty", "verify", ...
    parameters: dict[str, Any]
    counts: dict[str, int]  # rows by outcome: kept, and each drop reason
    rows_in: int
    parents: list[str] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    created: str = ""

    @property
    def rows_kept(self) -> int:
        return self.counts.get("kept", 0)

    @property
    def rows_dropped(self) -> int:
        return sum(v for k, v in self.counts.items() if k != "kept")


class Store:
    def __init__(self, root: str | None = None):
        self.root = paths.absolute(resolve_store(root))

    # -- locations -----------------------------------------------------------------------------
    @property
    def catalog_path(self) -> str:
        """Local stores keep the catalog inside the root; a remote store needs a local catalog file,
        given by $KLEAR_CATALOG (DuckDB cannot write a database file over fsspec)."""
        if paths.is_local(self.root):
            return paths.join(self.root.removeprefix("file://"), "catalog.duckdb")
        env = os.environ.get("KLEAR_CATALOG")
        if not env:
            raise ValueError(f"store {self.root} is remote: set KLEAR_CATALOG to a local catalog.duckdb path")
        return env

    @property
    def catalog(self) -> Catalog:
        paths.makedirs(self.root)
        return Catalog(self.catalog_path)

    def version_url(self, version_id: str) -> str:
        return paths.join(self.root, "datasets", version_id)

    def table_url(self, version_id: str, table: str) -> str:
        return paths.join(self.version_url(version_id), f"{table}.parquet")

    def path(self, *parts: str) -> str:
        """A location inside the store for other artifacts (checkpoints, runs, demo data)."""
        return paths.join(self.root, *parts)

    # -- dataset versions ----------------------------------------------------------------------
    def has_version(self, version_id: str) -> bool:
        return paths.exists(paths.join(self.version_url(version_id), "manifest.json"))

    def load_version(self, version_id: str) -> DatasetVersion:
        with paths.open_binary(paths.join(self.version_url(version_id), "manifest.json")) as f:
            return DatasetVersion(**json.loads(f.read()))

    def write_version(self, version: DatasetVersion, tables: Mapping[str, pa.Table | Path]) -> DatasetVersion:
        """Write the tables and the manifest (last), register the version in the catalog.
        If the version already exists nothing is written and the stored manifest is returned."""
        if self.has_version(version.id):
            existing = self.load_version(version.id)
            self._register(existing)
            return existing
        version.tables = sorted(tables)
        version.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        final = self.version_url(version.id)
        local = paths.is_local(final)
        target = f"{final}.tmp-{os.getpid()}" if local else final
        paths.makedirs(target)
        for name, table in tables.items():
            with paths.open_binary(paths.join(target, f"{name}.parquet"), "wb") as f:
                if isinstance(table, Path):  # a Parquet file written batch by batch (out-of-core curation)
                    with open(table, "rb") as src:
                        shutil.copyfileobj(src, f, 1 << 20)
                else:
                    pq.write_table(table, f, compression=PARQUET_COMPRESSION)
        with paths.open_binary(paths.join(target, "manifest.json"), "wb") as f:
            f.write(json.dumps(asdict(version), indent=2, sort_keys=True).encode())
        if local:
            try:
                os.rename(target, final)
            except OSError:  # another writer produced the same content-addressed version first
                shutil.rmtree(target, ignore_errors=True)
                return self.load_version(version.id)
        self._register(version)
        return version

    def read_table(self, version_id: str, table: str) -> pa.Table:
        with paths.open_binary(self.table_url(version_id, table)) as f:
            return pq.read_table(f)

    def _register(self, v: DatasetVersion) -> None:
        self.catalog.add_dataset({
            "id": v.id, "kind": v.kind, "created": v.created, "parameters": v.parameters,
            "rows_in": v.rows_in, "rows_kept": v.rows_kept, "rows_dropped": v.rows_dropped,
            "counts": v.counts, "parents": v.parents, "inputs": v.inputs, "path": self.version_url(v.id),
        })

    def publish(self, version_id: str) -> bool:
        """Make `version_id` the current one: the catalog views `problems`/`dropped` (and any other
        table of the version) read its Parquet. Idempotent."""
        v = self.load_version(version_id)
        return self.catalog.publish(version_id, {t: self.table_url(version_id, t) for t in v.tables})

    def current_version(self) -> str | None:
        if not Catalog(self.catalog_path).exists():
            return None
        return self.catalog.current_dataset("problems")
