"""Faults in the store: a writer killed at each point between its files and its catalog rows, no room on
the disk while it writes a version or the catalog, and files that are not what the store expects. After
each: nothing half-written in sight, the previous catalog readable, and a rerun (or any open of the
store) completes what was cut off. Kills are the writer's own SIGKILL at a named point of the code
(deterministic); a full disk is an OSError(ENOSPC) from a patched writer, or a real file size limit
(RLIMIT_FSIZE) in a child process."""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from storage.catalog import Catalog
from storage.errors import DiskFull, StoreError
from storage.store import DatasetVersion, Store, check_root
from tests.storage.processes import fresh_session

ROOT = Path(__file__).resolve().parents[2]

# A child that writes version ds-a (published), then ds-b with the fault given as argv[2], and reports.
CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys
    import pyarrow as pa
    from storage.store import DatasetVersion, Store
    from storage.catalog import Catalog

    root, fault = sys.argv[1], sys.argv[2]
    store = Store(root)

    def version(name, rows):
        v = DatasetVersion(id=f"ds-{name}", kind="curate", parameters={"n": name}, counts={"kept": rows},
                           rows_in=rows)
        return v, {"problems": pa.table({"id": [f"{name}{i:07d}" + os.urandom(24).hex() for i in range(rows)]})}

    a, tables = version("a", 3)
    store.write_version(a, tables)
    store.publish(a.id)

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    b, tables = version("b", int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    if fault == "kill-after-rename":            # the version's directory is in place, its row is not
        Store._register = die
    elif fault == "kill-before-publish-snapshot":  # the views changed in the record, not in catalog.duckdb
        store.write_version(b, tables)
        Catalog._publish_snapshot = die
        store.publish(b.id)
    elif fault.startswith("fsize="):            # a real limit: writes past it fail with EFBIG
        limit = int(fault.split("=")[1])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit if limit > 0 else os.path.getsize(
            store.catalog.record), resource.RLIM_INFINITY))
    try:
        store.write_version(b, tables)
        store.publish(b.id)
    except OSError as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        sys.exit(0)
    print(json.dumps({"error": None}))
""")


def _child(store: Path, fault: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(store), fault, *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _rerun(store: Path, rows: int = 5) -> None:
    """What a rerun of the stage does (flows/curate.py): write the version unless it is there, publish it."""
    s = Store(str(store))
    v = DatasetVersion(id="ds-b", kind="curate", parameters={"n": "b"}, counts={"kept": rows}, rows_in=rows)
    if not s.has_version(v.id):
        s.write_version(v, {"problems": pa.table({"id": [f"b{i}" for i in range(rows)]})})
    s.publish(v.id)


def _leftovers(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "datasets").iterdir() if ".tmp" in p.name) + \
        sorted(p.name for p in (store / ".catalog.record").iterdir() if ".tmp" in p.name)


# -- kills --------------------------------------------------------------------------------------------------

def test_a_kill_between_the_rename_and_the_catalog_row_is_repaired_by_the_rerun(tmp_path):
    store = tmp_path / "s"
    assert _child(store, "kill-after-rename").returncode == -9
    assert (store / "datasets" / "ds-b" / "manifest.json").exists()  # renamed into place, never recorded
    _rerun(store)
    assert fresh_session(str(store / "catalog.duckdb"), "select id from datasets order by id") == [("ds-a",), ("ds-b",)]
    assert fresh_session(str(store / "catalog.duckdb"), "select count(*) from problems") == [(5,)]


def test_a_kill_between_the_rename_and_the_catalog_row_is_repaired_by_any_open(tmp_path):
    store = tmp_path / "s"
    assert _child(store, "kill-after-rename").returncode == -9
    assert Store(str(store)).current_version() == "ds-a"  # still a's: b was never published
    assert [d["id"] for d in Store(str(store)).catalog.datasets()] == ["ds-a", "ds-b"]


def test_a_kill_between_the_record_and_its_snapshot_is_repaired_by_the_rerun(tmp_path):
    store = tmp_path / "s"
    assert _child(store, "kill-before-publish-snapshot").returncode == -9
    catalog = str(store / "catalog.duckdb")
    assert fresh_session(catalog, "select count(*) from problems") == [(3,)]  # the snapshot missed the views
    _rerun(store)
    assert fresh_session(catalog, "select count(*) from problems") == [(5,)]


def test_a_kill_between_the_record_and_its_snapshot_is_repaired_by_any_open(tmp_path):
    store = tmp_path / "s"
    assert _child(store, "kill-before-publish-snapshot").returncode == -9
    assert Store(str(store)).current_version() == "ds-b"  # a read: the record knows, the snapshot is renewed
    assert fresh_session(str(store / "catalog.duckdb"), "select count(*) from problems") == [(5,)]


def test_a_temp_version_left_by_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = Store(str(tmp_path / "s"))
    left = tmp_path / "s" / "datasets" / f"ds-x.tmp-{os.uname().nodename}-{dead.pid}"
    left.mkdir(parents=True)
    (left / "problems.parquet").write_bytes(b"partial")
    live = tmp_path / "s" / "datasets" / f"ds-y.tmp-{os.uname().nodename}-{os.getpid()}"  # being written
    live.mkdir()
    v = DatasetVersion(id="ds-c", kind="curate", parameters={}, counts={"kept": 1}, rows_in=1)
    store.write_version(v, {"problems": pa.table({"id": ["c"]})})
    assert not left.exists() and live.exists()


def test_a_live_writers_complete_temp_version_is_not_recorded_by_another_write(tmp_path):
    """A writer between its manifest and its rename: its temp directory looks complete but is not a
    version (recording it would read a path about to vanish)."""
    store = Store(str(tmp_path / "s"))
    y = DatasetVersion(id="ds-y", kind="curate", parameters={}, counts={"kept": 1}, rows_in=1)
    store.write_version(y, {"problems": pa.table({"id": ["y"]})})  # a real manifest to copy
    live = tmp_path / "s" / "datasets" / f"ds-z.tmp-{os.uname().nodename}-{os.getpid()}"
    shutil.copytree(tmp_path / "s" / "datasets" / "ds-y", live)
    manifest = json.loads((live / "manifest.json").read_text())
    (live / "manifest.json").write_text(json.dumps({**manifest, "id": "ds-z"}))  # ds-z, about to be renamed
    v = DatasetVersion(id="ds-c", kind="curate", parameters={}, counts={"kept": 1}, rows_in=1)
    store.write_version(v, {"problems": pa.table({"id": ["c"]})})
    assert sorted(r[0] for r in store.catalog.query("SELECT id FROM datasets")) == ["ds-c", "ds-y"]


# -- no room on the disk ------------------------------------------------------------------------------------

def _store_with_a(tmp_path) -> Store:
    store = Store(str(tmp_path / "s"))
    v = DatasetVersion(id="ds-a", kind="curate", parameters={}, counts={"kept": 3}, rows_in=3)
    store.write_version(v, {"problems": pa.table({"id": ["1", "2", "3"]})})
    store.publish(v.id)
    return store


def _no_room(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_no_room_for_a_version_removes_its_partial_files_and_the_rerun_completes(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    store = _store_with_a(tmp_path)
    real = pq.write_table

    def half_then_full(table, where, **kw):
        where.write(b"PAR1 half a file")
        _no_room()

    monkeypatch.setattr(pq, "write_table", half_then_full)
    b = DatasetVersion(id="ds-b", kind="curate", parameters={}, counts={"kept": 2}, rows_in=2)
    with pytest.raises(DiskFull, match=r"dataset version .*ds-b: no room left on the device"):
        store.write_version(b, {"problems": pa.table({"id": ["x", "y"]})})
    assert _leftovers(tmp_path / "s") == [] and not store.has_version("ds-b")
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(3,)]
    monkeypatch.setattr(pq, "write_table", real)
    _rerun(tmp_path / "s", rows=2)
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(2,)]


def test_no_room_for_the_snapshot_keeps_the_previous_catalog_readable_and_the_next_open_publishes(tmp_path,
                                                                                                   monkeypatch):
    import storage.catalog as catalog_module

    store = _store_with_a(tmp_path)
    b = DatasetVersion(id="ds-b", kind="curate", parameters={}, counts={"kept": 2}, rows_in=2)
    store.write_version(b, {"problems": pa.table({"id": ["x", "y"]})})

    def partial_copy(src, dst):
        Path(dst).write_bytes(b"DUCK partial")
        _no_room()

    monkeypatch.setattr(catalog_module.shutil, "copyfile", partial_copy)
    with pytest.raises(DiskFull, match=r"catalog .*catalog.duckdb: no room left on the device"):
        store.publish(b.id)
    assert _leftovers(tmp_path / "s") == []
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(3,)]
    monkeypatch.undo()
    assert store.current_version() == "ds-b"  # the next open, with room, publishes what was cut off
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(2,)]


@pytest.mark.parametrize("limit, rows, what", [
    ("200000", "60000", "dataset version"),  # the version's Parquet is past the limit
    ("0", "5", "catalog"),                  # the catalog record's size: its next checkpoint is past it
])
def test_a_real_file_size_limit_is_one_error_and_the_rerun_with_room_completes(tmp_path, limit, rows, what):
    store = tmp_path / "s"
    res = _child(store, f"fsize={limit}", rows)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["error"] == "DiskFull" and what in report["message"], report
    assert len(report["message"].splitlines()) == 1
    assert _leftovers(store) == []
    assert fresh_session(str(store / "catalog.duckdb"), "select count(*) from problems") == [(3,)]
    _rerun(store, rows=int(rows))
    assert fresh_session(str(store / "catalog.duckdb"), "select id from datasets order by id") == [("ds-a",), ("ds-b",)]
    assert Store(str(store)).current_version() == "ds-b"


# -- files that are not what the store expects ------------------------------------------------------------

@pytest.mark.parametrize("which", ["catalog.duckdb", ".catalog.record/record.duckdb"])
def test_a_catalog_file_that_is_not_duckdb_is_one_error_naming_it(tmp_path, which):
    root = tmp_path / "s"
    if which.startswith(".catalog.record"):
        _store_with_a(tmp_path)
    (root / which).parent.mkdir(parents=True, exist_ok=True)
    (root / which).write_text("not a database\n")
    store = Store(str(root))
    for call in (lambda: Catalog(store.catalog_path).check(), store.current_version,
                 lambda: store.catalog.insert_once("checkpoints", {"id": "c", "stage": "base", "path": "/m",
                                                                   "created": "2025-01-01"})):
        with pytest.raises(StoreError, match=f"{root / which}: not a DuckDB database file") as e:
            call()
        assert len(str(e.value).splitlines()) == 1


def test_a_snapshot_that_is_not_duckdb_beside_a_good_record_is_published_again(tmp_path):
    store = _store_with_a(tmp_path)
    Path(store.catalog_path).write_text("garbage")
    assert store.current_version() == "ds-a"
    assert fresh_session(store.catalog_path, "select count(*) from problems") == [(3,)]


@pytest.mark.parametrize("manifest, why", [
    ({"extra_key_of_a_newer_layout": 1}, "unknown keys extra_key_of_a_newer_layout"),
    ({"drop": "counts"}, "missing keys counts"),
    ({"counts": [1, 2]}, "key 'counts' holds list"),
    ("[1, 2]", "not a dataset manifest"),
    ("{not json", "not a JSON manifest"),
])
def test_a_manifest_of_another_layout_is_one_error_naming_the_file(tmp_path, manifest, why):
    store = _store_with_a(tmp_path)
    path = Path(store.version_url("ds-a")) / "manifest.json"
    if isinstance(manifest, dict):
        data = json.loads(path.read_text())
        data.pop(manifest.pop("drop", None), None)
        path.write_text(json.dumps({**data, **manifest}))
    else:
        path.write_text(manifest)
    with pytest.raises(StoreError, match=f"{path}: .*{why}") as e:
        store.load_version("ds-a")
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("root, env, why", [
    ("foo://bucket/store", {}, "unknown protocol foo://"),
    ("s3://bucket/store", {}, "s3:// needs a library that is not installed"),
    ("memory://bucket/store", {}, "a remote store needs a local catalog file: set KLEAR_CATALOG"),
    ("memory://bucket/store", {"KLEAR_CATALOG": "memory://c.duckdb"}, "must be a local file"),
    ("/tmp/a?b/store", {}, "must not contain ?"),
    ("/tmp/a[1]/store", {}, "must not contain [ ]"),
])
def test_a_store_root_that_cannot_hold_a_store_is_refused_naming_it(monkeypatch, root, env, why):
    if root.startswith("s3://") and shutil.which("true") and _has("s3fs"):
        pytest.skip("s3fs is installed here")
    monkeypatch.delenv("KLEAR_CATALOG", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(StoreError, match=why.replace("?", r"\?").replace("[", r"\[").replace("]", r"\]")):
        check_root(root)


def test_odd_but_valid_store_roots_are_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("KLEAR_CATALOG", str(tmp_path / "c.duckdb"))
    for root in (str(tmp_path / "a b" / "ünï"), str(tmp_path / "x" / ".." / "y"), "memory://bucket/s"):
        check_root(root)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_a_wal_the_record_cannot_replay_is_set_aside_and_the_catalog_reads(tmp_path):
    """A WAL left behind a checkpoint that reached the file (a full disk or a kill between the two): DuckDB
    refuses to open the record with it; the next open moves it aside and reads the rows the file holds."""
    import duckdb

    store = _store_with_a(tmp_path)
    record = Catalog(store.catalog_path).record
    con = duckdb.connect(str(record))
    con.execute("INSERT INTO checkpoints (id, stage, path, created) VALUES ('ck-1', 'base', '/m', now())")
    stale = Path(f"{record}.wal").read_bytes()
    con.close()  # checkpoints: the row is in the file, the WAL removed
    Path(f"{record}.wal").write_bytes(stale)
    with pytest.raises(duckdb.Error, match="WAL"):
        duckdb.connect(str(record)).close()
    assert store.current_version() == "ds-a"
    assert store.catalog.query("select id from checkpoints") == [("ck-1",)]
    assert Path(f"{record}.wal.unreplayable").exists()
    assert fresh_session(store.catalog_path, "select id from checkpoints") == [("ck-1",)]
