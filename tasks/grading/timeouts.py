"""Hard timeouts for CPU-bound calls that may hang (sympy inside math-verify), usable off the main
thread and inside Dask workers, where signal-based timeouts (math-verify's own) do not work.

Calls run in a small pool of worker processes; a call that exceeds its deadline gets `TimedOut` and its
pool is killed and replaced (a hung sympy cannot be interrupted any other way). A new pool's start-up
(spawning Python, importing the called function's module and running its `warm_up()` if it has one) is
waited for apart from the call's deadline: on a loaded machine start-up alone can exceed a 5 s deadline,
and every call would then time out, kill the pool and respawn it. A worker ends by itself when this
process is gone (tasks/process_lifetime.py), however this process ended.
"""
from __future__ import annotations

import concurrent.futures as cf
import importlib
import multiprocessing as mp
import os
import threading
from typing import Any, Callable

from tasks.process_lifetime import exit_with_parent


class TimedOut(Exception):
    """The call did not finish within its deadline."""


def _import(module: str) -> None:
    warm_up = getattr(importlib.import_module(module), "warm_up", None)
    if callable(warm_up):
        warm_up()


def _terminate(pool: cf.ProcessPoolExecutor) -> None:
    for p in list(getattr(pool, "_processes", {}).values()):
        p.kill()
    pool.shutdown(wait=False, cancel_futures=True)


class ProcessTimeoutPool:
    def __init__(self, workers: int = 1, startup_timeout: float = 120.0):
        self.workers = workers
        self.startup_timeout = startup_timeout  # spawn + imports of a new pool; not part of any call's deadline
        self._lock = threading.Lock()
        self._pool: cf.ProcessPoolExecutor | None = None

    def _get(self, module: str | None = None) -> cf.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                              initializer=exit_with_parent, initargs=(os.getpid(),))
                if module:
                    try:
                        pool.submit(_import, module).result(timeout=self.startup_timeout)
                    except (cf.TimeoutError, cf.process.BrokenProcessPool):
                        _terminate(pool)
                        raise TimedOut(f"worker process did not start within {self.startup_timeout:.0f}s") from None
                self._pool = pool
            return self._pool

    def _kill(self, pool: cf.ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        _terminate(pool)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        module = getattr(fn, "__module__", None)
        pool = self._get(module)
        try:
            fut = pool.submit(fn, *args)
        except cf.process.BrokenProcessPool:
            self._kill(pool)
            pool = self._get(module)
            fut = pool.submit(fn, *args)
        try:
            return fut.result(timeout=timeout)
        except cf.TimeoutError:
            self._kill(pool)
            raise TimedOut(f"{getattr(fn, '__name__', fn)} exceeded {timeout:.1f}s") from None
        except cf.process.BrokenProcessPool:
            self._kill(pool)
            raise TimedOut(f"{getattr(fn, '__name__', fn)}: worker process died") from None

    def close(self) -> None:
        if self._pool is not None:
            self._kill(self._pool)
