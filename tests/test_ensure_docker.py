"""scripts/ensure-docker.sh, run twice at once (make starts one in the background while the venv installs):
the second waits for the first and then finds the engine it started, never for the engine's lifetime.
Docker, dockerd and pgrep are stand-ins on PATH: an engine that answers one second after it starts."""
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ensure-docker.sh"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not Path("/etc/debian_version").exists(),
                                reason="the script starts an engine only as root on Debian")


def _stand_ins(bin_dir: Path) -> None:
    bin_dir.mkdir()
    up = bin_dir / "up"
    for name, body in {"docker": f'[ -f "{up}" ]',                 # `docker info` answers once it is up
                       "dockerd": f'sleep 1; touch "{up}"; while [ -f "{up}" ]; do sleep 0.2; done',  # lives on
                       "pgrep": "exit 1"}.items():                 # no engine running yet
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)


def test_a_second_run_waits_for_the_first_and_finds_its_engine(tmp_path):
    _stand_ins(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "TMPDIR": str(tmp_path),
           "KLEAR_DOCKERD_LOG": str(tmp_path / "dockerd.log")}
    first = subprocess.Popen(["bash", str(SCRIPT)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        second = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=45)
        assert first.wait(timeout=45) == 0
        assert second.returncode == 0, second.stderr
    finally:
        first.kill()
        (tmp_path / "bin" / "up").unlink(missing_ok=True)  # the stand-in engine ends
