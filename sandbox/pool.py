"""A pool of warm sandbox containers: one job at a time per container, faults retried elsewhere.

    with SandboxPool(PoolConfig(size=2)) as pool:
        response = pool.run(job, timeout=60)     # the runner's raw response; see runner.py

A container goes back to the pool after a clean job and is replaced (in the background) after
`recycle_after` jobs or any fault: a runner that did not answer, answered garbage, or could not clean
up. A fault is retried on another container, after waiting for the engine if it stopped answering (a
restarted daemon kills every container; the idle ones are then checked and replaced too). When
`retries` are exhausted, run() raises ProgramFault if the job itself brought down at least two fresh
containers while the engine kept answering (a fault that repeats is the program's: callers score it),
else SandboxUnavailable (callers report sandbox_error).
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

from sandbox.config import PoolConfig
from sandbox.container import REMOVE_TIMEOUT_S, Container, SandboxFault, wait_for_engine
from sandbox.image import ensure_image
from sandbox.reaper import reap

log = logging.getLogger(__name__)


class SandboxUnavailable(Exception):
    """A job could not be run after every retry: report it as sandbox_error, never as a verdict."""


class ProgramFault(Exception):
    """The job faulted in every fresh container that ran it (two or more), with the engine up: the
    program's doing, so it is scored. `verdict`: memory_limit if a container was OOM-killed, timeout if
    no runner ever answered, else runtime_error."""

    def __init__(self, faults: list[SandboxFault]):
        super().__init__(f"the job brought down {len(faults)} fresh containers: {faults[-1]}")
        self.faults = faults
        kinds = {f.kind for f in faults}
        self.verdict = ("memory_limit" if "oom" in kinds else "timeout" if kinds == {"no_answer"}
                        else "runtime_error")


def check_response(resp: dict) -> None:
    """Raise SandboxFault for a response that reports a failure of the sandbox, not of the program."""
    for raw in [resp.get("compile") or {}] + resp.get("results", []):
        if raw.get("setup_failed"):
            why = (raw.get("report") or {}).get("setup_error") or raw.get("stderr") or "no detail"
            raise SandboxFault(f"test setup failed: {why}", "setup")


def _close_all(containers) -> None:
    for c in list(containers):
        c.close()


class SandboxPool:
    def __init__(self, config: PoolConfig | None = None, client=None):
        self.config = config or PoolConfig()
        self._client = client
        self.image: str | None = None
        self._idle: queue.Queue[Container] = queue.Queue()
        self._members: set[Container] = set()  # every live container, idle or busy
        self._pending = 0  # containers being started
        self._removing = 0  # discarded containers being removed in the background
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when _pending or _removing drops
        self._start_lock = threading.Lock()
        self._closed = False
        self._started = False
        self._spawner = ThreadPoolExecutor(max_workers=min(4, max(1, self.config.size)),
                                           thread_name_prefix="sandbox-spawn")
        self.stats = collections.Counter()
        # Containers die with their attach socket anyway; this removes them promptly at exit.
        self._finalizer = weakref.finalize(self, _close_all, self._members)

    # ---------------------------------------------------------------------------------- lifecycle
    @property
    def client(self):
        if self._client is None:
            import docker

            self._client = docker.from_env(timeout=120)
        return self._client

    def start(self) -> "SandboxPool":
        """Build the image if needed, reap orphans, and warm `size` containers in parallel."""
        with self._start_lock:
            if self._started:
                return self
            self.image = ensure_image(self.config.image, self.client)
            reap(self.client)
            futures = [self._spawner.submit(self._spawn) for _ in range(self.config.size)]
            errors = [f.exception() for f in futures]
            if all(errors):
                self.close()
                raise SandboxUnavailable(f"no sandbox container could start: {errors[0]}")
            self._started = True
        return self

    def close(self, timeout: float = REMOVE_TIMEOUT_S + 30) -> None:
        """Remove every container of the pool; return once the engine no longer lists any of them.

        That includes containers being started (by the spawner or by an _acquire in another thread,
        which removes what it started once it sees the pool closed) and discarded ones being removed in
        the background. Bounded by `timeout` (and each removal by REMOVE_TIMEOUT_S): what is still
        there then is logged and left to auto_remove and the reaper."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True
            members = list(self._members)
            self._members.clear()
        self._spawner.shutdown(wait=False, cancel_futures=True)  # running starts are waited for below
        with ThreadPoolExecutor(max_workers=8) as ex:  # removal is ≈ 0.1-0.3 s each: do them together
            list(ex.map(lambda c: c.close(), members))
        with self._settled:
            if not self._settled.wait_for(lambda: self._pending == 0 and self._removing == 0,
                                          timeout=max(0.0, deadline - time.monotonic())):
                log.warning("sandbox pool closed with %d container(s) still starting and %d being removed",
                            self._pending, self._removing)

    def __enter__(self) -> "SandboxPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------------------------- members
    def _spawn(self) -> None:
        with self._lock:
            if self._closed or len(self._members) + self._pending >= self.config.size:
                return
            self._pending += 1
        try:  # pending until it is a member or removed, so close() can wait for it
            exec_tmp = self.config.container.tmpfs_exec
            if exec_tmp is None:
                exec_tmp = self.config.image.cpp
            c = Container(self.client, self.image, self.config.container, self.config.startup_s, exec_tmp).start()
            with self._lock:
                keep = not self._closed
                if keep:
                    self._members.add(c)
            if not keep:
                c.close()
                return
        finally:
            with self._settled:
                self._pending -= 1
                self._settled.notify_all()
        self.stats["started"] += 1
        self._idle.put(c)

    def _spawn_in_background(self) -> None:
        def spawn():
            try:
                self._spawn()
            except Exception as exc:  # the next acquire retries synchronously and reports it
                log.warning("sandbox replacement failed: %s", exc)
        try:
            self._spawner.submit(spawn)
        except RuntimeError:  # pool closed
            pass

    def _discard(self, c: Container) -> None:
        """Drop a member; it is removed in the background (close() waits for that) and replaced."""
        with self._lock:
            self._members.discard(c)
            self._removing += 1
        self.stats["recycled"] += 1
        threading.Thread(target=self._remove, args=(c,), daemon=True).start()
        self._spawn_in_background()

    def _remove(self, c: Container) -> None:
        try:
            c.close()
        finally:
            with self._settled:
                self._removing -= 1
                self._settled.notify_all()

    def _acquire(self, wait_s: float) -> Container:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                pass
            if self._closed:
                raise SandboxFault("pool is closed")
            with self._lock:
                short = len(self._members) + self._pending < self.config.size
            if short:
                self._spawn()  # in this thread, so an engine failure surfaces here
            if time.monotonic() > deadline:
                raise SandboxFault(f"no sandbox container free within {wait_s:.0f}s")

    def _release(self, c: Container, healthy: bool) -> None:
        if healthy and not self._closed and c.jobs < self.config.recycle_after:
            self._idle.put(c)
        else:
            self._discard(c)

    def _after_fault(self) -> None:
        """Wait for the engine, then drop idle containers that no longer answer a ping."""
        if not wait_for_engine(self.client, self.config.engine_wait_s):
            return
        idle = []
        while True:
            try:
                idle.append(self._idle.get_nowait())
            except queue.Empty:
                break
        for c in idle:
            try:
                c.run({"op": "ping"}, timeout=2.0)
                c.jobs -= 1  # a ping is not a job
                self._idle.put(c)
            except SandboxFault:
                self._discard(c)

    # ---------------------------------------------------------------------------------------- run
    def run(self, job: dict, timeout: float) -> dict:
        """Run one job on some container; raises SandboxUnavailable once retries are exhausted."""
        if not self._started:
            self.start()
        last: Exception | None = None
        job_faults: list[SandboxFault] = []  # faults after the job was sent, each in a fresh container
        for attempt in range(1, self.config.retries + 2):
            try:
                c = self._acquire(self.config.startup_s + self.config.engine_wait_s)
            except SandboxFault as exc:
                last = exc
                self.stats["faults"] += 1
                self._after_fault()
                continue
            try:
                resp = c.run(job, timeout)
                check_response(resp)
            except SandboxFault as exc:
                last = exc
                job_faults.append(exc)
                self.stats["faults"] += 1
                log.warning("sandbox fault (attempt %d): %s", attempt, exc)
                self._discard(c)
                self._after_fault()
                continue
            self.stats["jobs"] += 1
            self._release(c, healthy=bool(resp.get("clean")))
            resp["attempts"] = attempt
            return resp
        if len(job_faults) >= 2 and wait_for_engine(self.client, self.config.engine_wait_s):
            raise ProgramFault(job_faults)
        raise SandboxUnavailable(f"{last} (after {self.config.retries + 1} attempts)")
