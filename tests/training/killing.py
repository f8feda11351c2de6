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
    def kill(proc) -> bool:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True

    return _kill_after_checkpoint([sys.executable, "-c", code], out, final_step, timeout_s, kill)


def _kill_after_checkpoint(cmd: list[str], out: Path, final_step: int, timeout_s: float, kill) -> int:
    """Run `cmd`; once a checkpoint before `final_step` exists, call `kill(proc)` (True when it killed)
    and return that step. Fails if the run ends first or no checkpoint comes within `timeout_s`; the
    process group never outlives the call."""
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ckpt = latest_checkpoint(out)
            if ckpt is not None and proc.poll() is None:
                step = int(ckpt.name.split("-")[1])
                if step < final_step and kill(proc):
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


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


def _rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def kill_rank_after_checkpoint(cmd: list[str], out: Path, final_step: int, rank: int = 1,
                               timeout_s: float = 420) -> int:
    """Run a torchrun command (it trains into `out`); as soon as a checkpoint before `final_step` exists,
    SIGKILL the process of `rank` only and let torchrun notice and stop the others (bounded wait, then
    the whole group is killed). Returns the checkpoint's step. Fails if the run ends first."""
    def kill(proc) -> bool:
        victims = [p for p in _descendants(proc.pid) if _rank_of(p) == rank]
        if not victims:
            return False
        os.kill(victims[0], signal.SIGKILL)
        try:
            proc.wait(timeout=120)  # torchrun tears the other ranks down and exits non-zero
        except subprocess.TimeoutExpired:
            pytest.fail("torchrun did not stop within 120 s after a rank was killed")
        assert proc.returncode != 0
        return True

    return _kill_after_checkpoint(cmd, out, final_step, timeout_s, kill)
