"""Sandbox tasks on an existing Dask cluster go only to workers that advertise the `sandbox` resource."""
from tasks.verification.verify import sandbox_placement


def test_workers_with_the_sandbox_resource_take_the_tasks():
    info = {"workers": {"tcp://a": {"resources": {"sandbox": 1}}, "tcp://b": {"resources": {}},
                        "tcp://c": {"resources": {"sandbox": 2, "GPU": 1}}}}
    assert sandbox_placement(info) == ({"sandbox": 1}, 2)


def test_without_the_resource_any_worker_may_run_them():
    info = {"workers": {"tcp://a": {"resources": {}}, "tcp://b": {}, "tcp://c": {"resources": {"GPU": 1}}}}
    assert sandbox_placement(info) == (None, 3)
    assert sandbox_placement({"workers": {}}) == (None, 1)


def test_plugin_warms_only_workers_that_will_get_sandbox_tasks():
    """On a cluster whose workers advertise `sandbox`, the others start no containers (no Docker needed
    to check: the decision is taken before any pool exists)."""
    from types import SimpleNamespace

    from sandbox.config import PoolConfig
    from tasks.verification.worker import SandboxPlugin

    plugin = SandboxPlugin(PoolConfig(), resource="sandbox")
    plugin.setup(SimpleNamespace(id="gpu-worker", state=SimpleNamespace(total_resources={"GPU": 1})))
    plugin.setup(SimpleNamespace(id="plain-worker", state=SimpleNamespace(total_resources={})))
    assert plugin._warming == {}
