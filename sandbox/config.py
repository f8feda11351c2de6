"""Typed configuration for the sandbox: per-test limits, container isolation, pool and judging.

Every default carries its reason. All sizes are in bytes unless the name says otherwise.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sandbox.image import ImageConfig

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Per-test limits, enforced inside the container by the runner on each forked test process."""

    time_limit_s: float = 4.0  # CPU seconds per test: typical judges give 1-2 s for C++; Python needs more
    wall_factor: float = 2.0  # wall deadline = max(factor * time, time + 1): a loaded host stretches wall time
    memory: int = 1024 * MiB  # RLIMIT_AS per test: what competitive-programming judges allow (256 MiB-1 GiB)
    nproc: int = 64  # RLIMIT_NPROC: enough for multiprocessing, too few for a fork bomb to matter
    file_size: int = 16 * MiB  # RLIMIT_FSIZE: largest file a program may write under /tmp
    nofile: int = 1024  # RLIMIT_NOFILE: a normal shell default
    output: int = 1 * MiB  # stdout (and stderr) cap per test; above it the verdict is output_limit
    max_timeouts: int = 2  # after this many timed-out tests the rest are skipped: bounds a stuck submission
    compile_time_s: float = 30.0  # g++ wall deadline (C++ rows only)
    compile_memory: int = 2048 * MiB  # g++ address space (template-heavy code needs more than a run)

    def wall_s(self, time_limit_s: float | None = None) -> float:
        t = time_limit_s or self.time_limit_s
        return max(t * self.wall_factor, t + 1.0)

    def to_runner(self, time_limit_s: float | None = None) -> dict:
        """The `limits` object of a runner request (see LIMIT_DEFAULTS in runner.py)."""
        t = time_limit_s or self.time_limit_s
        return {"cpu_s": t, "wall_s": self.wall_s(t), "memory_bytes": self.memory, "nproc": self.nproc,
                "fsize_bytes": self.file_size, "nofile": self.nofile, "output_bytes": self.output,
                "max_timeouts": self.max_timeouts, "compile_wall_s": self.compile_time_s,
                "compile_memory_bytes": self.compile_memory}


@dataclass(frozen=True)
class ContainerConfig:
    """Isolation of one warm container. Defaults are the strict ones; loosen knowingly."""

    network: str = "none"  # no interface but loopback: no internet, no Docker host, no metadata service
    read_only_root: bool = True  # the image cannot be modified; only the tmpfs mounts are writable
    tmpfs_size: int = 64 * MiB  # /tmp cap: room for scratch files, not for filling the host's memory
    tmpfs_exec: bool | None = None  # None: exec allowed on /tmp only for the g++ image (binaries run there)
    shm_size: int = 16 * MiB  # /dev/shm cap (multiprocessing semaphores need a little)
    tmpfs_inodes: int = 16384  # files + dirs on /tmp: a program's 170,000 empty dirs took the runner 4-5 s
    #   to wipe, past the host's deadline; 16k is plenty for scratch files and wipes in well under a second
    shm_inodes: int = 4096  # the same bound for /dev/shm
    memory: int = 1536 * MiB  # memory+swap of the whole container (no swap): a test's 1 GiB plus tmpfs, shm
    #   and the runner; catches what RLIMIT_AS cannot (many processes each under it). Raise with Limits.memory
    ipc_memory: int = 64 * MiB  # SysV shared memory in all (kernel.shmall/shmmax of the container's own IPC
    #   namespace): unattached segments belong to no process, so the OOM killer could not find them in
    #   any program and would kill the runner instead; bounded, they cannot fill the container
    ipc_objects: int = 256  # SysV segments, message queues (each ≤ 64 KiB) and semaphore sets, each
    pids: int = 128  # pids cgroup limit: turns a fork bomb into EAGAIN (the runner then kills everything)
    cpus: float = 1.0  # CPU quota: one test runs at a time, so one core; threads cannot starve neighbours
    uid_range: tuple[int, int] = (20000, 60000)  # a random non-root uid per container, so RLIMIT_NPROC
    #   (counted per uid across the host) never lets one container's fork bomb block another's
    labels: dict = field(default_factory=dict)  # extra labels; `klear.sandbox=1` + owner are always set

    def net_sysctls(self) -> dict[str, str]:
        """The container's own network namespace: no TIME_WAIT state (tcp_max_tw_buckets 0 closes a socket at
        once instead of keeping it 60 s), so a closed connection's port numbers, which a program chooses and
        /proc/net/tcp shows, cannot carry one job's data to the next (the runner also checks no socket is
        left after each test). None with network "host", whose namespace is not the container's to set."""
        return {} if self.network == "host" else {"net.ipv4.tcp_max_tw_buckets": "0"}

    def ipc_sysctls(self) -> dict[str, str]:
        """The container's SysV IPC limits (namespaced sysctls Docker sets at creation)."""
        return {"kernel.shmmax": str(self.ipc_memory), "kernel.shmall": str(self.ipc_memory // 4096),
                "kernel.shmmni": str(self.ipc_objects), "kernel.msgmni": str(self.ipc_objects),
                "kernel.msgmnb": str(64 * 1024), "kernel.sem": f"250 32000 32 {self.ipc_objects}"}


@dataclass(frozen=True)
class PoolConfig:
    """A pool of warm containers, one job at a time each."""

    size: int = 2  # containers = parallel jobs; one per core is the sweet spot (each gets 1 CPU)
    recycle_after: int = 500  # jobs per container before a fresh one: a backstop, since the runner already
    #   kills every process and wipes /tmp after each test (start-up ≈ 0.3 s, so < 1 ms per job)
    retries: int = 2  # re-runs of a job after an infrastructure fault before it is reported sandbox_error
    engine_wait_s: float = 60.0  # how long a fault waits for the Docker engine to answer again (restarts)
    startup_s: float = 30.0  # a new container must say hello within this
    job_slack_s: float = 10.0  # host-side deadline = the runner's own worst case + this
    image: ImageConfig = field(default_factory=ImageConfig)
    container: ContainerConfig = field(default_factory=ContainerConfig)

    def key(self) -> str:
        """Stable identity of a pool configuration (one pool per process per key)."""
        import hashlib
        import json

        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JudgeConfig:
    """How submissions are turned into runner jobs and verdicts."""

    max_tests: int = 16  # tests per submission, sampled when there are more (the paper's RL reward)
    seed: int = 0  # sampling seed; combined with the row id, so a row always gets the same tests
    float_tolerance: float | None = None  # None: LiveCodeBench's exact Decimal rule; e.g. 1e-6 to tolerate
    unwrap_outputs: bool = False  # call-based: also accept value == expected[0] (APPS/TACO wrap outputs)
    max_time_limit_s: float = 60.0  # a row's time_limit above this is a bad row, not a 16-minute job
    output_chars: int = 0  # > 0: each test's entry in details also carries the program's `output` (stdout
    #   text, or a call's returned value as the runner encoded it) when it fits in this many characters
    #   (else None), so the host can compare two programs on inputs with no expected output (mutant scoring,
    #   tasks/verification/strength.py); 0: verdicts only, as judging needs, and no bulk in the results
    limits: Limits = field(default_factory=Limits)
