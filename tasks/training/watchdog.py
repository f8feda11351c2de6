"""StepWatchdog: end this process when one step of a multi-process run outlasts a time limit.

A rank of a torchrun job can wait without failing: in a collective a partner never enters (an engine group
whose partner skipped a generate call, a rank stuck in a library's own process group, a hung GPU), until a
process-group timeout ends it, if one does. Meanwhile the job holds its GPUs. The watchdog turns that wait
into an exit: when one armed phase (a step, an evaluation, a checkpoint) runs past `seconds`, it writes one
line naming the rank, the phase and the limit, then every thread's stack (where the rank waits), and ends
the process with status 1; torchrun then stops the other ranks and the launcher reports the failure.

Two timers fire, because a process can be stuck in C code that holds the interpreter lock, where no Python
thread runs: a Python timer thread (the line, the stacks, `os._exit(1)`) at `seconds`, and faulthandler's
own thread, which needs no lock, `backstop_s` later (its "Timeout" header, the stacks, exit 1).
Re-arming (the next step) restarts both; `disarm` stops both.

The rank that runs out of time first is usually one waiting on the culprit, not the culprit itself; so while
armed, a SIGTERM (what torchrun sends the other ranks once one has failed) also writes every thread's stack
before the process ends as it would have, and each rank says where it was.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading

BACKSTOP_S = 30.0  # the Python thread gets this long to write its line before faulthandler ends the process


class StepWatchdog:
    """`arm(label)` at the start of each phase, `disarm()` when the run is done. `seconds` 0: off."""

    def __init__(self, seconds: float, rank: int, backstop_s: float = BACKSTOP_S):
        self.seconds = float(seconds)
        self.backstop_s = backstop_s
        self.rank = rank
        self._timer: threading.Timer | None = None

    def arm(self, label: str) -> None:
        self.disarm()
        if self.seconds <= 0:
            return
        self._timer = threading.Timer(self.seconds, self._expire, args=(label,))
        self._timer.daemon = True
        self._timer.start()
        faulthandler.dump_traceback_later(self.seconds + self.backstop_s, exit=True, file=sys.stderr)
        faulthandler.register(signal.SIGTERM, file=sys.stderr, all_threads=True, chain=True)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            faulthandler.cancel_dump_traceback_later()
            faulthandler.unregister(signal.SIGTERM)

    def _expire(self, label: str) -> None:
        sys.stderr.write(f"rank {self.rank}: {label} ran past {self.seconds:g} s (--step-timeout-s); ending "
                         "the run. Where each thread of this rank waits:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(1)
