"""StepWatchdog: a step that outlasts its limit ends the process with one line naming rank, step and limit,
then the stacks; steps within the limit (re-armed each step) never do; a process stuck in C code holding
the interpreter lock still ends (faulthandler's backstop); under torchrun, a rank waiting in a collective
its partner never enters ends the whole job, and the partner, stopped by torchrun, shows where it was."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_steps_within_the_limit_rearm_and_finish():
    res = _run("""
        import time
        from tasks.training.watchdog import StepWatchdog
        w = StepWatchdog(1.0, rank=0, backstop_s=1.0)
        for step in range(6):  # 2.4 s in all, each step 0.4 s of a 1 s limit
            w.arm(f"step {step}")
            time.sleep(0.4)
        w.disarm()
        time.sleep(2.5)  # past both timers of the last arm: disarmed, nothing fires
        print("finished")
    """)
    assert res.returncode == 0 and "finished" in res.stdout, res.stderr


def test_a_step_past_the_limit_ends_the_process_naming_rank_step_and_limit():
    res = _run("""
        import time
        from tasks.training.watchdog import StepWatchdog
        w = StepWatchdog(1.0, rank=3, backstop_s=30)
        w.arm("RL step 1"); time.sleep(0.2)
        w.arm("RL step 2")
        def waiting_on_a_partner():
            time.sleep(60)
        waiting_on_a_partner()
        print("not reached")
    """)
    assert res.returncode == 1 and "not reached" not in res.stdout
    first = res.stderr.splitlines()[0]
    assert first.startswith("rank 3: RL step 2 ran past 1 s (--step-timeout-s); ending the run"), res.stderr
    assert "waiting_on_a_partner" in res.stderr  # the stack says where it waited


def test_a_process_stuck_in_c_code_holding_the_lock_still_ends():
    res = _run("""
        import re
        from tasks.training.watchdog import StepWatchdog
        StepWatchdog(1.0, rank=0, backstop_s=1.0).arm("RL step 1")
        re.match(r"(a+)+b", "a" * 64)  # catastrophic backtracking in C, never releasing the lock
        print("not reached")
    """)
    assert res.returncode == 1 and "not reached" not in res.stdout
    assert "Timeout (0:00:02)!" in res.stderr, res.stderr


def test_off_when_zero():
    res = _run("""
        import time
        from tasks.training.watchdog import StepWatchdog
        w = StepWatchdog(0, rank=0, backstop_s=0.5)
        w.arm("RL step 1"); time.sleep(1.5); print("finished")
    """)
    assert res.returncode == 0 and "finished" in res.stdout, res.stderr


HUNG_RANKS = """
import time
import torch.distributed as dist
from tasks.training.watchdog import StepWatchdog

def never_enters_the_barrier():
    time.sleep(600)


dist.init_process_group("gloo")
watchdog = StepWatchdog(2.0 if dist.get_rank() == 0 else 500.0, rank=dist.get_rank())
watchdog.arm("RL step 1")
if dist.get_rank() == 1:
    never_enters_the_barrier()
dist.barrier()
print("not reached")
"""


@pytest.mark.timeout(300)
def test_a_rank_waiting_on_a_partner_ends_the_torchrun_job(tmp_path):
    script = tmp_path / "hung_ranks.py"
    script.write_text(HUNG_RANKS)
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script)],
                         capture_output=True, text=True, timeout=240, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "not reached" not in out
    assert "rank 0: RL step 1 ran past 2 s (--step-timeout-s); ending the run" in out, out[-3000:]
    assert "never_enters_the_barrier" in out, out[-3000:]  # torchrun's SIGTERM: the culprit's stack too
