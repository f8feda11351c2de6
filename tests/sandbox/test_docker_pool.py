"""Pool lifecycle on real containers: recycling after N jobs, and the reaper for crashed clients."""
import socket
import subprocess
import sys
import time

import pytest

from sandbox import PoolConfig, SandboxPool, reap
from sandbox.container import LABEL, OWNER_LABEL, owner_id
from sandbox.image import ensure_image
from sandbox.reaper import labelled, owner_alive

pytestmark = pytest.mark.docker

JOB = {"op": "run", "mode": "stdio", "code": "print(1)", "tests": [{"stdin": ""}]}


@pytest.fixture(scope="module")
def client():
    try:
        import docker

        c = docker.from_env(timeout=120)
        c.ping()
    except Exception:
        pytest.skip("no Docker engine")
    return c


def test_owner_alive():
    assert owner_alive(owner_id())
    assert not owner_alive(f"{socket.gethostname()}:999999:1")  # no such process
    assert not owner_alive("garbage")
    assert owner_alive("another-host:1:1")  # not ours to judge


def test_recycles_after_n_jobs(client):
    with SandboxPool(PoolConfig(size=1, recycle_after=2), client=client) as pool:
        first = next(iter(pool._members)).id
        pool.run(JOB, 30)
        pool.run(JOB, 30)  # second job: container retired
        deadline = time.monotonic() + 30
        while not pool._members and time.monotonic() < deadline:
            time.sleep(0.05)
        pool.run(JOB, 30)
        assert next(iter(pool._members)).id != first
        assert pool.stats["recycled"] == 1 and pool.stats["jobs"] == 3


def test_reaper_removes_containers_of_dead_clients(client):
    tag = ensure_image(client=client)
    # A client that starts a container and is SIGKILLed can leave nothing behind (auto_remove), so fake
    # the worst case: a running labelled container whose owner process is gone.
    c = client.containers.run(tag, ["/usr/bin/sleep", "60"], detach=True, network_mode="none",
                              labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:999999:1"})
    alive = client.containers.run(tag, ["/usr/bin/sleep", "60"], detach=True, network_mode="none",
                                  labels={LABEL: "1", OWNER_LABEL: owner_id()})
    try:
        removed = reap(client)
        assert c.id in removed and alive.id not in removed
        assert alive.id in {x.id for x in labelled(client)}
    finally:
        for x in (c, alive):
            try:
                x.remove(force=True)
            except Exception:
                pass


def test_killed_client_leaves_no_container(client):
    code = ("import time, sys\nfrom sandbox import SandboxPool, PoolConfig\n"
            "p = SandboxPool(PoolConfig(size=2)).start()\nprint(p._members and 'ready', flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    try:
        assert proc.stdout.readline().strip() == "ready"
        owner = f":{proc.pid}:"
        assert len([x for x in labelled(client) if owner in x.labels[OWNER_LABEL]]) == 2
    finally:
        proc.kill()  # SIGKILL: no atexit, no finalizer
        proc.wait()
    deadline = time.monotonic() + 15
    while [x for x in labelled(client) if owner in x.labels[OWNER_LABEL]] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [x for x in labelled(client) if owner in x.labels[OWNER_LABEL]] == []
