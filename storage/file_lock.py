"""A bounded-wait advisory file lock (flock) between the processes and threads of one host.

    with file_lock(path, exclusive=True, timeout_s=120):   # else LockTimeout naming `path`
        ...

Rules:
- Exclusive for writers, shared for readers: many shared holders at once, or one exclusive holder.
- Every call opens its own descriptor of the lock file (created if missing), so two threads of one
  process exclude each other exactly like two processes do.
- The kernel drops the lock when the descriptor closes, including when its holder exits or is killed:
  a crashed writer never leaves the lock held.
- The wait is bounded: non-blocking attempts, 5 ms apart doubling up to 100 ms, for at most `timeout_s`;
  then LockTimeout naming the file.
- A thread asking again for a lock it already holds gets LockReentry at once instead of waiting for
  itself forever.
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

FIRST_RETRY_S = 0.005
MAX_RETRY_S = 0.1

_held = threading.local()


class LockTimeout(TimeoutError):
    """Another holder kept the lock longer than the caller agreed to wait."""


class LockReentry(RuntimeError):
    """This thread already holds the lock it asks for."""


def _held_by_this_thread() -> set[str]:
    if not hasattr(_held, "paths"):
        _held.paths = set()
    return _held.paths


def _acquire(fd: int, mode: int, path: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = FIRST_RETRY_S
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{path}: still locked by another holder after {timeout_s:.0f}s") from None
            time.sleep(delay)
            delay = min(2 * delay, MAX_RETRY_S)


@contextmanager
def file_lock(path: str, exclusive: bool, timeout_s: float) -> Iterator[None]:
    """Hold `path` locked (exclusive or shared) for the block; see the module rules."""
    key = os.path.realpath(path)
    held = _held_by_this_thread()
    if key in held:
        raise LockReentry(f"{path}: this thread already holds this lock (nested use would wait for itself)")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, path, timeout_s)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        os.close(fd)  # releases the lock
