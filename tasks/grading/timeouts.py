"""Hard timeouts for CPU-bound calls that may hang (sympy inside math-verify), usable off the main
thread and inside Dask workers, where signal-based timeouts (math-verify's own) do not work.

Calls run in a small pool of worker processes; a call that exceeds its deadline gets `TimedOut` and its
pool is killed and replaced (a hung sympy cannot be interrupted any other way).
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import threading
from typing import Any, Callable


class TimedOut(Exception):
    """The call did not finish within its deadline."""


class ProcessTimeoutPool:
    def __init__(self, workers: int = 1):
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: cf.ProcessPoolExecutor | None = None

    def _get(self) -> cf.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"))
            return self._pool

    def _kill(self, pool: cf.ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        for p in list(getattr(pool, "_processes", {}).values()):
            p.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        pool = self._get()
        try:
            fut = pool.submit(fn, *args)
        except cf.process.BrokenProcessPool:
            self._kill(pool)
            pool = self._get()
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
