"""Ctrl-C at any moment of a `klear` command, its teardown included, ends it in one of two ways — never by
the signal itself (status −2, which a shell reports as 130 but with no line, and after which the caller
cannot tell an interrupted run from a crash):

- the line `klear: interrupted` last on stderr and exit 130, when the signal comes while the command works
  or tears down: the interpreter running the thread pools' exit hooks (which join their workers), joining
  the other threads and running the exit hooks (the temporary Prefect server stopping, claims released);
- the command's own exit status (0 here) and no line, when it comes after that, while the interpreter
  frees its modules: the command has finished; Ctrl-C is ignored then (Python would otherwise have put
  SIGINT back to its default action, and the process would die by it).

No traceback in either case. The fast tests drive each teardown phase deterministically: a cheap command
(`klear model list`, no Prefect) through flows.cli.main(), the signal sent from a hook placed in that phase.
The slow one interrupts a real `klear eval` (temporary Prefect server) when its result appears and again
once its server is gone. Every wait is a bounded poll."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.flows.test_faults_cli import Command, _alive, _server_of
from tests.polling import gone_within

ROOT = Path(__file__).resolve().parents[2]

# Runs klear's main() on `klear model list`, with SIGINT sent to this process in one phase: the command, or
# a phase of its teardown. The hooks go in right after main() installs its Ctrl-C handler (note_interrupts),
# as a command's own would (so its exit hooks run before the one note_interrupts registers).
PROBE = r'''
import atexit, os, signal, sys, threading, time

phase = sys.argv[1]
sys.argv = ["klear", "model", "list"]
import flows.cli as cli


def ctrl_c(kill=os.kill, pid=os.getpid(), sleep=time.sleep):
    kill(pid, signal.SIGINT)
    sleep(1.0)  # the handler runs in the main thread at its next check (at once: sleep is interrupted)


def in_thread_join():
    """A worker thread still running when main() returns: the interpreter joins it, and it sends Ctrl-C."""
    def worker():
        while threading.main_thread().is_alive():
            time.sleep(0.01)
        ctrl_c()
    threading.Thread(target=worker, name="late-worker").start()


def in_executor_shutdown():
    """A thread pool's exit hook, as concurrent.futures registers it to join its workers: the interpreter
    runs these first, before it marks the main thread stopped, and one of them sends Ctrl-C."""
    threading._register_atexit(ctrl_c)


class InModuleCleanup:
    """Freed with flows.cli's namespace, when the interpreter clears its modules (after every exit hook)."""
    def __del__(self, ctrl_c=ctrl_c):
        ctrl_c()


def in_the_command():
    """While `klear model list` works: as it reads its first model's manifest."""
    import tasks.models.pretrained as pretrained

    read_manifest = pretrained.read_manifest

    def interrupted_read(path):
        ctrl_c()
        return read_manifest(path)
    pretrained.read_manifest = interrupted_read


real = cli.note_interrupts


def hooked():
    real()
    if phase == "command":
        in_the_command()
    elif phase == "atexit":
        atexit.register(ctrl_c)
    elif phase == "threads":
        in_thread_join()
    elif phase == "executors":
        in_executor_shutdown()
    elif phase == "modules":
        cli._in_module_cleanup = InModuleCleanup()


cli.note_interrupts = hooked
cli.main()
'''


def _probe(tmp_path: Path, phase: str) -> subprocess.CompletedProcess:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return subprocess.run([sys.executable, str(script), phase], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "KeyboardInterrupt" not in stderr, \
        stderr[-3000:]


def _ends_interrupted(rc: int, stderr: str) -> None:
    assert rc == 130, (rc, stderr[-3000:])
    _no_traceback(stderr)
    assert [line for line in stderr.splitlines() if line.strip()][-1] == "klear: interrupted", stderr[-3000:]


def test_ctrl_c_while_the_command_works_is_one_line_and_130(tmp_path):
    r = _probe(tmp_path, "command")
    assert "smollm2" not in r.stdout, r.stdout[-2000:]
    _ends_interrupted(r.returncode, r.stderr)


@pytest.mark.parametrize("phase", ["executors", "threads", "atexit"])
def test_ctrl_c_while_the_command_tears_down_is_one_line_and_130(tmp_path, phase):
    r = _probe(tmp_path, phase)
    assert "smollm2" in r.stdout, r.stdout[-2000:]  # the command's work was done before the signal
    _ends_interrupted(r.returncode, r.stderr)


def test_ctrl_c_after_the_teardown_is_ignored_and_the_command_exits_as_it_would(tmp_path):
    r = _probe(tmp_path, "modules")
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])  # not −2: killed by SIGINT
    assert "smollm2" in r.stdout and r.stderr.strip() == "", r.stderr[-3000:]


# -- a real `klear eval`, its temporary Prefect server included ----------------------------------------------

@pytest.fixture(scope="module")
def eval_inputs(tmp_path_factory):
    from tasks.models.factory import init_model

    d = tmp_path_factory.mktemp("eval-teardown")
    rows = [{"id": f"p{a}", "problem": f"What is {a} plus {a}?", "answer": str(2 * a)} for a in range(4)]
    bench = d / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = init_model(d / "model", [r["problem"] + " <think>" + r["answer"] + "</think>" for r in rows], seed=0)
    return model, bench


class EvalCommand(Command):
    """`klear eval` as Command starts it, its stdout (the JSON summary lines) read as it comes too."""

    def __init__(self, model, bench, store):
        super().__init__("eval", "--model", model, "--benchmark", f"b={bench}", "--k", 1, "--max-tokens", 4,
                         "--store", store, env={"KLEAR_PROGRESS": "off"}, stdout=subprocess.PIPE)

    def wait_for_summary(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.startswith("{") for line in self.out):
                return
            if self.proc.poll() is not None and self.out_done.is_set():
                pytest.fail(f"ended (exit {self.proc.returncode}) before its summary:\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.01)
        pytest.fail(f"no summary within {timeout} s")


def _ctrl_c(cmd: Command) -> None:
    try:
        os.killpg(cmd.proc.pid, signal.SIGINT)  # as the terminal sends it: the command's whole process group
    except ProcessLookupError:
        pass  # it had already exited


@pytest.mark.slow  # two `klear eval` runs, each with its temporary Prefect server
def test_ctrl_c_of_klear_eval_at_its_result_and_after_its_server_stopped(eval_inputs, tmp_path):
    model, bench = eval_inputs
    # 1. at once when the result is printed: the server is still up (it stops in the exit hooks), so the
    #    command is still working or tearing down: `klear: interrupted`, 130
    cmd = EvalCommand(model, bench, tmp_path / "store")
    try:
        cmd.wait_for_summary()
        servers = _server_of(cmd)
        still_up = _alive(servers)
        _ctrl_c(cmd)
        rc = cmd.finish(timeout=60)
    finally:
        cmd.kill()
    assert rc >= 0, f"killed by signal {-rc}:\n" + "\n".join(cmd.lines[-40:])
    if still_up:
        _ends_interrupted(rc, "\n".join(cmd.lines))
    else:  # it had got past its exit hooks before the signal: finished
        assert rc in (0, 130), rc
    assert gone_within(lambda: _alive(servers), 20) == []

    # 2. once its server is gone (Prefect's exit hook has run): late in the teardown, or after it
    cmd = EvalCommand(model, bench, tmp_path / "store")
    try:
        cmd.wait_for_summary()
        servers = _server_of(cmd)
        assert gone_within(lambda: _alive(servers), 60) == [], "the temporary server outlived its command"
        _ctrl_c(cmd)
        rc = cmd.finish(timeout=60)
    finally:
        cmd.kill()
    stderr = "\n".join(cmd.lines)
    assert rc in (0, 130), f"exit {rc} (negative: killed by the signal):\n{stderr[-3000:]}"
    if rc == 130:
        _ends_interrupted(rc, stderr)
    else:
        _no_traceback(stderr)
