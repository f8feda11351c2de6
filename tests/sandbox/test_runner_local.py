"""The in-container runner's harness, run here as a plain subprocess (no Docker, ≈ 10 s).

Outside a container the runner is in development mode: a private temp dir instead of /tmp, and it only
kills its own children's process groups. Isolation itself is tested in test_docker_sandbox.py.
"""
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import pytest

from sandbox.image import RUNNER_PATH
from sandbox.testcases import parse_test_suite
from sandbox.verdicts import judge_test, stdout_text

LIMITS = {"cpu_s": 1.0, "wall_s": 2.0, "output_bytes": 4096}


def _load_runner_module():
    """sandbox/runner.py imported as a plain module (development mode: not PID 1, not --sandbox)."""
    spec = importlib.util.spec_from_file_location("klear_runner_under_test", RUNNER_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNNER = _load_runner_module()


def assert_job(runner, code, assert_code, checker=True, **job):
    """Run assert-style tests as the host sends them; (suite, runs, response). With `checker`, every
    snippet goes to the checker, plain calls included (without: plain calls are made by the program)."""
    suite = parse_test_suite({"assert_code": assert_code})
    if checker:
        suite = dataclasses.replace(suite, programs=tuple(dataclasses.replace(p, calls=None) for p in suite.programs))
    indices = list(range(len(suite)))
    tests, runs = suite.plan(indices)
    return suite, runs, runner(mode="assert", code=code, tests=tests, **job)


def verdicts(suite, runs, response, cpu_limit=LIMITS["cpu_s"]):
    return [judge_test(response["results"][run], suite, i, cpu_limit)[0] for i, run in enumerate(runs)]


def checks(runner, code, assert_code, **job):
    """(the checker's entries of a one-snippet run, the host's verdicts)."""
    suite, runs, r = assert_job(runner, code, assert_code, **job)
    (result,) = r["results"]
    return result["checks"], verdicts(suite, runs, r)


@pytest.fixture(scope="module")
def runner():
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    proc = subprocess.Popen([python, "-I",
                             str(RUNNER_PATH)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    hello = json.loads(proc.stdout.readline())
    assert hello["hello"] and hello["sandboxed"] is False  # never the destructive mode outside a container

    def line(**job):
        """The runner's response line, unparsed."""
        job = {"op": "run", "limits": LIMITS, **job}
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        return proc.stdout.readline()

    def run(**job):
        return json.loads(line(**job))

    run.line = line
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
    t = r["results"][0]
    assert t["report"] == {"value": {"__tuple__": [1, {"__dict__": [[2, [1]]]}]}}
    assert t["exit"] == 0 and stdout_text(t) == "" and "checks" not in t  # checks: assert-style only


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


def test_call_based_the_last_report_line_is_the_value(runner):
    code = "import os\ndef f():\n    os.write(3, b'{\"value\": 99}\\n')\n    return 5"
    r = runner(mode="call", code=code, fn_name="f", tests=[{"args": []}])
    assert r["results"][0]["report"] == {"value": 5}  # the harness's line comes after the program's


# ------------------------------------------------------------------------------------ assert-style
def test_assert_style_each_test_passes_or_fails_on_its_own(runner):
    suite, runs, r = assert_job(runner, "def f(x): return x * 2",
                                ["assert f(1) == 2\nassert f(2) == 5\nassert f(3) == 6", "assert f(4) == 8"])
    first, second = r["results"]
    assert first["checks"] == {"0": {"ok": True}, "1": {"verdict": "wrong_answer", "message": "assertion failed"},
                               "2": {"ok": True}}
    assert second["checks"] == {"0": {"ok": True}} and first["exit"] == second["exit"] == 0
    assert verdicts(suite, runs, r) == ["accepted", "wrong_answer", "accepted", "accepted"]


def test_assert_style_program_never_sees_the_test_code(runner):
    code = """
import gc
def g():
    return 0
def f():
    needle = "".join(["XSEC", "RETX"])  # the other test's expected value, searched for in all it holds
    for obj in gc.get_objects():
        try:
            if needle in repr(obj):
                return "found"
        except Exception:
            pass
    return "absent"
"""
    got, judged = checks(runner, code, "assert g() == 'XSECRETX', 'XSECRETX'\nassert f() == 'absent'")
    assert got["1"] == {"ok": True} and judged == ["wrong_answer", "accepted"]


def test_assert_style_exception_in_the_program_fails_only_its_test(runner):
    got, judged = checks(runner, "def f(x): return 1 // x", "assert f(0) == 1\nassert f(1) == 1")
    assert got["0"]["verdict"] == "runtime_error" and "ZeroDivisionError" in got["0"]["message"]
    assert got["1"] == {"ok": True}  # the snippet went on
    assert judged == ["runtime_error", "accepted"]


def test_assert_style_setup_statement_that_raises_fails_the_tests_after_it(runner):
    got, judged = checks(runner, "def f(x): return x",
                         "assert f(1) == 1\nsetup = 1 // 0\nassert f(2) == 2\nassert f(3) == 3")
    assert got["0"] == {"ok": True}
    assert all(got[k]["verdict"] == "runtime_error" and got[k]["message"].startswith("setup:")
               and "ZeroDivisionError" in got[k]["message"] for k in ("1", "2"))
    assert judged == ["accepted", "runtime_error", "runtime_error"]


def test_assert_style_memory_error_in_the_program_is_that_tests_memory_limit(runner):
    got, judged = checks(runner, "def f(n):\n    return bytearray(n)",
                         "assert len(f(8 << 30)) > 0\nassert len(f(3)) == 3",
                         limits={**LIMITS, "memory_bytes": 512 << 20})
    assert got["0"]["verdict"] == "memory_limit" and judged == ["memory_limit", "accepted"]


def test_assert_style_runs_as_module_solution_without_its_main_block(runner):
    code = "def f():\n    return __name__\nif __name__ == '__main__':\n    input()\n    raise SystemExit(3)"
    got, judged = checks(runner, code, "assert f() == 'solution'")
    assert got == {"0": {"ok": True}} and judged == ["accepted"]


def test_assert_style_lying_values_cannot_pass(runner):
    code = ("class L(int):\n    def __eq__(self, o): return True\n    __ne__ = lambda self, o: False\n"
            "    __hash__ = int.__hash__\n"
            "class A:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
            "    def __bool__(self): return True\n    def __len__(self): return 3\n"
            "def f(): return L(0)\ndef g(): return A()\ndef h(): return 2 ** 100\ndef one(): return L(1)")
    got, judged = checks(runner, code, "assert f() == 1\nassert g() == 1\nassert 1 == g()\nassert g()\n"
                                       f"assert len(g()) == 3\nassert h() == {2**100}\nassert one() == 1\n"
                                       "assert g() != 1\nassert not (f() == 1)")
    assert judged == ["wrong_answer", "wrong_answer", "wrong_answer", "runtime_error", "runtime_error",
                      "accepted", "accepted", "accepted", "accepted"]  # values are the program's, __eq__ is not


@pytest.mark.parametrize("code", [
    "import os\nos._exit(0)",  # before anything is defined
    "import os\ndef f():\n    os._exit(0)",  # in the call
    "import sys\nsys.exit(0)",  # leaves the module: f is never defined
    "import sys\ndef f():\n    sys.exit(0)",
    "import sys\ndef f():\n    raise SystemExit",
    "import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGKILL)",
])
def test_assert_style_solution_cannot_exit_early_as_a_pass(runner, code):
    got, judged = checks(runner, code, "assert f() == 1\nassert f() == 1")
    assert all("ok" not in entry for entry in got.values())
    assert judged == ["runtime_error", "runtime_error"]


def test_assert_style_or_short_circuits_in_the_test_code(runner):
    code = ("class Stack:\n    def __init__(self):\n        self.items = [1, 2]\n"
            "    def pop(self):\n        return self.items.pop()\n    def size(self):\n        return len(self.items)\n"
            "s = Stack()")
    got, judged = checks(runner, code, "assert s.pop() == 2 or s.pop() == 1\nassert s.size() == 1")
    assert judged == ["accepted", "accepted"]  # pop was called once


def test_assert_style_for_loop_helpers_and_computed_expectations(runner):
    tests = ("def ref(a, b):\n    return sum([a, b])\n"
             "def check(candidate):\n"
             "    for a in range(5):\n        for b in range(3):\n            assert candidate(a, b) == ref(a, b)\n"
             "    expected = [ref(i, i) for i in range(4)]\n"
             "    assert [candidate(i, i) for i in range(4)] == expected\n"
             "check(add)")
    got, judged = checks(runner, "def add(a, b):\n    return a + b", tests)
    assert got == {"0": {"ok": True}, "1": {"ok": True}} and judged == ["accepted", "accepted"]
    got, judged = checks(runner, "def add(a, b):\n    return a + b if a != 4 else 0", tests)
    assert judged == ["wrong_answer", "accepted"]  # one bad case inside the loop fails the loop's test


def test_assert_style_range_and_generator_results_are_usable(runner):
    code = "def f(n):\n    return range(n)\ndef g(n):\n    for i in range(n):\n        yield i * i"
    got, judged = checks(runner, code, "assert list(f(3)) == [0, 1, 2]\nassert f(3) == range(3)\n"
                                       "assert list(g(4)) == [0, 1, 4, 9]\nassert sum(g(3)) == 5\n"
                                       "assert [x for x in g(2)] == [0, 1]\nassert list(g(2)) == [0, 2]")
    assert judged == ["accepted"] * 5 + ["wrong_answer"]


def test_assert_style_the_programs_gcd_shadows_the_headers(runner):
    assert checks(runner, "def gcd(a, b):\n    return 42", "assert gcd(4, 6) == 2")[1] == ["wrong_answer"]
    assert checks(runner, "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
                  "assert gcd(4, 6) == 2")[1] == ["accepted"]


@pytest.mark.parametrize("code, tests", [
    ("pass", "def check(candidate):\n    assert candidate(2, 3) == 5\ncheck(add)"),  # HumanEval/53
    ("def other():\n    return 0", "def check(candidate):\n    assert candidate([3, 1, 2, 4, 5]) == 3\n"
                                   "check(median)"),  # HumanEval/47
    ("if __name__ == '__main__':\n    def gcd(a, b):\n        return 0", "assert gcd(4, 6) == 2"),
], ids=["add", "median", "gcd-in-main-block"])
def test_assert_style_a_name_the_program_does_not_define_is_not_the_headers(runner, code, tests):
    # The snippet tests the program's `add`; a program that defines none must not pass on the checker's
    # own operator.add (or statistics.median, math.gcd) from LiveCodeBench's header.
    assert checks(runner, code, tests)[1] == ["runtime_error"]


def test_assert_style_the_program_patching_math_does_not_reach_the_checker(runner):
    code = "import math\nmath.isclose = lambda *a, **k: True\ndef f():\n    return 1.0"
    got, judged = checks(runner, code, "assert math.isclose(f(), 2.0)\nassert isclose(f(), 2.0)\n"
                                       "assert math.isclose(f(), 1.0)")
    # `isclose` beside the program's `f`: the header's helper (the checker's own), so isclose(1.0, 2.0) fails
    assert judged == ["wrong_answer", "wrong_answer", "accepted"]


HEADER_USER = ("def f(xs: List[int]) -> List[int]:\n"
               "    h = list(xs)\n    heapify(h)\n"
               "    return [Counter(xs).most_common(1)[0][0], deque(xs).popleft(), heappop(h),"
               " bisect_left(sorted(xs), 2), gcd(4, 6)]\n")


def test_livecodebench_header_names_need_no_import(runner):
    r = runner(mode="stdio", code=HEADER_USER + "print(*f(list(map(int, input().split()))))",
               tests=[{"stdin": "3 1 3 2\n"}])
    assert stdout_text(r["results"][0]) == "3 3 1 1 2\n" and r["results"][0]["exit"] == 0
    solution = ("class Solution:\n"
                "    def f(self, xs: List[int]) -> List[int]:\n"
                "        h = list(xs)\n        heapify(h)\n"
                "        return [Counter(xs).most_common(1)[0][0], deque(xs).popleft(), heappop(h),"
                " bisect_left(sorted(xs), 2), gcd(4, 6)]\n")
    r = runner(mode="call", code=solution, fn_name="f", tests=[{"args": [[3, 1, 3, 2]]}])
    assert r["results"][0]["report"] == {"value": [3, 3, 1, 1, 2]}
    assert checks(runner, HEADER_USER, "assert f([3, 1, 3, 2]) == [3, 3, 1, 1, 2]")[1] == ["accepted"]


DEEP = "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"


def test_recursion_3000_deep_works_in_every_mode(runner):
    r = runner(mode="stdio", code=DEEP + "print(depth(3000))", tests=[{"stdin": ""}])
    assert stdout_text(r["results"][0]) == "3000\n"
    r = runner(mode="call", code=DEEP, fn_name="depth", tests=[{"args": [3000]}])
    assert r["results"][0]["report"] == {"value": 3000}
    assert checks(runner, DEEP, "assert depth(3000) == 3000")[1] == ["accepted"]


def test_stderr_is_never_output_exceeded(runner):
    noisy = "import sys\ndef f():\n    sys.stderr.write('e' * (2 << 20))\n    return 1\n"
    r = runner(mode="stdio", code=noisy + "print(f())", tests=[{"stdin": ""}])
    t = r["results"][0]
    assert not t["output_exceeded"] and stdout_text(t) == "1\n" and t["stderr_bytes"] == 2 << 20
    assert len(t["stderr"]) <= 4096  # only the tail comes back
    r = runner(mode="call", code=noisy, fn_name="f", tests=[{"args": []}])
    assert not r["results"][0]["output_exceeded"] and r["results"][0]["report"] == {"value": 1}
    assert checks(runner, noisy, "assert f() == 1")[1] == ["accepted"]


@pytest.mark.parametrize("mode, job", [
    ("stdio", {"tests": [{"stdin": ""}] * 3}),
    ("call", {"fn_name": "f", "tests": [{"args": []}] * 3}),
    ("assert", {"tests": [{"units": [["test", "assert f() == 1"]]}] * 3}),
])
def test_compile_error_stops_the_job(runner, mode, job):
    r = runner(mode=mode, code="def f(:", **job)
    assert len(r["results"]) == 1 and "SyntaxError" in r["results"][0]["compile_error"]


def test_a_compile_error_report_written_by_the_program_stops_nothing(runner):
    code = "import os\nprint(1)\nos.write(3, b'{\"compile_error\": \"x\"}\\n')\n"
    r = runner(mode="stdio", code=code, tests=[{"stdin": ""}] * 2)
    assert len(r["results"]) == 2 and not any("compile_error" in t for t in r["results"])


def test_exit_codes_threads_and_atexit_like_livecodebench(runner):
    # LiveCodeBench's rule: sys.exit(code) ends a stdin/stdout program and its output is judged as is
    r = runner(mode="stdio", code="import sys\nprint('a')\nsys.exit(3)", tests=[{"stdin": ""}])
    assert r["results"][0]["exit"] == 0 and stdout_text(r["results"][0]) == "a\n"
    r = runner(mode="stdio", code="print('a')\nraise ValueError('x')", tests=[{"stdin": ""}])
    assert r["results"][0]["exit"] == 1 and r["results"][0]["report"]["exc"] == "ValueError"
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


def _parse_deep(line, frames):
    """json.loads of a response line with `frames` more Python frames on the stack (the host reads it
    deep inside pool.run / verify_submission, never at the top of a stack)."""
    if frames:
        return _parse_deep(line, frames - 1)
    return json.loads(line)


def test_a_deeply_nested_report_cannot_break_the_hosts_parse_of_the_response(runner):
    # The program writes its own report line; whatever the runner keeps of it must come back as a
    # response the host can read, or the host's json.loads raises RecursionError (not a ChannelError).
    for depth in (500, 900, 985, 2000):
        code = (f"import os\ndef f():\n    os.write(3, b'{{\"value\": ' + b'[' * {depth} + b']' * {depth}"
                " + b'}\\n')\n    os._exit(0)\n")
        line = runner.line(mode="call", code=code, fn_name="f", tests=[{"args": []}])
        resp = _parse_deep(line, 60)
        assert resp["ok"] and resp["results"][0]["exit"] == 0


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
    assert RUNNER.wipe(scratch) is True
    assert os.listdir(scratch) == [] and os.path.isdir(scratch)  # the root itself stays


def test_wipe_removes_a_20000_wide_dir(scratch):
    wide = os.path.join(scratch, "wide")
    os.mkdir(wide)
    for i in range(10_000):
        os.mkdir(os.path.join(wide, f"d{i}"))
        open(os.path.join(wide, f"f{i}"), "w").close()
    os.symlink("/", os.path.join(wide, "link"))  # a link is unlinked, never followed
    assert len(os.listdir(wide)) == 20_001
    assert RUNNER.wipe(scratch) is True
    assert os.listdir(scratch) == []


def test_wipe_keeps_what_it_is_told_to_keep(scratch):
    os.makedirs(os.path.join(scratch, "keep", "inner"))
    os.makedirs(os.path.join(scratch, "gone", "inner"))
    assert RUNNER.wipe(scratch, keep=(os.path.join(scratch, "keep"),)) is True
    assert _remaining(scratch) == [os.path.join(scratch, "keep"), os.path.join(scratch, "keep", "inner")]


@pytest.mark.parametrize("line", [
    b"[1, 2]",  # not an object
    b'"text"',
    b"5",
    b"1" * 5000,  # a 5,000-digit int
    b'{"value": ' + b"1" * 5000 + b"}",
    b"[" * 100_000 + b"]" * 100_000,  # 100,000-deep nesting
    b'{"value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    # deeper than any honest value (encode_value stops at runner.MAX_DEPTH); one the host could not read
    # back inside its response must be garbled (see the deeply nested report test above)
    b'{"value": ' + b"[" * 300 + b"]" * 300 + b"}",
    b"{not json",
    b"\xff\xfe",
])
def test_parse_report_garbled(line):
    assert RUNNER.parse_report(line) == {"garbled": True}


def test_parse_report_object():
    assert RUNNER.parse_report(b'{"value": [[1]]}') == {"value": [[1]]}
    assert RUNNER.parse_report(b'{"exc": "ValueError", "stage": "call", "message": "x"}')["exc"] == "ValueError"


def test_encode_decode_value_round_trip_as_plain_data():
    from decimal import Decimal
    from fractions import Fraction

    class Liar(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__

    class Thing:
        pass

    thing, refs = Thing(), RUNNER.Refs()
    value = [1, 2 ** 100, -2 ** 60, Liar(3), 1.5, float("inf"), "s", (1, 2), {1: "a", "k": [2]}, {1, 2},
             b"\x00\xff", 1 + 2j, range(1, 10, 2), Fraction(1, 3), Decimal("1.10"), None, True, thing]
    encoded = RUNNER.encode_value(value, refs)
    json.dumps(encoded)  # plain JSON
    assert encoded[1] == {"__int__": hex(2 ** 100)} and type(encoded[3]) is int and encoded[3] == 3
    assert encoded[-1] == {"__ref__": 0, "__type__": "Thing"} and refs == [thing]
    decoded = RUNNER.decode_value(encoded, lambda i, t: ("ref", i, t))
    assert decoded[:-1] == value[:-1] and type(decoded[3]) is int and type(decoded[7]) is tuple
    assert decoded[-1] == ("ref", 0, "Thing")
    assert "__repr__" in RUNNER.encode_value(thing)  # without refs: its repr, never equal to anything


def test_encode_decode_value_are_bounded():
    nested = []
    for _ in range(RUNNER.MAX_DEPTH + 5):
        nested = [nested]
    with pytest.raises(ValueError):
        RUNNER.encode_value(nested)
    with pytest.raises(ValueError):
        RUNNER.decode_value(nested, None)
    with pytest.raises(ValueError):
        RUNNER.decode_value(list(range(10)), None, [5])  # over the element budget
    for bad in ({"__weird__": 1}, {"__tuple__": 5}, {"__set__": "x"}):
        with pytest.raises(ValueError):
            RUNNER.decode_value(bad, None)


# ------------------------------------------ the test code's own tools stay the checker's (hostile review)
@pytest.mark.parametrize("shadow, tests", [
    ("def set(*a):\n    return 1", "assert set(f(2)) == set((4, 5))"),
    ("abs = lambda x: 0", "assert abs(f(2) - 5) < 1e-9"),
    ("def sorted(*a, **k):\n    return 0", "assert sorted(f(2)) == sorted([5, 4])"),
    ("range = lambda *a: ()", "for i in range(3):\n    assert f(i) == [i * i]"),
    ("zip = lambda *a: ()", "for x, y in zip([1, 2], [[1], [4]]):\n    assert f(x) == y"),
    ("class _M:\n    def isclose(self, *a, **k):\n        return True\nmath = _M()", "assert math.isclose(f(2)[0], 5.0)"),
])
def test_a_program_cannot_rebind_the_builtins_or_modules_the_test_judges_with(runner, shadow, tests):
    """A wrong f (it returns [0]) with one of the test code's tools rebound in its module: the test code
    still uses the checker's builtins and modules, so it fails."""
    got, judged = checks(runner, "def f(x):\n    return [0]\n" + shadow, tests)
    assert judged == ["wrong_answer"] or judged == ["runtime_error"], got


def test_a_list_the_function_sorts_in_place_is_sorted_in_the_test_code(runner):
    code = "def sort_in_place(a):\n    a.sort()\ndef wipe(d):\n    d.clear()"
    got, judged = checks(runner, code, "a = [3, 1, 2]\nsort_in_place(a)\nassert a == [1, 2, 3]\n"
                                       "d = {1: 2}\nwipe(d)\nassert d == {}")
    assert judged == ["accepted", "accepted"], got
    got, judged = checks(runner, "def sort_in_place(a):\n    a.clear()", "a = [1, 2, 3]\nsort_in_place(a)\n"
                                                                      "assert a == [1, 2, 3]")
    assert judged == ["wrong_answer"], got  # the test sees what the call did to its list


def test_program_objects_keep_their_identity_and_iterate(runner):
    code = ("class Node:\n    pass\nn = Node()\ndef ident(x):\n    return x\n"
            "def gen():\n    yield 1\n    yield 2\n")
    got, judged = checks(runner, code, "assert ident(n) is n\nassert ident(n) == n\n"
                                       "g = gen()\nassert next(g) == 1 and list(g) == [2]")
    assert judged == ["accepted", "accepted", "accepted"], got


def test_builtins_travel_to_the_program_as_arguments(runner):
    code = "def apply(f, x):\n    return f(x)\ndef longest(xs, key):\n    return max(xs, key=key)"
    got, judged = checks(runner, code, "assert apply(str, 5) == '5'\nassert longest(['a', 'abc', 'ab'], len) == 'abc'")
    assert judged == ["accepted", "accepted"], got


# ---------------------------------------------- plain calls: the program makes them, the host compares
def test_plain_call_asserts_need_no_checker_and_judge_the_same(runner):
    code = "def f(x):\n    if x == 3:\n        raise ValueError('three')\n    return [x] if x else (0,)"
    tests = "assert f(1) == [1]\nassert f(2) == [3]\nassert f(3) == [3]\nassert not f(4)\nassert [0] == f(0)"
    suite, runs, r = assert_job(runner, code, tests, checker=False)
    assert "checks" not in r["results"][0] and len(r["results"][0]["report"]["calls"]) == 5
    plain = verdicts(suite, runs, r)
    assert plain == ["accepted", "wrong_answer", "runtime_error", "wrong_answer", "wrong_answer"]
    suite, runs, r = assert_job(runner, code, tests, checker=True)  # the checker: same verdicts
    assert verdicts(suite, runs, r) == plain


def test_plain_calls_never_see_the_expected_value_and_lying_values_fail(runner):
    code = ("class L(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
            "class A:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\n"
            "import sys\ndef f():\n    return L(0)\ndef g():\n    return A()\n"
            "def h():\n    return 'XSECRETX' in open('/proc/self/cmdline').read() + repr(sys.modules)\n")
    suite, runs, r = assert_job(runner, code, "assert f() == 1\nassert g() == 1\nassert g()\nassert not h()",
                                checker=False)
    assert verdicts(suite, runs, r) == ["wrong_answer", "wrong_answer", "wrong_answer", "accepted"]


def test_each_test_runs_in_the_spare_forked_after_the_last_cleanup_and_a_killed_spare_is_replaced():
    """The zygote forks the next test process between tests; that spare is what runs the next test,
    and one that died in between (killed, say) is replaced by a fresh fork: the test still runs."""
    runner = RUNNER.Runner(sandboxed=False)
    job = {"mode": "call", "code": "import os\ndef f(x):\n    return os.getpid()", "fn_name": "f",
           "tests": [{"args": [1]}]}
    try:
        runner.run_job(job)
        runner.settle_spare()
        assert runner.spare is not None and runner.spare[0] == runner.zygote.pid
        spare_pid = runner.spare[1]
        assert runner.run_job(job)["results"][0]["report"] == {"value": spare_pid}
        runner.settle_spare()
        killed = runner.spare[1]
        os.kill(killed, 9)
        value = runner.run_job(job)["results"][0]["report"]["value"]
        assert isinstance(value, int) and value != killed
    finally:
        runner.zygote.stop()
        runner.checker.stop()
