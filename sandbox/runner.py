#!/usr/bin/python3
"""klear sandbox runner: lives inside a warm container as PID 1 and runs submissions.

Standard library only; shipped into the image at /opt/klear/runner.py. One request per line on stdin,
one JSON response per line on stdout (nothing else is ever written there).

    {"op": "ping"}
    {"op": "run", "language": "python"|"cpp", "mode": "stdio"|"call"|"assert", "code": "...",
     "fn_name": "...", "tests": [{"stdin": "..."} | {"args": [...]} | {"assert_code": "..."}],
     "limits": {...see LIMIT_DEFAULTS...}}

The runner never sees expected outputs: it reports raw facts per test (exit status, signal, CPU and
wall time, peak memory, captured stdout, the harness report) and the host judges them. Each test runs in
a child forked from this process (no interpreter start-up), in a fresh scratch dir, with its own
rlimits and a wall-clock deadline. After every test, as PID 1, the runner SIGKILLs every other process
in the container (kill(-1)), reaps them and wipes /tmp and /dev/shm, so daemonised children and files
never outlive the test that made them.

Hardening of the runner itself: it is not dumpable (so /proc/1/fd and /proc/1/mem are closed to the
programs it runs, which share its uid), it installs no signal handlers (PID 1 then ignores every
signal sent from inside the container), and its protocol pipes are moved off fds 0-2 and closed in
every child.
"""
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

VERSION = 1
# Destructive housekeeping (kill(-1), wiping /tmp) happens only when all three say we are the
# sandbox container's init: started with --sandbox, as PID 1, not as root. Anywhere else (a developer
# running this file by hand) the runner uses a private temp dir and kills only its children's groups.
IS_INIT = os.getpid() == 1
SANDBOXED = IS_INIT and os.getuid() != 0 and "--sandbox" in sys.argv
if SANDBOXED:
    SCRATCH_ROOTS = ("/tmp", "/dev/shm")
    WORK_DIR = "/tmp/run"  # fresh per test; the program's cwd, HOME and TMPDIR
    BUILD_DIR = "/tmp/.klear-build"  # compiled C++ binary; survives the per-test wipe within one job
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
SETUP_FAILED = 125  # child exit status when preparing a test failed before the program started
READY_FD = 4  # in the child, until the program starts: where it reports that setup went well


# ----------------------------------------------------------------------------------------- helpers
def _prctl(option, value):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
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


def _wipe(path, keep=()):
    """Remove everything under path (not path itself), making read-only dirs writable first."""
    ok = True
    try:
        names = os.listdir(path)
    except OSError:
        return True
    for name in names:
        full = os.path.join(path, name)
        if full in keep:
            continue
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                try:
                    os.chmod(full, 0o700)
                except OSError:
                    pass
                ok = _wipe(full) and ok
                os.rmdir(full)
            else:
                os.unlink(full)
        except OSError:
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
    """JSON-safe encoding of a return value that keeps the types `==` cares about.

    Tuples become lists (the LiveCodeBench rule); dicts keep non-string keys; sets stay sets; floats
    keep nan/inf; anything else is sent as its repr, which never equals an expected value.
    """
    if depth > 100:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < (1 << 53) else {"__int__": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode_value(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[encode_value(k, depth + 1), encode_value(v, depth + 1)]
                             for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"__set__": [encode_value(v, depth + 1) for v in value]}
    return {"__repr__": repr(value)[:200], "__type__": type(value).__name__}


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


def _raised_from(exc, filename):
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == filename


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


def _python_child(job, test, work):
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.open(1, "wb", closefd=False), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.open(2, "wb", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True)
    sys.argv = ["solution.py"]
    sys.path[:0] = [work]
    try:
        code = compile(job["code"], "solution.py", "exec")
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        _report({"compile_error": f"{type(exc).__name__}: {exc}"[:2000]})
        _finish(1)
    main = types.ModuleType("__main__")
    main.__file__ = os.path.join(work, "solution.py")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    ns = main.__dict__
    mode = job["mode"]
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
    # assert-style: the test code runs in the solution's namespace and must run to its end
    try:
        tests = compile(test["assert_code"], "<tests>", "exec")
        exec(tests, ns)
    except SystemExit as exc:
        if not (_raised_from(exc, "<tests>") and _exit_code(exc) == 0):
            _failed(exc, "tests")  # a solution may not end the test run early and call it a pass
    except BaseException as exc:
        _failed(exc, "tests")
    _report({"done": True})
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
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # ------------------------------------------------------------------- child
        try:
            _child_setup(limits, WORK_DIR, [stdin_fd] + [w for _, w in pipes] + [ready_w])
            os.set_inheritable(READY_FD, False)  # a compiled program never gets it
            os.write(READY_FD, b"R")
        except BaseException as exc:
            _report({"setup_error": repr(exc)[:500]})
            os._exit(SETUP_FAILED)
        if argv is not None:
            try:
                os.execv(argv[0], argv)
            except BaseException as exc:
                os.write(READY_FD, b"E")
                _report({"setup_error": f"exec {argv[0]}: {exc!r}"[:500]})
                os._exit(SETUP_FAILED)
        os.close(READY_FD)  # from here on the program runs: it cannot claim a setup failure
        _python_child(job, test, WORK_DIR)
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
    for fd in reads:  # every writer is dead now: drain to EOF (bounded by the cap)
        while sizes[reads[fd]] <= cap and pump(fd, reads[fd]):
            pass
        os.close(fd)
    sel.close()
    os.close(pidfd)
    os.set_blocking(ready_r, False)
    try:
        ready = os.read(ready_r, 16)
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
        "cpu": round(usage.ru_utime + usage.ru_stime, 4) if usage else None,
        "wall": round(wall, 4),
        "maxrss_kb": usage.ru_maxrss if usage else None,
        "stdout": b"".join(bufs["stdout"])[:cap + 1].decode("utf-8", "replace"),
        "stderr": b"".join(bufs["stderr"])[-STDERR_KEEP:].decode("utf-8", "replace"),
        "report": None,
    }
    if not clean:
        result["unclean"] = True
    if ready != b"R" and not timed_out:
        result["setup_failed"] = True  # decided here, from a pipe the program never held
    lines = b"".join(bufs["report"]).splitlines()
    if lines:
        try:
            result["report"] = json.loads(lines[-1])
        except ValueError:
            result["report"] = {"garbled": True}
    return result


def _cleanup(keep=()):
    ok = kill_everything()
    for root in SCRATCH_ROOTS:
        ok = _wipe(root, keep) and ok
    return ok


def _timed_out(raw, limits):
    return raw["timed_out"] or raw["signal"] == signal.SIGXCPU or (
        raw["cpu"] is not None and raw["cpu"] > limits["cpu_s"])


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
        compiled["stdout"] = compiled["stdout"][-STDERR_KEEP:]
        clean = _cleanup(keep=(BUILD_DIR,)) and clean
        if compiled["exit"] != 0:
            return {"ok": True, "compile": compiled, "results": [], "clean": _cleanup() and clean}
        argv = [binary]
    elif language != "python":
        return {"ok": True, "clean": True, "unsupported": f"unsupported language {language!r}"}
    for test in job["tests"]:
        if timeouts >= limits["max_timeouts"]:
            results.append({"skipped": True})
            continue
        raw = _spawn(job, test, limits, argv)
        results.append(raw)
        clean = _cleanup(keep=(BUILD_DIR,)) and not raw.get("unclean") and clean
        if (raw["report"] or {}).get("compile_error"):
            break
        if _timed_out(raw, limits):
            timeouts += 1
    clean = _cleanup() and clean
    return {"ok": True, "compile": compiled, "results": results, "clean": clean}


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # no handlers at all: PID 1 then ignores every signal
    _prctl(PR_SET_DUMPABLE, 0)
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
