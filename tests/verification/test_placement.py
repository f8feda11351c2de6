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
