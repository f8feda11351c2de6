"""Connecting to a Dask scheduler named by the user (`--dask ADDRESS`), shared by curation and verification."""
from __future__ import annotations

import socket
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
    from distributed import Client

    why = refusal(address)
    if why:
        raise OSError(why)
    return Client(address, timeout=timeout)
