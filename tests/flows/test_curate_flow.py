"""The curate flow under a real (temporary) Prefect server: results, catalog, artifacts, caching."""
import duckdb
import pytest

from tests.curation.fixtures import expected, write_corpus

pytestmark = pytest.mark.slow


def _config(files, store):
    from tasks.curation.config import CurateConfig

    return CurateConfig(sources=[{"name": "a", "path": str(files["a"])}, {"name": "b", "path": str(files["b"])}],
                        benchmarks={"bench": str(files["bench"])}, store=str(store))


def test_flow_writes_catalog_and_second_run_changes_nothing(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client

    from flows.curate import curate

    files = write_corpus(tmp_path / "in")
    store = tmp_path / "store"
    v1 = curate(_config(files, store))
    exp = expected()
    assert v1["rows_in"] == len(exp)
    assert v1["counts"]["kept"] == sum(v == "kept" for v in exp.values())

    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    reasons = dict(con.execute("select reason, count(*) from dropped group by 1").fetchall())
    kept = con.execute("select count(*) from problems").fetchone()[0]
    con.close()
    assert kept + sum(reasons.values()) == len(exp)
    assert reasons["contaminated"] == 2 and reasons["malformed"] == 5

    snapshot = {p: p.stat().st_mtime_ns for p in (store / "datasets").rglob("*")}
    catalog_mtime = (store / "catalog.duckdb").stat().st_mtime_ns
    v2 = curate(_config(files, store))
    assert v2 == v1
    assert {p: p.stat().st_mtime_ns for p in (store / "datasets").rglob("*")} == snapshot
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    assert con.execute("select count(*) from datasets").fetchone()[0] == 1
    con.close()
    del catalog_mtime  # DuckDB may touch the file on open; the rows are what must not change

    import asyncio

    async def artifacts():
        async with get_client() as client:
            return await client.read_artifacts()

    keys = {a.key for a in asyncio.run(artifacts())}
    assert {"curation-counts", "curation-report"} <= keys


def test_changed_parameter_makes_a_new_version(prefect_server, tmp_path):
    from flows.curate import curate

    files = write_corpus(tmp_path / "in")
    store = tmp_path / "store"
    v1 = curate(_config(files, store))
    cfg = _config(files, store)
    cfg.ngram = 12
    v2 = curate(cfg)
    assert v2["id"] != v1["id"]
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    assert con.execute("select count(*) from datasets").fetchone()[0] == 2
    con.close()
