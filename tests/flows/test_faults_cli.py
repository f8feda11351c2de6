"""Faults while a `klear` command works, as a user meets them: Ctrl-C (SIGINT to the whole foreground
process group, as a terminal sends it), SIGKILL, and a full disk (a real file size limit on the command,
RLIMIT_FSIZE). Each ends in one line or in silence as the README promises, leaves no process behind (the
temporary Prefect server, torchrun's ranks) and nothing half-written, and a rerun completes. Signals are
sent when the command prints a progress line, never after a timer."""
import json
import os
import queue
import random
import resource
import signal
import string
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.polling import gone_within

pytestmark = pytest.mark.slow  # each starts Prefect and curates or trains

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 300


class Command:
    """`klear ARGS` in a process group of its own (as a terminal's foreground job), its stderr read line
    by line as it comes (into `lines`); with stdout=subprocess.PIPE its stdout too (into `out`; `out_done`
    set at its end)."""

    def __init__(self, *args, env=None, preexec_fn=None, stdout=subprocess.DEVNULL):
        e = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        e.pop("PREFECT_API_URL", None)
        e.update(env or {})
        def as_a_terminal_starts_it():
            # A shell starts a foreground job with Ctrl-C at its default; this test run may have inherited
            # SIGINT ignored (a background job of a non-interactive shell), which the command would keep.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if preexec_fn is not None:
                preexec_fn()

        self.proc = subprocess.Popen([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT, env=e,
                                     stdout=stdout, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=as_a_terminal_starts_it)
        self.lines: list[str] = []
        self.out: list[str] = []
        self.out_done = threading.Event()
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        if self.proc.stdout is not None:
            threading.Thread(target=self._pump_stdout, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line)
        self._new.put(None)

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self.out.append(line.rstrip("\n"))
        self.out_done.set()

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                line = self._new.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                tail = "\n".join(self.lines[-40:])
                pytest.fail(f"ended (exit {self.proc.wait()}) before printing {text!r}:\n{tail}")
            if text in line:
                return
        pytest.fail(f"no {text!r} within {WAIT_S} s")

    def finish(self, timeout: float) -> int:
        """The exit code, once it exits (at most `timeout` s), and its stderr read to the end."""
        rc = self.proc.wait(timeout=timeout)
        while self._new.get(timeout=WAIT_S) is not None:
            pass
        return rc

    def descendants(self) -> list[int]:
        out, todo = [], [self.proc.pid]
        while todo:
            for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
                try:
                    kids = [int(c) for c in (task / "children").read_text().split()]
                except OSError:
                    continue
                out += kids
                todo += kids
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _alive(pids: list[int]) -> list[int]:
    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return [p for p in pids if running(p)]


def _server_of(cmd: Command) -> list[int]:
    """The command's temporary Prefect server(s): descendants running uvicorn."""
    def is_server(pid: int) -> bool:
        try:
            return b"uvicorn" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
    return [p for p in cmd.descendants() if is_server(p)]


@pytest.fixture(scope="module")
def big_source(tmp_path_factory) -> Path:
    """Enough rows that reading them outlasts the signal sent at the first progress line."""
    path = tmp_path_factory.mktemp("faults") / "big.jsonl"
    with path.open("w") as f:
        for i in range(200_000):
            row = {"problem": f"What is {i} plus {i * 7} times {i % 13}? Row {i}.", "answer": str(i)}
            f.write(json.dumps(row) + "\n")
    return path


def _one_last_line(cmd: Command, line: str) -> None:
    text = "\n".join(cmd.lines)
    assert "Traceback" not in text and "ERROR" not in text and "Exception" not in text, text[-3000:]
    assert [ln for ln in cmd.lines if ln.strip()][-1] == line, text[-3000:]


def test_ctrl_c_stops_klear_curate_at_once_in_one_line_with_its_server(big_source, tmp_path):
    store = tmp_path / "store"
    cmd = Command("curate", "--source", f"big={big_source}", "--store", store)
    try:
        cmd.wait_for("curate read big rows")
        servers = _server_of(cmd)
        assert servers, "no temporary Prefect server under the command"
        os.killpg(cmd.proc.pid, signal.SIGINT)
        assert cmd.finish(timeout=30) == 130, "\n".join(cmd.lines)[-3000:]
    finally:
        cmd.kill()
    _one_last_line(cmd, "klear: interrupted")
    assert gone_within(lambda: _alive(servers), 20) == []
    datasets = store / "datasets"
    assert not datasets.exists() or [p.name for p in datasets.iterdir()] == []


def test_a_sigkilled_command_leaves_no_prefect_server_running(big_source, tmp_path):
    cmd = Command("curate", "--source", f"big={big_source}", "--store", tmp_path / "store")
    try:
        cmd.wait_for("curate read big rows")
        servers = _server_of(cmd)
        assert servers, "no temporary Prefect server under the command"
        os.kill(cmd.proc.pid, signal.SIGKILL)  # the command alone, as the OOM killer would
        cmd.proc.wait(timeout=30)
        assert gone_within(lambda: _alive(servers), 20) == [], "the temporary Prefect server outlived its command"
    finally:
        cmd.kill()
        for pid in _alive(servers if "servers" in locals() else []):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def sft_inputs(tmp_path_factory):
    from tasks.models.factory import init_model

    d = tmp_path_factory.mktemp("sft")
    rows = [{"problem": f"What is {a} plus {b}?", "answer": str(a + b),
             "response": f"<think>{a} + {b} = {a + b}</think> \\boxed{{{a + b}}}"} for a in range(8) for b in range(8)]
    data = d / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return init_model(d / "model", [r["problem"] + r["response"] for r in rows], seed=0), data


def test_ctrl_c_of_sft_on_two_processes_is_one_line_and_stops_every_rank(sft_inputs, tmp_path):
    model, data = sft_inputs
    cmd = Command("sft", "--model", model, "--data", data, "--out", tmp_path / "out", "--nproc", 2, "--epochs", 100,
                  "--batch-size", 2, "--seq-len", 64, env={"KLEAR_STORE": str(tmp_path / "store")})
    try:
        cmd.wait_for("sft step 1/")
        workers = cmd.descendants()
        assert len(workers) >= 3, workers  # torchrun and its two ranks (and the temporary server)
        os.killpg(cmd.proc.pid, signal.SIGINT)
        assert cmd.finish(timeout=60) == 130, "\n".join(cmd.lines)[-3000:]
    finally:
        cmd.kill()
    _one_last_line(cmd, "klear: interrupted")
    assert gone_within(lambda: _alive(workers), 20) == []


def _random_rows(path: Path, n: int) -> Path:
    rng = random.Random(0)
    with path.open("w") as f:
        for i in range(n):
            text = "".join(rng.choices(string.ascii_lowercase + " ", k=80))
            f.write(json.dumps({"problem": f"Row {i}: {text}?", "answer": str(i)}) + "\n")
    return path


def test_a_full_disk_in_klear_curate_is_one_line_and_a_rerun_with_room_completes(prefect_server, tmp_path):
    """The file size limit applies to the command (and what it starts): the Prefect API is the session's
    server, whose database the limit must not reach."""
    import duckdb
    from prefect.settings import PREFECT_API_URL

    env = {"PREFECT_API_URL": PREFECT_API_URL.value()}
    store = tmp_path / "store"
    small, large = _random_rows(tmp_path / "small.jsonl", 50), _random_rows(tmp_path / "large.jsonl", 40_000)
    first = Command("curate", "--source", f"s={small}", "--store", store, env=env)
    assert first.finish(timeout=WAIT_S) == 0, "\n".join(first.lines[-40:])

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))

    full = Command("curate", "--source", f"s={large}", "--store", store, env=env, preexec_fn=limited)
    assert full.finish(timeout=WAIT_S) == 2
    lines = [ln for ln in full.lines if ln.strip() and not ln.startswith("curate ")]  # progress lines
    assert len(lines) == 1 and lines[0].startswith("klear: error: ") and "no room left on the device" in lines[0], \
        "\n".join(full.lines[-40:])
    assert "Traceback" not in "\n".join(full.lines)
    assert [p.name for p in (store / "datasets").iterdir() if ".tmp" in p.name] == []
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    assert con.sql("select count(*) from problems").fetchall() == [(50,)]  # the previous version, readable
    con.close()
    rerun = Command("curate", "--source", f"s={large}", "--store", store, env=env)
    assert rerun.finish(timeout=WAIT_S) == 0, "\n".join(rerun.lines[-40:])
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    assert con.sql("select count(*) from problems").fetchall() == [(40_000,)]
    con.close()
