"""Users query the catalog while flows write it: real DuckDB sessions and writers in other processes.

Each session or writer is a separate process (tests/storage/processes.py), so DuckDB's file locks are
the ones a user's session takes; every wait is bounded."""
import subprocess
import sys
import threading

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.catalog import Catalog
from storage.file_lock import LockReentry, LockTimeout, file_lock
from storage.store import DatasetVersion, Store
from tests.storage.processes import ROOT, Session, Writer, fresh_session


def _write(store: Store, name: str, n_problems: int) -> str:
    v = DatasetVersion(id=f"ds-{name}", kind="curate", parameters={"n": n_problems}, counts={"kept": n_problems},
                       rows_in=n_problems)
    store.write_version(v, {"problems": pa.table({"id": [f"{name}{i}" for i in range(n_problems)]})})
    store.publish(v.id)
    return v.id


def _versions(session_or_path) -> list[str]:
    sql = "select id from datasets order by id"
    rows = session_or_path.ask(sql) if isinstance(session_or_path, Session) else fresh_session(session_or_path, sql)
    return [r[0] for r in rows]


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_a_write_lands_while_a_user_session_is_open(tmp_path, read_only):
    store = Store(str(tmp_path / "s"))
    _write(store, "a", 2)
    user = Session(store.catalog_path, read_only=read_only)
    assert _versions(user) == ["ds-a"]
    if not read_only:  # a user writing into the catalog leaves a WAL beside the file
        user.ask("create table mine as select 42 as x")

    _write(store, "b", 5)
    assert store.catalog.insert_once("evaluations", {"id": "ev-1", "benchmark": "b", "created": "2025-01-01"})

    assert _versions(user) == ["ds-a"]  # the open session keeps its snapshot, views included
    assert user.ask("select count(*) from problems") == [(2,)]
    assert user.ask("select count(*) from evaluations") == [(0,)]
    assert _versions(store.catalog_path) == ["ds-a", "ds-b"]  # a new session sees the new state
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(5,)]
    assert fresh_session(store.catalog_path, "select id from evaluations") == [("ev-1",)]
    assert user.finish() == (0, "")


def test_writers_in_other_processes_at_once_all_land_and_a_shared_id_lands_once(tmp_path):
    root = str(tmp_path / "s")
    assert Store(root).catalog.query("select count(*) from datasets") == [(0,)]  # creates an empty catalog
    user = Session(Store(root).catalog_path)
    writers = [Writer(root, name, 5) for name in ("w0", "w1", "w2")]
    for w in writers:
        w.send("go")
    reports = [w.report() for w in writers]
    assert [w.finish()[0] for w in writers] == [0, 0, 0]

    assert all(r["inserted"] == [True] * 5 for r in reports)
    assert sorted(r["shared"] for r in reports) == [False, False, True]
    assert _versions(root + "/catalog.duckdb") == ["ds-w0", "ds-w1", "ds-w2"]
    counts = fresh_session(root + "/catalog.duckdb", "select id = 'ev-shared', count(*) from evaluations group by 1")
    assert sorted(counts) == [(False, 15), (True, 1)]
    assert _versions(user) == [] and user.finish()[0] == 0


def test_a_write_that_changes_nothing_rewrites_no_file(tmp_path):
    store = Store(str(tmp_path / "s"))
    vid = _write(store, "a", 2)
    assert store.catalog.insert_once("checkpoints", {"id": "ck-1", "stage": "base", "path": "/m",
                                                     "created": "2025-01-01"})
    before = (tmp_path / "s" / "catalog.duckdb").stat()
    assert store.catalog.insert_once("checkpoints", {"id": "ck-1", "stage": "sft", "path": "/n",
                                                     "created": "2025-01-02"}) is False
    assert store.publish(vid) is False
    after = (tmp_path / "s" / "catalog.duckdb").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert store.catalog.query("select stage from checkpoints") == [("base",)]


def test_what_a_connect_block_writes_is_published_even_if_the_block_then_fails(tmp_path):
    store = Store(str(tmp_path / "s"))
    cat = store.catalog
    with cat.connect() as con:
        con.execute("select count(*) from datasets").fetchall()
    before = (tmp_path / "s" / "catalog.duckdb").stat()
    with pytest.raises(ValueError):
        with cat.connect() as con:
            con.execute("insert into checkpoints (id, stage, path, created) values ('ck-1', 'base', '/m', now())")
            raise ValueError("the caller's own error")
    assert (tmp_path / "s" / "catalog.duckdb").stat().st_ino != before.st_ino
    assert fresh_session(store.catalog_path, "select id from checkpoints") == [("ck-1",)]


def _old_store(root) -> Store:
    """A store whose catalog an earlier version wrote: real tables, a view over dataset `ds-old`, no `infra`
    column, and a table of the user's own."""
    store = Store(str(root))
    dataset_url = store.version_url("ds-old")
    (root / "datasets" / "ds-old").mkdir(parents=True)
    pq.write_table(pa.table({"id": ["p"]}), f"{dataset_url}/problems.parquet")
    con = duckdb.connect(store.catalog_path)
    con.execute("CREATE TABLE datasets (id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, created TIMESTAMP NOT NULL, "
                "parameters JSON, rows_in BIGINT, rows_kept BIGINT, rows_dropped BIGINT, counts JSON, "
                "parents VARCHAR[], inputs JSON, path VARCHAR)")
    con.execute("INSERT INTO datasets VALUES ('ds-old', 'curate', '2024-01-01', '{}', 1, 1, 0, '{}', [], '{}', ?)",
                [dataset_url])
    con.execute("CREATE TABLE evaluations (id VARCHAR PRIMARY KEY, checkpoint VARCHAR, benchmark VARCHAR NOT NULL, "
                "benchmark_path VARCHAR, k INTEGER, seed INTEGER, avg_at_k DOUBLE, pass_at_k DOUBLE, "
                "n_problems INTEGER, created TIMESTAMP NOT NULL, results_path VARCHAR)")
    con.execute("INSERT INTO evaluations (id, benchmark, created, avg_at_k) VALUES ('ev-old', 'b', now(), 0.5)")
    con.execute("CREATE TABLE current_views (name VARCHAR PRIMARY KEY, dataset VARCHAR NOT NULL, url VARCHAR NOT NULL)")
    con.execute("INSERT INTO current_views VALUES ('problems', 'ds-old', ?)", [f"{dataset_url}/problems.parquet"])
    con.execute(f"CREATE VIEW problems AS SELECT * FROM read_parquet('{dataset_url}/problems.parquet')")
    con.execute("CREATE TABLE my_notes AS SELECT 'keep me' AS note")
    con.close()
    return store


def test_an_earlier_catalog_is_migrated_on_first_write_with_a_session_open_on_it(tmp_path):
    store = _old_store(tmp_path / "s")
    user = Session(store.catalog_path, read_only=False)  # an earlier version's user, holding the file
    user.ask("insert into my_notes values ('written in the open session')")  # only in its WAL so far

    new_row = {"id": "ev-new", "benchmark": "b", "created": "2025-01-01", "infra": 2}
    assert store.catalog.insert_once("evaluations", new_row)
    assert store.catalog.insert_once("evaluations", {**new_row, "id": "ev-old"}) is False
    cat = store.catalog_path
    assert fresh_session(cat, "select id, infra from evaluations order by id") == [("ev-new", 2), ("ev-old", None)]
    assert fresh_session(cat, "select count(*) from problems") == [(1,)]  # the old view, migrated
    assert fresh_session(cat, "select note from my_notes order by 1") == [("keep me",),
                                                                           ("written in the open session",)]
    _write(store, "new", 3)

    assert user.ask("select id from evaluations") == [("ev-old",)]
    assert user.finish()[0] == 0
    assert _versions(cat) == ["ds-new", "ds-old"]
    assert fresh_session(cat, "select count(*) from problems") == [(3,)]
    assert store.current_version() == "ds-new"


def test_a_lost_snapshot_or_record_is_rebuilt_from_the_other(tmp_path):
    store = Store(str(tmp_path / "s"))
    _write(store, "a", 1)
    (tmp_path / "s" / "catalog.duckdb").unlink()
    _write(store, "b", 1)  # the next write republishes the snapshot from the record
    assert _versions(store.catalog_path) == ["ds-a", "ds-b"]
    cat = Catalog(store.catalog_path)
    for f in cat.record_dir.iterdir():
        f.unlink()
    assert [d["id"] for d in store.catalog.datasets()] == ["ds-a", "ds-b"]  # the record restarts from the snapshot


def test_threads_of_one_process_take_turns(tmp_path):
    cat = Store(str(tmp_path / "s")).catalog
    got: list[bool] = []

    def insert(i: int) -> None:
        got.append(cat.insert_once("checkpoints", {"id": f"ck-{i % 4}", "stage": "base", "path": "/m",
                                                   "created": "2025-01-01"}))

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(got) == [False] * 8 + [True] * 4
    assert cat.query("select count(*) from checkpoints") == [(4,)]


def test_a_catalog_call_inside_connect_raises_instead_of_waiting_for_itself(tmp_path):
    cat = Store(str(tmp_path / "s")).catalog
    with cat.connect() as con:
        con.execute("select 1")
        with pytest.raises(LockReentry):
            cat.query("select 1")


def test_a_lock_held_too_long_times_out(tmp_path):
    path = str(tmp_path / "lock")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with file_lock(path, exclusive=False, timeout_s=1):
            held.set()
            release.wait(timeout=60)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(timeout=60)
    with file_lock(path, exclusive=False, timeout_s=1):  # shared holders coexist
        pass
    with pytest.raises(LockTimeout, match="still locked"):
        with file_lock(path, exclusive=True, timeout_s=0.2):
            pass
    release.set()
    t.join(timeout=60)
    with file_lock(path, exclusive=True, timeout_s=1):
        pass


def test_a_writer_killed_inside_the_lock_does_not_block_the_next(tmp_path):
    store = Store(str(tmp_path / "s"))
    _write(store, "a", 1)
    lock = Catalog(store.catalog_path).lock
    code = ("import os, signal, sys; from storage.file_lock import file_lock\n"
            f"with file_lock({str(lock)!r}, exclusive=True, timeout_s=60): os.kill(os.getpid(), signal.SIGKILL)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=120)
    assert r.returncode == -9
    _write(store, "b", 1)
    assert _versions(store.catalog_path) == ["ds-a", "ds-b"]


def test_a_migrated_catalog_whose_wal_cannot_be_replayed_keeps_its_checkpointed_rows(tmp_path, caplog):
    import shutil

    store = _old_store(tmp_path / "s")
    other = duckdb.connect(str(tmp_path / "other.duckdb"))
    other.execute("create table x as select 1 as i")  # a WAL of another file, as if copied mid-checkpoint
    shutil.copyfile(tmp_path / "other.duckdb.wal", tmp_path / "s" / "catalog.duckdb.wal")
    other.close()

    assert store.catalog.query("select id from evaluations") == [("ev-old",)]
    assert "cannot be replayed" in caplog.text
    assert not (tmp_path / "s" / "catalog.duckdb.wal").exists()
    assert fresh_session(store.catalog_path, "select note from my_notes") == [("keep me",)]
