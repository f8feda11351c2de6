#!/usr/bin/python3
"""klear sandbox runner: lives inside a warm container as PID 1 and runs submissions.

Standard library only; shipped into the image at /opt/klear/runner.py. One request per line on stdin,
one JSON response per line on stdout (nothing else is ever written there).

    {"op": "ping"}
    {"op": "run", "language": "python"|"cpp", "mode": "stdio"|"call"|"assert", "code": "...",
     "fn_name": "...", "tests": [{"stdin": "..."} | {"args": [...]} | {"assert_code": "..."}],
     "limits": {...see LIMIT_DEFAULTS...}}

The runner never sees expected outputs and decides nothing: it reports raw facts per test (exit status,
signal, CPU and wall time, peak memory, captured stdout, the harness reports) and the host judges them.
An assert-style test arrives already rewritten by the host (sandbox/asserts.py): its asserts are
`__observe__(k, lambda: EXPR)` calls, and the harness reports each observed value as plain data.
Call-based and assert code runs as an imported module named `solution` (`__name__ != "__main__"`).

Each test runs in a child forked from this process (no interpreter start-up), in a fresh scratch dir,
with its own rlimits and a wall-clock deadline. Its CPU time counts every descendant: the runner is the
container's init, so orphans are reparented to it and reaped, and the CPU of everything reaped during
the test (getrusage(RUSAGE_CHILDREN) before and after) is the test's. After every test, as PID 1, the
runner SIGKILLs every other process in the container (kill(-1)), reaps them, removes every SysV IPC
object (shared memory, message queues, semaphore sets) and wipes /tmp, /dev/shm and /dev/mqueue, so
daemonised children, files, IPC state and the memory they hold never outlive the test that made them.

Hardening of the runner itself: it is not dumpable (so /proc/1/fd and /proc/1/mem are closed to the
programs it runs, which share its uid), it installs no signal handlers (PID 1 then ignores every
signal sent from inside the container), and its protocol pipes are moved off fds 0-2 and closed in
every child.
"""
import base64
import ctypes
import fcntl
import io
import json
import math
import os
import resource
import selectors
import signal
import sys
import time
import types

VERSION = 2
# Destructive housekeeping (kill(-1), wiping /tmp) happens only when all three say we are the
# sandbox container's init: started with --sandbox, as PID 1, not as root. Anywhere else (a developer
# running this file by hand) the runner uses a private temp dir and kills only its children's groups.
IS_INIT = os.getpid() == 1
SANDBOXED = IS_INIT and os.getuid() != 0 and "--sandbox" in sys.argv
if SANDBOXED:
    SCRATCH_ROOTS = ("/tmp", "/dev/shm", "/dev/mqueue")
    WORK_DIR = "/tmp/run"  # fresh per test; the program's cwd, HOME and TMPDIR
    BUILD_DIR = "/tmp/.klear-build"  # compiled C++ binary, written afresh from the runner's memory per test
else:
    import atexit
    import shutil
    import tempfile

    _BASE = tempfile.mkdtemp(prefix="klear-runner-")
    atexit.register(shutil.rmtree, _BASE, True)  # children leave with os._exit, so only we run this
    SCRATCH_ROOTS = (_BASE,)
    WORK_DIR, BUILD_DIR = os.path.join(_BASE, "run"), os.path.join(_BASE, "build")
CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
             "USER": "sandbox", "LOGNAME": "sandbox", "PYTHONIOENCODING": "utf-8"}
STDERR_KEEP = 4096  # bytes of stderr returned per test (the tail: where tracebacks end)
LIMIT_DEFAULTS = {
    "cpu_s": 4.0,  # CPU seconds per test (RLIMIT_CPU rounds up; the host re-checks the exact time)
    "wall_s": 8.0,  # wall-clock deadline per test, then SIGKILL of everything
    "memory_bytes": 1 << 30,  # RLIMIT_AS per test
    "nproc": 64,  # RLIMIT_NPROC
    "fsize_bytes": 16 << 20,  # RLIMIT_FSIZE: largest file a program may write
    "nofile": 1024,  # RLIMIT_NOFILE
    "output_bytes": 1 << 20,  # stdout (and separately stderr) cap; beyond it the test is killed
    "max_timeouts": 2,  # after this many timed-out tests the rest are skipped
    "compile_wall_s": 30.0,  # C++ compile deadline
    "compile_memory_bytes": 2 << 30,  # C++ compile address-space limit
}
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36  # outside a container: orphans come back to us, so their CPU is counted
IPC_RMID = 0
MAX_REPORT_DEPTH = 250  # nesting accepted in a report line; deeper is garbled (never a runner crash)
OBSERVE = "__observe__"  # the harness function an assert-style test calls (see sandbox/asserts.py)
MAX_REPORTS = 100_000  # parsed report lines kept per test (blank ones skipped); more is truncation, not a
#   bigger response: a program's 1 MiB of report lines must not become a 20 MiB answer the host times out on
SETUP_FAILED = 125  # child exit status when preparing a test failed before the program started
READY_FD = 4  # in the child, until the program starts: where it reports that setup went well


# ----------------------------------------------------------------------------------------- helpers
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _prctl(option, value):
    try:
        _libc().prctl(option, value, 0, 0, 0)
    except Exception:
        pass


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _oom_kills():
    """The memory cgroup's OOM-kill counter (cgroup v1 or v2), or None when not visible."""
    for path, key in (("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
                      ("/sys/fs/cgroup/memory.events", "oom_kill")):
        try:
            with open(path) as fh:
                for line in fh:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except OSError:
            continue
    return None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _scan(fd, skip=()):
    """Unlink every non-directory in the open dir `fd`; return the names of its subdirectories."""
    ok, dirs = True, []
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return False, dirs
    for entry in entries:
        if entry.name in skip:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
        except OSError:
            ok = False
    return ok, dirs


def _container_cpu():
    """CPU seconds used by the whole container so far (cgroup v1 cpuacct or v2 cpu.stat), or None.

    The per-test figure is this counter's delta minus the runner's own: it sees processes that no one
    reaps (a SIGCHLD set to SIG_IGN makes the kernel discard children, and their CPU, unreported)."""
    if not SANDBOXED:
        return None
    try:
        with open("/sys/fs/cgroup/cpuacct/cpuacct.usage") as fh:
            return int(fh.read()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu.stat") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return None


def _self_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wipe(path, keep=()):
    """Remove everything under path (not path itself), making read-only dirs writable first.

    Iterative and fd-relative: any depth or width of tree costs one open directory at a time and each
    directory is listed once (a program's 1,100-deep or 100,000-wide tree cannot recurse or go quadratic).
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return True
    skip = {os.path.basename(k) for k in keep if os.path.dirname(k) == path}
    ok, first = _scan(fd, skip)
    names, pending = [], [first]  # names: the dirs descended into; pending: subdirs left per level
    try:
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                try:
                    os.chmod(name, 0o700, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    ok = False
                    continue
                os.close(fd)
                fd = child
                names.append(name)
                scanned, subdirs = _scan(fd)
                ok = ok and scanned
                pending.append(subdirs)
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(names.pop(), dir_fd=fd)
            except OSError:
                ok = False
    except OSError:
        ok = False
    finally:
        os.close(fd)
    return ok


def _remove_ipc():
    """Remove every SysV shared-memory segment, message queue and semaphore set in our IPC namespace
    (the container's own: ipc_mode private). Nothing is attached any more: every process is dead."""
    if not SANDBOXED:
        return True
    ok = True
    libc = _libc()
    for table, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                          ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                          ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        try:
            with open(f"/proc/sysvipc/{table}") as fh:
                ids = [int(line.split()[1]) for line in fh.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            ok = False
            continue
        for ipc_id in ids:
            if remove(ipc_id) != 0:
                ok = False
    return ok


def _signal_all(pgid=None):
    """SIGKILL every other process we can reach; False when there was none left to signal.

    As PID 1 of the container, kill(-1) reaches every process there (and the kernel exempts PID 1).
    Outside a container (development only) we fall back to the child's process group rather than
    signalling every process of the uid on the host.
    """
    try:
        if SANDBOXED:
            os.kill(-1, signal.SIGKILL)
        elif pgid:
            os.killpg(pgid, signal.SIGKILL)
        else:
            return False
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_everything(pgid=None):
    """SIGKILL every process but this one and reap them (orphans are reparented to PID 1, so they are
    ours to reap too); True once none are left."""
    deadline = time.monotonic() + 2.0
    while True:
        alive = _signal_all(pgid)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                if not alive:
                    return True
                break
            if pid == 0:
                break
        if not alive and not SANDBOXED:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


# ------------------------------------------------------------------------------- value encoding
def encode_value(value, depth=0):
    """JSON-safe encoding of a return value as plain data, keeping the types `==` cares about.

    Tuples, sets, dicts with non-string keys, bytes, complex and big ints are tagged objects; floats keep
    nan/inf; subclasses of the plain types become the plain type (an int subclass whose __eq__ lies is
    sent as its int value); anything else is sent as its repr, which the host never equals to anything.
    Ints travel as hex beyond 2**53, which no digit limit applies to.
    """
    if depth > 100:
        raise ValueError("value nested too deeply")
    if value is None or type(value) is bool:
        return value
    if isinstance(value, int):
        value = int.__int__(value)
        return value if abs(value) < (1 << 53) else {"__int__": hex(value)}
    if isinstance(value, float):
        value = float.__float__(value)
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, list):
        return [encode_value(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, dict):
        return {"__dict__": [[encode_value(k, depth + 1), encode_value(v, depth + 1)]
                             for k, v in dict.items(value)]}
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode_value(v, depth + 1) for v in set.__iter__(set(value))]}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": bytes(value).hex()}
    if isinstance(value, complex):
        return {"__complex__": [encode_value(value.real, depth + 1), encode_value(value.imag, depth + 1)]}
    fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
    if fractions is not None and isinstance(value, fractions.Fraction):
        return {"__fraction__": [encode_value(value.numerator, depth + 1),
                                 encode_value(value.denominator, depth + 1)]}
    if decimal is not None and isinstance(value, decimal.Decimal):
        return {"__decimal__": decimal.Decimal.__str__(value)}
    return {"__repr__": _safe_text(value, 200), "__type__": _safe_text(type(value).__name__, 80)}


def _safe_text(obj, n):
    try:
        return str.__str__(repr(obj))[:n] if not isinstance(obj, str) else str.__str__(obj)[:n]
    except BaseException:
        return "<unprintable>"


# --------------------------------------------------------------------------- in the forked child
def _report(obj):
    try:
        _write_all(3, (json.dumps(obj) + "\n").encode())
    except Exception:
        pass


def _finish(code):
    """Exit like the interpreter would: join non-daemon threads, run atexit, flush, then _exit."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def _observer():
    """The `__observe__(k, thunk)` an assert-style test calls: report observation k's value as plain data,
    or the exception computing it raised (that test's error; the snippet goes on)."""
    def observe(k, thunk):
        try:
            value = thunk()
        except Exception as exc:
            _report({"obs": k, "exc": _safe_text(type(exc).__name__, 80), "message": _safe_text(exc, 300)})
            return
        try:
            encoded = encode_value(value)
        except BaseException as exc:
            encoded = {"__repr__": f"<unencodable: {type(exc).__name__}>", "__type__": "?"}
        _report({"obs": k, "value": encoded})
    return observe


def _failed(exc, stage):
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the program's frames only, not the harness's
    try:
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
    except BaseException:
        pass
    _report({"exc": type(exc).__name__, "stage": stage, "message": str(exc)[:500]})
    _finish(1)


def _child_setup(limits, work, pin_fds):
    os.setsid()
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in pin_fds]  # out of the way of 0..n first
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(pin_fds), 65536)
    _prctl(PR_SET_DUMPABLE, 1)  # our own /proc entries back to our uid, so oom_score_adj is writable
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")  # on cgroup OOM, the program dies, not the runner
    except OSError:
        pass
    cpu = max(1, math.ceil(limits["cpu_s"]))
    for res, soft, hard in ((resource.RLIMIT_CPU, cpu, cpu + 1),
                            (resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"]),
                            (resource.RLIMIT_NPROC, limits["nproc"], limits["nproc"]),
                            (resource.RLIMIT_FSIZE, limits["fsize_bytes"], limits["fsize_bytes"]),
                            (resource.RLIMIT_NOFILE, limits["nofile"], limits["nofile"]),
                            (resource.RLIMIT_CORE, 0, 0)):
        resource.setrlimit(res, (soft, hard))
    os.environ.clear()
    os.environ.update(CHILD_ENV, HOME=work, TMPDIR=work)
    os.chdir(work)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _python_child(job, test, work, code):
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.open(1, "wb", closefd=False), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.open(2, "wb", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True)
    sys.argv = ["solution.py"]
    sys.path[:0] = [work]
    mode = job["mode"]
    # stdin/stdout programs run as the main script; call-based and assert code is imported as a module
    # (LiveCodeBench's rule), so an `if __name__ == "__main__":` block does not run.
    main = types.ModuleType("__main__" if mode == "stdio" else "solution")
    main.__file__ = os.path.join(work, "solution.py")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = sys.modules[main.__name__] = main
    ns = main.__dict__
    try:
        exec(code, ns)
    except SystemExit as exc:
        if mode == "stdio":
            _finish(_exit_code(exc))
        # call/assert: leaving the module early just ends the definitions; the tests still run
    except BaseException as exc:
        _failed(exc, "solution")
    if mode == "stdio":
        _finish(0)
    if mode == "call":
        name = job["fn_name"]
        try:
            target = ns.get("Solution")
            if isinstance(target, type) and hasattr(target, name):
                fn = getattr(target(), name)
            elif name in ns:
                fn = ns[name]
            else:
                raise NameError(f"function {name!r} is not defined")
            value = fn(*test["args"])
        except BaseException as exc:
            _failed(exc, "call")
        try:
            encoded = encode_value(value)
        except BaseException as exc:
            encoded = {"__repr__": f"<unencodable: {type(exc).__name__}>", "__type__": "?"}
        _report({"value": encoded})
        _finish(0)
    # assert-style: the host rewrote each assert into observations; nothing here decides pass/fail, and a
    # report the program writes itself is only another claim about its own values
    ns[OBSERVE] = _observer()
    try:
        tests = test.get("compiled") or compile(test["assert_code"], "<tests>", "exec")
        exec(tests, ns)
    except BaseException as exc:  # SystemExit included: the tests not yet observed are not reached
        _failed(exc, "tests")
    _finish(0)


# ------------------------------------------------------------------------------ in the runner
def _spawn(job, test, limits, argv=None):
    """Fork one child for one test (or a compile); return the raw facts about how it went."""
    os.makedirs(WORK_DIR, mode=0o700, exist_ok=True)
    stdin_fd = os.memfd_create("stdin", 0)
    _write_all(stdin_fd, test.get("stdin", "").encode("utf-8", "surrogateescape"))
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, report
    ready_r, ready_w = os.pipe()  # the child writes b"R" once set up, before any program code runs
    oom_before = _oom_kills()
    tree_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    box_before, self_before = _container_cpu(), _self_cpu()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # ------------------------------------------------------------------- child
        try:
            _child_setup(limits, WORK_DIR, [stdin_fd] + [w for _, w in pipes] + [ready_w])
            os.set_inheritable(READY_FD, False)  # a compiled program never gets it
        except BaseException as exc:
            _report({"setup_error": repr(exc)[:500]})
            os._exit(SETUP_FAILED)
        code = None
        if argv is None:  # Python: compiled here, on the test's clock, before any of the program runs, so
            try:          #   a compile error is told on the ready pipe, which the program never holds
                code = compile(job["code"], "solution.py", "exec")
            except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
                os.write(READY_FD, b"C" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:2000])
                os._exit(1)
        os.write(READY_FD, b"R")
        if argv is not None:
            try:
                os.execv(argv[0], argv)
            except BaseException as exc:
                os.write(READY_FD, b"E")
                _report({"setup_error": f"exec {argv[0]}: {exc!r}"[:500]})
                os._exit(SETUP_FAILED)
        os.close(READY_FD)  # from here on the program runs: it cannot claim a setup failure
        _python_child(job, test, WORK_DIR, code)
        os._exit(SETUP_FAILED)  # not reached: _python_child always exits
    # ------------------------------------------------------------------------------------ parent
    os.close(stdin_fd)
    os.close(ready_w)
    for _, w in pipes:
        os.close(w)
    reads = {r: name for (r, _), name in zip(pipes, ("stdout", "stderr", "report"))}
    bufs = {"stdout": [], "stderr": [], "report": []}
    sizes = dict.fromkeys(bufs, 0)
    cap = limits["output_bytes"]
    timed_out = exceeded = False
    pidfd = os.pidfd_open(pid)
    sel = selectors.DefaultSelector()
    sel.register(pidfd, selectors.EVENT_READ, None)
    for fd in reads:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, reads[fd])
    deadline = t0 + limits["wall_s"]

    def pump(fd, name):
        nonlocal exceeded
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        sizes[name] += len(chunk)
        if name == "stderr" and sizes[name] > 4 * STDERR_KEEP:
            bufs[name] = [b"".join(bufs[name])[-STDERR_KEEP:]]
        bufs[name].append(chunk)
        if sizes[name] > cap:
            exceeded = True
        return True

    exited = False
    while not exited and not exceeded:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(left):
            if key.data is None:
                exited = True
            elif not pump(key.fd, key.data):
                sel.unregister(key.fd)
    if not exited:
        _signal_all(pid)
    try:
        _, status, usage = os.wait4(pid, 0)  # before the sweep below, so its rusage is ours
    except ChildProcessError:
        status, usage = None, None
    wall = time.monotonic() - t0
    clean = kill_everything(pid)
    tree_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # everything reaped: every descendant's CPU
    tree_cpu = (tree_after.ru_utime + tree_after.ru_stime) - (tree_before.ru_utime + tree_before.ru_stime)
    box_after, self_after = _container_cpu(), _self_cpu()
    if box_before is not None and box_after is not None:  # what no wait() reports (auto-reaped children)
        tree_cpu = max(tree_cpu, (box_after - box_before) - (self_after - self_before))
    for fd in reads:  # every writer is dead now: drain to EOF (bounded by the cap)
        while sizes[reads[fd]] <= cap and pump(fd, reads[fd]):
            pass
        os.close(fd)
    sel.close()
    os.close(pidfd)
    os.set_blocking(ready_r, False)
    try:
        ready = os.read(ready_r, 4096)
    except BlockingIOError:
        ready = b""
    os.close(ready_r)
    oom_after = _oom_kills()
    result = {
        "exit": os.waitstatus_to_exitcode(status) if status is not None and os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "output_exceeded": exceeded,
        "oom": bool(oom_before is not None and oom_after is not None and oom_after > oom_before),
        "cpu": round(max(tree_cpu, usage.ru_utime + usage.ru_stime if usage else 0.0), 4),
        "wall": round(wall, 4),
        "maxrss_kb": usage.ru_maxrss if usage else None,
        # base64, not JSON text: control bytes would grow 6x as \u escapes in the response
        "stdout_b64": base64.b64encode(b"".join(bufs["stdout"])[:cap + 1]).decode("ascii"),
        "stderr": b"".join(bufs["stderr"])[-STDERR_KEEP:].decode("utf-8", "replace"),
        "report": None,
    }
    if not clean:
        result["unclean"] = True
    if ready.startswith(b"C"):
        result["compile_error"] = ready[1:].decode("utf-8", "replace")  # told before the program ran
    elif ready != b"R" and not timed_out:
        result["setup_failed"] = True  # decided here, from a pipe the program never held
    reports, garbled, last = [], 0, None
    for line in b"".join(bufs["report"]).splitlines():
        if not line.strip():
            continue
        last = _parse_report(line)
        if last.get("garbled") is True:
            garbled += 1
        elif len(reports) < MAX_REPORTS:
            reports.append(last)
        else:
            result["reports_truncated"] = True
    result["reports"] = reports
    result["report"] = last
    if garbled:
        result["garbled_reports"] = garbled
    return result


def _depth_ok(obj, depth=0):
    if depth > MAX_REPORT_DEPTH:
        return False
    if isinstance(obj, dict):
        return all(_depth_ok(v, depth + 1) for v in obj.values())
    if isinstance(obj, list):
        return all(_depth_ok(v, depth + 1) for v in obj)
    return True


def _parse_report(line):
    """One report line as a JSON object, or {"garbled": true}: whatever the program wrote on the report
    channel (a non-object, a 5,000-digit int, 100,000 nested lists) is data, never a runner crash."""
    try:
        obj = json.loads(line)
        if isinstance(obj, dict) and _depth_ok(obj):
            json.dumps(obj)  # what we send back must encode
            return obj
    except Exception:
        pass
    return {"garbled": True}


def _cleanup():
    ok = kill_everything()
    ok = _remove_ipc() and ok
    for root in SCRATCH_ROOTS:
        ok = _wipe(root) and ok
    return ok


def _timed_out(raw, limits):
    return raw["timed_out"] or raw["signal"] == signal.SIGXCPU or (
        raw["cpu"] is not None and raw["cpu"] > limits["cpu_s"])


def _install(path, data):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def run_job(job):
    limits = dict(LIMIT_DEFAULTS, **job.get("limits", {}))
    language = job.get("language", "python")
    results, timeouts, clean, compiled = [], 0, True, None
    argv = None
    if language == "cpp" and not os.path.exists("/usr/bin/g++"):
        return {"ok": True, "clean": True,
                "unsupported": "this image has no g++ (build it with `klear sandbox build --cpp`)"}
    if language == "cpp":
        os.makedirs(BUILD_DIR, mode=0o700, exist_ok=True)
        with open(os.path.join(BUILD_DIR, "main.cpp"), "w") as fh:
            fh.write(job["code"])
        compile_limits = dict(limits, cpu_s=limits["compile_wall_s"], wall_s=limits["compile_wall_s"],
                              memory_bytes=limits["compile_memory_bytes"],
                              fsize_bytes=max(limits["fsize_bytes"], 256 << 20), nproc=max(limits["nproc"], 32))
        binary = os.path.join(BUILD_DIR, "prog")
        compiled = _spawn(job, {}, compile_limits, ["/usr/bin/g++", "-O2", "-std=c++17", "-pipe",
                                                     "-o", binary, os.path.join(BUILD_DIR, "main.cpp")])
        compiled.pop("stdout_b64", None)
        try:
            with open(binary, "rb") as fh:
                program = fh.read()  # kept here: each test gets a fresh copy the last one cannot have touched
        except OSError:
            program = None
        clean = _cleanup() and clean
        if compiled["exit"] != 0 or program is None:
            return {"ok": True, "compile": compiled, "results": [], "clean": clean}
        argv = [binary]
    elif language != "python":
        return {"ok": True, "clean": True, "unsupported": f"unsupported language {language!r}"}
    if job.get("mode") == "assert":  # the host's test code is compiled here, off the program's CPU time
        for test in job["tests"]:
            try:
                test["compiled"] = compile(test["assert_code"], "<tests>", "exec")
            except Exception:
                pass  # the child compiles it again and reports the error as the test's
    for test in job["tests"]:
        if timeouts >= limits["max_timeouts"]:
            results.append({"skipped": True})
            continue
        if argv is not None:
            _install(binary, program)
        raw = _spawn(job, test, limits, argv)
        results.append(raw)
        clean = _cleanup() and not raw.get("unclean") and clean
        if raw.get("compile_error"):  # from the ready pipe: nothing the program wrote stops the job
            break
        if _timed_out(raw, limits):
            timeouts += 1
    clean = _cleanup() and clean
    return {"ok": True, "compile": compiled, "results": results, "clean": clean}


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # no handlers at all: PID 1 then ignores every signal
    _prctl(PR_SET_DUMPABLE, 0)
    if not IS_INIT:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    os.umask(0o077)
    # Protocol fds move off 0-2 so no child can inherit them; 0-2 become /dev/null.
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    reader = io.open(proto_in, "rb")
    os.environ.clear()
    hello = {"hello": VERSION, "sandboxed": SANDBOXED, "pid": os.getpid(), "python": sys.version.split()[0],
             "gpp": os.path.exists("/usr/bin/g++"), "oom_counter": _oom_kills() is not None,
             "clean": _cleanup()}
    _write_all(proto_out, (json.dumps(hello) + "\n").encode())
    served = 0
    for line in reader:
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "ping":
                resp = {"ok": True, "pong": True}
            elif op == "run":
                served += 1
                started = time.monotonic()
                resp = run_job(req)
                resp["runner_s"] = round(time.monotonic() - started, 4)
            elif op == "exit":
                break
            else:
                resp = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # a runner bug: report it; the host recycles this container
            resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            try:
                _cleanup()
            except Exception:
                pass
        resp["served"] = served
        _write_all(proto_out, (json.dumps(resp) + "\n").encode())


if __name__ == "__main__":
    main()
