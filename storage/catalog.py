"""The DuckDB catalog `<store>/catalog.duckdb`: tables describing every artifact, and views over the
latest Parquet of each kind, so users can query everything with plain SQL.

- `datasets`: one row per dataset version (id, kind, created, parameters, row counts, parents, inputs, path).
- `problems`, `dropped` (and any other table of the version, e.g. `verifications`): views over the Parquet
  of the current (latest published) dataset version.
- `checkpoints`: every model checkpoint (id, stage base/sft/rl, path, parent checkpoint, dataset version,
  config JSON, created) — lineage from any checkpoint back to its data and config.
- `evaluations`: one row per (checkpoint, benchmark, k, seed, settings): avg@k, pass@k, n_problems, and
  `infra` / `infra_problems` (infra-outcome samples, and problems with only those, left out of the metrics).
- `ablations`: one row per (ablation, arm, seed) run: final and best held-out avg@k (`loss` always,
  `arm` / `settings` name what the arm changed).
- `current_views`: which dataset and file each view points at (so publishing twice changes nothing).
Later stages add rows through `insert_once`.

Users' sessions never block flows (users query `catalog.duckdb` with DuckDB while flows run):
- The record is a private DuckDB file, `<dir>/.<name>.record/record.duckdb` next to the catalog
  (`.catalog.record/` in a store). Only this class opens it, always under the flock `lock` beside it:
  exclusive to write, shared to read. DuckDB's own one-writer-per-file lock is thus never contended.
- `catalog.duckdb` is a snapshot of the record: after every write that changed the record, the record is
  checkpointed, copied to a temp file and renamed over `catalog.duckdb`, still under the exclusive lock.
  Flows never open `catalog.duckdb`, so a user's session on it (read-only or read-write) cannot make a
  flow fail or wait; the rename leaves that session on its old file, which nothing rewrites (a consistent
  snapshot), and a session opened after it sees the new rows. Views read immutable dataset versions.
- A `catalog.duckdb.wal` left by a user's read-write session belongs to the replaced file: it is removed
  after the rename so new sessions open the new snapshot (what a user writes into the snapshot does not
  survive the next flow write).
- Writers of one store (processes or threads) take turns: inserts are check-then-insert under the
  exclusive lock, so `insert_once` of one id from two writers at once lands once and the other gets False.
  The lock is held for one open-write-checkpoint-copy (tens of milliseconds); a wait longer than
  `LOCK_TIMEOUT_S` raises LockTimeout instead of hanging.
- A write that changes nothing (an id already there, a view already current) rewrites no file.
- Migration: when the record is missing, it starts as a copy of the existing `catalog.duckdb` (with its
  WAL), so a catalog written by an earlier version — or a snapshot whose record was deleted — keeps all
  its rows; the copy is made without opening the file, so a user's session on it does not stop it.
- The schema (`_SCHEMA`, idempotent DDL) is applied whenever its hash differs from the one noted in the
  record directory, so a record written by an earlier version gains new columns before anyone reads it.
- Never call a Catalog method inside a `connect()` block of the same catalog: the lock is not re-entrant
  and says so (LockReentry) rather than deadlocking.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import duckdb

from storage.file_lock import file_lock

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    created TIMESTAMP NOT NULL,
    parameters JSON,
    rows_in BIGINT,
    rows_kept BIGINT,
    rows_dropped BIGINT,
    counts JSON,
    parents VARCHAR[],
    inputs JSON,
    path VARCHAR
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id VARCHAR PRIMARY KEY,
    stage VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    parent VARCHAR,
    dataset VARCHAR,
    config JSON,
    created TIMESTAMP NOT NULL
);
CREATE TABLE IF NOT EXISTS evaluations (
    id VARCHAR PRIMARY KEY,
    checkpoint VARCHAR,
    benchmark VARCHAR NOT NULL,
    benchmark_path VARCHAR,
    k INTEGER,
    seed INTEGER,
    avg_at_k DOUBLE,
    pass_at_k DOUBLE,
    n_problems INTEGER,
    created TIMESTAMP NOT NULL,
    results_path VARCHAR
);
CREATE TABLE IF NOT EXISTS ablations (
    id VARCHAR PRIMARY KEY,
    ablation VARCHAR NOT NULL,
    loss VARCHAR NOT NULL,
    seed INTEGER,
    checkpoint VARCHAR,
    final_avg_at_k DOUBLE,
    best_avg_at_k DOUBLE,
    steps INTEGER,
    benchmark VARCHAR,
    created TIMESTAMP NOT NULL
);
-- added after the first release: ALTER so catalogs created before gain the columns (NULL for old rows)
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS infra INTEGER;
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS infra_problems INTEGER;
ALTER TABLE ablations ADD COLUMN IF NOT EXISTS arm VARCHAR;        -- e.g. loss=gppo,sft_alpha=0.1
ALTER TABLE ablations ADD COLUMN IF NOT EXISTS settings JSON;      -- the arm's overrides
CREATE TABLE IF NOT EXISTS current_views (
    name VARCHAR PRIMARY KEY,
    dataset VARCHAR NOT NULL,
    url VARCHAR NOT NULL
);
"""


SCHEMA_HASH = hashlib.sha256(_SCHEMA.encode()).hexdigest()


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def record_dir(catalog_path: str) -> Path:
    """Where the record of `catalog_path` lives: `.catalog.record/` beside `catalog.duckdb`."""
    p = Path(catalog_path)
    return p.with_name(f".{p.stem}.record")


class Catalog:
    def __init__(self, path: str):
        self.path = path
        self.record_dir = record_dir(path)
        self.record = self.record_dir / "record.duckdb"
        self.lock = self.record_dir / "lock"

    def exists(self) -> bool:
        """Whether anything was ever recorded here (or an earlier version's catalog waits to be migrated)."""
        return self.record.exists() or Path(self.path).exists()

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the record. Read-only: under the shared lock, alongside other readers.
        Otherwise under the exclusive lock, and a change is published to `catalog.duckdb` on exit.
        Keep the block short: every writer of this store waits while it is open."""
        with (self._reading() if read_only else self._writing()) as con:
            yield con

    # -- writes --------------------------------------------------------------------------------
    def add_dataset(self, row: Mapping[str, Any]) -> bool:
        """Insert a `datasets` row unless its id is already there. Returns True when inserted."""
        with self._writing() as con:
            if con.execute("SELECT 1 FROM datasets WHERE id = ?", [row["id"]]).fetchone():
                return False
            con.execute(
                "INSERT INTO datasets VALUES (?, ?, ?::TIMESTAMP, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row["id"], row["kind"], row["created"], json.dumps(row["parameters"], sort_keys=True),
                    row["rows_in"], row["rows_kept"], row["rows_dropped"],
                    json.dumps(row["counts"], sort_keys=True), list(row["parents"]),
                    json.dumps(row["inputs"], sort_keys=True), row["path"],
                ],
            )
            return True

    def insert_once(self, table: str, row: Mapping[str, Any]) -> bool:
        """Insert `row` into `table` unless a row with its `id` exists (content-addressed ids make
        re-runs idempotent; the check and the insert share one exclusive lock, so two writers of one id
        land it once). JSON-able dict/list values are stored as JSON text. True when inserted."""
        cols = list(row)
        vals = [json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in row.values()]
        with self._writing() as con:
            if con.execute(f"SELECT 1 FROM {table} WHERE id = ?", [row["id"]]).fetchone():
                return False
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", vals)
            return True

    def publish(self, dataset: str, views: Mapping[str, str]) -> bool:
        """Point each view name at a Parquet URL of `dataset`. A view already pointing there is left
        alone, so publishing the same version twice changes nothing. Returns True if anything changed."""
        changed = False
        with self._writing() as con:
            for name, url in views.items():
                cur = con.execute("SELECT dataset, url FROM current_views WHERE name = ?", [name]).fetchone()
                if cur == (dataset, url):
                    continue
                con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(url)})")
                con.execute("INSERT OR REPLACE INTO current_views VALUES (?, ?, ?)", [name, dataset, url])
                changed = True
        return changed

    # -- reads ---------------------------------------------------------------------------------
    def current_dataset(self, view: str = "problems") -> str | None:
        with self._reading() as con:
            row = con.execute("SELECT dataset FROM current_views WHERE name = ?", [view]).fetchone()
        return row[0] if row else None

    def datasets(self) -> list[dict[str, Any]]:
        with self._reading() as con:
            cur = con.execute("SELECT * FROM datasets ORDER BY created")
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a read-only query against the record (the latest state, whatever the snapshot shows)."""
        with self._reading() as con:
            return con.execute(sql, params or []).fetchall()

    # -- the record and its snapshot -----------------------------------------------------------
    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        self.record_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(str(self.lock), exclusive=exclusive, timeout_s=LOCK_TIMEOUT_S):
            yield

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self._ensure_record()
        with self._locked(exclusive=False):
            con = duckdb.connect(str(self.record), read_only=True)
            try:
                yield con
            finally:
                con.close()

    @contextmanager
    def _writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The record open for writing; if the block changed it, a new snapshot replaces catalog.duckdb."""
        self._ensure_record()
        with self._locked(exclusive=True):
            before = _file_state(self.record)
            con = duckdb.connect(str(self.record))
            try:
                yield con
            finally:
                wrote = _wal(self.record).exists()  # committed writes wait there until a checkpoint
                _checkpoint_and_close(con)
                if wrote or _file_state(self.record) != before:
                    self._publish_snapshot()

    def _schema_noted(self) -> bool:
        try:
            return self.record.exists() and (self.record_dir / "schema").read_text() == SCHEMA_HASH
        except FileNotFoundError:
            return False

    def _ensure_record(self) -> None:
        """Create the record (migrating an existing catalog.duckdb) or bring its schema up to date."""
        if self._schema_noted():
            return
        with self._locked(exclusive=True):
            if self._schema_noted():
                return
            if not self.record.exists():
                self._start_record()
            _apply_schema(self.record)
            _write_atomically(self.record_dir / "schema", SCHEMA_HASH)
            self._publish_snapshot()

    def _start_record(self) -> None:
        """The record begins as a copy of catalog.duckdb when there is one (an earlier version's catalog,
        or a snapshot whose record was removed), so none of its rows is lost; else it begins empty."""
        tmp = self.record_dir / "record.tmp.duckdb"
        old = Path(self.path)
        _remove_database(tmp)
        if old.exists():
            log.info("catalog %s: migrating its rows into %s", old, self.record)
            _copy_database(old, tmp, with_wal=True)
            try:
                _apply_schema(tmp)
            except duckdb.Error as e:  # a WAL caught mid-write by a user's session
                log.warning("catalog %s: its WAL cannot be replayed (%s); migrating the file without it", old, e)
                _remove_database(tmp)
                _copy_database(old, tmp, with_wal=False)
                _apply_schema(tmp)
        else:
            _apply_schema(tmp)
        _remove_database(self.record)  # a WAL the lost record left behind would not match the new file
        os.replace(tmp, self.record)

    def _publish_snapshot(self) -> None:
        """Copy the (checkpointed) record to a temp file and rename it over catalog.duckdb: sessions open
        on the old file keep it whole, new sessions open the new one."""
        tmp = self.record_dir / "snapshot.tmp.duckdb"
        shutil.copyfile(self.record, tmp)
        _fsync(tmp)
        os.replace(tmp, self.path)
        with suppress(FileNotFoundError):  # a user's read-write session wrote it for the replaced file
            _wal(Path(self.path)).unlink()
        _fsync(Path(self.path).parent)


def _wal(db: Path) -> Path:
    return Path(f"{db}.wal")


def _checkpoint_and_close(con: duckdb.DuckDBPyConnection) -> None:
    """Leave everything in the database file itself: the snapshot is a copy of that file alone."""
    try:
        con.execute("CHECKPOINT")
    except duckdb.Error as e:  # the block failed inside a transaction: closing rolls it back
        log.debug("checkpoint skipped: %s", e)
    finally:
        con.close()


def _apply_schema(db: Path) -> None:
    con = duckdb.connect(str(db))
    try:
        con.execute(_SCHEMA)
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _file_state(db: Path) -> tuple:
    """What changes when DuckDB writes a database: its WAL appears, or the file itself is rewritten."""
    st = db.stat()
    return _wal(db).exists(), st.st_mtime_ns, st.st_size, st.st_ino


def _copy_database(src: Path, dst: Path, with_wal: bool) -> None:
    """Copy a DuckDB file by its bytes, never opening it with DuckDB (a session may hold its lock)."""
    shutil.copyfile(src, dst)
    if with_wal and _wal(src).exists():
        with suppress(FileNotFoundError):  # checkpointed and removed meanwhile: the file has it all
            shutil.copyfile(_wal(src), _wal(dst))


def _remove_database(db: Path) -> None:
    for p in (db, _wal(db)):
        with suppress(FileNotFoundError):
            p.unlink()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
