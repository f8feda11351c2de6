"""One warm sandbox container: created with every isolation default, runner attached, one job at a time."""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time

from sandbox.channel import Channel, ChannelError
from sandbox.config import ContainerConfig
from sandbox.image import RUNNER_CMD

log = logging.getLogger(__name__)

LABEL = "klear.sandbox"  # every container we create carries LABEL=1 (the reaper's selector)
OWNER_LABEL = "klear.owner"  # host:pid:start-ticks of the creating process (the reaper's liveness test)
CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"
REMOVE_TIMEOUT_S = 30.0  # how long close() waits for a container to be gone: ≈ 0.1-0.3 s, seconds under load


class SandboxFault(Exception):
    """A fault of the engine, a container or the runner: retried on a fresh container. `kind` says what
    was seen: "start" (no container), "no_answer", "oom" (the container was OOM-killed), "broken" (the
    runner closed its stream, answered garbage or reported an error), "setup" (a test's setup failed)."""

    def __init__(self, message: str, kind: str = "start"):
        super().__init__(message)
        self.kind = kind


def process_start_ticks(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot; with the pid it names a process uniquely."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{process_start_ticks(os.getpid()) or 0}"


def create_args(image: str, config: ContainerConfig, uid: int, exec_tmp: bool = False) -> tuple[dict, dict]:
    """(create_container kwargs, create_host_config kwargs): the isolation policy in one place."""
    tmp_opts = (f"rw,{'exec' if exec_tmp else 'noexec'},nosuid,nodev,size={config.tmpfs_size // 1024}k,"
                f"nr_inodes={config.tmpfs_inodes},mode=1777")
    # /dev/shm as our own tmpfs (Docker then mounts none of its own there), so its inodes are bounded too
    shm_opts = f"rw,noexec,nosuid,nodev,size={config.shm_size // 1024}k,nr_inodes={config.shm_inodes},mode=1777"
    host = dict(
        network_mode=config.network,
        read_only=config.read_only_root,
        tmpfs={"/tmp": tmp_opts, "/dev/shm": shm_opts},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit=config.memory,
        memswap_limit=config.memory,  # equal to the memory limit: no swap
        pids_limit=config.pids,
        nano_cpus=int(config.cpus * 1e9),
        ipc_mode="private",
        sysctls={**config.ipc_sysctls(), **config.net_sysctls()},  # SysV IPC bounded, no TIME_WAIT sockets
        auto_remove=True,  # the runner exits when our attach socket closes (client crash): gone for good
        log_config={"type": "none", "config": {}},  # protocol traffic must not pile up in json logs
        init=False,  # the runner is PID 1: it reaps orphans and kill(-1) reaches every process
    )
    container = dict(
        image=image,
        command=RUNNER_CMD,
        user=f"{uid}:{uid}",
        stdin_open=True,  # with detach=False docker-py also sets StdinOnce: stdin closes when our
        detach=False,  #   attachment does (client gone), the runner sees EOF and exits, auto_remove cleans up
        tty=False,
        environment={"PATH": CHILD_PATH, "LANG": "C.UTF-8", "HOME": "/tmp"},  # nothing from the host
        labels={**config.labels, LABEL: "1", OWNER_LABEL: owner_id()},
        network_disabled=config.network == "none",
        hostname="sandbox",
        working_dir="/tmp",
        stop_signal="SIGKILL",  # PID 1 ignores SIGTERM and has nothing to save: `docker stop` (and an
        #   engine shutdown) would otherwise wait out the 10 s grace period per container
    )
    return container, host


class Container:
    def __init__(self, client, image: str, config: ContainerConfig, startup_s: float = 30.0,
                 exec_tmp: bool = False):
        self.client = client  # a docker.DockerClient
        self.image = image
        self.config = config
        self.exec_tmp = exec_tmp  # compiled (C++) programs run from /tmp
        self.startup_s = startup_s
        self.id: str | None = None
        self.channel: Channel | None = None
        self.jobs = 0
        self.hello: dict = {}
        self.uid = random.randrange(*config.uid_range)
        self._close_lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"sandbox {self.id[:12] if self.id else '?'}"

    def start(self) -> "Container":
        api = self.client.api
        kwargs, host = create_args(self.image, self.config, self.uid, self.exec_tmp)
        try:
            self.id = api.create_container(host_config=api.create_host_config(**host), **kwargs)["Id"]
            # Attach before start: nothing the runner writes can be missed or sit in an HTTP read buffer.
            sock = api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self.channel = Channel(sock, name=self.name)
            api.start(self.id)
            self.hello = self.channel.recv(self.startup_s)
        except Exception as exc:
            self.close()
            raise SandboxFault(f"could not start a sandbox container from {self.image}: {exc}") from exc
        if "hello" not in self.hello or not self.hello.get("sandboxed"):
            self.close()
            raise SandboxFault(f"{self.name}: unexpected greeting {self.hello!r}")
        return self

    def run(self, job: dict, timeout: float) -> dict:
        """Send a job, return the runner's response. Any failure to get one is a SandboxFault."""
        if self.channel is None:
            raise SandboxFault(f"{self.name} is not running")
        try:
            self.channel.send(job)
            resp = self.channel.recv(timeout)
        except ChannelError as exc:
            kind = "no_answer" if exc.timed_out else "oom" if self.oom_killed() else "broken"
            raise SandboxFault(str(exc), kind) from exc
        self.jobs += 1
        if not resp.get("ok"):
            raise SandboxFault(f"{self.name}: runner error: {resp.get('error')}", "broken")
        return resp

    def oom_killed(self) -> bool:
        """Whether the engine says the kernel's OOM killer ended this container (False when unsure)."""
        try:
            return bool(self.client.api.inspect_container(self.id)["State"].get("OOMKilled"))
        except Exception:
            return False

    def close(self, timeout: float = REMOVE_TIMEOUT_S) -> None:
        """Remove the container and return once the engine no longer lists it (within `timeout`).

        The removal is requested while our attach socket is still open: closing it first makes the
        runner exit, auto_remove starts its own removal, and ours is refused with 409 "already in
        progress" while the container is still listed. Whoever removes it, we wait until it is gone.
        Past `timeout`, or with the engine down, what is left is auto_remove's and the reaper's.
        Safe to call twice and from two threads (the second call waits for the first)."""
        with self._close_lock:
            cid, name = self.id, self.name
            self.id = None
            try:
                if cid is not None:
                    remove_and_wait(self.client.api, cid, timeout, name)
            finally:
                if self.channel is not None:
                    self.channel.close()
                    self.channel = None


def remove_and_wait(api, cid: str, timeout: float, name: str = "") -> bool:
    """Force-remove container `cid`; True once the engine reports it gone (404), False if it was still
    there after `timeout` s or the engine could not be asked."""
    from docker.errors import APIError, NotFound

    name = name or f"sandbox {cid[:12]}"
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            api.remove_container(cid, force=True)
            return True  # the engine answers once the container is gone
        except NotFound:
            return True
        except APIError as exc:  # 409: another removal (auto_remove, the reaper) is in progress
            log.debug("%s: remove: %s", name, exc)
        except Exception as exc:  # engine down or unreachable: the reaper's job
            log.debug("%s: remove: %s", name, exc)
            return False
        if time.monotonic() + delay > deadline:
            log.warning("%s: still listed %.0f s after removal was requested", name, timeout)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def wait_for_engine(client, timeout: float) -> bool:
    """Poll the engine until it answers (e.g. after a restart); False if it never did."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            return True
        except Exception:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
