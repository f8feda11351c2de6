import os
import tempfile

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# one Prefect home for the session (never the user's): the klear subprocesses the tests start run an ephemeral
# server on it, and only the first has to create and migrate its database (≈ 10 s a run otherwise). Each test
# process (`make test` runs two, pytest-xdist) imports this module, so each has its own home and store; in one
# process tests run one at a time and results are cached per store, so sharing it changes no outcome; the
# tests that need a fresh home (the telemetry notice, two curations racing) still make their own.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="klear-test-prefect-home-")
# a process of the suite (and each command it starts) that dies by a fatal signal prints every thread's stack
os.environ.setdefault("PYTHONFAULTHANDLER", "1")
# training on a file records its checkpoint in the default store: keep that out of the checkout
os.environ.setdefault("KLEAR_STORE", tempfile.mkdtemp(prefix="klear-test-store-"))
# torch's thread count on CPU is every usable CPU by default (tasks/cpu_threads.py); with several test processes
# each takes its share instead (and the commands it starts inherit it), or they would wait on each other's
# cores. Importing the package first also sets OpenMP's waiting before any test module imports torch.
from tasks.cpu_threads import usable_cpus  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER_COUNT") and not any(
        os.environ.get(v) for v in ("KLEAR_TORCH_THREADS", "OMP_NUM_THREADS")):
    os.environ["KLEAR_TORCH_THREADS"] = str(max(1, usable_cpus() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """One real, temporary Prefect server (SQLite) for the whole session: starting it costs 9–15 s."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield


@pytest.fixture
def session_api(prefect_server) -> dict[str, str]:
    """The environment for a `klear` subprocess to run its flows on the session's server instead of starting
    a temporary one (6–15 s a command). Tests of the temporary server itself (tests/flows/test_faults_cli.py,
    tests/test_process_lifetime.py) and of concurrent commands each with its own do without."""
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_API_URL": PREFECT_API_URL.value()}


def pytest_collection_modifyitems(config, items):
    """With several test processes (`make test`: pytest-xdist), the tests that declare a longer timeout than
    the default start first, so no process is left running one long test alone at the end (the routed
    deployment test alone is ≈ 5 min). Stable: every other test keeps its place."""
    if not getattr(config.option, "numprocesses", None):
        return
    default = float(config.getini("timeout"))

    def declared(item) -> float:
        mark = item.get_closest_marker("timeout")
        return float(mark.args[0]) if mark and mark.args else default

    items.sort(key=lambda item: -declared(item))
