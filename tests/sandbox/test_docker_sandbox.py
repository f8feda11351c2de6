"""Real containers: every test format, then one hostile behaviour per test.

After each hostile program the same warm container (the pool has one) must still accept a correct
program, with no stray process and nothing left in /tmp or /dev/shm. At the end no container this
process labelled may remain. One pool for the module keeps it to seconds, not minutes.
"""
import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from sandbox import JudgeConfig, Limits, PoolConfig, SandboxPool, verify_submission
from sandbox.container import LABEL, OWNER_LABEL, owner_id
from sandbox.reaper import labelled

pytestmark = pytest.mark.docker

SECRET = "klear-host-secret-6b1f"
FAST = JudgeConfig(limits=Limits(time_limit_s=1.0))


def ours(client):
    me = owner_id()
    return [c for c in labelled(client) if c.labels.get(OWNER_LABEL) == me]


@pytest.fixture(scope="module")
def pool(docker_client):
    os.environ["KLEAR_TEST_SECRET"] = SECRET  # must not reach any program
    pool = SandboxPool(PoolConfig(size=1), client=docker_client).start()
    yield pool
    pool.close()  # returns once the engine lists none of its containers (recycled ones included)
    del os.environ["KLEAR_TEST_SECRET"]
    assert ours(docker_client) == []


def run(pool, code, expected="", tests=None, config=FAST, **row):
    tests = tests or {"inputs": [""], "outputs": [expected]}
    return verify_submission({"id": "t", "code": textwrap.dedent(code), "tests": tests, **row}, pool, config)


PROBE = """
import os, time
time.sleep(0.3)  # a surviving daemon would have recreated its file by now
def stat(p):
    try:
        return open(f"/proc/{p}/cmdline", "rb").read(), int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None, None
def helper(p):  # the runner's zygote (our parent) and its checker (PID 1's child, PID 1's command line)
    cmdline, ppid = stat(p)
    return int(p) == os.getppid() or (ppid == 1 and cmdline == stat(1)[0])
others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid()) and not helper(p)]
print(len(others), sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')))
"""


def assert_healthy(pool):
    """The sandbox still accepts a correct program, and nothing of the last one is left."""
    out = run(pool, PROBE, "0 ['run'] []")
    assert out["verdict"] == "accepted", out["details"]
    assert run(pool, "print(sum(map(int, input().split())))",
               tests={"inputs": ["1 2\n"], "outputs": ["3\n"]})["verdict"] == "accepted"


# ------------------------------------------------------------------------------ formats and verdicts
@pytest.mark.parametrize("code, tests, verdict, passed", [
    ("print(int(input()) * 2)", {"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10"]}, "accepted", 2),
    ("print(int(input()) + 2)", {"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10"]}, "wrong_answer", 1),
    ("print(1 / int(input()))", {"inputs": ["0\n"], "outputs": ["1"]}, "runtime_error", 0),
    ("print('1.50')", {"inputs": [""], "outputs": ["1.5\n"]}, "accepted", 1),
    ("def add(a, b):\n    return a + b", {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]},
     "accepted", 2),
    ("def add(a, b):\n    return a - b", {"fn_name": "add", "inputs": [[1, 2], [2, 0]], "outputs": [3, 2]},
     "wrong_answer", 1),
    ("class Solution:\n    def twoSum(self, nums, t):\n        return (0, 1)",
     {"fn_name": "twoSum", "inputs": [[[1, 2], 3]], "outputs": [[0, 1]]}, "accepted", 1),
    ("def f(x):\n    return {x}", {"fn_name": "f", "inputs": [[1]], "outputs": [[1]]}, "wrong_answer", 0),
    ("def add(a, b):\n    return a + b", {"assert_code": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]},
     "accepted", 2),
    ("def add(a, b):\n    return a * b", {"assert_code": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]},
     "wrong_answer", 1),
    ("def add(a, b) return", {"assert_code": "assert add(1, 2) == 3"}, "compile_error", 0),
    # LeetCode's judge offers sortedcontainers, and its solutions use it: the image carries it
    ("from sortedcontainers import SortedList\nclass Solution:\n    def kth(self, xs, k):\n"
     "        return SortedList(xs)[k]", {"fn_name": "kth", "inputs": [[[5, 1, 3], 1]], "outputs": [3]}, "accepted", 1),
])
def test_formats(pool, code, tests, verdict, passed):
    out = run(pool, code, tests=tests)
    assert (out["verdict"], out["passed"]) == (verdict, passed), out["details"]
    assert out["reward"] == passed / out["total"]


def test_cpp_without_gpp_is_unscored(pool):
    out = run(pool, "int main(){}", language="cpp")
    assert out["verdict"] == "sandbox_error" and out["reward"] is None


# ------------------------------------------------------------------------------- hostile programs
def test_network_outside_is_unreachable(pool):
    code = """
    import os, socket
    results = [sorted(os.listdir('/sys/class/net'))]
    for host, port in [('1.1.1.1', 53), ('8.8.8.8', 443), ('deb.debian.org', 80), ('pypi.org', 443)]:
        try:
            socket.create_connection((host, port), timeout=2).close()
            results.append('open')
        except OSError:
            results.append('blocked')
    print(*results)
    """
    out = run(pool, code, "['lo'] blocked blocked blocked blocked")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_docker_host_is_unreachable(pool):
    host_ips = {"172.17.0.1", "10.0.2.2", "169.254.169.254"}
    try:
        host_ips.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    code = f"""
    import os, socket
    hits = []
    for ip in {sorted(host_ips)!r}:
        for port in (2375, 2376, 22, 80, 8786):
            try:
                socket.create_connection((ip, port), timeout=1).close()
                hits.append(f'{{ip}}:{{port}}')
            except OSError:
                pass
    hits += [p for p in ('/var/run/docker.sock', '/run/docker.sock', '/run/containerd') if os.path.exists(p)]
    print(hits)
    """
    out = run(pool, code, "[]")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_fork_bomb_is_contained(pool):
    code = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    out = run(pool, code, "x")
    assert out["verdict"] in ("timeout", "runtime_error"), out["details"]
    assert os.fork  # the host is fine (this process can still fork: the rest of the suite does)
    assert_healthy(pool)


def test_memory_hog_is_memory_limit(pool):
    # A per-test limit of 256 MiB and a generous time limit: touching pages is slow on a busy VM.
    config = JudgeConfig(limits=Limits(time_limit_s=10.0, memory=256 << 20))
    out = run(pool, "a = []\nwhile True:\n    a.append(bytearray(16 << 20))", "x", config=config)
    assert out["verdict"] == "memory_limit", out["details"]
    out = run(pool, "x = [0] * (10 ** 10)", "x")  # one huge request fails at once
    assert out["verdict"] == "memory_limit", out["details"]
    assert_healthy(pool)


def test_memory_hog_in_many_processes_hits_the_container_limit(pool):
    code = """
    import os, time
    for _ in range(3):
        if os.fork() == 0:
            b = bytearray(600 << 20)           # each under RLIMIT_AS, together over the cgroup limit
            for i in range(0, len(b), 4096):
                b[i] = 1
            time.sleep(2)
            os._exit(0)
    for _ in range(3):
        os.wait()
    print('survived')
    """
    out = run(pool, code, "never", config=JudgeConfig(limits=Limits(time_limit_s=10.0)))
    assert out["verdict"] == "memory_limit", out["details"]
    assert_healthy(pool)


def test_busy_loop_is_timeout(pool):
    out = run(pool, "while True:\n    pass", "x")
    assert out["verdict"] == "timeout", out["details"]
    assert out["details"]["tests"][0]["wall"] < 3
    assert_healthy(pool)


def test_sigterm_ignoring_process_is_killed(pool):
    code = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        time.sleep(0.05)
    """
    out = run(pool, code, "x")
    assert out["verdict"] == "timeout", out["details"]
    assert_healthy(pool)


def test_output_flood_is_output_limit(pool):
    out = run(pool, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", "x")
    assert out["verdict"] == "output_limit", out["details"]
    assert_healthy(pool)


def test_stderr_is_never_judged_nor_output_limit(pool):
    """LiveCodeBench's rule: stderr is not judged. 2 MiB of debug output beside the right answer is
    accepted; a program that never stops writing there runs out of time, it is not an output limit."""
    out = run(pool, "import sys\nsys.stderr.write('e' * (2 << 20))\nprint('x')", "x")
    assert out["verdict"] == "accepted", out["details"]
    out = run(pool, "import sys\nwhile True:\n    sys.stderr.write('e' * 65536)", "x")
    assert out["verdict"] == "timeout", out["details"]
    assert_healthy(pool)


def test_tmp_fill_is_capped_and_wiped(pool):
    code = """
    import errno
    n = 0
    try:
        while True:
            with open(f'/tmp/fill{n}', 'wb') as f:
                f.write(b'x' * (8 << 20))
            n += 1
    except OSError as e:
        print(errno.errorcode[e.errno], n * 8 <= 64)
    """
    out = run(pool, code, "ENOSPC True")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)  # and /tmp is empty again


def test_root_filesystem_is_read_only(pool):
    code = """
    import os
    ok = []
    for path in ('/etc/passwd', '/usr/bin/evil', '/opt/klear/runner.py', '/evil', '/etc/hosts', '/var/tmp/x'):
        try:
            with open(path, 'a') as f:
                f.write('x')
            ok.append(path)
        except OSError:
            pass
    try:
        os.mkdir('/usr/lib/evil')
        ok.append('mkdir')
    except OSError:
        pass
    print(ok)
    """
    out = run(pool, code, "[]")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_host_files_are_not_visible(pool, tmp_path):
    sentinel = tmp_path / "host-only.txt"
    sentinel.write_text(SECRET)
    checkout = str(Path(__file__).resolve().parents[2] / "pyproject.toml")  # this checkout, wherever it is
    paths = [str(sentinel), checkout, os.path.expanduser("~/.cache/klear"), "/var/lib/docker",
             "/usr/bin/dockerd", "/etc/docker", os.path.expanduser("~/.bash_history")]
    code = f"""
    import os
    print([p for p in {paths!r} if os.path.exists(p)])
    """
    out = run(pool, code, "[]")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_daemonised_child_does_not_outlive_the_test(pool):
    code = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            while True:
                with open('/tmp/daemon-alive', 'w') as f:
                    f.write(str(time.time()))
                time.sleep(0.05)
        os._exit(0)
    os.wait()
    time.sleep(0.2)
    print('parent done')
    """
    out = run(pool, code, "parent done")
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)  # no process but the runner, no /tmp/daemon-alive


def test_environment_is_scrubbed(pool):
    code = f"""
    import os
    print(sorted(os.environ))
    print(any({SECRET!r} in v for v in os.environ.values()))
    try:
        open('/proc/1/environ', 'rb').read()
        print('read')
    except OSError:
        print('blocked')
    """
    expected = ("['HOME', 'LANG', 'LC_ALL', 'LOGNAME', 'PATH', 'PYTHONIOENCODING', 'TMPDIR', 'USER']\n"
                "False\nblocked")
    out = run(pool, code, expected)
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_runner_cannot_be_killed_traced_or_read(pool):
    code = """
    import ctypes, os, signal
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP, signal.SIGSEGV):
        try:
            os.kill(1, sig)
        except OSError:
            pass
    leaks = []
    for path in ('/proc/1/mem', '/proc/1/fd/0', '/proc/1/fd/1', '/proc/1/cmdline'):
        try:
            with open(path, 'rb') as f:
                f.read(1)
            leaks.append(path)
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    print(leaks, libc.ptrace(16, 1, 0, 0))  # PTRACE_ATTACH to the runner
    """
    out = run(pool, code, "['/proc/1/cmdline'] -1")  # cmdline is public; everything else is closed
    assert out["verdict"] == "accepted", out["details"]
    assert_healthy(pool)


def test_exiting_before_the_asserts_is_not_a_pass(pool):
    out = run(pool, "import os\nos._exit(0)", tests={"assert_code": "assert add(1, 2) == 3"})
    assert out["verdict"] == "runtime_error", out["details"]
    out = run(pool, "import sys\ndef add(a, b):\n    sys.exit(0)", tests={"assert_code": "assert add(1, 2) == 3"})
    assert out["verdict"] == "runtime_error", out["details"]
    assert_healthy(pool)


def test_runs_as_non_root_without_capabilities(pool):
    code = """
    import os
    caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd'))]
    nnp = [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')]
    print(os.getuid() != 0, os.getgid() != 0, caps, nnp)
    """
    out = run(pool, code, "True True ['0000000000000000', '0000000000000000'] ['1']")
    assert out["verdict"] == "accepted", out["details"]


# ------------------------------------------------------------------------------------- faults
def test_container_killed_mid_job_is_retried_not_scored(pool, docker_client):
    import threading

    def kill_soon():

        time.sleep(0.5)
        for c in ours(docker_client):
            c.kill()

    threading.Thread(target=kill_soon).start()
    out = run(pool, "import time\ntime.sleep(1)\nprint('ok')", "ok")
    assert out["verdict"] == "accepted" and out["details"]["attempts"] == 2, out["details"]
    assert_healthy(pool)


def test_no_labelled_containers_remain_after_close(docker_client):
    p = SandboxPool(PoolConfig(size=2), client=docker_client).start()
    ids = {m.id for m in p._members}
    assert len(ids) == 2 and ids <= {c.id for c in ours(docker_client)}
    assert all(c.labels[LABEL] == "1" for c in ours(docker_client))
    p.close()  # synchronous: no bounded poll, a container still listed here is a bug in close()
    assert ids.isdisjoint(c.id for c in labelled(docker_client))


def test_tmp_is_noexec_on_the_python_image(pool):
    code = """
    import os, shutil, subprocess
    shutil.copy('/bin/true', '/tmp/t')
    os.chmod('/tmp/t', 0o755)
    try:
        subprocess.run(['/tmp/t'])
        print('ran')
    except PermissionError:
        print('blocked')
    """
    out = run(pool, code, "blocked")
    assert out["verdict"] == "accepted", out["details"]
