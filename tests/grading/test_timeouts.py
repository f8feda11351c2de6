"""The worker pool under math grading: CPU-time deadlines, the wall backstop, and workers that end with
their caller even while stuck in C code."""
import itertools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tasks.grading.timeouts import ProcessTimeoutPool, RemoteError, TimedOut, WorkerFault
from tests.polling import gone_within

ROOT = Path(__file__).resolve().parents[2]


def _spin_python(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds


def _sleep(s):
    time.sleep(s)
    return s


def _spin_in_c():
    return sum(itertools.repeat(1, 10 ** 13))  # one C loop holding the GIL for hours


def _count(n, spin):
    for k in range(n):
        _spin_python(spin)
        yield k


def _then_hang(n):
    yield from range(n)
    _spin_python(60)
    yield n


def _fail():
    raise KeyError("nope")


@pytest.fixture
def pool():
    p = ProcessTimeoutPool()
    yield p
    p.close()


def test_a_call_past_its_cpu_budget_is_killed_and_the_pool_recovers(pool):
    with pytest.raises(TimedOut):
        pool.call(_spin_python, 30, timeout=0.5)
    assert pool.call(_spin_python, 0, timeout=30) == 0


def test_waiting_without_cpu_is_not_past_a_cpu_deadline(pool):
    assert pool.call(_sleep, 1.5, timeout=0.5) == 1.5


def test_the_wall_backstop_ends_a_worker_that_makes_no_progress():
    p = ProcessTimeoutPool(wall_factor=1, min_wall_s=1)
    try:
        with pytest.raises(WorkerFault) as e:
            p.call(_sleep, 30, timeout=0.5)
        assert e.value.kind == "stalled"
    finally:
        p.close()


def test_pool_startup_is_not_part_of_the_deadline(pool):
    # a fresh worker starts Python and imports this module (pytest, the pool): far longer than 0.2 s
    assert pool.call(_sleep, 0, timeout=0.2) == 0


def test_a_stream_gets_its_budget_per_value(pool):
    """Three values of 0.4 s CPU each under a 0.6 s budget: 1.2 s in all, never 0.6 s for one value."""
    assert list(pool.stream(_count, 3, 0.4, timeout=0.6)) == [0, 1, 2]


def test_a_stream_past_its_budget_says_how_far_it_got(pool):
    got = []
    with pytest.raises(TimedOut) as e:
        for v in pool.stream(_then_hang, 2, timeout=0.5):
            got.append(v)
    assert got == [0, 1] and e.value.received == 2


def test_an_exception_in_the_call_comes_back_and_the_worker_stays(pool):
    pid = pool.call(os.getpid, timeout=30)
    with pytest.raises(RemoteError, match="KeyError"):
        pool.call(_fail, timeout=30)
    assert pool.call(os.getpid, timeout=30) == pid


def test_a_function_of_main_is_refused(pool):
    def local():
        return 1
    with pytest.raises(ValueError, match="module-level function"):
        pool.call(local, timeout=1)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_worker_stuck_in_c_code_ends_when_its_caller_dies():
    """The worker's own poll for its parent needs the GIL, which a C loop never gives back; its CPU limit
    (2 × budget + 5 s past what it had used) ends it anyway."""
    code = textwrap.dedent("""
        import os, threading, time
        from tasks.grading.timeouts import ProcessTimeoutPool
        from tests.grading.test_timeouts import _spin_in_c
        pool = ProcessTimeoutPool()
        worker = pool.call(os.getpid, timeout=60)
        threading.Thread(target=lambda: pool.call(_spin_in_c, timeout=1), daemon=True).start()
        time.sleep(1)
        print(worker, flush=True)
        os._exit(1)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 1, res.stderr
    pid = int(res.stdout.split()[-1])
    assert gone_within(lambda: [pid] if _alive(pid) else [], 90) == [], f"worker {pid} outlived its parent"
