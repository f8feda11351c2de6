"""The Dask set-up of curation's part runner and verification, one rule for both: a run either connects to
the scheduler the user names (`--dask ADDRESS`; the verify flow reads $KLEAR_DASK_ADDRESS) or starts a
LocalCluster of N workers, and `dask_cluster` closes what the run opened when it ends: the client always,
then the cluster when it started one (a named scheduler and its workers are not the run's to stop)."""
from __future__ import annotations

import logging
import socket
from contextlib import contextmanager
from typing import Iterable, Iterator
from urllib.parse import urlsplit


TCP_SCHEMES = ("tcp", "tls", "ws", "wss")  # Dask's comms over TCP: a refused port looks the same for each


def refusal(address: str) -> str | None:
    """"connection refused by HOST:PORT" when `address` (tcp://, tls://, ws://, wss:// or HOST:PORT) names a port
    that refuses a connection
    (nothing listens there); None otherwise: it accepted, or the host did not answer in 2 s (no route, a
    firewall that drops packets), which is left to Dask's connect and its timeout."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:  # not a port number: Dask's own connect says what is wrong with the address
        return None
    if parts.scheme not in TCP_SCHEMES or not parts.hostname or not port:
        return None
    try:
        socket.create_connection((parts.hostname, port), timeout=2).close()
    except ConnectionRefusedError:
        return f"connection refused by {parts.hostname}:{port}"
    except OSError:
        pass
    return None


def connect(address: str, timeout: str = "15s"):
    """A `distributed.Client` of the scheduler at `address`; OSError saying why when none answers: at once
    when the port refuses the connection (`refusal`; Dask's own connect would retry until `timeout`), else
    Dask's error after `timeout`."""
    from distributed import Client  # here, not at import: Dask's import is paid only by runs that use it

    why = refusal(address)
    if why:
        raise OSError(why)
    return Client(address, timeout=timeout)


class DaskError(RuntimeError):
    """No Dask scheduler answers at the address given; the message names the flag and says why."""


@contextmanager
def dask_cluster(address: str | None, workers: int, *, threads_per_worker: int = 1, processes: bool = True,
                 plugins: Iterable = (), timeout: str = "15s", flag: str = "--dask") -> Iterator[tuple]:
    """(client, cluster) for one run. With `address`: a client of that scheduler and cluster None, or
    DaskError `FLAG ADDRESS: cannot reach the scheduler (why)` (`connect`). Without: a LocalCluster of
    `workers` workers of `threads_per_worker` threads, as processes or as threads of this process, each
    worker with `plugins` (no dashboard: nobody is told its port). The module's lifetime rule on exit."""
    from distributed import Client, LocalCluster  # here, not at import: as in `connect`

    if address:
        try:
            client = connect(address, timeout=timeout)
        except Exception as exc:
            raise DaskError(f"{flag} {address}: cannot reach the scheduler ({exc})") from None
        with client:
            yield client, None
        return
    with LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker, processes=processes,
                      dashboard_address=None, silence_logs=logging.ERROR, plugins=set(plugins)) as cluster, \
            Client(cluster) as client:
        yield client, cluster
