"""`klear curate` as a user runs it, while the user queries the store's catalog: a read-only DuckDB session
held open in another process, and two curate runs into the same store at once. Both runs succeed, the
session keeps its snapshot, a new session sees both versions."""
import os
import subprocess
import sys

import pytest

from storage.store import Store
from tests.curation.fixtures import write_corpus
from tests.storage.processes import ROOT, Session, fresh_session

pytestmark = pytest.mark.slow


def _start_curate(files: dict, store: str, ngram: int, home: str) -> subprocess.Popen:
    env = {**os.environ, "PREFECT_HOME": home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)  # each run starts its own temporary server
    args = ["curate", "--source", f"a={files['a']}", "--source", f"b={files['b']}",
            "--benchmark", f"bench={files['bench']}", "--store", store, "--ngram", str(ngram)]
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_curate_runs_into_one_store_succeed_while_a_session_is_open(tmp_path):
    files = write_corpus(tmp_path / "in")
    store = Store(str(tmp_path / "store"))
    assert store.catalog.query("select count(*) from datasets") == [(0,)]  # the catalog the user opens
    user = Session(store.catalog_path, read_only=True)

    runs = [_start_curate(files, store.root, ngram, str(tmp_path / f"ph{ngram}")) for ngram in (12, 13)]
    outputs = [r.communicate(timeout=900) for r in runs]
    for r, (out, err) in zip(runs, outputs):
        assert r.returncode == 0 and "Traceback" not in err, err
        assert "TOTAL" in out

    assert user.ask("select count(*) from datasets") == [(0,)]  # the open session's snapshot
    rows = fresh_session(store.catalog_path, "select parameters->>'ngram' from datasets order by 1")
    assert rows == [("12",), ("13",)]
    assert fresh_session(store.catalog_path, "select count(*) > 0 from problems") == [(True,)]
    assert user.finish() == (0, "")
