"""Worker processes end with the process that started them, however it ended (here: os._exit, as the RL
step watchdog ends a rank; SIGKILL and torchrun's stop leave the same orphans)."""
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.polling import gone_within

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _orphan_of(code: str) -> int:
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 1, res.stderr
    return int(res.stdout.split()[-1])


def test_a_grading_pool_worker_ends_when_its_process_dies_abruptly():
    pid = _orphan_of("""
        import os
        from tasks.grading.timeouts import ProcessTimeoutPool
        worker = ProcessTimeoutPool().call(os.getpid, timeout=60)
        print(worker, flush=True)
        os._exit(1)  # no close(): the pool is left as a killed process leaves it
    """)
    assert gone_within(lambda: [pid] if _alive(pid) else [], 20) == [], f"worker {pid} outlived its parent"


def test_a_worker_of_a_live_parent_stays():
    code = textwrap.dedent("""
        import os, time
        from tasks.grading.timeouts import ProcessTimeoutPool
        pool = ProcessTimeoutPool()
        worker = pool.call(os.getpid, timeout=60)
        time.sleep(3)  # three of the worker's polls
        assert pool.call(os.getpid, timeout=60) == worker  # the same worker, still serving
        pool.close()
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr
