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

Faults (a kill, a full disk) leave a catalog that the next open repairs:
- Each snapshot notes the state of the record it copies (`<record dir>/snapshot`: size, mtime, inode, WAL).
  A writer killed, or out of room, after the record changed and before its snapshot replaced
  catalog.duckdb leaves a note that no longer matches the record; any later open of the catalog (a read or
  a write) then checkpoints the record and publishes the snapshot the writer did not. A snapshot that is
  missing or not DuckDB is published again the same way (it is derived: the record holds the rows).
- No room to write (the record's WAL or checkpoint, the snapshot's copy): DiskFull, one line; the partial
  temp file is removed and catalog.duckdb keeps the last complete snapshot, readable.
- A record WAL that DuckDB refuses to replay (left by a checkpoint a full disk cut short) is moved aside
  (`_connect`); the record opens with what its file holds.
- A record or a catalog.duckdb to migrate that is not a DuckDB file (a header check, without opening it),
  or that DuckDB refuses to open: StoreError naming the file and what to do, never DuckDB's traceback.
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

from storage.errors import DiskFull, StoreError, is_disk_full
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


# Text columns of the Parquet tables that the views show typed, so `date >= '2025-01-01'` and
# `tests->>'fn_name'` work without casts: what each holds (ISO dates and times, JSON documents). A value
# that does not parse shows as NULL (the Parquet keeps the text). Bump VIEW_RULES when this changes: the
# schema hash includes it, so every existing catalog re-creates its views on the next open.
VIEW_TYPES = {"date": "DATE", "created": "TIMESTAMP", "tests": "JSON", "meta": "JSON", "details": "JSON"}
VIEW_RULES = "2026-12-05"

SCHEMA_HASH = hashlib.sha256((_SCHEMA + VIEW_RULES).encode()).hexdigest()


def view_sql(con: duckdb.DuckDBPyConnection, name: str, url: str) -> str:
    """The view `name` over the Parquet at `url`, its VIEW_TYPES text columns cast (TRY_CAST: NULL where a
    value does not parse)."""
    source = f"read_parquet({_sql_str(url)})"
    columns = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    casts = [f'TRY_CAST("{c}" AS {VIEW_TYPES[c]}) AS "{c}"' for c, typ, *_ in columns
             if c in VIEW_TYPES and typ == "VARCHAR"]
    replace = f" REPLACE ({', '.join(casts)})" if casts else ""
    return f"CREATE OR REPLACE VIEW {name} AS SELECT *{replace} FROM {source}"


def _retype_views(con: duckdb.DuckDBPyConnection) -> None:
    """Every view of `current_views` re-created under today's VIEW_TYPES (a catalog written by an earlier
    version showed them as text); a view whose Parquet cannot be read now is left as it was."""
    for name, url in con.execute("SELECT name, url FROM current_views").fetchall():
        try:
            con.execute(view_sql(con, name, url))
        except duckdb.Error as e:
            log.warning("catalog: view %s over %s left as it was (%s)", name, url, _first_line(e))


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
                con.execute(view_sql(con, name, url))
                con.execute("INSERT OR REPLACE INTO current_views VALUES (?, ?, ?)", [name, dataset, url])
                changed = True
        return changed

    # -- reads ---------------------------------------------------------------------------------
    def current_dataset(self, view: str = "problems") -> str | None:
        with self._reading() as con:
            row = con.execute("SELECT dataset FROM current_views WHERE name = ?", [view]).fetchone()
        return row[0] if row else None

    def views(self) -> list[str]:
        """The views published so far (problems, dropped, verifications, …), by name."""
        with self._reading() as con:
            return [r[0] for r in con.execute("SELECT name FROM current_views ORDER BY name").fetchall()]

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
            con = self._open_record(read_only=True)
            try:
                yield con
            finally:
                con.close()

    @contextmanager
    def _writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The record open for writing; if the block changed it, a new snapshot replaces catalog.duckdb.
        No room to write (inside the block or at the checkpoint) is DiskFull; the snapshot left for the next
        open to publish (module docstring, "Faults")."""
        self._ensure_record()
        with self._locked(exclusive=True):
            before = _file_state(self.record)
            con = self._open_record(read_only=False)
            try:
                yield con
            except BaseException as e:
                self._finish_write(con, before, after_error=True)
                if isinstance(e, duckdb.Error) and is_disk_full(e):
                    raise DiskFull.writing(f"catalog record {self.record}", e) from None
                raise
            self._finish_write(con, before, after_error=False)

    def _finish_write(self, con: duckdb.DuckDBPyConnection, before: tuple, after_error: bool) -> None:
        """Checkpoint and close; if the record changed (rows a failed block committed before its error
        count too), publish the snapshot. After the block's own error, a fault here is only logged: the
        block's error is the one to report, and the next open publishes what this could not."""
        try:
            wrote = _wal(self.record).exists()  # committed writes wait there until a checkpoint
            self._checkpoint_and_close(con)
            if wrote or _file_state(self.record) != before:
                self._publish_snapshot()
        except (OSError, duckdb.Error) as e:
            if not after_error:
                raise
            log.warning("catalog %s: snapshot not published after a failed write (%s)", self.path, _first_line(e))

    def _open_record(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        """A connection to the record; a record DuckDB refuses (not its file, another version's) is a
        StoreError naming it."""
        try:
            return duckdb.connect(str(self.record), read_only=read_only) if read_only else _connect(self.record)
        except duckdb.Error as e:
            if is_disk_full(e):
                raise DiskFull.writing(f"catalog record {self.record}", e) from None
            raise StoreError(f"catalog record {self.record}: DuckDB cannot open it ({_first_line(e)}); "
                             f"remove {self.record_dir} to rebuild it from {self.path}") from None

    def _checkpoint_and_close(self, con: duckdb.DuckDBPyConnection) -> None:
        """Leave everything in the record file itself (the snapshot is a copy of that file alone). No room
        to checkpoint is DiskFull: the rows wait in the WAL, and the snapshot is published by the next open
        that has room."""
        try:
            con.execute("CHECKPOINT")
        except duckdb.Error as e:
            _close_quietly(con)
            if is_disk_full(e):
                raise DiskFull.writing(f"catalog record {self.record}", e) from None
            log.debug("checkpoint skipped: %s", e)
            return
        con.close()

    def _schema_noted(self) -> bool:
        try:
            return self.record.exists() and (self.record_dir / "schema").read_text() == SCHEMA_HASH
        except FileNotFoundError:
            return False

    def _snapshot_current(self) -> bool:
        """Whether catalog.duckdb is the snapshot of the record as it is now (module docstring, "Faults")."""
        try:
            noted = (self.record_dir / "snapshot").read_text()
        except FileNotFoundError:
            return False
        return noted == _state_text(self.record) and is_duckdb_file(Path(self.path))

    def _ensure_record(self) -> None:
        """Create the record (migrating an existing catalog.duckdb) or bring its schema up to date, and
        publish a snapshot that a killed or starved writer left unpublished."""
        self.check()
        if self._schema_noted() and self._snapshot_current():
            return
        with self._locked(exclusive=True):
            try:
                if not self._schema_noted():
                    if not self.record.exists():
                        self._start_record()
                    _apply_schema(self.record)
                    _write_atomically(self.record_dir / "schema", SCHEMA_HASH)
                    self._publish_snapshot()
                elif not self._snapshot_current():
                    self._repair_snapshot()
            except duckdb.Error as e:
                if is_disk_full(e):
                    raise DiskFull.writing(f"catalog record {self.record}", e) from None
                raise StoreError(f"catalog record {self.record}: DuckDB cannot open it ({_first_line(e)}); "
                                 f"remove {self.record_dir} to rebuild it from {self.path}") from None
            except OSError as e:
                if is_disk_full(e) and not isinstance(e, DiskFull):
                    raise DiskFull.writing(f"catalog record {self.record}", e) from None
                raise

    def _repair_snapshot(self) -> None:
        """Publish the snapshot of the record as it is (its WAL checkpointed first). Failing to now (no
        room, a store this user may only read) is a warning, not an error: readers go on reading the record,
        and catalog.duckdb keeps the previous snapshot until an open that can publishes this one."""
        if (self.record_dir / "snapshot").exists():
            log.warning("catalog %s: publishing the snapshot an interrupted write left unpublished", self.path)
        else:  # a record from before snapshots were noted: published once, to note it
            log.info("catalog %s: noting its snapshot", self.path)
        try:
            _apply_schema(self.record)  # opens (replaying any WAL) and checkpoints
            self._publish_snapshot()
        except (OSError, duckdb.Error) as e:
            log.warning("catalog %s: cannot publish its snapshot now (%s)", self.path, _first_line(e))

    def check(self) -> None:
        """StoreError unless the files DuckDB will open are DuckDB files (a header check, opening nothing):
        the record, else the catalog.duckdb it would migrate. A snapshot beside a good record is not
        checked: it is published again from the record."""
        if self.record.exists():
            if not is_duckdb_file(self.record):
                raise StoreError(f"catalog record {self.record}: not a DuckDB database file; remove "
                                 f"{self.record_dir} to rebuild it from {self.path}")
        elif Path(self.path).exists() and not is_duckdb_file(Path(self.path)):
            raise StoreError(f"{self.path}: not a DuckDB database file; move it away and rerun (the dataset "
                             "versions beside it are kept and recorded again)")

    def _start_record(self) -> None:
        """The record begins as a copy of catalog.duckdb when there is one (an earlier version's catalog,
        or a snapshot whose record was removed), so none of its rows is lost; else it begins empty."""
        tmp = self.record_dir / "record.tmp.duckdb"
        old = Path(self.path)
        _remove_database(tmp)
        try:
            if old.exists():
                log.info("catalog %s: migrating its rows into %s", old, self.record)
                _copy_database(old, tmp, with_wal=True)
                try:
                    _apply_schema(tmp)
                except duckdb.Error as e:  # a WAL caught mid-write by a user's session
                    if is_disk_full(e):
                        raise
                    log.warning("catalog %s: its WAL cannot be replayed (%s); migrating the file without it", old, e)
                    _remove_database(tmp)
                    _copy_database(old, tmp, with_wal=False)
                    _apply_schema(tmp)
            else:
                _apply_schema(tmp)
        except (OSError, duckdb.Error) as e:
            _remove_database(tmp)
            if is_disk_full(e):
                raise DiskFull.writing(f"catalog record {self.record}", e) from None
            if isinstance(e, duckdb.Error):
                raise StoreError(f"{old}: DuckDB cannot open it ({_first_line(e)}); move it away and rerun") from None
            raise
        _remove_database(self.record)  # a WAL the lost record left behind would not match the new file
        os.replace(tmp, self.record)

    def _publish_snapshot(self) -> None:
        """Copy the (checkpointed) record to a temp file and rename it over catalog.duckdb: sessions open
        on the old file keep it whole, new sessions open the new one. Then note which record state it
        copies. No room for the copy: the temp file is removed, catalog.duckdb is left as it was (readable)
        and DiskFull is raised; the note still names the older state, so the next open publishes it."""
        tmp = self.record_dir / "snapshot.tmp.duckdb"
        state = _state_text(self.record)
        try:
            shutil.copyfile(self.record, tmp)
            _fsync(tmp)
            os.replace(tmp, self.path)
        except OSError as e:
            with suppress(FileNotFoundError):
                tmp.unlink()
            if is_disk_full(e):
                raise DiskFull.writing(f"catalog {self.path}", e) from None
            raise
        with suppress(FileNotFoundError):  # a user's read-write session wrote it for the replaced file
            _wal(Path(self.path)).unlink()
        _fsync(Path(self.path).parent)
        with suppress(OSError):  # no room for the note: the next open publishes once more, no harm
            _write_atomically(self.record_dir / "snapshot", state)


DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file (after the header's checksum)


def is_duckdb_file(path: Path) -> bool:
    """Whether `path` starts like a DuckDB database file (read 12 bytes; DuckDB is never asked)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[8:12] == DUCKDB_MAGIC


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _close_quietly(con: duckdb.DuckDBPyConnection) -> None:
    with suppress(duckdb.Error):
        con.close()


def _state_text(db: Path) -> str:
    return json.dumps(_file_state(db))


def _wal(db: Path) -> Path:
    return Path(f"{db}.wal")


def _connect(db: Path) -> duckdb.DuckDBPyConnection:
    """`db` open for writing. A WAL DuckDB refuses to replay (one a full disk or a kill left behind a
    checkpoint that had already reached the file: "created for an older version of this database") is
    moved aside as `<db>.wal.unreplayable`, and the file opens with what it holds; the rows such a WAL
    holds are in the file already, or were never committed."""
    try:
        return duckdb.connect(str(db))
    except duckdb.Error as e:
        wal = _wal(db)
        if "WAL" not in str(e) or not wal.exists():
            raise
        aside = wal.with_name(wal.name + ".unreplayable")
        log.warning("catalog record %s: its WAL cannot be replayed (%s); moved aside to %s", db, _first_line(e),
                    aside)
        os.replace(wal, aside)
        return duckdb.connect(str(db))


def _apply_schema(db: Path) -> None:
    con = _connect(db)
    try:
        con.execute(_SCHEMA)
        _retype_views(con)
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
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
