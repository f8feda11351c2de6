"""Pool lifecycle on real containers: recycling after N jobs, and the reaper for crashed clients."""
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from sandbox import PoolConfig, SandboxPool, reap
from sandbox.config import ContainerConfig
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


def tagged_pool(client, **kw) -> tuple[SandboxPool, str]:
    """A pool whose containers carry a label of their own, so a test sees exactly its containers."""
    tag = uuid.uuid4().hex
    return SandboxPool(PoolConfig(container=ContainerConfig(labels={"klear.test": tag}), **kw), client=client), tag


def listed(client, tag: str) -> list:
    return [x for x in labelled(client) if x.labels.get("klear.test") == tag]


def test_close_returns_after_recycled_and_replacement_containers_are_gone(client):
    """close() waits for a retired container still being removed in the background and for its
    replacement being started: when it returns, the engine lists none of the pool's containers."""
    pool, tag = tagged_pool(client, size=1, recycle_after=1)
    with pool:
        pool.run(JOB, 30)  # retires the container (removed in a background thread) and starts another
    assert listed(client, tag) == []


def test_close_waits_for_a_container_started_by_another_thread(client):
    """A run() in another thread may be starting a container (its _acquire found the pool short) when
    close() is called: close() returns only after that container is removed too."""
    pool, tag = tagged_pool(client, size=1)
    pool.image = ensure_image(client=client)
    worker = threading.Thread(target=pool._spawn)  # what _acquire does in the caller's thread
    worker.start()
    deadline = time.monotonic() + 10
    while pool._pending == 0 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    pool.close()
    assert listed(client, tag) == []
    worker.join(60)
    assert listed(client, tag) == [] and not pool._members


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


SLOW_JOB = {"op": "run", "mode": "stdio", "code": "import time\ntime.sleep(3)", "tests": [{"stdin": ""}]}


def test_a_job_that_faults_in_every_fresh_container_is_the_programs_and_scored(client):
    """No runner answers the job in time in any of its fresh containers while the engine answers:
    a fault that repeats is the program's (ProgramFault, verdict timeout), not sandbox_error."""
    from sandbox.pool import ProgramFault

    with SandboxPool(PoolConfig(size=1, retries=1), client=client) as pool:
        with pytest.raises(ProgramFault) as info:
            pool.run(SLOW_JOB, 0.5)
        assert info.value.verdict == "timeout" and [f.kind for f in info.value.faults] == ["no_answer"] * 2
        assert pool.run(JOB, 30)["results"][0]["exit"] == 0  # the pool still serves the next job


def test_a_repeated_fault_while_the_engine_is_gone_stays_unscored(client, monkeypatch):
    from sandbox import SandboxUnavailable
    from sandbox import pool as pool_module

    with SandboxPool(PoolConfig(size=1, retries=1, engine_wait_s=0.1), client=client) as pool:
        monkeypatch.setattr(pool_module, "wait_for_engine", lambda *_: False)
        with pytest.raises(SandboxUnavailable):
            pool.run(SLOW_JOB, 0.5)


def test_program_fault_verdicts_follow_what_was_seen():
    from sandbox.container import SandboxFault
    from sandbox.pool import ProgramFault

    def fault(*kinds):
        return ProgramFault([SandboxFault("x", k) for k in kinds]).verdict

    assert fault("no_answer", "no_answer") == "timeout"
    assert fault("broken", "oom") == "memory_limit"
    assert fault("no_answer", "broken") == "runtime_error"
    assert fault("setup", "setup") == "runtime_error"


def test_verify_submission_scores_a_program_fault_and_leaves_an_unavailable_sandbox_unscored():
    from types import SimpleNamespace

    from sandbox import SandboxUnavailable, verify_submission
    from sandbox.container import SandboxFault
    from sandbox.pool import ProgramFault

    row = {"id": "r", "code": "print(1)", "tests": {"inputs": ["", ""], "outputs": ["1", "1"]}}

    def pool_raising(exc):
        def run(job, timeout):
            raise exc
        return SimpleNamespace(run=run, config=PoolConfig())

    scored = verify_submission(row, pool_raising(ProgramFault([SandboxFault("x", "oom")] * 2)))
    assert (scored["verdict"], scored["reward"], scored["total"]) == ("memory_limit", 0.0, 2)
    unscored = verify_submission(row, pool_raising(SandboxUnavailable("engine gone")))
    assert (unscored["verdict"], unscored["reward"]) == ("sandbox_error", None)
