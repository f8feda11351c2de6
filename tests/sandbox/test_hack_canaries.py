"""Hack canaries: programs written to get reward without solving the task, one behaviour each, run in
the real Docker sandbox. Each must come back as a scored, non-accepted verdict (reward 0), never
`accepted` and never `sandbox_error`; honest programs next to them must stay accepted.

The classes: forged assert-style results, CPU used where the test's own process cannot see it, state left
in a warm container for a later test or job, output made to crash the judge (penalty evasion), and honest
programs that used to be misjudged. One warm container serves the whole module, so every cross-job
canary really shares it with its victim.
"""

import pytest

from sandbox import JudgeConfig, Limits

from tests.sandbox.canaries import no_faults, refused, run

pytestmark = pytest.mark.docker

DOUBLE = {"assert_code": "assert double(2) == 4\nassert double(21) == 42"}  # an honest double(x) passes


def stdio(expected="ok\n", n=1):
    return {"inputs": [f"{i}\n" for i in range(n)], "outputs": [expected] * n}


# ------------------------------------------------------------------------ 1. forged assert-style results
def test_forged_observation_on_the_report_fd(pool):
    refused(run(pool, """
        import json, os
        for k, v in enumerate([42, 4]):  # any claim is just another wrong value: the expected never came here
            os.write(3, (json.dumps({"obs": k, "value": v}) + "\\n").encode())
        def double(x):
            return 0
    """, DOUBLE))


def test_forged_done_report_then_early_exit(pool):
    refused(run(pool, """
        import os
        os.write(3, b'{"done": true}\\n')
        os._exit(0)
    """, DOUBLE))


def test_atexit_hook_writing_a_report(pool):
    refused(run(pool, """
        import atexit, os
        atexit.register(lambda: os.write(3, b'{"done": true}\\n'))
        def double(x):
            raise SystemExit(0)
    """, DOUBLE))


def test_always_equal_object(pool):
    refused(run(pool, """
        class Any:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = object.__hash__
        def double(x):
            return Any()
    """, DOUBLE))


def test_int_subclass_that_equals_everything(pool):
    refused(run(pool, """
        class Liar(int):
            def __eq__(self, other): return True
            __hash__ = int.__hash__
        def double(x):
            return Liar(0)
    """, DOUBLE))


def test_patched_builtins_exec_skips_the_tests(pool):
    refused(run(pool, """
        import builtins
        builtins.exec = lambda *a, **k: None
        def double(x):
            return 0
    """, DOUBLE))


def test_system_exit_compiled_under_the_harness_file_name(pool):
    refused(run(pool, """
        exec(compile("raise SystemExit(0)", "<tests>", "exec"))
        def double(x):
            return 0
    """, DOUBLE))


def test_harness_patched_through_frames(pool):
    refused(run(pool, """
        import sys, os
        f = sys._getframe()
        while f is not None:  # every harness global we can reach: report "done", exit clean
            g = f.f_globals
            if "_report" in g:
                g["_report"] = lambda obj: os.write(3, b'{"done": true}\\n')
            if "encode_value" in g:
                g["encode_value"] = lambda v: 4
            f = f.f_back
        def double(x):
            return 0
    """, DOUBLE))


def test_trace_hook_jumping_over_the_asserts(pool):
    refused(run(pool, """
        import sys
        def tracer(frame, event, arg):
            if frame.f_code.co_filename == "<tests>" and event == "line":
                try:
                    frame.f_lineno = 10 ** 6
                except Exception:
                    pass
            return tracer
        sys.settrace(tracer)
        sys._getframe().f_trace = tracer
        def double(x):
            return 0
    """, DOUBLE))


def test_reading_the_test_code_for_expected_values(pool):
    refused(run(pool, """
        import gc, re, sys
        def double(x):  # look everywhere in this process for the literal the assert expects
            found = []
            for obj in gc.get_objects():
                if isinstance(obj, dict):
                    for v in list(obj.values()):
                        if isinstance(v, str) and "==" in v:
                            found += re.findall(r"== *(\\d+)", v)
            for name in list(sys.modules):
                pass
            return int(found[-1]) if found else -1
    """, {"assert_code": "assert double(2) == 987654"}))


def test_honest_twin_of_the_forgeries_is_accepted(pool):
    out = run(pool, "def double(x):\n    return 2 * x\n", DOUBLE)
    assert out["verdict"] == "accepted" and out["reward"] == 1.0, out


# ---------------------------------------------------------------------------------- 2. CPU accounting
BURN = """
import os, time
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
"""


def test_cpu_burned_in_an_unwaited_grandchild_counts(pool):
    out = refused(run(pool, BURN + """
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:       # grandchild: never waited for by the test's process
        burn(0.7)
        os.write(w, b"x")
    os._exit(0)
burn(0.7)
os.read(r, 1)
print("ok")
""", stdio()))
    assert out["verdict"] == "timeout", out


def test_cpu_of_a_detached_daemon_counts(pool):
    out = refused(run(pool, BURN + """
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        burn(1.3)
        os.write(w, b"x")
        os._exit(0)
    os._exit(0)
os.read(r, 1)
print("ok")
""", stdio()))
    assert out["verdict"] == "timeout", out


# ------------------------------------------------------------------- 3. state across tests and jobs
SYSV = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
KEY = 0x6b6c6561
"""


@pytest.mark.parametrize("kind, get", [
    ("shared memory", "libc.shmget(KEY, 4096, {flags})"),
    ("message queue", "libc.msgget(KEY, {flags})"),
    ("semaphore set", "libc.semget(KEY, 1, {flags})"),
])
def test_sysv_ipc_object_does_not_survive_to_the_next_test(pool, kind, get):
    create = get.format(flags="IPC_CREAT | 0o600")
    probe = get.format(flags="0o600")
    code = SYSV + f"""
if input() == "0":
    print("ok" if {create} >= 0 else "create failed")
else:
    print("ok" if {probe} < 0 else "left over")
"""
    out = run(pool, code, stdio(n=2))
    assert out["verdict"] == "accepted", (kind, out)


def test_sysv_ipc_object_does_not_survive_to_the_next_job(pool):
    made = run(pool, SYSV + "print('ok' if libc.shmget(KEY, 4096, IPC_CREAT | 0o600) >= 0 else 'no')", stdio())
    assert made["verdict"] == "accepted", made
    out = run(pool, SYSV + "print('ok' if libc.shmget(KEY, 4096, 0o600) < 0 else 'left over')", stdio())
    assert out["verdict"] == "accepted", out


def test_posix_message_queue_does_not_survive_to_the_next_test(pool):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype = ctypes.c_int
if input() == "0":
    q = libc.mq_open(b"/klear-canary", os.O_CREAT | os.O_RDWR, 0o600, None)
    print("ok" if q >= 0 else "create failed " + str(ctypes.get_errno()))
else:
    q = libc.mq_open(b"/klear-canary", os.O_RDWR)
    print("ok" if q < 0 and not os.listdir("/dev/mqueue") else "left over")
"""
    out = run(pool, code, stdio(n=2))
    assert out["verdict"] == "accepted", out


def test_a_sibling_cannot_read_answers_left_in_shared_memory(pool):
    honest = SYSV + """
def double(x):
    seg = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(seg, None, 0)
    ctypes.memmove(addr, str(2 * x).encode() + b"\\0", 16)
    libc.shmdt(ctypes.c_void_p(addr))
    return 2 * x
"""
    cheat = SYSV + """
def double(x):
    seg = libc.shmget(KEY, 4096, 0o666)
    if seg < 0:
        return -1
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(seg, None, 0)
    return int(ctypes.string_at(addr).decode() or -1)
"""
    tests = {"assert_code": "assert double(21) == 42"}
    assert run(pool, honest, tests)["verdict"] == "accepted"
    refused(run(pool, cheat, tests))


def test_memory_charged_by_one_job_is_free_for_the_next(pool):
    hog = SYSV + """
libc.shmat.restype = ctypes.c_void_p
for i in range(3):  # 3 x 400 MiB, each touched then detached: charged to the container, held by no process
    seg = libc.shmget(KEY + i, 400 << 20, IPC_CREAT | 0o600)
    addr = libc.shmat(seg, None, 0)
    ctypes.memset(addr, 1, 400 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
print("ok")
"""
    roomy = JudgeConfig(limits=Limits(time_limit_s=4.0))
    before = pool.stats["faults"]
    run(pool, hog, stdio(), roomy)  # whatever its own verdict, it must not poison the next job
    honest = "x = bytearray(700 << 20)\nx[::4096] = b'\\1' * len(x[::4096])\nprint('ok')"
    out = run(pool, honest, stdio(), roomy)
    assert out["verdict"] == "accepted", out
    no_faults(pool, before)


# ---------------------------------------------------- 4. penalty evasion: scored, never sandbox_error
@pytest.mark.parametrize("report", [
    b"[1, 2]",                                  # a report that is not an object
    b'"done"',
    b'{"value": ' + b"9" * 5000 + b"}",        # an int past the decimal-digit limit
    b"[" * 100_000 + b"]" * 100_000,           # nesting past every recursion limit
    b'{"value": {"__int__": "' + b"9" * 5000 + b'"}}',
    b'{"value": {"__dict__": 5}}',
    b'{"value": {"__set__": [[1], {"__dict__": [[[], 1]]}]}}',
    b'{"obs": 0, "value": {"__float__": "sNaN"}}',
    b"\xff\xfe not json",
])
def test_a_forged_report_is_a_scored_verdict(pool, report):
    before = pool.stats["faults"]
    code = f"import os\nos.write(3, {report!r} + b'\\n')\nos._exit(0)\n"
    for tests in ({"fn_name": "double", "inputs": [[2]], "outputs": [4]}, DOUBLE):
        refused(run(pool, code, tests))
    no_faults(pool, before)


@pytest.mark.parametrize("printed", ["sNaN", "NaN", "-sNaN123", "Infinity", "1e999999999", "nan nan"])
def test_printed_special_numbers_are_compared_not_crashed_on(pool, printed):
    out = run(pool, f"print({printed!r})", {"inputs": ["\n"], "outputs": ["1\n"]})
    refused(out)
    assert out["verdict"] == "wrong_answer", out


DEEP_TREE = """
import os
os.chdir("/tmp")
for _ in range(1100):
    os.mkdir("d")
    os.chdir("d")
os.chmod(".", 0)
print("ok")
"""
WIDE_LOCKED_TREE = """
import os
for i in range(3000):
    d = f"/tmp/w{i}"
    os.mkdir(d)
    open(d + "/f", "w").close()
    os.chmod(d, 0)
print("ok")
"""


@pytest.mark.parametrize("tree", [DEEP_TREE, WIDE_LOCKED_TREE], ids=["1100-deep", "3000-wide-locked"])
def test_a_directory_tree_left_behind_is_wiped(pool, tree):
    before = pool.stats["faults"]
    assert run(pool, tree, stdio())["verdict"] == "accepted"
    probe = run(pool, "import os\nprint('ok' if os.listdir('/tmp') == ['run'] else len(os.listdir('/tmp')))", stdio())
    assert probe["verdict"] == "accepted", probe
    no_faults(pool, before)


def test_an_observation_that_raises_an_odd_exception_is_a_runtime_error(pool):
    code = """
class Weird(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")
def double(x):
    raise Weird()
"""
    out = refused(run(pool, code, DOUBLE))
    assert out["verdict"] == "runtime_error", out


# --------------------------------------------------------------- 5. honest programs judged correctly
def test_call_based_with_a_main_block_reading_stdin_is_accepted(pool):
    code = """
def add(a, b):
    return a + b

if __name__ == "__main__":
    a, b = map(int, input().split())
    print(add(a, b))
"""
    out = run(pool, code, {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    assert out["verdict"] == "accepted", out
    out = run(pool, code, {"assert_code": "assert add(1, 2) == 3"})
    assert out["verdict"] == "accepted", out


def test_each_assert_is_one_scored_test(pool):
    tests = {"assert_code": "assert double(1) == 2\nassert double(2) == 4\nassert double(3) == 7"}
    out = run(pool, "def double(x):\n    return 2 * x\n", tests)
    assert (out["verdict"], out["passed"], out["total"]) == ("wrong_answer", 2, 3), out


# ------------------------------------------------------------- 6. through the RL reward path, for real
def test_rl_reward_of_a_timed_out_program_is_the_wrong_answer_reward(pool):
    from tasks.grading.code_grader import CodeGrader
    from tasks.grading.grade import Outcome
    from tasks.grading.rewards import RewardConfig, reward_from_grade

    row = {"id": "loop", "domain": "code", "tests": {"fn_name": "double", "inputs": [[2]], "outputs": [4]}}
    response = "<think>spin</think>\n```python\ndef double(x):\n    while True:\n        pass\n```"
    grader = CodeGrader(workers=1)
    try:
        (grade,) = grader.grade_batch([(response, row)])
    finally:
        grader.close()
    assert grade.outcome == Outcome.WRONG and grade.verdict == "timeout", grade
    assert reward_from_grade("code", response, grade, RewardConfig()) == 0.0
    assert reward_from_grade("code", response, grade, RewardConfig(scale_code=True)) == -1.0


# ------------------------------------------- 7. found by red-teaming the rewritten sandbox, one each
def test_a_flood_of_blank_report_lines_is_scored(pool):
    before = pool.stats["faults"]
    code = "import os\nos.write(3, b'\\n' * ((1 << 20) - 1))\nos._exit(0)\n"
    refused(run(pool, code, {"fn_name": "double", "inputs": [[1], [2], [3], [4]], "outputs": [2, 4, 6, 8]}))
    no_faults(pool, before)


def test_an_inode_flood_is_bounded_and_wiped_in_time(pool):
    before = pool.stats["faults"]
    code = """
import os
os.makedirs("/tmp/d", exist_ok=True)
made = 0
try:
    while True:
        os.mkdir(f"/tmp/d/{made}")
        made += 1
except OSError:
    pass
print(made)
"""
    out = refused(run(pool, code, stdio(n=6)))
    assert out["verdict"] == "wrong_answer", out
    no_faults(pool, before)


def test_control_bytes_filling_stdout_in_every_test_are_scored(pool):
    before = pool.stats["faults"]
    code = "import os\nos.write(1, b'\\x01' * ((1 << 20) - 1))\n"
    out = refused(run(pool, code, stdio(n=16)))
    assert out["verdict"] == "wrong_answer", out
    no_faults(pool, before)


def test_a_lone_surrogate_in_a_report_cannot_break_the_batch(pool, tmp_path):
    from tasks.verification import VerifyConfig, verify_rows
    from tasks.verification.io import write_rows

    code = "import os\nos.write(3, b'{\"exc\": \"\\\\ud800\", \"message\": \"\\\\udfff\"}\\n')\nos._exit(0)\n"
    rows = [{"id": "surrogate", "code": code, "tests": {"fn_name": "f", "inputs": [[1]], "outputs": [1]}},
            {"id": "honest", "code": "def f(x):\n    return x\n", "tests": {"fn_name": "f", "inputs": [[1]], "outputs": [1]}}]
    out = verify_rows(rows, VerifyConfig(executor="threads", workers=1))
    refused(out[0])
    assert out[1]["verdict"] == "accepted"
    for name in ("out.jsonl", "out.parquet"):
        write_rows(out, str(tmp_path / name))  # must not raise


def test_a_str_subclass_cannot_answer_a_predicate(pool):
    code = """
class Yes(str):
    def startswith(self, *a): return True
    def isdigit(self): return True
def f(s):
    return Yes("zzz")
"""
    refused(run(pool, code, {"assert_code": "assert f('abc').startswith('ab')\nassert f('12').isdigit()"}))


def test_cpu_of_children_the_kernel_reaps_counts(pool):
    out = refused(run(pool, BURN + """
import signal
signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # children vanish without a wait: no rusage for anyone
r, w = os.pipe()
for _ in range(2):
    if os.fork() == 0:
        burn(0.75)
        os.write(w, b"x")
        os._exit(0)
os.read(r, 1)
os.read(r, 1)
print("ok")
""", stdio()))
    assert out["verdict"] == "timeout", out


def test_the_build_dir_is_no_hiding_place_between_tests(pool):
    code = """
import os
d = "/tmp/.klear-build"
if input() == "0":
    os.makedirs(d, exist_ok=True)
    open(d + "/progress", "w").write("half done")
    print("ok")
else:
    print("ok" if not os.path.exists(d + "/progress") else "found")
"""
    assert run(pool, code, stdio(n=2))["verdict"] == "accepted"


def test_colliding_hashes_in_a_forged_set_are_a_wrong_answer(pool):
    code = """
import json, os
value = {"__set__": [k * (2 ** 61 - 1) for k in range(1, 30000)]}
os.write(3, (json.dumps({"value": value}) + "\\n").encode())
os._exit(0)
"""
    refused(run(pool, code, {"fn_name": "f", "inputs": [[1]], "outputs": [[1]]}))


# -------------------------------------------------------------------------- 8. red team, round two
def test_a_compile_error_report_written_by_the_program_is_no_escape(pool):
    before = pool.stats["faults"]
    code = "import os\nprint(1)\nos.write(3, b'{\"compile_error\": 1}\\n')\n"
    out = run(pool, code, {"inputs": ["", ""], "outputs": ["2\n", "2\n"]})
    assert out["verdict"] == "wrong_answer" and out["reward"] == 0.0, out
    no_faults(pool, before)


def test_a_huge_decimal_is_a_scored_failure(pool):
    """round() of Decimal('1e999999') builds a million-digit int in the checker: the test runs out of
    time like it would in any harness, and the verdict is the program's, not the sandbox's."""
    code = "from decimal import Decimal\ndef f():\n    return Decimal('1e999999')\n"
    before = pool.stats["faults"]
    out = refused(run(pool, code, {"assert_code": "assert round(f()) == 3"}))
    assert out["verdict"] in ("wrong_answer", "timeout"), out
    no_faults(pool, before)


def test_a_method_of_a_returned_value_cannot_judge_the_expected_value(pool):
    """A list subclass arrives as a plain list: its lying `equals` method never reaches the checker."""
    code = "class L(list):\n    def equals(self, other): return True\ndef f(x):\n    return L()\n"
    out = refused(run(pool, code, {"assert_code": "assert f(1).equals([1, 2])"}))
    assert out["verdict"] == "runtime_error" and "AttributeError" in out["details"]["message"], out


def test_honest_starred_fraction_and_range_shapes_are_accepted(pool):
    code = ("from fractions import Fraction\nimport random\ndef f(x):\n    return [1, 2]\n"
            "def half():\n    return Fraction(1, 2)\ndef roll():\n    return random.randint(1, 6)\n")
    tests = {"assert_code": "assert [*f(1)] == [1, 2]\nassert abs(half() - 0.5) < 1e-9\nassert roll() in range(1, 7)"}
    out = run(pool, code, tests)
    assert out["verdict"] == "accepted" and out["passed"] == 3, out
