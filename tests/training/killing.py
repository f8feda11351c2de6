"""Run a trainer in a child process and SIGKILL it mid-run, once it has written a checkpoint."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.training.checkpoint import latest_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def kill_after_checkpoint(code: str, out: Path, final_step: int, timeout_s: float = 300) -> int:
    """Run `python -c code` (it trains into `out`), SIGKILL its process group as soon as a checkpoint
    before `final_step` exists; returns that checkpoint's step. Fails if the run ends first."""
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ckpt = latest_checkpoint(out)
            if ckpt is not None and proc.poll() is None:
                step = int(ckpt.name.split("-")[1])
                if step < final_step:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return step
            if proc.poll() is not None:
                pytest.fail(f"the run ended (exit {proc.returncode}) before it could be killed:\n"
                            f"{proc.stderr.read()[-3000:]}")
            time.sleep(0.02)
        pytest.fail(f"no checkpoint within {timeout_s} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
