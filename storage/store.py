"""The dataset store: immutable, content-addressed dataset versions as zstd Parquet plus the DuckDB catalog.

Layout (root is a local directory or an fsspec URL):
    <root>/datasets/<version-id>/<table>.parquet   one file per table (problems, dropped, ...)
    <root>/datasets/<version-id>/manifest.json     written last: a version exists iff its manifest does
    <root>/catalog.duckdb                          the catalog users query: a snapshot, replaced after each write
    <root>/.catalog.record/                        the catalog's record and lock (storage/catalog.py; private)

A version id is `ds-` + the first 16 hex digits of the hash of everything that determines its content
(input file hashes, parameters, code version), so writing the same version twice is a no-op.

Faults leave nothing half-written in sight, and the next run (or any open of the store) completes it:
- A version is written into `<version-id>.tmp-<host>-<pid>` and renamed into place. A write that fails
  (no room: DiskFull, one line) removes its temp directory; one left by a killed writer (its pid no longer
  runs on this host) is removed by the next write into the store.
- A version renamed into place whose `datasets` row never landed (a kill between the two) is recorded by
  the next write or publish of any version, and by `publish` of that version itself.
- A manifest this code cannot read (not JSON, keys of another layout) is a StoreError naming the file.
- `check_root`: a root whose URL cannot be opened here, a remote root without $KLEAR_CATALOG, or a path
  DuckDB would read as a glob pattern is refused (StoreError) before anything is written.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
from contextlib import suppress
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from storage import paths
from storage.catalog import Catalog
from storage.errors import DiskFull, StoreError, is_disk_full
from storage.refs import data_ref

log = logging.getLogger(__name__)

DEFAULT_STORE = "./klear-store"
PARQUET_COMPRESSION = "zstd"
GLOB_CHARACTERS = "*?[]{}"  # DuckDB reads a Parquet URL (a view over a version) as a glob pattern, and
#   takes what follows a '?' in a database path as options


def resolve_store(root: str | None = None) -> str:
    """`--store` wins, then $KLEAR_STORE, then ./klear-store."""
    return root or os.environ.get("KLEAR_STORE") or DEFAULT_STORE


def store_of(data: str) -> str | None:
    """The store a training `--data` value names: a store directory or `STORE#VERSION`; None for a file."""
    ref = data_ref(data)
    return ref.store if ref else None


def check_root(root: str, catalog: str | None = None) -> None:
    """StoreError (one line naming the root) unless a store can live at `root`: its URL can be opened
    here (paths.url_problem), a remote root has a local catalog file ($KLEAR_CATALOG, or `catalog`), and
    neither holds a character DuckDB reads as a glob or an option (the views would read other files, the
    catalog would open another path). Creates nothing."""
    if why := paths.url_problem(root):
        raise StoreError(f"{root}: {why}")
    if not paths.is_local(root):
        catalog = catalog or os.environ.get("KLEAR_CATALOG")
        if not catalog:
            raise StoreError(f"{root}: a remote store needs a local catalog file: set KLEAR_CATALOG to a "
                             "catalog.duckdb path on this machine")
        if not paths.is_local(catalog):
            raise StoreError(f"KLEAR_CATALOG {catalog}: must be a local file (DuckDB cannot write over fsspec)")
    for where, path in (("", root), ("KLEAR_CATALOG ", catalog)):
        bad = sorted({c for c in str(path or "") if c in GLOB_CHARACTERS})
        if bad:
            raise StoreError(f"{where}{path}: a store path must not contain {' '.join(bad)} (DuckDB would read "
                             "it as a pattern)")


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

    @classmethod
    def from_manifest(cls, data: object, where: str) -> DatasetVersion:
        """The version a manifest describes; StoreError naming `where` for one of another layout (a key
        this code does not know, one it needs missing, a value of the wrong type): reading it anyway could
        publish a version under counts or tables it does not have."""
        if not isinstance(data, dict):
            raise StoreError(f"{where}: not a dataset manifest (a JSON object was expected)")
        known = {f.name: f for f in fields(cls)}
        required = {n for n, f in known.items() if f.default is MISSING and f.default_factory is MISSING}
        unknown, missing = sorted(set(data) - set(known)), sorted(required - set(data))
        if unknown or missing:
            parts = ([f"unknown keys {', '.join(unknown)}"] if unknown else []) + \
                    ([f"missing keys {', '.join(missing)}"] if missing else [])
            raise StoreError(f"{where}: a manifest of another store layout ({'; '.join(parts)}); remove its "
                             "version directory to write it again")
        for name, kind in _MANIFEST_TYPES.items():
            if name in data and not isinstance(data[name], kind):
                raise StoreError(f"{where}: key {name!r} holds {type(data[name]).__name__}, not "
                                 f"{kind.__name__ if isinstance(kind, type) else kind[0].__name__}")
        return cls(**data)


def recorded_inputs(inputs: Any) -> Any:
    """A version's inputs as its manifest and `datasets` row keep them: the `path` of each source
    (`inputs["sources"][i]`) and each benchmark (`inputs["benchmarks"][name]`), as the user named it,
    recorded absolute (paths.recorded), resolved in the process that read it, so the record still names the
    file from any other directory; everything else as given (a field_map may rename a raw field `path`)."""
    if not isinstance(inputs, dict):
        return inputs
    out = dict(inputs)
    if isinstance(out.get("sources"), list):
        out["sources"] = [{**s, "path": paths.recorded(s["path"])} if isinstance(s, dict)
                          and isinstance(s.get("path"), str) else s for s in out["sources"]]
    if isinstance(out.get("benchmarks"), dict):
        out["benchmarks"] = {n: {**b, "path": paths.recorded(b["path"])} if isinstance(b, dict)
                             and isinstance(b.get("path"), str) else b for n, b in out["benchmarks"].items()}
    return out


_MANIFEST_TYPES = {"id": str, "kind": str, "parameters": dict, "counts": dict, "rows_in": int, "parents": list,
                   "inputs": dict, "tables": list, "created": str}


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
        url = paths.join(self.version_url(version_id), "manifest.json")
        with paths.open_binary(url) as f:
            raw = f.read()
        try:
            data = json.loads(raw)
        except ValueError as e:  # UnicodeDecodeError too
            raise StoreError(f"{url}: not a JSON manifest ({type(e).__name__})") from None
        return DatasetVersion.from_manifest(data, url)

    def write_version(self, version: DatasetVersion, tables: Mapping[str, pa.Table | Path]) -> DatasetVersion:
        """Write the tables and the manifest (last), register the version in the catalog.
        The inputs' file paths are recorded absolute (recorded_inputs).
        If the version already exists nothing is written and the stored manifest is returned.
        A write that fails leaves no partial version (module docstring, "Faults")."""
        self.repair()
        if self.has_version(version.id):
            existing = self.load_version(version.id)
            self._register(existing)
            return existing
        version.tables = sorted(tables)
        version.inputs = recorded_inputs(version.inputs)
        version.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        final = self.version_url(version.id)
        local = paths.is_local(final)
        target = f"{final}{_tmp_suffix()}" if local else final
        try:
            self._write_files(target, version, tables)
        except BaseException as e:
            _remove_tree(target)
            if is_disk_full(e) and not isinstance(e, DiskFull):
                raise DiskFull.writing(f"dataset version {final}", e) from None
            raise
        if local:
            try:
                os.rename(target, final)
            except OSError:  # another writer produced the same content-addressed version first
                shutil.rmtree(target, ignore_errors=True)
                return self.load_version(version.id)
        self._register(version)
        return version

    @staticmethod
    def _write_files(target: str, version: DatasetVersion, tables: Mapping[str, pa.Table | Path]) -> None:
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

    def repair(self) -> None:
        """Finish what killed writers left (module docstring, "Faults"): remove their temp version
        directories, and record in `datasets` every complete version the catalog lacks. Idempotent, and
        cheap when nothing is left: one listing and one catalog read."""
        if not paths.is_local(self.root):
            return
        root = Path(self.root.removeprefix("file://")) / "datasets"
        if not root.is_dir():
            return
        complete = []
        for d in root.iterdir():
            if _abandoned_tmp(d.name):
                log.warning("store %s: removing %s, left by a writer that is gone", self.root, d.name)
                _remove_tree(str(d))
            elif TMP_MARK in d.name:  # a live writer's version, renamed into place (or removed) by it
                continue
            elif (d / "manifest.json").is_file():
                complete.append(d.name)
        if not complete:
            return
        recorded = {r[0] for r in self.catalog.query("SELECT id FROM datasets")}
        for vid in sorted(set(complete) - recorded):
            try:
                version = self.load_version(vid)
            except FileNotFoundError:  # removed since the listing (a concurrent repair or cleanup)
                continue
            except StoreError as e:  # reported when that version is asked for; not this write's business
                log.warning("store %s: not recording %s: %s", self.root, vid, e)
                continue
            log.warning("store %s: recording version %s, written but never recorded (an interrupted run)",
                        self.root, vid)
            self._register(version)

    def read_table(self, version_id: str, table: str, columns: list[str] | None = None) -> pa.Table:
        """A version's table (only `columns` when given: a long-text table's other columns stay on disk)."""
        with paths.open_binary(self.table_url(version_id, table)) as f:
            return pq.read_table(f, columns=columns)

    def _register(self, v: DatasetVersion) -> None:
        self.catalog.add_dataset({
            "id": v.id, "kind": v.kind, "created": v.created, "parameters": v.parameters,
            "rows_in": v.rows_in, "rows_kept": v.rows_kept, "rows_dropped": v.rows_dropped,
            "counts": v.counts, "parents": v.parents, "inputs": v.inputs, "path": self.version_url(v.id),
        })

    def publish(self, version_id: str) -> bool:
        """Make `version_id` the current one: the catalog views `problems`/`dropped` (and any other
        table of the version) read its Parquet. Its `datasets` row is recorded first if a kill lost it, so
        a rerun repairs a store interrupted anywhere between the rename and the views. Idempotent."""
        v = self.load_version(version_id)
        self.repair()
        self._register(v)
        return self.catalog.publish(version_id, {t: self.table_url(version_id, t) for t in v.tables})

    def current_version(self) -> str | None:
        """The published version (None for a store nothing was published in; nothing is created then)."""
        if not Catalog(self.catalog_path).exists():
            return None
        try:
            self.repair()
        except OSError as e:  # a read goes on without it (no room, a store this user may only read)
            log.warning("store %s: not repaired now (%s)", self.root, e)
        return self.catalog.current_dataset("problems")


TMP_MARK = ".tmp-"  # in a directory name under datasets/: a version being written, never one to read


def _tmp_suffix() -> str:
    """`.tmp-<host>-<pid>`: whose temp version directory this is, so a later writer on this host can tell
    one whose writer is gone (`_abandoned_tmp`) from one being written."""
    return f"{TMP_MARK}{socket.gethostname()}-{os.getpid()}"


def _abandoned_tmp(name: str) -> bool:
    """Whether a directory name under datasets/ is the temp version of a writer on this host that no longer
    runs (a temp directory of another host is left alone: this host cannot see its writer)."""
    _, sep, owner = name.partition(TMP_MARK)
    host, dash, pid = owner.rpartition("-")
    if not (sep and dash and pid.isdigit()) or host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _remove_tree(url: str) -> None:
    """Remove a partial directory, local or remote; never raises (it runs while another error propagates)."""
    if paths.is_local(url):
        shutil.rmtree(url.removeprefix("file://"), ignore_errors=True)
        return
    with suppress(Exception):
        fs, path = paths.fs_for(url)
        if fs.exists(path):
            fs.rm(path, recursive=True)
