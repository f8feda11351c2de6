"""The in-container runner's harness, run here as a plain subprocess (no Docker, ≈ 1 s).

Outside a container the runner is in development mode: a private temp dir instead of /tmp, and it only
kills its own children's process groups. Isolation itself is tested in test_docker_sandbox.py.
"""
import json
import os
import subprocess
import sys

import pytest

from sandbox.image import RUNNER_PATH

LIMITS = {"cpu_s": 1.0, "wall_s": 2.0, "output_bytes": 4096}


@pytest.fixture(scope="module")
def runner():
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    proc = subprocess.Popen([python, "-I",
                             str(RUNNER_PATH)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    hello = json.loads(proc.stdout.readline())
    assert hello["hello"] and hello["sandboxed"] is False  # never the destructive mode outside a container

    def run(**job):
        job = {"op": "run", "limits": LIMITS, **job}
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    yield run
    proc.stdin.close()
    proc.wait(timeout=10)


def test_ping(runner):
    assert runner(op="ping")["pong"]


def test_stdio_runs_each_test_with_its_input(runner):
    r = runner(mode="stdio", code="print(int(input()) * 2)", tests=[{"stdin": "2\n"}, {"stdin": "5"}])
    assert [t["stdout"] for t in r["results"]] == ["4\n", "10\n"] and r["clean"]
    assert all(t["exit"] == 0 and t["cpu"] is not None for t in r["results"])


def test_call_based_with_class_solution(runner):
    code = "class Solution:\n    def pair(self, a, b):\n        return (a, {b: [a]})"
    r = runner(mode="call", code=code, fn_name="pair", tests=[{"args": [1, 2]}])
    assert r["results"][0]["report"] == {"value": [1, {"__dict__": [[2, [1]]]}]}


def test_call_based_plain_function_and_missing_function(runner):
    r = runner(mode="call", code="def f(x): return x + 1", fn_name="f", tests=[{"args": [1]}])
    assert r["results"][0]["report"] == {"value": 2}
    r = runner(mode="call", code="def g(x): return x", fn_name="f", tests=[{"args": [1]}])
    assert r["results"][0]["report"]["exc"] == "NameError"


def test_assert_style(runner):
    r = runner(mode="assert", code="def f(): return 1",
               tests=[{"assert_code": "assert f() == 1"}, {"assert_code": "assert f() == 2"}])
    ok, bad = r["results"]
    assert ok["report"] == {"done": True} and ok["exit"] == 0
    assert bad["report"]["exc"] == "AssertionError" and "runner.py" not in bad["stderr"]


def test_assert_style_solution_cannot_exit_early_as_a_pass(runner):
    r = runner(mode="assert", code="import os\nos._exit(0)", tests=[{"assert_code": "assert False"}])
    assert r["results"][0]["report"] is None  # no "done": judged runtime_error
    r = runner(mode="assert", code="import sys\ndef f():\n    sys.exit(0)",
               tests=[{"assert_code": "assert f() == 1"}])
    assert r["results"][0]["report"]["exc"] == "SystemExit"


def test_compile_error_stops_the_job(runner):
    r = runner(mode="stdio", code="def f(:", tests=[{"stdin": ""}] * 3)
    assert len(r["results"]) == 1 and "SyntaxError" in r["results"][0]["report"]["compile_error"]


def test_exit_codes_threads_and_atexit_like_a_real_interpreter(runner):
    r = runner(mode="stdio", code="import sys\nprint('a')\nsys.exit(3)", tests=[{"stdin": ""}])
    assert r["results"][0]["exit"] == 3 and r["results"][0]["stdout"] == "a\n"
    code = ("import threading, atexit\natexit.register(lambda: print('bye'))\n"
            "threading.Thread(target=lambda: print('thread')).start()")
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}])
    assert r["results"][0]["stdout"] == "thread\nbye\n"


def test_main_module_is_the_solution(runner):
    r = runner(mode="stdio", code="import __main__\nx = 5\nprint(__main__.x, __name__)", tests=[{"stdin": ""}])
    assert r["results"][0]["stdout"] == "5 __main__\n"


def test_timeouts_are_values_and_cap_the_job(runner):
    r = runner(mode="stdio", code="while True: pass", tests=[{"stdin": ""}] * 4,
               limits={**LIMITS, "max_timeouts": 2})
    first, second, third, fourth = r["results"]
    assert first["signal"] in (9, 24) and second["signal"] in (9, 24)
    assert third == {"skipped": True} and fourth == {"skipped": True}


def test_sleeper_hits_the_wall_deadline(runner):
    r = runner(mode="stdio", code="import time\ntime.sleep(30)", tests=[{"stdin": ""}])
    t = r["results"][0]
    assert t["timed_out"] and 1.9 < t["wall"] < 5


def test_output_cap(runner):
    r = runner(mode="stdio", code="while True: print('x' * 100)", tests=[{"stdin": ""}])
    t = r["results"][0]
    assert t["output_exceeded"] and len(t["stdout"]) <= LIMITS["output_bytes"] + 1


def test_memory_error_is_reported(runner):
    r = runner(mode="stdio", code="x = bytearray(8 << 30)", tests=[{"stdin": ""}],
               limits={**LIMITS, "memory_bytes": 512 << 20})
    assert r["results"][0]["report"]["exc"] == "MemoryError"


def test_unsupported_language(runner):
    r = runner(mode="stdio", language="java", code="x", tests=[{"stdin": ""}])
    assert "unsupported" in r and r["clean"]


def test_bad_request_is_an_error_not_a_crash(runner):
    assert runner(op="nope")["ok"] is False
    r = runner(mode="stdio")  # no code, no tests
    assert r["ok"] is False and "error" in r
    assert runner(op="ping")["pong"]  # still alive


def test_a_program_cannot_fake_a_setup_failure(runner):
    code = "import json, os\nos.write(3, json.dumps({'setup_error': 'fake'}).encode() + b'\\n')\nos._exit(125)"
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}])
    assert "setup_failed" not in r["results"][0] and r["results"][0]["exit"] == 125
    r = runner(mode="stdio", code="import os\nos.write(4, b'E')", tests=[{"stdin": ""}])  # fd 4 is closed
    assert "setup_failed" not in r["results"][0]
