"""Remove sandbox containers left behind by a client that died without cleaning up.

Containers normally remove themselves (auto_remove; the runner exits when its client's attach socket
closes). This catches the rest: every container labelled klear.sandbox=1 whose owner process (recorded
in the klear.owner label as host:pid:start-ticks) is gone from this host, or that is no longer running.
"""
from __future__ import annotations

import logging
import socket

from sandbox.container import LABEL, OWNER_LABEL, process_start_ticks, remove_and_wait

log = logging.getLogger(__name__)


def owner_alive(owner: str | None) -> bool:
    """True unless the label names a process on this host that no longer exists."""
    try:
        host, pid, ticks = (owner or "").rsplit(":", 2)
        pid = int(pid)
    except ValueError:
        return False  # unreadable owner: nobody can claim it
    if host != socket.gethostname():
        return True  # another host's client: not ours to judge
    return process_start_ticks(pid) == ticks


def labelled(client, attempts: int = 5) -> list:
    """Labelled containers. The SDK inspects each listed container; one auto-removed by another client in
    between raises NotFound, so the listing is simply taken again."""
    from docker.errors import NotFound

    for i in range(attempts):
        try:
            return client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
        except NotFound:
            if i == attempts - 1:
                raise
    return []


def reap(client=None, everything: bool = False, timeout: float = 10.0) -> list[str]:
    """Remove orphaned (or, with everything=True, all) sandbox containers; return the ids of those gone
    on return (each removal waits at most `timeout` s)."""
    if client is None:
        import docker

        client = docker.from_env()
    removed = []
    for c in labelled(client):
        orphan = not owner_alive(c.labels.get(OWNER_LABEL)) or c.status in ("exited", "dead")
        if everything or orphan:  # waits out a removal already in progress (auto_remove): gone on return
            if remove_and_wait(client.api, c.id, timeout, f"reap {c.short_id}"):
                removed.append(c.id)
    if removed:
        log.info("reaped %d sandbox container(s)", len(removed))
    return removed
