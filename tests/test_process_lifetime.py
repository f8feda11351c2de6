"""Worker processes end with the process that started them, however it ended (here: os._exit, as the RL
step watchdog ends a rank; SIGKILL and torchrun's stop leave the same orphans)."""
import os
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


def test_a_temporary_prefect_server_ends_with_its_command_and_ignores_its_ctrl_c(tmp_path):
    """flows/cli_prefect.py starts Prefect's temporary server through its entry point: the server leaves
    the command's process group (a terminal's Ctrl-C is the command's to handle, not the server's) and
    ends when the command is gone, however it ended. Here the "server" is a module that sleeps."""
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    pid = _orphan_of(f"""
        import os, subprocess, sys, time
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([{str(tmp_path)!r}, {str(ROOT)!r}]))
        server = subprocess.Popen([sys.executable, "-m", "flows.cli_prefect", str(os.getpid()), "-m", "sleeper"],
                                  env=env)
        deadline = time.monotonic() + 60
        while os.getpgid(server.pid) != server.pid and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getpgid(server.pid) == server.pid != os.getpgid(0), "the server stayed in the command's group"
        print(server.pid, flush=True)
        os._exit(1)  # as a SIGKILL leaves it: no atexit, no stop()
    """)
    assert gone_within(lambda: [pid] if _alive(pid) else [], 20) == [], f"server {pid} outlived its command"


def test_the_server_command_prefect_runs_is_rewritten_to_the_tied_entry_point():
    import subprocess as real

    from flows.cli_prefect import _TiedSubprocess

    seen = []

    class Recorder:
        TimeoutExpired = real.TimeoutExpired

        def Popen(self, args, **kw):  # noqa: N802
            seen.append((args, kw.get("process_group")))

    tied = _TiedSubprocess(Recorder())
    tied.Popen([sys.executable, "-m", "uvicorn", "--port", "1"], env={})
    tied.Popen([sys.executable, "-m", "other"])
    assert seen == [([sys.executable, "-m", "flows.cli_prefect", str(os.getpid()), "-m", "uvicorn", "--port", "1"], 0),
                    ([sys.executable, "-m", "other"], None)]  # the server in a process group of its own
    assert tied.TimeoutExpired is real.TimeoutExpired
