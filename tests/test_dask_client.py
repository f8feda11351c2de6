"""dask_client.connect: a port nobody listens on is refused at once, naming host and port; a live scheduler
gives a working client. dask_cluster, the set-up curation and verification share: the run's own cluster
closes with it, a named scheduler stays up."""
import socket

import pytest

from tasks.dask_client import DaskError, connect, dask_cluster, refusal


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


@pytest.mark.parametrize("form", ["tcp://127.0.0.1:{port}", "127.0.0.1:{port}", "tls://127.0.0.1:{port}"])
def test_a_refused_port_is_named_without_waiting_for_the_timeout(form):
    port = _closed_port()
    with pytest.raises(OSError, match=f"^connection refused by 127.0.0.1:{port}$"):
        connect(form.format(port=port), timeout="30s")  # Dask's own error after the timeout says "Timed out"


def test_a_live_scheduler_gives_a_client():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with connect(cluster.scheduler_address) as client:
            assert client.submit(sum, [1, 2]).result() == 3


@pytest.mark.parametrize("address", ["inproc://10.0.0.1/1234/1", "tcp://127.0.0.1", "127.0.0.1:abc",
                                     "tcp://127.0.0.1:99999"])
def test_an_address_without_a_usable_tcp_port_is_left_to_dask(address):
    assert refusal(address) is None


def test_a_local_cluster_lives_as_long_as_the_run():
    with dask_cluster(None, 2, processes=False) as (client, cluster):
        assert len(client.scheduler_info()["workers"]) == 2 and client.submit(sum, [1, 2]).result() == 3
    assert client.status == "closed" and cluster.status.name == "closed"


def test_a_named_scheduler_outlives_the_run_and_a_refused_one_names_the_flag():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as theirs:
        with dask_cluster(theirs.scheduler_address, 4) as (client, cluster):
            assert cluster is None and client.submit(sum, [1, 2]).result() == 3
        assert client.status == "closed" and theirs.status.name == "running"
    port = _closed_port()
    with pytest.raises(DaskError, match=rf"^--dask 127.0.0.1:{port}: cannot reach the scheduler "
                                        rf"\(connection refused by 127.0.0.1:{port}\)$"):
        with dask_cluster(f"127.0.0.1:{port}", 2):
            pass
