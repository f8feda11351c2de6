import pytest

from sandbox import PoolConfig, SandboxPool
from sandbox.container import OWNER_LABEL, owner_id
from sandbox.reaper import labelled


@pytest.fixture(scope="module")
def docker_client():
    """A Docker client whose engine answers, or a skip saying how to get one."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine ({type(exc).__name__}); run scripts/ensure-docker.sh")
    return client


@pytest.fixture(scope="module")
def pool(docker_client):
    """One warm container for the whole module, so consecutive jobs really share it (modules with
    other needs define their own `pool`)."""
    pool = SandboxPool(PoolConfig(size=1), client=docker_client).start()
    yield pool
    pool.close()
    assert [c for c in labelled(docker_client) if c.labels.get(OWNER_LABEL) == owner_id()] == []
