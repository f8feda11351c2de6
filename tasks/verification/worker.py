"""One sandbox pool per process, created on first use and closed when the process (or Dask worker) ends.

On a Dask worker the pool has one container per worker thread; `SandboxPlugin` closes it at worker
teardown. If a worker is killed outright, its containers still go: each runner exits when its attach
socket closes, and the container removes itself (auto_remove); the reaper catches anything left.
"""
from __future__ import annotations

import dataclasses
import logging
import threading

from sandbox.config import PoolConfig
from sandbox.pool import SandboxPool

log = logging.getLogger(__name__)

_pools: dict[str, SandboxPool] = {}
_lock = threading.Lock()


def _worker_threads() -> int | None:
    try:
        from distributed import get_worker

        return get_worker().state.nthreads
    except (ImportError, ValueError, AttributeError):
        return None


def get_pool(config: PoolConfig) -> SandboxPool:
    """This process's pool for `config` (sized to the Dask worker's threads when on a worker)."""
    threads = _worker_threads()
    if threads:
        config = dataclasses.replace(config, size=threads)
    key = config.key()
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = SandboxPool(config)
    pool.start()  # idempotent; outside the lock so other pools are not held up by a slow start
    return pool


def close_pools() -> None:
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception as exc:
            log.warning("closing sandbox pool: %s", exc)


try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - dask is a dependency; this keeps the module importable without it
    WorkerPlugin = object


class SandboxPlugin(WorkerPlugin):
    """Closes the worker's sandbox pools when the worker shuts down.

    Registering a plugin again under the same name (every `klear verify` against a long-lived cluster
    does) tears the old instance down on a running worker: the pools stay then, warm and possibly in use
    by another client's tasks. Only a closing worker closes them.
    """

    name = "klear-sandbox"

    def teardown(self, worker) -> None:
        status = getattr(getattr(worker, "status", None), "name", "closed")
        if status not in ("running", "paused"):
            close_pools()
