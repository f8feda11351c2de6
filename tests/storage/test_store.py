import duckdb
import pyarrow as pa

from storage.keys import hash_json
from storage.store import DatasetVersion, Store, resolve_store


def _version(i="ds-0000000000000001", kept=2):
    return DatasetVersion(id=i, kind="curate", parameters={"k": 1}, counts={"kept": kept, "malformed": 1},
                          rows_in=kept + 1, inputs={"x": 1})


def _tables(n=2):
    return {"problems": pa.table({"id": [str(i) for i in range(n)]}),
            "dropped": pa.table({"reason": ["malformed"]})}


def test_resolve_store_prefers_flag_then_env(monkeypatch):
    monkeypatch.setenv("KLEAR_STORE", "/tmp/envstore")
    assert resolve_store("/x") == "/x"
    assert resolve_store(None) == "/tmp/envstore"
    monkeypatch.delenv("KLEAR_STORE")
    assert resolve_store(None) == "./klear-store"


def test_write_publish_and_query(tmp_path):
    store = Store(str(tmp_path / "s"))
    v = store.write_version(_version(), _tables())
    assert v.created and v.tables == ["dropped", "problems"]
    assert store.publish(v.id) is True
    con = duckdb.connect(store.catalog_path, read_only=True)
    assert con.execute("select count(*) from problems").fetchone() == (2,)
    assert con.execute("select rows_in, rows_kept, rows_dropped, counts->>'malformed' from datasets").fetchone() == (3, 2, 1, "1")
    con.close()
    assert (tmp_path / "s" / "datasets" / v.id / "problems.parquet").exists()


def test_writing_an_existing_version_changes_nothing(tmp_path):
    store = Store(str(tmp_path))
    v1 = store.write_version(_version(), _tables())
    store.publish(v1.id)
    mtime = (tmp_path / "datasets" / v1.id / "problems.parquet").stat().st_mtime_ns
    v2 = store.write_version(_version(kept=99), _tables(99))  # same id: the stored one wins
    assert v2.created == v1.created and v2.counts == v1.counts
    assert store.publish(v1.id) is False
    assert (tmp_path / "datasets" / v1.id / "problems.parquet").stat().st_mtime_ns == mtime
    assert len(store.catalog.datasets()) == 1


def test_publish_switches_views_to_latest(tmp_path):
    store = Store(str(tmp_path))
    a = store.write_version(_version("ds-a"), _tables(2))
    b = store.write_version(_version("ds-b", kept=5), _tables(5))
    store.publish(a.id)
    store.publish(b.id)
    assert store.current_version() == "ds-b"
    assert store.catalog.query("select count(*) from problems") == [(5,)]


def test_parquet_is_zstd(tmp_path):
    import pyarrow.parquet as pq

    store = Store(str(tmp_path))
    v = store.write_version(_version(), _tables())
    meta = pq.read_metadata(store.table_url(v.id, "problems"))
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_hash_json_is_order_independent():
    assert hash_json({"a": 1, "b": [1, 2]}) == hash_json({"b": [1, 2], "a": 1})


def test_store_of_a_data_argument(tmp_path):
    from storage.store import store_of

    (tmp_path / "s").mkdir()
    f = tmp_path / "rows.jsonl"
    f.write_text("{}\n")
    assert store_of(str(tmp_path / "s")) == str(tmp_path / "s")
    assert store_of(f"{tmp_path}/s#ds-0123") == f"{tmp_path}/s"
    assert store_of(str(f)) is None


def test_current_version_of_a_store_without_a_catalog_creates_nothing(tmp_path):
    store = Store(str(tmp_path / "s"))
    assert store.current_version() is None
    assert not (tmp_path / "s").exists()
    v = store.write_version(_version(), _tables())
    store.publish(v.id)
    (tmp_path / "s" / "catalog.duckdb").unlink()  # the users' snapshot is gone, the record still knows
    assert store.current_version() == v.id


def _typed_tables():
    return {"problems": pa.table({"id": ["a", "b"], "date": ["2024-12-31", "2025-03-01"],
                                  "tests": ['{"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}', None],
                                  "meta": ['{"origin": "x"}', '{"origin": "y"}']}),
            "dropped": pa.table({"reason": ["malformed"]}),
            "verifications": pa.table({"problem_id": ["a"], "details": ['{"first_failure": null}'],
                                       "created": ["2026-12-05T00:21:22+00:00"]})}


def test_views_show_dates_times_and_json_typed(tmp_path):
    """`date >= '2025-01-01'` and `tests->>'fn_name'` work without casts (storage/catalog.VIEW_TYPES)."""
    store = Store(str(tmp_path))
    v = store.write_version(_version(), _typed_tables())
    store.publish(v.id)
    con = duckdb.connect(store.catalog_path, read_only=True)
    types = dict(con.execute("select column_name, data_type from information_schema.columns "
                             "where table_name in ('problems', 'verifications')").fetchall())
    assert (types["date"], types["tests"], types["meta"], types["details"], types["created"]) == (
        "DATE", "JSON", "JSON", "JSON", "TIMESTAMP")
    assert con.execute("select id from problems where date >= '2025-01-01'").fetchall() == [("b",)]
    assert con.execute("select tests->>'fn_name', meta->>'origin' from problems where id = 'a'").fetchall() == [("add", "x")]
    assert con.execute("select year(created) from verifications").fetchall() == [(2026,)]
    con.close()


def test_a_catalog_with_text_views_is_retyped_on_its_next_open(tmp_path):
    """A catalog written before the views were typed: its views show text until the next open, which
    re-creates them (the schema hash includes the view rules)."""
    from storage.catalog import record_dir

    store = Store(str(tmp_path))
    v = store.write_version(_version(), _typed_tables())
    store.publish(v.id)
    rec = record_dir(store.catalog_path)
    con = duckdb.connect(str(rec / "record.duckdb"))
    url = con.execute("select url from current_views where name = 'problems'").fetchone()[0]
    con.execute(f"create or replace view problems as select * from read_parquet('{url}')")  # as before
    con.close()
    (rec / "schema").write_text("an earlier version's schema hash")
    assert Store(str(tmp_path)).catalog.query("select typeof(date) from problems limit 1") == [("DATE",)]
