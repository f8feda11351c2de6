"""How many torch threads a training or generation loop on CPU uses, and how they wait.

The count is part of a run's arithmetic: torch's CPU kernels split some sums across their threads (a
weight's gradient sums over every token of the micro-batch, a norm's over the batch), so another count adds
in another order. At the demo's shapes (8 × 256 tokens a step) 1 and 2 threads give gradients that differ in
the last bits, and SFT's 1,858 steps carry that into other weights and another held-out figure. So the count
is chosen from the machine, never from its load, and a run repeats on its machine whatever else runs there:

- default: a fixed count, the CPUs this process may use (its affinity, capped by a cgroup CPU quota);
- `KLEAR_TORCH_THREADS=N` (or `OMP_NUM_THREADS=N`): N;
- `KLEAR_TORCH_THREADS=auto`: the count follows the load, for speed on busy cores at the cost of
  repeatability. torch's intra-op threads meet at the end of every parallel region; on a core that another
  process holds, the thread that is not scheduled makes the others wait until it is. The rule, rechecked
  every `interval_s`:

      threads = clamp(floor(cpus - others + 0.25), 1, cpus)

  with `cpus` as above and `others` the CPU-seconds per second that everything but this process used since
  the last check (/proc/stat busy time minus this process's own CPU time). The 0.25 lets a core that others
  use only a little still count as free.

How the threads wait: at the end of each parallel region a thread that is done waits for the others.
GNU OpenMP (the runtime of torch's Linux wheels) spins GOMP_SPINCOUNT pause-loop turns before it sleeps:
300,000 by default (about 3 ms; libgomp counts ~100,000 a millisecond), which on busy cores burns the CPU the
late thread needs; 0 with OMP_WAIT_POLICY=PASSIVE, which makes every wake-up a futex call, and a CPU step of
the demo's tiny model runs thousands of short regions. So the package sets a brief spin (`BRIEF_SPIN` turns,
about 0.1 ms) unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT; OpenMP reads it once, when torch is
first imported, so it is set when the package is imported (tasks/__init__.py). How long a thread waits never
changes what it computes. bench/threads.py measures the policies side by side (docs/benchmarks.md).
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PIN_VARS = ("KLEAR_TORCH_THREADS", "OMP_NUM_THREADS")
FOLLOW_LOAD = "auto"  # KLEAR_TORCH_THREADS's value for the load-following count


WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # a user's choice of how OpenMP threads wait
BRIEF_SPIN = 10_000  # GNU OpenMP pause-loop turns before a waiting thread sleeps (module docstring): on 2
#   cores at the demo's SFT shapes as fast idle as OpenMP's own 300,000, and on busy cores far from its
#   slowdown (bench/threads.py; docs/benchmarks.md, 2026-12-06)


def brief_spin() -> None:
    """Set GOMP_SPINCOUNT to BRIEF_SPIN in this process's environment unless a variable of WAIT_VARS is set."""
    if not any(var in os.environ for var in WAIT_VARS):
        os.environ["GOMP_SPINCOUNT"] = str(BRIEF_SPIN)


def threads_for(cpus: int, others: float) -> int:
    """The rule above: CPUs left free by `others` CPU-seconds per second, at least 1, at most `cpus`."""
    return max(1, min(cpus, math.floor(cpus - others + 0.25)))


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_quota(root: Path = CGROUP_ROOT, own: str | None = None) -> float | None:
    """The CPUs a cgroup quota gives this process (quota / period: a container's `--cpus`, a pod's CPU
    limit), or None when there is none or no cgroup files. cgroup v2: `cpu.max` ("QUOTA PERIOD", or "max
    PERIOD") of the process's own group (`own`: the `0::PATH` line of /proc/self/cgroup) and of each group
    above it up to `root`; the smallest quota holds. v1: cpu.cfs_quota_us (-1: none) over
    cpu.cfs_period_us at the hierarchy's root (a container's own, where it has a namespace)."""
    if own is None:
        try:
            own = next((line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                        if line.startswith("0::")), "")
        except OSError:
            own = ""
    group, quotas, v2 = root / own.strip("/"), [], False
    while True:
        try:
            quota, period = (group / "cpu.max").read_text().split()[:2]
            v2 = True
            if quota != "max" and int(period) > 0:
                quotas.append(int(quota) / int(period))
        except (OSError, ValueError):
            pass
        if group == root or root not in group.parents:
            break
        group = group.parent
    if v2:
        return min(quotas, default=None)
    for hierarchy in ("cpu", "cpu,cpuacct"):
        try:
            quota = int((root / hierarchy / "cpu.cfs_quota_us").read_text())
            period = int((root / hierarchy / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return quota / period if quota > 0 and period > 0 else None
    return None


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity mask (else os.cpu_count()), capped by a cgroup CPU quota
    rounded down (at least 1): threads beyond a quota are throttled for the rest of each period, and the
    others wait for them at the next barrier."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return cpus if quota is None else max(1, min(cpus, math.floor(quota)))


def pinned_threads() -> int | None:
    """The thread count the user pinned through the environment, or None. A KLEAR_TORCH_THREADS that is
    neither a count nor "auto" is a ValueError naming it (OMP_NUM_THREADS is OpenMP's: one it cannot use
    is left to it)."""
    for var in PIN_VARS:
        value = os.environ.get(var, "").strip()
        if value.isdecimal() and value.isascii() and int(value) > 0:
            return int(value)
        if var == PIN_VARS[0] and value and value.lower() != FOLLOW_LOAD:
            raise ValueError(f"{var}={value!r}: give a thread count (1, 2, ...) or {FOLLOW_LOAD}")
    return None


def follows_load() -> bool:
    """Whether the user asked for the load-following count (KLEAR_TORCH_THREADS=auto)."""
    return os.environ.get(PIN_VARS[0], "").strip().lower() == FOLLOW_LOAD


def thread_setting() -> int | str:
    """What a loop will use: the fixed count (pinned, else every usable CPU), or "auto"."""
    return FOLLOW_LOAD if follows_load() else pinned_threads() or usable_cpus()


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
    """Sets torch's thread count (the module's policy) when made; then call once per step: with
    KLEAR_TORCH_THREADS=auto it follows the load by the rule above, at most every `interval_s`; returns the
    count in use. `.setting` is what a run records: the fixed count, or "auto"."""

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
        self.follows_load = follows_load()
        self._apply(self.cpus if self.follows_load else pinned_threads() or self.cpus)
        self.setting: int | str = FOLLOW_LOAD if self.follows_load else self.threads
        self._last = (self.clock(), self.system_busy(), self.own_cpu())
        if self.follows_load and self.probe_s > 0:
            self.sleep(self.probe_s)
            self._check()

    @staticmethod
    def recorded(governor: "ThreadGovernor | None", on_cpu: bool) -> int | str | None:
        """What a run records as its `torch_threads`: the governor's setting; without one (a rank, which
        keeps torchrun's count) the count torch runs with on CPU; None on a GPU."""
        if governor is not None:
            return governor.setting
        if not on_cpu:
            return None
        import torch

        return torch.get_num_threads()

    def _apply(self, n: int) -> None:
        if n != self.threads:
            self.set_threads(n)
            self.threads = n

    def __call__(self) -> int:
        if not self.follows_load:
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
