import pytest


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
