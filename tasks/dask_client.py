"""Connecting to a Dask scheduler named by the user (`--dask ADDRESS`), shared by curation and verification."""
from __future__ import annotations

import socket
from urllib.parse import urlsplit


def refusal(address: str) -> str | None:
    """"connection refused by HOST:PORT" when `address` is a tcp address whose port refuses a connection
    (nothing listens there); None otherwise: it accepted, or the host did not answer in 2 s (no route, a
    firewall that drops packets), which is left to Dask's connect and its timeout."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme != "tcp" or not parts.hostname or not parts.port:
        return None
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except ConnectionRefusedError:
        return f"connection refused by {parts.hostname}:{parts.port}"
    except OSError:
        pass
    return None


def connect(address: str, timeout: str = "15s"):
    """A `distributed.Client` of the scheduler at `address`; OSError saying why when none answers: at once
    when the port refuses the connection (`refusal`; Dask's own connect would retry until `timeout`), else
    Dask's error after `timeout`."""
    from distributed import Client

    why = refusal(address)
    if why:
        raise OSError(why)
    return Client(address, timeout=timeout)
