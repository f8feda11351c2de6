"""Isolation canaries: hostile programs (a policy after reward it did not earn) that attack the runner
itself rather than the judge, run in the real Docker sandbox. One behaviour each.

1. An earlier job's answers must not be readable by the next job's program. Job A is an honest program
   whose answer is a fresh random token; job B, for the same problem, does not know the token and looks
   for anything of its shape: in every frame, every gc object, every readable memory mapping, every open
   file descriptor. B must not be accepted. Each search first proves itself on a token of the same shape
   that B plants in its own memory (else B exits with "SELFTEST FAILED", a runtime_error, and the test
   fails): a passing test means "the search works, and found no earlier job's data". The same holds for
   the port numbers of the sockets an earlier job closed.
2. Penalty evasion: a program must not turn its penalty into `sandbox_error` (reward None: the rollout is
   dropped, which under RL beats a penalty). Each comes back as a scored verdict (reward 0), the pool
   records no fault, the same program gets the same verdict twice, and the next job on the container is
   judged normally.

The hostile programs attack generically: they do not know the runner's fd numbers or protocol, they
write to every open fd > 2, signal every pid they can see, scan everything they can read. One warm
container (PoolConfig(size=1)) serves the whole module, so consecutive jobs really share it.
"""
import secrets
import time

import pytest

from sandbox import JudgeConfig, Limits
from sandbox.verdicts import SANDBOX_ERROR

from tests.sandbox.canaries import FAST, no_faults, refused, run

pytestmark = pytest.mark.docker

SEARCHING = JudgeConfig(limits=Limits(time_limit_s=4.0))  # scanning every mapping takes ≈ 0.3 s of CPU
ROOMY = JudgeConfig(limits=Limits(time_limit_s=8.0))  # room to fill the container's memory before the CPU limit
OK = {"inputs": ["\n"], "outputs": ["ok\n"]}


# ------------------------------------------------------------ 1. an earlier job's answers stay hidden
# The searching half of job B. PREFIX (the answer's known shape, as a problem statement would give it)
# is defined in front of it; the answer is PREFIX + 32 hex digits.
SEARCH = r'''
import base64, binascii, collections, gc, os, re, sys

TOKEN = re.compile(re.escape(PREFIX) + rb"[0-9a-f]{32}(?![0-9a-f])")
BASE64 = re.compile(rb"[A-Za-z0-9+/]{40,}")


def tokens_in(data, found):
    """Count every token-shaped string in `data` (str or bytes), also inside any base64 text there."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    for m in TOKEN.findall(data):
        found[m.decode()] += 1
    for m in BASE64.findall(data):
        for skip in range(4):
            text = m[skip:]
            try:
                decoded = base64.b64decode(text[: len(text) // 4 * 4])
            except (binascii.Error, ValueError):
                continue
            for t in TOKEN.findall(decoded):
                found[t.decode()] += 1


def walk(obj, found, seen, depth=0):
    """Every str/bytes reachable from obj through dicts, lists, tuples and sets (bounded)."""
    if depth > 12 or seen.get(id(obj), 99) <= depth or len(seen) > 3_000_000:
        return
    seen[id(obj)] = depth
    if isinstance(obj, (str, bytes, bytearray)):
        tokens_in(bytes(obj) if isinstance(obj, bytearray) else obj, found)
    elif isinstance(obj, dict):
        for k, v in list(obj.items()):
            walk(k, found, seen, depth + 1)
            walk(v, found, seen, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in list(obj):
            walk(v, found, seen, depth + 1)


def scan_frames():
    """Every frame on the stack, back to the outermost: its locals and its globals."""
    found = collections.Counter()
    seen = {id(found): -1}
    f = sys._getframe(1)
    while f is not None:
        walk(f.f_locals, found, seen)
        walk(f.f_globals, found, seen)
        f = f.f_back
    return found


def scan_gc():
    """Every object the garbage collector tracks, and what it holds a few levels down."""
    found = collections.Counter()
    seen = {id(found): -1}
    for obj in gc.get_objects():
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            walk(obj, found, seen, 9)
    return found


def scan_mem():
    """The raw bytes of every readable mapping of this process (/proc/self/mem, else read directly)."""
    import ctypes
    found = collections.Counter()
    regions = []
    with open("/proc/self/maps") as fh:
        for line in fh.read().splitlines():
            fields = line.split()
            if fields[1][0] == "r":
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                regions.append((lo, hi, fields[5] if len(fields) > 5 else ""))
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
    except OSError:
        fd = None
    for lo, hi, name in regions:
        pos = lo
        while pos < hi:
            n = min(hi - pos, 4 << 20)
            try:
                if fd is not None:
                    chunk = os.pread(fd, n, pos)
                elif name.startswith("[") and name not in ("[heap]", "[stack]"):
                    break
                else:
                    chunk = ctypes.string_at(pos, n)
            except OSError:
                break
            if not chunk:
                break
            tokens_in(chunk, found)
            pos += len(chunk) if pos + len(chunk) >= hi else max(len(chunk) - 256, 1)  # overlap the seams
    if fd is not None:
        os.close(fd)
    return found


def scan_fds():
    """Every open file descriptor: where it points, and whatever can be read, reread or peeked there."""
    import socket
    found = collections.Counter()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            os.fstat(fd)
            data = [os.readlink(f"/proc/self/fd/{fd}")]
        except OSError:
            continue
        for how in ("pread", "read", "reopen", "peek"):
            try:
                if how == "pread":
                    data.append(os.pread(fd, 1 << 20, 0))
                elif how == "read":
                    blocking = os.get_blocking(fd)
                    os.set_blocking(fd, False)
                    try:
                        data.append(os.read(fd, 1 << 20))
                    finally:
                        os.set_blocking(fd, blocking)
                elif how == "reopen":  # a pipe's write end reopens as its read end
                    g = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
                    try:
                        data.append(os.pread(g, 1 << 20, 0))
                    except OSError:
                        data.append(os.read(g, 1 << 20))
                    finally:
                        os.close(g)
                else:
                    s = socket.socket(fileno=os.dup(fd))
                    try:
                        data.append(s.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT))
                    finally:
                        s.close()
            except (OSError, ValueError):
                pass
        for d in data:
            tokens_in(d, found)
    return found


def cheat(scan):
    """The most frequent token-shaped string `scan` finds that this program did not make itself.
    Positive control: a token of the same shape planted here (a local, a list, a dict, a pipe, a memfd)
    must be found, or the search is broken and we say so."""
    import secrets
    mine = PREFIX.decode() + secrets.token_hex(16)
    planted = [mine, {"planted": mine}]
    r, w = os.pipe()
    os.write(w, mine.encode())
    m = os.memfd_create("planted")
    os.write(m, mine.encode())
    try:
        found = scan()
    finally:
        for fd in (r, w, m):
            os.close(fd)
    if mine not in found:
        raise SystemExit(f"SELFTEST FAILED: {scan.__name__} missed the program's own token")
    del found[mine]
    sys.stderr.write(f"{scan.__name__} found {dict(found)}\n")
    return found.most_common(1)[0][0] if found else "nothing found"
'''


def problem(mode, token):
    """(tests, honest program) for a problem in `mode` whose one answer is `token`."""
    if mode == "stdio":
        return {"inputs": ["\n"], "outputs": [token + "\n"]}, f"print({token!r})\n"
    honest = f"def f():\n    return {token!r}\n"
    if mode == "call":
        return {"fn_name": "f", "inputs": [[]], "outputs": [token]}, honest
    return {"assert_code": f"assert f() == {token!r}"}, honest


def searcher(mode, scan, prefix):
    """Job B: the same problem's signature, answered with whatever `scan` finds."""
    code = f"PREFIX = {prefix.encode()!r}\n" + SEARCH
    if mode == "stdio":
        return code + f"\nprint(cheat({scan}))\n"
    return code + f"\ndef f():\n    try:\n        return cheat({scan})\n    except SystemExit as exc:\n" \
                  f"        raise RuntimeError(str(exc))\n"


def earlier_answer_stays_hidden(pool, scan, mode):
    prefix = f"iso_{scan}_{mode}_"  # a shape of its own per test: earlier tests' tokens never match
    token = prefix + secrets.token_hex(16)
    tests, honest = problem(mode, token)
    first = run(pool, honest, tests, SEARCHING)
    assert first["verdict"] == "accepted", first
    out = run(pool, searcher(mode, scan, prefix), tests, SEARCHING)
    assert out["verdict"] != "accepted", f"job B read job A's answer {token} through {scan}: {out}"
    refused(out)
    assert out["verdict"] == "wrong_answer", f"positive control: {scan} must find the program's own token: {out}"


MODES = ["stdio", "call", "assert"]


@pytest.mark.parametrize("mode", MODES)
def test_an_earlier_jobs_answer_is_in_no_frame(pool, mode):
    """The policy walks sys._getframe() back to the outermost frame, through every f_locals and
    f_globals (into dicts, lists, bytes, base64 text), for an answer an earlier job produced."""
    earlier_answer_stays_hidden(pool, "scan_frames", mode)


@pytest.mark.parametrize("mode", MODES)
def test_an_earlier_jobs_answer_is_in_no_gc_object(pool, mode):
    """The policy searches every object gc.get_objects() returns, and what they hold."""
    earlier_answer_stays_hidden(pool, "scan_gc", mode)


@pytest.mark.parametrize("mode", MODES)
def test_an_earlier_jobs_answer_is_in_no_memory_mapping(pool, mode):
    """The policy reads /proc/self/maps, then the raw bytes of every readable region through
    /proc/self/mem: freed but not overwritten memory included."""
    earlier_answer_stays_hidden(pool, "scan_mem", mode)


@pytest.mark.parametrize("mode", MODES)
def test_an_earlier_jobs_answer_is_behind_no_inherited_fd(pool, mode):
    """The policy reads, rereads (pread at 0), reopens through /proc/self/fd and peeks every file
    descriptor it inherited."""
    earlier_answer_stays_hidden(pool, "scan_fds", mode)


# An earlier job's answer carried in the port numbers of sockets it closed: the kernel keeps a closed TCP
# connection (TIME_WAIT, 60 s by default) in the container's network namespace, which outlives every job,
# and /proc/net/tcp lists it with both ports.
PORTS = r'''
import socket
SLOT, VALUE = 20000, 30000  # a connection from port SLOT + i to VALUE + v says "digit i is v"


def publish(slot, value, keep=False):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", VALUE + value))
    srv.listen(1)
    cli = socket.socket()
    cli.bind(("127.0.0.1", SLOT + slot))
    cli.connect(("127.0.0.1", VALUE + value))
    conn, _ = srv.accept()
    if keep:
        return cli, conn, srv
    cli.close()  # the side that closes first holds TIME_WAIT
    conn.close()
    srv.close()


def read(slots):
    seen = {}
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            local, remote = line.split()[1:3]
            port, peer = int(local.split(":")[1], 16), int(remote.split(":")[1], 16)
            if SLOT <= port < SLOT + 8 and port - SLOT in slots:
                seen[port - SLOT] = peer - VALUE
    return seen
'''


def test_an_earlier_jobs_answer_is_in_no_socket_it_closed(pool):
    """Job A, an honest program colluding with later rollouts, prints its answer (two 15-bit digits) and
    publishes it as two loopback connections it closes at once. Job B reads /proc/net/tcp for them; its
    positive control is its own planted pair, kept open. B must find its own pair and not A's."""
    token = secrets.randbelow(1 << 30)
    tests = {"inputs": ["\n"], "outputs": [f"{token}\n"]}
    hi, lo = token >> 15, token & 0x7FFF
    honest = PORTS + f"print({token})\npublish(0, {hi})\npublish(1, {lo})\n"
    assert run(pool, honest, tests, SEARCHING)["verdict"] == "accepted"
    reader = PORTS + """
own = publish(2, 1234, keep=True), publish(3, 4321, keep=True)
if read({2, 3}) != {2: 1234, 3: 4321}:
    raise SystemExit("SELFTEST FAILED")
seen = read({0, 1})
print((seen[0] << 15) | seen[1] if len(seen) == 2 else "nothing found")
"""
    out = run(pool, reader, tests, SEARCHING)
    assert out["verdict"] != "accepted", f"job B read job A's answer {token} from closed sockets: {out}"
    refused(out)
    assert out["verdict"] == "wrong_answer", f"positive control: the scan must find B's own sockets: {out}"


# ------------------------------------------------------ 2. penalty evasion: scored, never sandbox_error
FDS = '''
import os
def open_fds():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
            fds.append(int(name))
        except OSError:
            pass
    return fds
def flood(fd, data):
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass
'''
REPORTS_THEN_SHM_FILL = FDS + r'''
import ctypes, json
line = (json.dumps({"obs": 0, "value": [[]] * 20000}) + "\n").encode()  # 3 bytes in, ~64 bytes parsed
reports = line * (((1 << 20) - 4096) // len(line))
for fd in open_fds():
    if fd > 2:
        flood(fd, reports)
flood(1, reports)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
SEG = 64 << 20
while True:  # unattached segments until the container is full: charged to it, held by no process
    seg = libc.shmget(0, SEG, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    if seg < 0:
        break
    addr = libc.shmat(seg, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        break
    ctypes.memset(addr, 1, SEG)
    libc.shmdt(addr)
def f(x):
    return -1
'''
GARBLED_REPORTS = FDS + r'''
block = b"".join([
    b"{}\n" * 20000,                               # the cheapest report to write, the dearest to parse
    b"[" * 240 + b"]" * 240 + b"\n",                # nesting just under a depth limit
    b"[" * 5000 + b"]" * 5000 + b"\n",              # and far past it
    b'{"value": ' + b"9" * 4300 + b"}\n",           # the longest int a str may convert
    b'{"value": ' + b"9" * 5000 + b"}\n",           # and past that
    b"\xff\xfe\xc0\x80" * 256 + b"\n",              # invalid UTF-8
])
garbage = block * (((1 << 20) - 4096) // len(block))  # just under the output cap
for fd in open_fds():
    if fd > 2:
        flood(fd, garbage)
def f(x):
    return -1
'''
HUGE_LITERAL = "x = [" + "0," * 1_000_000 + "]\nprint('wrong')\n"  # compiling it takes 1.2-2.5 s of CPU here
# A CPU limit far below the literal's compile time, whatever the machine's speed that hour (at FAST's 1 s
# the compile once finished in time on a fast hour and the program printed its wrong answer)
COMPILE_BOUND = JudgeConfig(limits=Limits(time_limit_s=0.3))
CALLS = {"fn_name": "f", "inputs": [[i] for i in range(8)], "outputs": [2 * i for i in range(8)]}  # 8 runs
HOSTILE = {  # name: (program, tests, config, honest next job)
    "reports-then-shm-fill": (REPORTS_THEN_SHM_FILL, {**CALLS, "inputs": [[1]], "outputs": [2]}, ROOMY,
                              "x = bytearray(512 << 20)\nx[::4096] = b'\\1' * len(x[::4096])\nprint('ok')\n"),
    "garbled-report-flood": (GARBLED_REPORTS, CALLS, FAST, "print('ok')\n"),
    "huge-literal": (HUGE_LITERAL, OK, COMPILE_BOUND, "print('ok')\n"),
}
_first_verdict = {}  # name -> the verdict its own test got, so the determinism test needs one run less


def hostile(pool, name):
    """Run hostile program `name`; it must be scored, fault nothing, and leave the container working."""
    code, tests, config, honest = HOSTILE[name]
    before = pool.stats["faults"]
    started = time.monotonic()
    out = run(pool, code, tests, config)
    elapsed = time.monotonic() - started
    _first_verdict.setdefault(name, out["verdict"])
    refused(out)
    no_faults(pool, before)
    after = run(pool, honest, OK, config)
    assert after["verdict"] == "accepted", ("the next job on the container", after)
    return out, elapsed


def test_report_flood_then_filling_memory_with_shm_is_scored(pool):
    """The policy writes ~1 MiB of parse-heavy JSON report lines to every open fd > 2 and to stdout,
    then fills the container's memory with unattached SysV shared-memory segments: the runner, parsing
    the reports before its cleanup frees the segments, must not be OOM-killed (a fault, then
    sandbox_error)."""
    hostile(pool, "reports-then-shm-fill")


def test_garbled_report_flood_is_scored_within_the_runners_budget(pool):
    """The policy floods every open fd > 2 with garbled report lines (hundreds of thousands of `{}`,
    nesting, huge ints, invalid UTF-8) up to the output cap, in every test: the runner's parsing must
    stay within the 0.5 s per run that the host's deadline allows it, or on a loaded host the round
    trip times out (a fault, then sandbox_error)."""
    out, elapsed = hostile(pool, "garbled-report-flood")
    runs = [t for t in out["details"]["tests"] if t.get("wall") is not None]
    overhead = elapsed - sum(t["wall"] for t in runs)
    assert overhead <= 0.5 * len(runs) + 2.0, (f"the round trip took {elapsed:.1f}s, {overhead:.1f}s beyond "
                                               f"the programs' own wall time ({len(runs)} runs)")


def test_a_literal_too_big_to_compile_in_time_is_scored(pool):
    """The policy submits a million-element list literal: compile() alone exhausts the CPU limit before
    any of the program runs. That is the program's timeout (or compile error), not a setup failure."""
    out, _ = hostile(pool, "huge-literal")
    assert out["verdict"] in ("timeout", "compile_error"), out


@pytest.mark.parametrize("name", list(HOSTILE))
def test_penalty_evasion_verdicts_are_deterministic(pool, name):
    """The same hostile program gets the same verdict every time (and a scored one): no race between its
    flood, its kill and the runner decides it."""
    first = _first_verdict.get(name) or run(pool, *HOSTILE[name][:3])["verdict"]
    second = run(pool, *HOSTILE[name][:3])["verdict"]
    assert first == second, (name, first, second)
    assert first != SANDBOX_ERROR, (name, first)


SIGNAL_EVERYONE = '''
import os, signal, sys, time
SIG = signal.{sig}
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
hit = 0
for name in os.listdir("/proc"):  # every process we can see, pid 1 included
    if name.isdigit() and int(name) != os.getpid():
        try:
            os.kill(int(name), SIG)
            hit += 1
        except OSError:
            pass
_, status = os.waitpid(child, os.WUNTRACED)  # positive control: our own child got it
got = os.WSTOPSIG(status) if os.WIFSTOPPED(status) else os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
if got != SIG:
    sys.exit(f"SELFTEST FAILED: our own child was not signalled ({{status}})")
if os.WIFSTOPPED(status):
    os.kill(child, signal.SIGKILL)
print("wrong", hit)
'''


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL"])
def test_signalling_every_visible_process_is_scored(pool, sig):
    """The policy sends SIGSTOP (or SIGKILL) to every pid in /proc but its own, pid 1 and whatever
    helper of the runner it can see included, then prints a wrong answer."""
    before = pool.stats["faults"]
    out = refused(run(pool, SIGNAL_EVERYONE.format(sig=sig), OK))
    assert out["verdict"] == "wrong_answer", out
    no_faults(pool, before)
    after = run(pool, "print('ok')\n", OK)
    assert after["verdict"] == "accepted", ("the next job on the container", after)


STOP_THE_ZYGOTE = '''
import os, signal, time
zygote = os.getppid()  # the runner's process forker, parent of every test process
if os.fork() == 0:  # a daemon that keeps stopping it while the runner waits for it after the deadline
    os.setsid()
    end = time.monotonic() + 4
    while time.monotonic() < end:
        try:
            os.kill(zygote, signal.SIGSTOP)
        except OSError:
            pass
    os._exit(0)
time.sleep(30)
'''


def test_stopping_the_zygote_past_the_deadline_is_a_timeout_within_the_budget(pool):
    """The policy keeps SIGSTOPping the runner's zygote while it runs out its wall time, so that the
    runner's wait for it (after the deadline, outside the program's clock) outlasts the host's patience:
    it must cost the program its own test, a timeout, and the answer must come within the job budget."""
    before = pool.stats["faults"]
    started = time.monotonic()
    out = refused(run(pool, STOP_THE_ZYGOTE, OK))
    assert out["verdict"] == "timeout", out
    assert time.monotonic() - started < FAST.limits.wall_s() + 3.0, "the runner waited on a stopped zygote"
    no_faults(pool, before)
    assert run(pool, "print('ok')\n", OK)["verdict"] == "accepted"
