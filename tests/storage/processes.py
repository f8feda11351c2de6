"""Other processes for the catalog tests: a user's DuckDB session held open, and store writers that start
together on a signal. Every wait is bounded (a queue with a timeout, subprocess timeouts).

    python -m tests.storage.processes session CATALOG ro|rw   # answers one SQL line with one JSON line
    python -m tests.storage.processes write STORE NAME N     # on "go": a version, N evaluations, one shared id
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120


class Child:
    """A child process spoken to one line at a time; every answer is awaited at most WAIT_S."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.storage.processes", *args], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the child closed its output

    def line(self) -> str:
        try:
            line = self.lines.get(timeout=WAIT_S)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"no answer within {WAIT_S}s from {self.proc.args}") from None
        if line is None:
            self.proc.wait(timeout=WAIT_S)
            raise AssertionError(f"{self.proc.args} exited {self.proc.returncode}: {self.proc.stderr.read()}")
        return line.strip()

    def send(self, text: str) -> None:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def finish(self) -> tuple[int, str]:
        """Close its input, wait for it to exit; its exit code and stderr."""
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)
        return self.proc.returncode, self.proc.stderr.read()


class Session(Child):
    """A user's DuckDB session on a catalog file, held open in another process until `finish`."""

    def __init__(self, catalog: str, read_only: bool = True):
        super().__init__("session", catalog, "ro" if read_only else "rw")
        assert self.line() == "ready"

    def ask(self, sql: str):
        self.send(sql)
        answer = json.loads(self.line())
        if isinstance(answer, dict):
            raise AssertionError(f"the session failed on {sql!r}: {answer['error']}")
        return [tuple(r) for r in answer]


def fresh_session(catalog: str, sql: str) -> list[tuple]:
    """A new session in a new process (no DuckDB instance cached in this one): one query, then closed."""
    s = Session(catalog)
    try:
        return s.ask(sql)
    finally:
        s.finish()


class Writer(Child):
    """A process that writes into a store when told `go`; its report: inserted flags and the shared one."""

    def __init__(self, store: str, name: str, n: int):
        super().__init__("write", store, name, str(n))
        assert self.line() == "ready"

    def report(self) -> dict:
        return json.loads(self.line())


def _serve_session(catalog: str, mode: str) -> None:
    import duckdb

    con = duckdb.connect(catalog, read_only=mode == "ro")
    print("ready", flush=True)
    for sql in sys.stdin:
        try:
            print(json.dumps(con.execute(sql).fetchall(), default=str), flush=True)
        except duckdb.Error as e:
            print(json.dumps({"error": str(e)}), flush=True)
    con.close()


def _write_on_go(store_root: str, name: str, n: int) -> None:
    import pyarrow as pa

    from storage.store import DatasetVersion, Store

    print("ready", flush=True)
    sys.stdin.readline()
    store = Store(store_root)
    version = DatasetVersion(id=f"ds-{name}", kind="curate", parameters={"writer": name}, counts={"kept": 1},
                             rows_in=1)
    store.write_version(version, {"problems": pa.table({"id": [name]})})
    store.publish(version.id)
    row = {"benchmark": "b", "created": "2025-01-01", "k": 1}
    inserted = [store.catalog.insert_once("evaluations", {**row, "id": f"ev-{name}-{i}"}) for i in range(n)]
    shared = store.catalog.insert_once("evaluations", {**row, "id": "ev-shared", "benchmark_path": name})
    print(json.dumps({"inserted": inserted, "shared": shared}), flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "session":
        _serve_session(*args)
    else:
        _write_on_go(args[0], args[1], int(args[2]))
