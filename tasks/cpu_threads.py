"""How many torch threads a training or generation loop should use: the CPUs other processes leave free.

torch's intra-op threads meet at the end of every parallel region; on a core that another process holds,
the thread that is not scheduled makes the others spin until it is, so two threads on two cores shared
with busy processes run several times slower than one. The rule, rechecked every `interval_s`:

    threads = clamp(floor(cpus - others + 0.25), 1, cpus)

with `cpus` the CPUs this process may run on (sched_getaffinity) and `others` the CPU-seconds per second
that everything but this process used since the last check (/proc/stat busy time minus this process's
own CPU time). The 0.25 lets a core that others use only a little still count as free.

The count can change results: torch's CPU kernels split some sums across their threads (a weight's gradient
sums over every token of the micro-batch, a norm's over the batch), so another count adds in another order.
At tests/training/test_sft.py's small shapes 1 and 2 threads train the same weights; at the demo's (8 × 256
tokens a step) the gradients differ in the last bits and SFT's 1,858 steps carry that into other weights
(docs/benchmarks.md). So a run's figures depend on the threads the machine's load gave it. `OMP_NUM_THREADS`
or `KLEAR_TORCH_THREADS` set by the user pins the count and turns the rule off: the way to a run that repeats.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PIN_VARS = ("KLEAR_TORCH_THREADS", "OMP_NUM_THREADS")


def threads_for(cpus: int, others: float) -> int:
    """The rule above: CPUs left free by `others` CPU-seconds per second, at least 1, at most `cpus`."""
    return max(1, min(cpus, math.floor(cpus - others + 0.25)))


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pinned_threads() -> int | None:
    """The thread count the user pinned through the environment, or None."""
    for var in PIN_VARS:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def system_busy_seconds() -> float | None:
    """CPU-seconds all processes have spent busy since boot (/proc/stat; None where there is none)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # guest time is already in user


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class ThreadGovernor:
    """Call once per step: sets torch's thread count by the rule above, at most every `interval_s`;
    returns the count in use."""

    interval_s: float = 5.0
    probe_s: float = 0.2  # the first look, before the first step: others' load over this long
    set_threads: Callable[[int], None] | None = None  # torch.set_num_threads unless given
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    system_busy: Callable[[], float | None] = system_busy_seconds
    own_cpu: Callable[[], float] = own_cpu_seconds
    cpus: int = field(default_factory=usable_cpus)
    threads: int = 0
    _last: tuple[float, float | None, float] | None = None

    def __post_init__(self) -> None:
        if self.set_threads is None:
            import torch  # only where a loop runs: the CLI's start-up does not load torch

            self.set_threads = torch.set_num_threads
        pinned = pinned_threads()
        self.pinned = pinned is not None
        self._apply(pinned or self.cpus)
        self._last = (self.clock(), self.system_busy(), self.own_cpu())
        if not self.pinned and self.probe_s > 0:
            self.sleep(self.probe_s)
            self._check()

    def _apply(self, n: int) -> None:
        if n != self.threads:
            self.set_threads(n)
            self.threads = n

    def __call__(self) -> int:
        if self.pinned:
            return self.threads
        if self.clock() - self._last[0] >= self.interval_s:
            self._check()
        return self.threads

    def _check(self) -> None:
        now = self.clock()
        t0, busy0, own0 = self._last
        if now <= t0:
            return
        busy, own = self.system_busy(), self.own_cpu()
        self._last = (now, busy, own)
        if busy is None or busy0 is None:
            return
        others = max(0.0, (busy - busy0) - (own - own0)) / (now - t0)
        self._apply(threads_for(self.cpus, others))
