"""Output-directory claims (storage/claims.py): one run at a time, stale claims taken over, one hostile
situation per test. Holders are real processes: a claim is about processes, not objects."""
import json
import os
import socket
import subprocess
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import pytest

from storage.claims import CLAIM_FILE, PARTIAL_GRACE_S, ClaimError, acquire, claim_dir, process_start, writable_dir

ROOT = Path(__file__).resolve().parents[2]


def _holder(directory: Path, command: str = "klear sft --out held"):
    """A separate process that claims `directory` and sleeps; returns it once the claim exists."""
    code = (f"import sys, time; from storage.claims import acquire; acquire({str(directory)!r}, {command!r}); "
            "print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _write_claim(directory: Path, **owner) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CLAIM_FILE
    path.write_text(json.dumps({"host": socket.gethostname(), "command": "klear sft", "since": "earlier", **owner}))
    return path


def test_a_live_holder_is_named_and_the_second_run_refused(tmp_path):
    proc = _holder(tmp_path / "out")
    try:
        with pytest.raises(ClaimError) as e:
            acquire(tmp_path / "out")
        assert f"pid {proc.pid} on {socket.gethostname()}" in str(e.value)
        assert "klear sft --out held" in str(e.value)
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_holder_on_this_host_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write_claim(tmp_path, pid=dead.pid, pid_start="1")
    assert acquire(tmp_path, "me") is True
    assert json.loads((tmp_path / CLAIM_FILE).read_text())["pid"] == os.getpid()


def test_a_reused_pid_is_stale(tmp_path):
    """The pid is alive but is another process now (its start time differs from the claim's)."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_start(other.pid) is not None
        _write_claim(tmp_path, pid=other.pid, pid_start="0")
        assert acquire(tmp_path) is True
    finally:
        other.kill()
        other.wait()


def test_a_claim_from_another_host_is_refused_with_the_file_to_remove(tmp_path):
    path = _write_claim(tmp_path, pid=1, host="elsewhere.example")
    with pytest.raises(ClaimError, match=f"on elsewhere.example .*remove {path}"):
        acquire(tmp_path)


def test_a_fresh_unreadable_claim_is_refused_and_an_old_one_taken_over(tmp_path):
    path = tmp_path / CLAIM_FILE
    path.write_text("")  # a writer killed between creating the file and filling it, or still writing
    with pytest.raises(ClaimError, match="being claimed by another run right now"):
        acquire(tmp_path)
    old = time.time() - PARTIAL_GRACE_S - 5
    os.utime(path, (old, old))
    assert acquire(tmp_path) is True


def test_nested_claims_in_one_process_share_it_and_the_outer_releases(tmp_path):
    with claim_dir(tmp_path):
        with claim_dir(tmp_path):
            pass
        assert (tmp_path / CLAIM_FILE).exists()  # the inner block did not release the outer's claim
    assert not (tmp_path / CLAIM_FILE).exists()


def test_a_child_process_shares_its_parents_claim(tmp_path):
    """torchrun ranks are children of the command that claimed --out: they must not be refused."""
    with claim_dir(tmp_path):
        code = f"from storage.claims import acquire; print(acquire({str(tmp_path)!r}))"
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
        assert json.loads((tmp_path / CLAIM_FILE).read_text())["pid"] == os.getpid()


def _race(directory: str) -> bool:
    try:
        acquire(directory)
        time.sleep(1.0)  # hold it while the others decide
        return True
    except ClaimError:
        return False


def test_racing_runs_on_a_stale_claim_leave_exactly_one_holder(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write_claim(tmp_path, pid=dead.pid)
    with get_context("spawn").Pool(4) as pool:
        won = pool.map(_race, [str(tmp_path)] * 4)
    assert sum(won) == 1


@pytest.mark.parametrize("make, why", [
    (lambda d: (d / "f").write_text("x") and d / "f", "is a file, not a directory"),
    (lambda d: (d / "f").write_text("x") and d / "f" / "sub", "a parent is a file"),
])
def test_a_directory_that_cannot_be_used_is_one_line(tmp_path, make, why):
    with pytest.raises(ClaimError, match=why):
        writable_dir(make(tmp_path))
