"""Warm sandbox pools: one per Dask worker, one per `klear verify` run whose workers are threads of
this process, or one per process off Dask; created on first use.

A worker's pool has one container per worker thread. `SandboxPlugin(pool_config)` starts warming it
as the worker starts (in a background thread, so the containers come up while the cluster is still
starting) and closes it at worker teardown. The workers of a threads-only LocalCluster share their
run's pool instead (`owner=` the run), which verify_rows starts warming before Dask is even imported.
If a worker is killed outright, its containers still go: each runner exits when its attach socket
closes and the container removes itself (auto_remove); the reaper catches anything left.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading

from sandbox.config import PoolConfig
from sandbox.pool import SandboxPool

log = logging.getLogger(__name__)

_pools: dict[tuple[str | None, str], SandboxPool] = {}  # (worker id or None, pool config key) -> pool
_lock = threading.Lock()


def _current_worker():
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def get_pool(config: PoolConfig, worker=None, owner: str | None = None) -> SandboxPool:
    """The started pool for `config`: with `owner`, this process's pool of that name (sized by config);
    else this Dask worker's own (sized to its threads); else this process's."""
    if owner is None:
        worker = worker if worker is not None else _current_worker()
        if worker is not None:
            config = dataclasses.replace(config, size=worker.state.nthreads)
            owner = worker.id
    key = (owner, config.key())
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = SandboxPool(config)
    pool.start()  # idempotent; outside the lock so other pools are not held up by a slow start
    return pool


def close_pools(owner: str | None = None) -> None:
    """Close every pool of this process, or only those of one owner (a worker's id, a run's name)."""
    with _lock:
        keys = [k for k in _pools if owner is None or k[0] == owner]
        pools = [_pools.pop(k) for k in keys]
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
    """Warms the worker's pool for `pool` as the worker starts; closes its pools when the worker closes.

    Registering a plugin again under the same name (every `klear verify` against a long-lived cluster
    does) tears the old instance down on a running worker: the pools stay then, warm and possibly in use
    by another client's tasks. Only a closing worker closes them.
    """

    name = "klear-sandbox"

    def __init__(self, pool: PoolConfig | None = None, resource: str | None = None):
        self.pool = pool
        self.resource = resource  # warm only on workers advertising this resource (the ones that get tasks)
        self._warming: dict[str, threading.Thread] = {}

    def setup(self, worker) -> None:
        if self.pool is None:
            return
        if self.resource and (worker.state.total_resources or {}).get(self.resource, 0) < 1:
            return

        def warm():
            try:
                get_pool(self.pool, worker)
            except Exception as exc:  # the first task starts the pool again and reports the fault
                log.warning("warming the sandbox pool: %s", exc)

        thread = threading.Thread(target=warm, name="klear-sandbox-warm", daemon=True)
        self._warming[worker.id] = thread
        thread.start()

    async def teardown(self, worker) -> None:
        status = getattr(getattr(worker, "status", None), "name", "closed")
        if status in ("running", "paused"):
            return

        def close():
            thread = self._warming.pop(worker.id, None)
            if thread is not None:
                thread.join(timeout=60)  # a pool still starting must not be registered after the close
            close_pools(worker.id)

        # In a thread: workers sharing one event loop (threads-only LocalCluster) close theirs together.
        await asyncio.get_running_loop().run_in_executor(None, close)
