"""exit_with_parent: a worker process that ends when the process that started it is gone.

A worker started with the spawn context (a grading pool's math-verify worker, an evaluation shard) outlives
a parent that ends without closing it — SIGKILL, the out-of-memory killer, torchrun stopping a rank, the RL
step watchdog's exit — and then waits on its queue for good, holding memory (and its resource tracker).
The rule: at start-up the worker remembers its parent's pid; a daemon thread checks every `poll_s` seconds
whether its parent is still that pid (a dead parent's children are handed to another process: init or a
subreaper) and ends the worker at once when not. Linux's parent-death signal is not used: it fires when the
*thread* that started the worker ends, and pools start workers from whichever thread submits first.
"""
from __future__ import annotations

import os
import threading
import time

POLL_S = 1.0  # an orphan lives at most this long: cheap (one getppid a second) and prompt enough


def exit_with_parent(parent_pid: int, poll_s: float = POLL_S) -> None:
    """Call first thing in a worker (or pass as a pool's initializer with initargs=(os.getpid(),))."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
