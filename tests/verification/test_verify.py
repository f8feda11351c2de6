"""verify_rows: order, exactly one result per row, bad rows; then real sandboxes on threads and Dask."""
import os
import signal
import time
from contextlib import contextmanager

import pytest

import sandbox.judge
import tasks.verification.verify as verify_mod
from sandbox.verdicts import result_row
from tasks.verification import VerifyConfig, verify_rows
from tests.polling import gone_within


class Updates:
    """A tasks.progress.Progress that hands each update's (done, total) to `fn`."""

    def __init__(self, fn):
        self.fn = fn

    def update(self, step, total, tokens=0, **figures):
        self.fn(step, total)


class FakePool:
    def __init__(self, config):
        self.config = config

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def test_threads_keep_order_and_isolate_judge_bugs(monkeypatch):
    def fake_verify(row, pool, judge):
        if row["id"] == "boom":
            raise RuntimeError("judge bug")
        time.sleep(0.01 * (row["id"] % 3))  # finish out of order
        return result_row(row["id"], "accepted", 1, 1, {})

    monkeypatch.setattr(verify_mod, "SandboxPool", FakePool)
    monkeypatch.setattr(sandbox.judge, "verify_submission", fake_verify)
    ok = {"code": "x", "tests": {"assert_code": "assert f(1) == 1"}}
    rows = [dict(ok, id=i) for i in range(20)] + [dict(ok, id="boom"), {"id": "no-tests", "code": "x"}]
    seen = []
    out = verify_rows(rows, VerifyConfig(executor="threads", workers=3), progress=Updates(lambda d, t: seen.append((d, t))))
    assert [r["id"] for r in out] == list(range(20)) + ["boom", "no-tests"]
    assert out[20]["verdict"] == "sandbox_error" and "judge bug" in out[20]["details"]["reason"]
    assert out[21]["verdict"] == "invalid_tests" and out[21]["reward"] is None
    assert seen[-1] == (22, 22) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_rows_the_reader_finds_odd_but_readable_are_judged(monkeypatch, tmp_path):
    """An id beyond 64 bits and a bare CR inside a line are rows like any other: each judged, and the
    results written to JSONL and Parquet (unreadable rows refuse the file: test_input_rules.py)."""
    from tasks.verification.io import read_rows, write_rows

    monkeypatch.setattr(verify_mod, "SandboxPool", FakePool)
    monkeypatch.setattr(sandbox.judge, "verify_submission",
                        lambda row, pool, judge: result_row(row["id"], "accepted", 1, 1, {}))
    ok = b'"code": "x", "tests": {"assert_code": "assert f(1) == 1"}}'
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([b'{"id": "a", ' + ok, b'{"id": 1' + b"0" * 30 + b", " + ok,
                                 b'{"id": "cr",\r ' + ok]) + b"\n")
    out = verify_rows(read_rows(str(path)), VerifyConfig(executor="threads", workers=1))
    assert [(r["id"], r["verdict"]) for r in out] == [("a", "accepted"), (10 ** 30, "accepted"), ("cr", "accepted")]
    write_rows(out, str(tmp_path / "out.parquet"))
    write_rows(out, str(tmp_path / "out.jsonl"))
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3


def test_worker_side_imports_stay_light():
    """A Dask worker unpickling verify_chunk imports tasks.verification.verify: not the file readers
    (pyarrow, fsspec) nor any model code, which would add to every worker's start-up."""
    import subprocess
    import sys

    code = ("import sys, tasks.verification.verify; "
            "print(sorted(m for m in ('pyarrow', 'fsspec', 'torch', 'transformers', 'prefect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_executor():
    with pytest.raises(ValueError, match="executor"):
        verify_rows([{"id": 1}], VerifyConfig(executor="nope"))


# ------------------------------------------------------------------------------------ real sandboxes
def _docker_ok():
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


def mixed_rows(n):
    rows = []
    for i in range(n):
        if i % 4 == 0:
            rows.append({"id": f"r{i}", "code": "def add(a, b):\n    return a + b",
                         "tests": {"assert_code": f"assert add({i}, 1) == {i + 1}"}})
        elif i % 4 == 1:
            rows.append({"id": f"r{i}", "code": "def add(a, b):\n    return a - b",
                         "tests": {"assert_code": f"assert add({i}, 1) == {i + 1}"}})
        elif i % 4 == 2:
            rows.append({"id": f"r{i}", "code": "print(int(input()) + 1)",
                         "tests": {"inputs": [f"{i}\n"], "outputs": [f"{i + 1}\n"]}})
        else:
            rows.append({"id": f"r{i}", "code": "def f(x):\n    return [x, x]",
                         "tests": {"fn_name": "f", "inputs": [[i]], "outputs": [[i, i]]}})
    return rows


def expected_verdict(i):
    return "wrong_answer" if i % 4 == 1 else "accepted"


@pytest.mark.docker
def test_threads_on_real_sandboxes():
    if not _docker_ok():
        pytest.skip("no Docker engine")
    out = verify_rows(mixed_rows(24), VerifyConfig(executor="threads", workers=2))
    assert [r["id"] for r in out] == [f"r{i}" for i in range(24)]
    assert [r["verdict"] for r in out] == [expected_verdict(i) for i in range(24)]


@pytest.mark.docker
def test_threads_local_cluster_gives_each_worker_a_container():
    """The default LocalCluster runs its workers as threads of this process, sharing the run's pool:
    two workers must still mean two containers, and none may outlive the run."""
    if not _docker_ok():
        pytest.skip("no Docker engine")
    import docker

    from sandbox.container import OWNER_LABEL, owner_id
    from sandbox.reaper import labelled

    client = docker.from_env()
    mine = lambda: [c for c in labelled(client) if c.labels.get(OWNER_LABEL) == owner_id()]  # noqa: E731
    seen = []
    rows = [dict(r, code="import time\ntime.sleep(0.05)\n" + r["code"]) for r in mixed_rows(24)]
    out = verify_rows(rows, VerifyConfig(workers=2), progress=Updates(lambda done, total: seen.append(len(mine()))))
    assert [r["verdict"] for r in out] == [expected_verdict(i) for i in range(24)]
    assert max(seen) == 2
    assert mine() == []  # verify_rows closed the run's pool, and close() returns once its containers are gone


@pytest.mark.docker
@pytest.mark.slow
def test_dask_worker_killed_mid_run_every_row_once():
    if not _docker_ok():
        pytest.skip("no Docker engine")
    rows = [dict(r, code="import time\ntime.sleep(0.1)\n" + r["code"]) for r in mixed_rows(60)]
    killed = []
    real_cluster = verify_mod._cluster

    @contextmanager
    def cluster(config, **kw):  # keep a handle on the client to find a worker's pid
        with real_cluster(config, **kw) as (client, local):
            killed.append(client)
            yield client, local

    def progress(done, total):
        if done >= 12 and len(killed) == 1:
            pids = killed[0].run(os.getpid)
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)  # a worker process this test's LocalCluster started
            killed.append(victim)

    verify_mod._cluster = cluster
    try:
        out = verify_rows(rows, VerifyConfig(workers=2, processes=True, chunk_size=4), progress=Updates(progress))
    finally:
        verify_mod._cluster = real_cluster
    assert len(killed) == 2, "the worker was not killed mid-run"
    assert [r["id"] for r in out] == [f"r{i}" for i in range(60)]  # every row, once, in order
    assert [r["verdict"] for r in out] == [expected_verdict(i) for i in range(60)]
    import docker

    from sandbox.container import OWNER_LABEL
    from sandbox.reaper import labelled

    # Asynchronous: the killed worker's containers remove themselves once their attach sockets close.
    client = docker.from_env()
    left = lambda: [c for c in labelled(client) if f":{killed[1]}:" in c.labels.get(OWNER_LABEL, "")]  # noqa: E731
    assert gone_within(left, 30) == []


@pytest.mark.docker
@pytest.mark.slow
def test_existing_scheduler_keeps_pools_warm_between_runs():
    if not _docker_ok():
        pytest.skip("no Docker engine")
    import docker
    from distributed import LocalCluster

    from sandbox.container import OWNER_LABEL
    from sandbox.reaper import labelled

    client = docker.from_env()
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        config = VerifyConfig(dask_address=cluster.scheduler_address)
        first = verify_rows(mixed_rows(8), config)
        pid = list(cluster.workers.values())[0].process.process.pid
        mine = lambda: {c.id for c in labelled(client) if f":{pid}:" in c.labels.get(OWNER_LABEL, "")}  # noqa: E731
        warm = mine()
        second = verify_rows(mixed_rows(8), config)  # registers the plugin again: must not close the pool
        assert len(warm) == 2 and mine() == warm
        assert [r["verdict"] for r in first] == [r["verdict"] for r in second] == [expected_verdict(i) for i in range(8)]
    # The worker closed: its pool went with it (closed at teardown, or auto_remove if the nanny killed it).
    assert gone_within(mine, 30) == set()
