"""The in-container runner's harness, run here as a plain subprocess (no Docker, ≈ 1 s).

Outside a container the runner is in development mode: a private temp dir instead of /tmp, and it only
kills its own children's process groups. Isolation itself is tested in test_docker_sandbox.py.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import pytest

from sandbox.image import RUNNER_PATH
from sandbox.testcases import parse_tests
from sandbox.verdicts import judge_test, stdout_text

LIMITS = {"cpu_s": 1.0, "wall_s": 2.0, "output_bytes": 4096}


def _load_runner_module():
    """sandbox/runner.py imported as a plain module (development mode: not PID 1, not --sandbox)."""
    spec = importlib.util.spec_from_file_location("klear_runner_under_test", RUNNER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SANDBOXED is False
    return module


RUNNER = _load_runner_module()


def assert_job(runner, code, assert_code):
    """Run assert-style tests as the host sends them (rewritten); (suite, runs, response)."""
    suite = parse_tests({"assert_code": assert_code})
    indices = list(range(len(suite)))
    tests, runs = suite.plan(indices)
    return suite, runs, runner(mode="assert", code=code, tests=tests)


def verdicts(suite, runs, response, cpu_limit=LIMITS["cpu_s"]):
    return [judge_test(response["results"][run], suite, i, cpu_limit)[0] for i, run in enumerate(runs)]


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
    assert [stdout_text(t) for t in r["results"]] == ["4\n", "10\n"] and r["clean"]
    assert all(t["exit"] == 0 and t["cpu"] is not None for t in r["results"])


def test_call_based_with_class_solution(runner):
    code = "class Solution:\n    def pair(self, a, b):\n        return (a, {b: [a]})"
    r = runner(mode="call", code=code, fn_name="pair", tests=[{"args": [1, 2]}])
    assert r["results"][0]["report"] == {"value": {"__tuple__": [1, {"__dict__": [[2, [1]]]}]}}
    assert r["results"][0]["reports"] == [r["results"][0]["report"]]


def test_call_based_plain_function_and_missing_function(runner):
    r = runner(mode="call", code="def f(x): return x + 1", fn_name="f", tests=[{"args": [1]}])
    assert r["results"][0]["report"] == {"value": 2}
    r = runner(mode="call", code="def g(x): return x", fn_name="f", tests=[{"args": [1]}])
    assert r["results"][0]["report"]["exc"] == "NameError"


def test_call_based_runs_as_module_solution_without_its_main_block(runner):
    code = "def f(x):\n    return [x, __name__]\nif __name__ == '__main__':\n    input()\n    raise SystemExit(7)"
    r = runner(mode="call", code=code, fn_name="f", tests=[{"args": [1], "stdin": ""}])
    t = r["results"][0]
    assert t["report"] == {"value": [1, "solution"]} and t["exit"] == 0  # the block did not run


def test_call_based_big_int_and_int_subclass_are_plain_data(runner):
    code = "class L(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n" \
           "def f(): return [2 ** 100, -2 ** 60, L(3)]"
    r = runner(mode="call", code=code, fn_name="f", tests=[{"args": []}])
    assert r["results"][0]["report"] == {"value": [{"__int__": hex(2**100)}, {"__int__": hex(-2**60)}, 3]}


def test_assert_style_reports_each_observation_and_the_host_judges(runner):
    suite, runs, r = assert_job(runner, "def f(x): return x * 2",
                                ["assert f(1) == 2\nassert f(2) == 5", "assert f(3) == 6"])
    first, second = r["results"]
    assert first["reports"] == [{"obs": 0, "value": 2}, {"obs": 1, "value": 4}] and first["exit"] == 0
    assert second["reports"] == [{"obs": 0, "value": 6}]
    assert first["report"] == {"obs": 1, "value": 4}  # the last line; no {"done": true} any more
    assert verdicts(suite, runs, r) == ["accepted", "wrong_answer", "accepted"]


def test_assert_style_program_never_sees_the_expected_value(runner):
    code = """
import gc
def f():
    needle = "".join(["XSEC", "RETX"])  # the expected value, searched for in all the child holds
    for obj in gc.get_objects():
        try:
            if needle in repr(obj):
                return "found"
        except Exception:
            pass
    return "absent"
"""
    suite, runs, r = assert_job(runner, code, "assert f() == 'XSECRETX', 'XSECRETX'")
    assert r["results"][0]["reports"] == [{"obs": 0, "value": "absent"}]
    assert verdicts(suite, runs, r) == ["wrong_answer"]


def test_assert_style_observation_that_raises_fails_only_its_test(runner):
    suite, runs, r = assert_job(runner, "def f(x): return 1 // x", "assert f(0) == 1\nassert f(1) == 1")
    t = r["results"][0]
    assert t["reports"][0]["obs"] == 0 and t["reports"][0]["exc"] == "ZeroDivisionError"
    assert t["reports"][1] == {"obs": 1, "value": 1} and t["exit"] == 0
    assert verdicts(suite, runs, r) == ["runtime_error", "accepted"]


def test_assert_style_error_outside_an_observation_stops_the_snippet(runner):
    suite, runs, r = assert_job(runner, "def f(x): return x",
                                "assert f(1) == 1\nsetup = 1 // 0\nassert f(2) == 2")
    t = r["results"][0]
    assert t["reports"][0] == {"obs": 0, "value": 1}
    assert t["report"]["exc"] == "ZeroDivisionError" and t["report"]["stage"] == "tests" and t["exit"] == 1
    assert "ZeroDivisionError" in t["stderr"] and "runner.py" not in t["stderr"]  # the program's frames only
    assert verdicts(suite, runs, r) == ["accepted", "runtime_error"]


def test_assert_style_runs_as_module_solution_without_its_main_block(runner):
    code = "def f():\n    return __name__\nif __name__ == '__main__':\n    input()"
    suite, runs, r = assert_job(runner, code, "assert f() == 'solution'")
    assert r["results"][0]["reports"] == [{"obs": 0, "value": "solution"}]
    assert verdicts(suite, runs, r) == ["accepted"]


def test_assert_style_lying_values_are_plain_data(runner):
    code = ("class L(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
            "class A:\n    def __eq__(self, o): return True\n"
            "def f(): return L(0)\ndef g(): return A()\ndef h(): return 2 ** 100")
    suite, runs, r = assert_job(runner, code, f"assert f() == 1\nassert g() == 1\nassert h() == {2**100}")
    values = [line["value"] for line in r["results"][0]["reports"]]
    assert values[0] == 0 and values[1]["__type__"] == "A" and values[2] == {"__int__": hex(2**100)}
    assert verdicts(suite, runs, r) == ["wrong_answer", "wrong_answer", "accepted"]


def test_assert_style_solution_cannot_exit_early_as_a_pass(runner):
    suite, runs, r = assert_job(runner, "import os\nos._exit(0)", "assert f() == 1")
    assert r["results"][0]["reports"] == [] and r["results"][0]["report"] is None
    assert verdicts(suite, runs, r) == ["runtime_error"]
    suite, runs, r = assert_job(runner, "import sys\ndef f():\n    sys.exit(0)", "assert f() == 1")
    assert r["results"][0]["report"]["exc"] == "SystemExit"  # not an observation: the snippet stops
    assert verdicts(suite, runs, r) == ["runtime_error"]


def test_compile_error_stops_the_job(runner):
    r = runner(mode="stdio", code="def f(:", tests=[{"stdin": ""}] * 3)
    assert len(r["results"]) == 1 and "SyntaxError" in r["results"][0]["compile_error"]


def test_a_compile_error_report_written_by_the_program_stops_nothing(runner):
    code = "import os\nprint(1)\nos.write(3, b'{\"compile_error\": \"x\"}\\n')\n"
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}] * 2)
    assert len(r["results"]) == 2 and not any("compile_error" in t for t in r["results"])


def test_exit_codes_threads_and_atexit_like_a_real_interpreter(runner):
    r = runner(mode="stdio", code="import sys\nprint('a')\nsys.exit(3)", tests=[{"stdin": ""}])
    assert r["results"][0]["exit"] == 3 and stdout_text(r["results"][0]) == "a\n"
    code = ("import threading, atexit\natexit.register(lambda: print('bye'))\n"
            "threading.Thread(target=lambda: print('thread')).start()")
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}])
    assert stdout_text(r["results"][0]) == "thread\nbye\n"


def test_main_module_is_the_solution(runner):
    r = runner(mode="stdio", code="import __main__\nx = 5\nprint(__main__.x, __name__)", tests=[{"stdin": ""}])
    assert stdout_text(r["results"][0]) == "5 __main__\n"


def test_cpu_of_an_orphaned_grandchild_counts(runner):
    # The child burns ~1.2 s, its forked grandchild ~1.2 s; the child never reaps it, so only the
    # runner's RUSAGE_CHILDREN (the grandchild is reparented to it) sees the grandchild's CPU.
    code = """
import os, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    burn(1.2)
    os._exit(0)
os.close(w)
burn(1.2)
os.read(r, 1)  # EOF once the grandchild has exited (it is never waited for)
print("done")
"""
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}], limits={**LIMITS, "cpu_s": 2.0, "wall_s": 6.0})
    t = r["results"][0]
    assert t["exit"] == 0 and stdout_text(t) == "done\n" and not t["timed_out"]
    assert t["cpu"] > 2.0


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
    assert t["output_exceeded"] and len(stdout_text(t)) <= LIMITS["output_bytes"] + 1


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


# ------------------------------------------------------------------ the runner's helpers, in-process
@pytest.fixture
def scratch():
    with tempfile.TemporaryDirectory(prefix="klear-wipe-test-") as path:
        yield path


def _remaining(path):
    return [os.path.join(d, n) for d, dirs, files in os.walk(path) for n in dirs + files]


def test_wipe_removes_a_1100_deep_tree(scratch):
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth in range(1100):  # fd-relative: the path is longer than any single syscall accepts
            os.mkdir("d", dir_fd=fd)
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as fh:
                fh.write(str(depth))
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    assert RUNNER._wipe(scratch) is True
    assert os.listdir(scratch) == [] and os.path.isdir(scratch)  # the root itself stays


def test_wipe_removes_a_20000_wide_dir(scratch):
    wide = os.path.join(scratch, "wide")
    os.mkdir(wide)
    for i in range(10_000):
        os.mkdir(os.path.join(wide, f"d{i}"))
        open(os.path.join(wide, f"f{i}"), "w").close()
    os.symlink("/", os.path.join(wide, "link"))  # a link is unlinked, never followed
    assert len(os.listdir(wide)) == 20_001
    assert RUNNER._wipe(scratch) is True
    assert os.listdir(scratch) == []


def test_wipe_keeps_what_it_is_told_to_keep(scratch):
    os.makedirs(os.path.join(scratch, "keep", "inner"))
    os.makedirs(os.path.join(scratch, "gone", "inner"))
    assert RUNNER._wipe(scratch, keep=(os.path.join(scratch, "keep"),)) is True
    assert _remaining(scratch) == [os.path.join(scratch, "keep"), os.path.join(scratch, "keep", "inner")]


@pytest.mark.parametrize("line", [
    b"[1, 2]",  # not an object
    b'"text"',
    b"5",
    b"1" * 5000,  # a 5,000-digit int
    b'{"obs": 0, "value": ' + b"1" * 5000 + b"}",
    b"[" * 100_000 + b"]" * 100_000,  # 100,000-deep nesting
    b'{"obs": 0, "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"obs": 0, "value": ' + b"[" * 300 + b"]" * 300 + b"}",  # deeper than MAX_REPORT_DEPTH
    b"{not json",
    b"\xff\xfe",
])
def test_parse_report_garbled(line):
    assert RUNNER._parse_report(line) == {"garbled": True}


def test_parse_report_object():
    assert RUNNER._parse_report(b'{"obs": 3, "value": [[1]]}') == {"obs": 3, "value": [[1]]}
