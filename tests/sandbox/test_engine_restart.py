"""The Docker engine restarted mid-run: every row still gets one result, and no row is scored on a fault.

Uses a private dockerd that this test starts and restarts (its own socket, data root, exec root and
bridge, no iptables), so the shared engine is never touched. Needs root, dockerd and `ip`.
Not `--bridge=none`: a daemon started that way deletes the host's docker0, breaking the shared engine.
"""
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sandbox.reaper import labelled
from tests.polling import gone_within
from tasks.verification import VerifyConfig, verify_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SOCK = "/run/klear-test-docker.sock"
BRIDGE = "kltest0"  # the private engine's own bridge (its containers use network none anyway)
DATA = Path.home() / ".cache" / "klear" / "test-dockerd"  # kept: the imported image is reused next run


class PrivateDockerd:
    def __init__(self, log: Path):
        self.log = log
        self.proc = None

    def start(self):
        args = ["dockerd", "--data-root", str(DATA), "--exec-root", "/run/klear-test-docker",
                "--pidfile", "/run/klear-test-docker.pid", "-H", f"unix://{SOCK}", f"--bridge={BRIDGE}",
                "--iptables=false", "--ip-masq=false", "--ip6tables=false"]
        self.proc = subprocess.Popen(args, stdout=open(self.log, "a"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        import docker

        for _ in range(240):
            try:
                client = docker.DockerClient(base_url=f"unix://{SOCK}", timeout=300)
                client.ping()
                return client
            except Exception:
                time.sleep(0.25)
        raise RuntimeError(f"private dockerd did not start; see {self.log}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # what `systemctl restart docker` does
            self.proc.wait(timeout=60)


@pytest.fixture
def dockerd(tmp_path, monkeypatch):
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("needs root, dockerd and ip to run a private engine")
    made = not Path(f"/sys/class/net/{BRIDGE}").exists()
    if made:
        for cmd in (["ip", "link", "add", "name", BRIDGE, "type", "bridge"],
                    ["ip", "addr", "add", "10.213.0.1/24", "dev", BRIDGE], ["ip", "link", "set", BRIDGE, "up"]):
            subprocess.run(cmd, check=True)
    d = PrivateDockerd(tmp_path / "dockerd.log")
    try:
        client = d.start()
        monkeypatch.setenv("DOCKER_HOST", f"unix://{SOCK}")
        yield d, client
    finally:
        d.stop()
        if made:
            subprocess.run(["ip", "link", "del", BRIDGE])


def test_engine_restart_mid_run(dockerd):
    d, client = dockerd
    from sandbox.image import ensure_image

    ensure_image(client=client)  # into the private engine (from the cached rootfs: seconds)
    rows = [{"id": i, "code": f"import time\ntime.sleep(0.25)\nprint({i})",
             "tests": {"inputs": [""], "outputs": [f"{i}\n"]}} for i in range(30)]
    restarted = threading.Event()

    def restart():
        d.stop()
        d.start()
        restarted.set()

    def progress(done, total):
        if done >= 6 and not restarted.is_set() and not getattr(progress, "fired", False):
            progress.fired = True
            threading.Thread(target=restart).start()

    class OnUpdate:  # a tasks.progress.Progress
        def update(self, done, total, tokens=0, **figures):
            progress(done, total)

    out = verify_rows(rows, VerifyConfig(executor="threads", workers=2), progress=OnUpdate())
    assert restarted.wait(60)
    assert [r["id"] for r in out] == list(range(30))
    assert [r["verdict"] for r in out] == ["accepted"] * 30, [r["details"] for r in out if r["verdict"] != "accepted"]
    assert max(r["details"]["attempts"] for r in out) >= 2  # some jobs really were cut off and re-run
    assert gone_within(lambda: labelled(client), 30) == []  # the restart's dead containers go on their own
