#!/usr/bin/python3
"""klear sandbox runner: lives inside a warm container as PID 1 and runs submissions.

Standard library only; shipped into the image at /opt/klear/runner.py. One request per line on stdin,
one JSON response per line on stdout (nothing else is ever written there).

    {"op": "ping"}
    {"op": "run", "language": "python"|"cpp", "mode": "stdio"|"call"|"assert", "code": "...",
     "fn_name": "...", "tests": [{"stdin": "..."} | {"args": [...]} | {"units": [[kind, source], ...]}],
     "limits": {...see LIMIT_DEFAULTS...}, "deadline_s": seconds the host waits for the answer}

The runner never sees an expected stdout or return value and decides nothing for stdin/stdout and
call-based tests: it reports raw facts per test (exit status, signal, CPU and wall time, peak memory,
stdout, the call's value) and the host judges them. Assert-style tests run as the test code itself, in
a checker process that never loads the program's code (see "Assert-style" below).

Processes. PID 1 (this file's main) reads jobs and holds them, but never forks a program: every test
process is forked from the zygote, a fresh interpreter exec'd at container start (and again if it dies)
that never receives a request, a response or anything a program wrote. Asked to spawn, the zygote forks
twice (the test process is re-parented to PID 1, which waits for it) and the new process reads its own
setup (its code, its one test input) from a memfd PID 1 hands over. So frames, gc objects, the heap and
the inherited file descriptors of a test process hold nothing of an earlier job.

After every test PID 1 has the zygote SIGKILL every other process in the container (kill(-1) spares
PID 1 and the caller), reaps them, removes every SysV IPC object and wipes /tmp, /dev/shm and
/dev/mqueue, and only then parses what the test wrote: its processes, memory and IPC are gone before a
report is read. What is read is bounded (stdout and the call's value by `output_bytes`, stderr read and
discarded past a tail, the checker's results by the number of tests).

Python programs run under LiveCodeBench's conventions: its import header executed first in the
program's namespace and its recursion limit (LCB_HEADER); stderr is never judged and never counts
toward the output limit. stdin/stdout programs run as the main script with real stdin (LiveCodeBench
runs them in-process with a stdin stand-in); call-based and assert code runs as an imported module named
`solution` (`__name__ != "__main__"`).

Assert-style: each run is one snippet of test code, split by the host into units (setup statements and
tests). The program runs as a server: it imports the solution and answers requests on a socket
(look up a name, call, get an attribute, iterate) with plain data, or with a reference for a value that
is not plain data. The checker, a second process forked from the zygote, never loads the program's
code: it executes the test units, resolving every name the test code does not define through the
program, so a `for` loop of asserts, helper functions and computed expectations run as written and
`and`/`or` keep their short-circuit order. Values it gets back are rebuilt from plain data (an object
whose __eq__ lies arrives as a reference equal only to itself), so pass/fail is decided where the
program cannot reach: the checker is not dumpable (its memory and fds are closed to the program) and
holds the only write end of its results pipe. A test passes only when its unit ran an assert (each
assert statement is counted as it starts); a StopIteration the program raises reaches the test code as a
RuntimeError (PEP 479's rule); a call's arguments keep their types and come back changed in place at
any depth (CallArgs); the header's helpers the test code uses are the checker's (_TestGlobals).

Time: compiling is the program's own time (the CPU limit applies from before compile()); every step of
the runner's work for a test fits in the wall deadline plus a bounded cleanup, and a job stops starting
tests once `deadline_s` would be passed (the rest are `skipped`).

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
import socket
import sys
import time
import types

VERSION = 4
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
    "output_bytes": 1 << 20,  # stdout (and a call's value) cap; beyond it the test is killed
    "max_timeouts": 2,  # after this many timed-out tests the rest are skipped
    "compile_wall_s": 30.0,  # C++ compile deadline
    "compile_memory_bytes": 2 << 30,  # C++ compile address-space limit
}
# LiveCodeBench's import header (lcb_runner/evaluation/testing_util.py), run before every Python program
LCB_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
               "statistics", "itertools", "functools", "operator", "io", "sys", "json")
LCB_HEADER = ("".join(f"from {m} import *\n" for m in LCB_MODULES[:-2])
              + "from sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
              + "".join(f"import {m}\n" for m in LCB_MODULES) + "sys.setrecursionlimit(50000)\n")
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36  # outside a container: orphans come back to us, so their CPU is counted
IPC_RMID = 0
SETUP_FAILED = 125  # exit status of a test process whose preparation failed before the program's time
# Fixed fds in a test process: 0-2 stdio, then these. The ready pipe tells PID 1, on a pipe the program
# never holds, how far the setup got: b"P<pid>\n" (forked), b"L" (limits set: from here on it is the
# program's time), then b"R" (program starts), b"C<message>" (compile error) or b"E" (exec failed).
REPORT_FD, READY_FD, CHAN_FD = 3, 4, 5
MAX_MESSAGE = 1 << 20  # a checker <-> program message; a bigger answer is the program's output_limit
MAX_ELEMENTS = 1_000_000  # members of one decoded value, all levels together
MAX_DEPTH = 100  # nesting of an encoded value
MAX_REPORT_DEPTH = 250  # nesting of a report line kept; deeper is garbled (the host reads it back safely)


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


def _container_cpu(sandboxed):
    """CPU seconds used by the whole container so far (cgroup v1 cpuacct or v2 cpu.stat), or None.

    The per-test figure is this counter's delta minus the runner's, the zygote's and the checker's own:
    it sees processes that no one reaps (a SIGCHLD set to SIG_IGN makes the kernel discard children, and
    their CPU, unreported)."""
    if not sandboxed:
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


def _proc_cpu(pid):
    """CPU seconds a process used itself (not its children), from /proc (0.0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def wipe(path, keep=()):
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


INET_TABLES = ("tcp", "tcp6", "udp", "udp6")  # /proc/net: the sockets of our network namespace


def inet_sockets():
    """Every TCP and UDP socket in our network namespace as (table, local, remote, state, inode): a closed
    one's inode is 0, its ports tell it apart. A table the kernel lacks (tcp6 with IPv6 off) holds none."""
    found = set()
    for table in INET_TABLES:
        try:
            with open(f"/proc/net/{table}") as fh:
                lines = fh.readlines()[1:]
        except OSError:
            continue
        rows = (line.split() for line in lines)
        found.update((table, *f[1:4], f[9]) for f in rows if len(f) > 9)
    return found


def _sockets_gone(before, wait_s=0.5):
    """True once no TCP or UDP socket is left in our network namespace but those of `before` (the sockets
    there when the runner started: none with network "none"; a network's own resolver otherwise). The
    namespace is the container's, which outlives every test and job: every process is dead, but the kernel
    can keep a socket after its last owner, and a socket's ports carry a job's data to the next one (a policy
    encoding an answer in the port numbers of connections it closed; TIME_WAIT held them 60 s until
    ContainerConfig.net_sysctls turned it off). Waits up to `wait_s` for loopback's last closes; False (the
    container is replaced) if any is still there."""
    deadline = time.monotonic() + wait_s
    while True:
        if not inet_sockets() - before:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


# ------------------------------------------------------------------------------- value encoding
def encode_value(value, refs=None, depth=0, aliases=None):
    """JSON-safe encoding of a value as plain data, keeping the types `==` and the test code care about.

    Tuples, sets, frozensets, dicts with non-string keys, bytes, bytearrays, complex, ranges and big ints
    are tagged objects, and so are collections' Counter, OrderedDict, defaultdict (with a default factory
    that is a builtin or a collections type; another one is a reference when `refs` is given, else none),
    deque (with its maxlen) and named tuples (type name and fields): the receiver rebuilds its own object
    of that type, so an argument keeps its missing-key default, its order-sensitive equality, its
    hashability or its field names. Floats keep nan/inf; subclasses of these types become the type (an
    int subclass whose __eq__ lies is sent as its int value). Anything else is a reference when `refs` (a
    list the sender keeps the objects in) is given, else its repr, which the host never equals to anything.
    Ints travel as hex beyond 2**53, which no digit limit applies to. `aliases` (id → index) sends a
    mutable container it holds as `{"__alias__": index}` (a call's arguments, CallArgs).
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if value is None or type(value) is bool:
        return value
    if aliases is not None and depth and id(value) in aliases:  # the top-level container is encoded itself
        return {"__alias__": aliases[id(value)]}
    if isinstance(value, int):
        value = int.__int__(value)
        return value if abs(value) < (1 << 53) else {"__int__": hex(value)}
    if isinstance(value, float):
        value = float.__float__(value)
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, str):
        return str.__str__(value)

    def enc(v):
        return encode_value(v, refs, depth + 1, aliases)

    if isinstance(value, tuple):
        fields = _namedtuple_fields(value)
        members = [enc(v) for v in tuple.__iter__(value)]
        if fields is not None:
            return {"__namedtuple__": [_safe_text(type(value).__name__, 80), fields, members]}
        return {"__tuple__": members}
    if isinstance(value, list):
        return [enc(v) for v in list.__iter__(value)]
    collections = sys.modules.get("collections")
    if isinstance(value, dict):
        pairs = [[enc(k), enc(v)] for k, v in dict.items(value)]
        if collections is not None:
            if isinstance(value, collections.Counter):
                return {"__counter__": pairs}
            if isinstance(value, collections.OrderedDict):
                return {"__odict__": pairs}
            if isinstance(value, collections.defaultdict):
                return {"__defaultdict__": [_factory(value.default_factory, refs), pairs]}
        return {"__dict__": pairs}
    if isinstance(value, frozenset):
        return {"__frozenset__": [enc(v) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"__set__": [enc(v) for v in set.__iter__(value)]}
    if collections is not None and isinstance(value, collections.deque):
        return {"__deque__": [[enc(v) for v in collections.deque.__iter__(value)], value.maxlen]}
    if isinstance(value, bytearray):
        return {"__bytearray__": bytes(value).hex()}
    if isinstance(value, bytes):
        return {"__bytes__": bytes(value).hex()}
    if isinstance(value, complex):
        return {"__complex__": [encode_value(value.real, refs, depth + 1),
                                encode_value(value.imag, refs, depth + 1)]}
    if type(value) is range:
        return {"__range__": [encode_value(value.start), encode_value(value.stop), encode_value(value.step)]}
    fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
    if fractions is not None and isinstance(value, fractions.Fraction):
        return {"__fraction__": [encode_value(value.numerator, refs, depth + 1),
                                 encode_value(value.denominator, refs, depth + 1)]}
    if decimal is not None and isinstance(value, decimal.Decimal):
        return {"__decimal__": decimal.Decimal.__str__(value)}
    if refs is not None:
        return {"__ref__": refs.add(value), "__type__": _safe_text(type(value).__name__, 80)}
    return {"__repr__": _safe_text(value, 200), "__type__": _safe_text(type(value).__name__, 80)}


def _namedtuple_fields(value):
    """A named tuple's field names (its type's `_fields`: identifiers, one per member), else None."""
    fields = getattr(type(value), "_fields", None)
    if (type(fields) is tuple and len(fields) == tuple.__len__(value)
            and all(type(f) is str and f.isidentifier() and not f.startswith("_") for f in fields)):
        return list(fields)
    return None


# The builtin functions that travel by name (besides the builtin types): those that compute on their
# arguments alone. Not input, print, open, eval, exec, breakpoint, globals, vars, setattr, ...: decoded
# in the checker (a value or a default factory the program sends), they would act on the checker itself.
PURE_BUILTINS = frozenset(("abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash",
                           "hex", "isinstance", "issubclass", "iter", "len", "max", "min", "next", "oct", "ord",
                           "pow", "repr", "round", "sorted", "sum"))
FACTORY_TYPES = ("Counter", "OrderedDict", "defaultdict", "deque")  # collections types a factory may be


def _factory(factory, refs):
    """A defaultdict's default factory as data: None, a builtin, a collections type, else a reference
    (when `refs`), else None (the receiver's copy then has no default)."""
    import builtins

    name = getattr(factory, "__name__", None)
    if factory is None or not isinstance(name, str) or name.startswith("_"):
        return None
    if getattr(builtins, name, None) is factory:
        return {"__builtin__": name}
    collections = sys.modules.get("collections")
    if name in FACTORY_TYPES and collections is not None and getattr(collections, name) is factory:
        return {"__collections__": name}
    if refs is not None:
        return {"__ref__": refs.add(factory), "__type__": "function"}
    return None


def _safe_text(obj, n):
    try:
        return str.__str__(repr(obj))[:n] if not isinstance(obj, str) else str.__str__(obj)[:n]
    except BaseException:
        return "<unprintable>"


def decode_value(value, make_ref, budget=None, table=None, register=True, any_builtin=False):
    """Inverse of encode_value for the runner's own processes; `make_ref(id, type)` builds a reference.
    Bounded: MAX_ELEMENTS members in all, MAX_DEPTH levels; anything malformed raises ValueError.
    `table`: `{"__alias__": i}` is table[i]; with `register`, each mutable container decoded (list, dict,
    set, bytearray, deque and the dict types) is appended to it when it starts, in the sender's order (a
    call's arguments: the same object twice, or inside itself, arrives as one object). A builtin travels by
    name: a type or one of PURE_BUILTINS, any builtin with `any_builtin` (the program decoding the test
    code's arguments, `apply(print, 3)`)."""
    import collections

    budget = budget if budget is not None else [MAX_ELEMENTS]

    def members(payload, depth):
        if type(payload) is not list or depth > MAX_DEPTH:
            raise ValueError("malformed value")
        budget[0] -= len(payload)
        if budget[0] < 0:
            raise ValueError("value too large")
        return [dec(v, depth + 1) for v in payload]

    def new(container):
        if table is not None and register:
            table.append(container)
        return container

    def items(payload, depth):
        """A dict tag's [[key, value], ...], each pair decoded key first (a pair is no list of its own)."""
        if type(payload) is not list or depth > MAX_DEPTH:
            raise ValueError("malformed value")
        budget[0] -= 2 * len(payload)
        if budget[0] < 0:
            raise ValueError("value too large")
        for kv in payload:
            if type(kv) is not list or len(kv) != 2:
                raise ValueError("a dict item is a [key, value] pair")
            k = _key(dec(kv[0], depth + 1))
            yield k, dec(kv[1], depth + 1)

    def pairs(payload, depth, into):
        for k, val in items(payload, depth):
            dict.__setitem__(into, k, val)
        return into

    def dec(v, depth):
        if type(v) is list:
            out = new([])
            out.extend(members(v, depth))
            return out
        if type(v) is not dict:
            return v
        if "__alias__" in v:
            i = v["__alias__"]
            if table is None or type(i) is not int or not 0 <= i < len(table):
                raise ValueError("bad alias")
            return table[i]
        if "__int__" in v:
            return int(str(v["__int__"]), 16)
        if "__float__" in v:
            return float(str(v["__float__"]))
        if "__tuple__" in v:
            return tuple(members(v["__tuple__"], depth))
        if "__namedtuple__" in v:
            name, fields, values = v["__namedtuple__"]
            parts = members(values, depth)
            budget[0] -= len(fields) if type(fields) is list else 0
            kind = _namedtuple_type(name, fields) if len(parts) == (len(fields) if type(fields) is list else -1) else None
            return kind(*parts) if kind is not None else tuple(parts)
        if "__dict__" in v:
            return pairs(v["__dict__"], depth, new({}))
        if "__counter__" in v:
            return pairs(v["__counter__"], depth, new(collections.Counter()))
        if "__odict__" in v:
            out = new(collections.OrderedDict())
            out.update(items(v["__odict__"], depth))
            return out
        if "__defaultdict__" in v:
            factory, content = v["__defaultdict__"]
            out = new(collections.defaultdict())
            out.default_factory = None if factory is None else dec(factory, depth + 1)
            if out.default_factory is not None and not callable(out.default_factory):
                raise ValueError("a default factory is callable")
            return pairs(content, depth, out)
        if "__set__" in v:
            out = new(set())
            out.update(_key(m) for m in members(v["__set__"], depth))
            return out
        if "__frozenset__" in v:
            return frozenset(_key(m) for m in members(v["__frozenset__"], depth))
        if "__deque__" in v:
            content, maxlen = v["__deque__"]
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise ValueError("bad maxlen")
            out = new(collections.deque(maxlen=maxlen))
            out.extend(members(content, depth))
            return out
        if "__bytearray__" in v:
            return new(bytearray.fromhex(str(v["__bytearray__"])))
        if "__collections__" in v:
            name = str(v["__collections__"])
            if name not in FACTORY_TYPES:
                raise ValueError("unknown collections type")
            return getattr(collections, name)
        if "__bytes__" in v:
            return bytes.fromhex(str(v["__bytes__"]))
        if "__complex__" in v:
            re_, im = members(v["__complex__"], depth)
            return complex(re_, im)
        if "__range__" in v:
            return range(*members(v["__range__"], depth))
        if "__fraction__" in v:
            import fractions
            return fractions.Fraction(*members(v["__fraction__"], depth))
        if "__decimal__" in v:
            import decimal
            return decimal.Decimal(str(v["__decimal__"]))
        if "__ref__" in v:
            return make_ref(v["__ref__"], _safe_text(v.get("__type__", "?"), 80))
        if "__builtin__" in v:  # a builtin function or type the test passes (`key=len`, `str`)
            import builtins
            name = str(v["__builtin__"])
            found = getattr(builtins, name, None) if not name.startswith("_") else None
            if found is None or not (any_builtin or isinstance(found, type) or name in PURE_BUILTINS):
                raise ValueError("not a builtin that travels")
            return found
        raise ValueError("unknown tag")

    return dec(value, 0)


def _key(k):
    return tuple(_key(x) for x in k) if type(k) is list else k


NAMEDTUPLES = {}  # (type name, fields) -> the class; emptied at the start of every run (check_run)
MAX_NAMEDTUPLE_TYPES, MAX_NAMEDTUPLE_FIELDS = 64, 64


def _namedtuple_type(name, fields):
    """The receiver's own named tuple class for (name, fields), or None (then the value is a plain tuple):
    a spelling namedtuple refuses, too many fields, or more types than a run may make. The classes live
    for one run, so no program's types reach the next."""
    if (type(name) is not str or type(fields) is not list or len(fields) > MAX_NAMEDTUPLE_FIELDS
            or not all(type(f) is str and len(f) <= 80 for f in fields) or len(name) > 80):
        return None
    key = (name, tuple(fields))
    if key not in NAMEDTUPLES:
        if len(NAMEDTUPLES) >= MAX_NAMEDTUPLE_TYPES:
            return None
        import collections
        try:
            NAMEDTUPLES[key] = collections.namedtuple(name if name.isidentifier() else "namedtuple", fields)
        except Exception:  # a keyword, a duplicate (after normalisation), a leading underscore, ...
            NAMEDTUPLES[key] = None
    return NAMEDTUPLES[key]


# --------------------------------------------------------------------------- in a test process
def _report(obj):
    try:
        _write_all(REPORT_FD, (json.dumps(obj) + "\n").encode())
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


def _failed(exc, stage):
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the program's frames only, not the harness's
    try:
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
    except BaseException:
        pass
    _report({"exc": type(exc).__name__, "stage": stage, "message": _safe_text(str(exc), 500)})
    _finish(1)


def _limits(limits, work):
    """Resource limits, environment and signal dispositions of a test process (before its program)."""
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


def _program(setup):
    """A test process running the program (fds 0-2 its stdio, REPORT_FD, READY_FD, CHAN_FD in assert
    mode). Never returns."""
    work = setup["work"]
    try:
        _prctl(PR_SET_DUMPABLE, 1)  # it holds nothing but its own test: a normal process again
        _limits(setup["limits"], work)
        os.set_inheritable(READY_FD, False)  # a compiled program never gets it
    except BaseException as exc:
        _report({"setup_error": repr(exc)[:500]})
        os._exit(SETUP_FAILED)
    os.write(READY_FD, b"L")  # from here on: the program's time
    argv = setup.get("argv")
    if argv:
        os.write(READY_FD, b"R")
        try:
            os.execv(argv[0], argv)
        except BaseException:
            os.write(READY_FD, b"E")
            os._exit(SETUP_FAILED)
    try:
        code = compile(setup["code"], "solution.py", "exec")
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        os.write(READY_FD, b"C" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:2000])
        os._exit(1)
    os.write(READY_FD, b"R")
    os.close(READY_FD)  # from here on the program runs: it cannot claim a setup failure
    _python_program(setup, code)
    os._exit(SETUP_FAILED)  # not reached


def _python_program(setup, code):
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.open(1, "wb", closefd=False), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.open(2, "wb", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", line_buffering=True)
    work = setup["work"]
    sys.argv = ["solution.py"]
    sys.path[:0] = [work]
    mode = setup["mode"]
    # stdin/stdout programs run as the main script; call-based and assert code is imported as a module
    # (LiveCodeBench's rule), so an `if __name__ == "__main__":` block does not run. The header's names
    # come with the builtins (see load_header).
    main = types.ModuleType("__main__" if mode == "stdio" else "solution")
    main.__file__ = os.path.join(work, "solution.py")
    main.__builtins__ = HEADER_BUILTINS
    sys.modules["__main__"] = sys.modules[main.__name__] = main
    ns = main.__dict__
    try:
        exec(code, ns)
    except SystemExit as exc:
        if mode == "stdio":  # LiveCodeBench's rule: sys.exit(code) ends the program; its output is judged
            _exit_code(exc)
            _finish(0)
        # call/assert: leaving the module early just ends the definitions; the tests still run
    except BaseException as exc:
        if mode == "assert":
            _serve_dead(exc)
        _failed(exc, "solution")
    if mode == "stdio":
        _finish(0)
    if mode == "assert" and setup.get("calls") is not None:
        _plain_calls(ns, setup["calls"])
    if mode == "assert":
        _serve(ns)
    name = setup["fn_name"]
    try:
        target = ns.get("Solution")
        if isinstance(target, type) and hasattr(target, name):
            fn = getattr(target(), name)
        elif name in ns:
            fn = ns[name]
        else:
            raise NameError(f"function {name!r} is not defined")
        value = fn(*setup["args"])
    except BaseException as exc:
        _failed(exc, "call")
    try:
        encoded = encode_value(value)
    except BaseException as exc:
        encoded = {"__repr__": f"<unencodable: {type(exc).__name__}>", "__type__": "?"}
    _report({"value": encoded})
    _finish(0)


def _plain_calls(ns, calls):
    """Assert-style tests that are plain calls (sandbox/asserts.py, Call): make each call and report
    every value (or exception) in one line at the end; the host compares. Never returns."""
    import builtins

    out = []
    for name, args in calls:
        try:
            fn = ns[name] if name in ns else getattr(builtins, name)
        except AttributeError:
            out.append({"exc": "NameError", "message": f"name {name!r} is not defined"})
            continue
        try:
            value = fn(*decode_value(args, _no_refs))
        except BaseException as exc:  # SystemExit included: that call's test fails, the others run
            out.append({"exc": _safe_text(type(exc).__name__, 80), "message": _safe_text(str(exc), 300)})
            continue
        try:
            out.append({"value": encode_value(value)})
        except BaseException as exc:
            out.append({"value": {"__repr__": f"<unencodable: {type(exc).__name__}>", "__type__": "?"}})
    _report({"calls": out})
    _finish(0)


def _no_refs(_id, _type):
    raise ValueError("no references here")


HEADER_CODE = compile(LCB_HEADER, "<header>", "exec")
HEADER_NAMES = {}  # what the header binds: name -> object (built by load_header)
HEADER_BUILTINS = {}  # the builtins a program runs with: Python's, then the header's names over them


def load_header():
    """In the zygote (and the checker): run LiveCodeBench's header once, keep what it binds, and build
    the builtins programs run with: a test process's module starts empty, and the header's names are
    found where the builtins are (a name the program binds shadows them, as it would the header's). So
    the program's namespace holds exactly what the program bound, and running the header costs a test
    nothing: copying ~700 names into each namespace would write every object's reference count and so
    copy hundreds of the zygote's pages per test (≈ 2 ms). Also sets the int-to-string digit limit
    (50,000) as LiveCodeBench's evaluation does."""
    import builtins

    sys.set_int_max_str_digits(50000)
    ns = {"__builtins__": builtins}
    exec(HEADER_CODE, ns)
    HEADER_NAMES.update((k, v) for k, v in ns.items() if not k.startswith("__"))
    HEADER_BUILTINS.update(builtins.__dict__)
    HEADER_BUILTINS.update(HEADER_NAMES)
    for name in ("quit", "exit"):  # `site` adds these; test processes run without it (python3 -I -S)
        HEADER_BUILTINS.setdefault(name, _quit)


def _quit(code=None):
    """`quit()` / `exit()` as `site` defines them: end the program with SystemExit(code)."""
    raise SystemExit(code)


# ------------------------------------------------------------------- assert-style: program side
class _Chan:
    """JSON lines over the socket between the checker and the program (CHAN_FD on both sides)."""

    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.file = self.sock.makefile("rb")

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def close(self):
        for obj in (self.file, self.sock):
            try:
                obj.close()
            except OSError:
                pass

    def recv(self):
        line = self.file.readline(MAX_MESSAGE + 1)
        if not line:
            raise EOFError("closed")
        if len(line) > MAX_MESSAGE or not line.endswith(b"\n"):
            raise OverflowError("message over the cap")
        return json.loads(line)


class Refs(list):
    """The program's objects the checker holds references to; one id per object (so `f(x) is x` and
    `g() == g()` for the same object hold in the test code, as they would in the program's process)."""

    def __init__(self):
        super().__init__()
        self.ids = {}

    def add(self, obj):
        i = self.ids.get(id(obj))
        if i is None:
            self.append(obj)  # kept alive, so its id() is never reused while the run lasts
            i = self.ids[id(obj)] = len(self) - 1
        return i


def decode_call(req, ref):
    """(args, kwargs, table) of a call request: `args` [encoded value], `kwargs` [[name, encoded value]],
    decoded in that order with one budget, `table` their mutable containers in the checker's order
    (CallArgs)."""
    args, kwargs = req.get("args", []), req.get("kwargs", [])
    if type(args) is not list or type(kwargs) is not list or not all(
            type(kv) is list and len(kv) == 2 and type(kv[0]) is str for kv in kwargs):
        raise ValueError("malformed call")
    table, budget = [], [MAX_ELEMENTS]
    decoded = [decode_value(a, ref, budget, table, any_builtin=True) for a in args]
    named = {k: decode_value(v, ref, budget, table, any_builtin=True) for k, v in kwargs}
    return decoded, named, table


def shallow(container):
    """What a container holds, by identity: equal before and after a call when the call changed nothing in
    it (a change inside a member container is that container's own); a set reordered by the call counts as
    changed (then its state is sent for nothing). Holds references, so no id is reused meanwhile."""
    if isinstance(container, bytearray):
        return bytes(container)
    if isinstance(container, dict):
        return _Same([r for kv in dict.items(container) for r in kv])  # keys and values, in order
    return _Same(list(container))


class _Same:
    """References compared by identity, never by the members' own __eq__ (the program's)."""

    __slots__ = ("refs",)

    def __init__(self, refs):
        self.refs = refs

    def __eq__(self, other):
        return (isinstance(other, _Same) and len(self.refs) == len(other.refs)
                and all(a is b for a, b in zip(self.refs, other.refs)))


def container_state(obj, aliases, refs):
    """What a mutable container of a call's arguments holds after the call: its encoding, each container
    of the arguments inside it as an alias (so the checker refills its own objects, CallArgs)."""
    return encode_value(obj, refs, 0, aliases)


def _serve_dead(exc):
    """The solution failed to import: tell the checker once, then fail like a plain run."""
    try:
        _Chan(CHAN_FD).send({"dead": type(exc).__name__, "message": _safe_text(str(exc), 300)})
    except BaseException:
        pass


def _serve(ns):
    """Answer the checker's requests on the solution's namespace until it hangs up. First the names the
    program bound: to objects of its own, or to the header's (`from math import gcd` is the header's
    gcd); then values go back as plain data, anything else as a reference into `refs` (the checker can call it,
    get its attributes or iterate it, never compare it by the program's own __eq__)."""
    chan = _Chan(CHAN_FD)
    refs = Refs()
    try:
        used = [n for n in list(ns) if isinstance(n, str) and not n.startswith("__")]
        names = [n for n in used if n not in HEADER_NAMES or HEADER_NAMES[n] is not ns[n]]
        header = [n for n in used if n in HEADER_NAMES and HEADER_NAMES[n] is ns[n]]
        bound = {}  # functions and classes go as references at once: one round trip fewer per name
        for n in names:
            if callable(ns[n]) and len(bound) < 1000:
                bound[n] = refs.add(ns[n])
        chan.send({"names": names, "header": header, "bound": bound})
    except BaseException:
        _finish(1)

    def ref(i, _type):
        if type(i) is not int or not 0 <= i < len(refs):
            raise ValueError("bad reference")
        return refs[i]

    while True:
        try:
            req = chan.recv()
        except BaseException:
            _finish(0)
        op = req.get("op")
        after = None
        try:
            if op == "name":
                if req["name"] not in ns:
                    chan.send({"missing": True})
                    continue
                result = ns[req["name"]]
            else:
                target = ref(req.get("ref"), None)
                if op == "call":
                    args, kwargs, table = decode_call(req, ref)
                    before = [shallow(c) for c in table]
                    result = target(*args, **kwargs)
                    # what the call left in every list/dict/set/deque/bytearray of its arguments that it
                    # changed, at any depth and keyword ones too, goes back: the checker's own objects
                    # change as they would have had the call run there
                    aliases = {id(c): i for i, c in enumerate(table)}
                    after = [None if shallow(c) == old else container_state(c, aliases, refs)
                             for c, old in zip(table, before)]
                elif op == "getattr":
                    result = getattr(target, str(req.get("name")))
                elif op == "plain_truth":  # Python's rule for a type with neither __bool__ nor __len__: true
                    result = not any(hasattr(type(target), m) for m in ("__bool__", "__len__"))
                elif op == "iter":
                    result = iter(target)
                elif op == "next":
                    try:
                        result = next(target)
                    except StopIteration:
                        chan.send({"stop": True})
                        continue
                else:
                    raise ValueError(f"unknown op {op!r}")
            try:
                encoded = encode_value(result, refs)
            except BaseException as exc:
                encoded = {"__repr__": f"<unencodable: {type(exc).__name__}>", "__type__": "?"}
            chan.send({"value": encoded, "after": after} if after and any(a is not None for a in after)
                      else {"value": encoded})
        except (SystemExit, KeyboardInterrupt) as exc:
            chan.send({"exc": type(exc).__name__, "message": _safe_text(str(exc), 300)})
            _finish(_exit_code(exc) if isinstance(exc, SystemExit) else 1)
        except BaseException as exc:
            import traceback
            try:
                traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
            except BaseException:
                pass
            try:
                chan.send({"exc": _safe_text(type(exc).__name__, 80), "message": _safe_text(str(exc), 300)})
            except BaseException:
                _finish(1)


# ------------------------------------------------------------------- assert-style: checker side
class ProgramGone(BaseException):
    """The program stopped answering (exited, was killed, or sent a message over the cap). A
    BaseException, so the test code's `except Exception` cannot swallow it."""


class RemoteError(Exception):
    """An exception raised in the program that is not a builtin exception type."""


class Remote:
    """A value of the program's that is not plain data. It can be called, have attributes read, be
    iterated; it equals only itself and has no truth value or length the program could decide: an object
    whose type defines neither `__bool__` nor `__len__` is true, as in Python (`while node:` over the
    program's linked list), and any other has no truth here."""

    __slots__ = ("_id", "_type", "_conn")

    def __init__(self, ref_id, type_name, conn):
        object.__setattr__(self, "_id", ref_id)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_conn", conn)

    def __call__(self, *args, **kwargs):
        return self._conn.request("call", self._id, args=list(args), kwargs=kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._conn.request("getattr", self._id, name=name)

    def __iter__(self):
        it = self._conn.request("iter", self._id)
        return it if isinstance(it, Remote) else iter(it)  # a Remote iterator has its own __next__

    def __next__(self):
        return self._conn.request("next", self._id)

    def __eq__(self, other):
        return isinstance(other, Remote) and other._id == self._id and other._conn is self._conn

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("remote", self._id))

    def __bool__(self):
        if self._conn.request("plain_truth", self._id) is True:
            return True
        raise TypeError(f"the truth of a {self._type} object from the program is not judged")

    def __len__(self):
        raise TypeError(f"the length of a {self._type} object from the program is not judged")

    def __repr__(self):
        return f"<{self._type} object of the program>"


class _Conn:
    """The checker's end of the program channel."""

    def __init__(self, fd):
        self.chan = _Chan(fd)
        self.calls = 0
        self.remotes = {}  # ref id -> its one Remote

    def remote(self, ref_id, type_name):
        if ref_id not in self.remotes:
            self.remotes[ref_id] = Remote(ref_id, type_name, self)
        return self.remotes[ref_id]

    def request(self, op, ref_id=None, **fields):
        msg, call = {"op": op}, None
        if ref_id is not None:
            msg["ref"] = ref_id
        if op == "call":
            call = CallArgs()
            msg["args"] = [call.encode(a) for a in fields["args"]]
            msg["kwargs"] = [[str(k), call.encode(v)] for k, v in fields["kwargs"].items()]
        elif "name" in fields:
            msg["name"] = fields["name"]
        self.calls += 1
        try:
            self.chan.send(msg)
            answer = self.chan.recv()
        except OverflowError:
            raise ProgramGone("output_limit") from None
        except (OSError, EOFError, ValueError):
            raise ProgramGone("gone") from None
        if not isinstance(answer, dict):
            raise ProgramGone("gone")
        # the end of an iteration answers only `next`, a missing name only `name`: the program writes the
        # channel itself if it likes, and a `stop` forged in answer to a call would end the test code's
        # map()/zip() as a StopIteration does
        if answer.get("stop") or answer.get("missing"):
            if answer.get("stop") and op == "next":
                raise StopIteration
            if answer.get("missing") and op == "name":
                raise KeyError(fields.get("name"))
            raise ProgramGone("gone")
        if "dead" in answer:
            raise ProgramGone("gone")
        if "exc" in answer:
            name = str(answer["exc"])[:80]
            if name in ("StopIteration", "StopAsyncIteration") and op != "next":
                # raised by the program's code, not the end of an iteration: as Python does for a
                # generator (PEP 479), it reaches the test as an error, never as a silent end of the
                # test code's map()/zip()/for loop
                name = "RuntimeError"
                answer = {**answer, "message": f"the program raised {answer['exc']}"}
            raise _remote_exception(name, str(answer.get("message", ""))[:300])
        if call is not None and type(answer.get("after")) is list:
            call.refill(answer["after"], self.remote)
        try:
            return decode_value(answer.get("value"), self.remote)
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            return Remote(-1, "undecodable", self)


class CallArgs:
    """A call's arguments on their way from the test code to the program and back.

    Encoded in order (positional, then keyword values), every mutable container met at any depth
    (list, dict and its collections kinds, set, deque, bytearray) is numbered as it starts; met again
    (the same list twice, a list inside itself) it is sent as `{"__alias__": n}`, so the program gets
    one object as the test code had one. After the call the program sends each numbered container's
    contents (`after`, containers inside it as aliases) and `refill` puts them into the test code's own
    objects, in place: an in-place change to a nested list, a dict's list, a keyword argument or an
    aliased argument is seen by the test as it would be had the call run in its process. Values are
    plain data; a builtin (`key=len`) or a collections type travels by name, the program's objects as
    references; anything else cannot be passed (TypeError in the test code)."""

    def __init__(self):
        self.table = []
        self.ids = {}

    def encode(self, value, depth=0):
        import builtins
        import collections

        if depth > MAX_DEPTH:
            raise ValueError("argument nested too deeply")
        if isinstance(value, Remote):
            return {"__ref__": value._id}
        name = getattr(value, "__name__", None)
        if isinstance(name, str) and not name.startswith("_") and getattr(builtins, name, None) is value:
            return {"__builtin__": name}
        if isinstance(value, type) and name in FACTORY_TYPES and getattr(collections, name) is value:
            return {"__collections__": name}
        if id(value) in self.ids:
            return {"__alias__": self.ids[id(value)]}
        if isinstance(value, (list, dict, set, bytearray, collections.deque)):
            self.ids[id(value)] = len(self.table)
            self.table.append(value)

        def enc(v):
            return self.encode(v, depth + 1)

        if isinstance(value, list):
            return [enc(v) for v in value]
        if isinstance(value, tuple):
            fields = _namedtuple_fields(value)
            members = [enc(v) for v in value]
            return ({"__namedtuple__": [type(value).__name__, fields, members]} if fields is not None
                    else {"__tuple__": members})
        if isinstance(value, dict):
            pairs = [[enc(k), enc(v)] for k, v in value.items()]
            if isinstance(value, collections.Counter):
                return {"__counter__": pairs}
            if isinstance(value, collections.OrderedDict):
                return {"__odict__": pairs}
            if isinstance(value, collections.defaultdict):
                factory = value.default_factory
                if factory is not None:
                    try:  # a builtin, a collections type or the program's function travel
                        factory = enc(factory)
                    except TypeError:  # the test code's own function (a lambda) cannot: no default there
                        factory = None
                return {"__defaultdict__": [factory, pairs]}
            return {"__dict__": pairs}
        if isinstance(value, frozenset):
            return {"__frozenset__": [enc(v) for v in value]}
        if isinstance(value, set):
            return {"__set__": [enc(v) for v in value]}
        if isinstance(value, collections.deque):
            return {"__deque__": [[enc(v) for v in value], value.maxlen]}
        encoded = encode_value(value)
        if isinstance(encoded, dict) and ("__repr__" in encoded or "__ref__" in encoded):
            raise TypeError(f"a {type(value).__name__} cannot be passed to the program as plain data")
        return encoded

    def refill(self, after, make_ref):
        """Put the program's `after` contents into the test code's containers (all decoded first, so a
        malformed one changes nothing); a state of another kind than its container is ignored."""
        import collections

        if len(after) != len(self.table):
            return
        try:
            states = [decode_value(a, make_ref, table=self.table, register=False) for a in after]
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            return
        for mine, state in zip(self.table, states):
            if (isinstance(mine, list) and type(state) is list) or (
                    isinstance(mine, bytearray) and type(state) is bytearray):
                mine[:] = state
            elif isinstance(mine, collections.deque) and isinstance(state, collections.deque):
                mine.clear()
                mine.extend(state)
            elif isinstance(mine, dict) and isinstance(state, dict):
                mine.clear()
                (dict.update if isinstance(mine, collections.Counter) else type(mine).update)(mine, state)
            elif isinstance(mine, set) and isinstance(state, set):
                mine.clear()
                mine.update(state)


def _remote_exception(name, message):
    import builtins

    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RemoteError
        message = f"{name}: {message}"
    try:
        exc = cls(message)
    except BaseException:
        exc = RemoteError(f"{name}: {message}")
    exc.klear_remote = name
    return exc


def header_helpers(free, tested=()):
    """The header names a snippet's test code uses as helpers (module rule in _TestGlobals): those among
    its free names `free` when it also uses a name the header does not offer (the function under test, or
    the program's module `solution`), less those it tests (`tested`: sandbox/asserts.py tested_names,
    `assert count([1, 2]) == 2`, `r = factorial(5)` then `assert r == 120`); none when every free name is the header's (then they are
    the functions under test: `gcd`)."""
    free = set(free)
    under_test = {n for n in free if n not in HEADER_NAMES}
    return {n for n in free if n in HEADER_NAMES} - set(tested) if under_test else set()


class _TestGlobals(dict):
    """The test code's namespace, as if it ran as the main script after the program in the program's
    module (HumanEval's and MBPP's harnesses; `__name__` is "__main__", so tests under an `if __name__ ==
    "__main__":` block run), with the program's objects kept out of the checker: the builtins; the names
    the program's code binds to objects of its own, looked up in the program (as references, or plain
    data) when first used; the names it binds to the header's objects (`import math`, `from math import
    gcd`), as the checker's own copies of those objects (so a `math` the program patched is never the
    checker's). A name the program never binds is a NameError, even one the header offers: a program that
    defines no `add` must not pass tests of `add` with the header's operator.add.

    Header names as helpers: in a snippet that also tests a name the header does not offer (`f`), a header
    name its test code uses without binding it (`isclose`, `sqrt`, `Counter`) is the header's, as in
    LiveCodeBench, and never the program's: a program that defines its own `isclose` cannot judge itself
    (header_helpers). Only `solution.NAME` reaches the program's own object of such a name."""

    def __init__(self, conn, program_names, header_names=(), bound=None, free=(), tested=()):
        import builtins

        super().__init__(__name__="__main__", __builtins__=__builtins__)
        self.conn = conn
        helpers = header_helpers(free, tested)
        self.own = {n for n in program_names if n in helpers}  # the program's objects of helper names
        # the builtins and the header's modules are always the checker's: a program that rebinds `set`,
        # `abs`, `range` or `math` changes nothing in how the test code judges its values
        self.program_names = {n for n in program_names if not hasattr(builtins, n)
                              and not isinstance(HEADER_NAMES.get(n), types.ModuleType) and n not in helpers}
        self.update((n, v) for n, v in HEADER_NAMES.items() if isinstance(v, types.ModuleType))
        self.update((n, HEADER_NAMES[n]) for n in helpers)
        for name in header_names:
            if name in HEADER_NAMES and name not in self.program_names:
                self[name] = HEADER_NAMES[name]
        for name, ref_id in (bound or {}).items():  # the program's functions and classes, as references
            if name in self.program_names and type(ref_id) is int:
                self[name] = conn.remote(ref_id, "function")
        self["solution"] = _SolutionModule(self)

    def __missing__(self, name):
        if name not in self.program_names:
            raise KeyError(name)
        value = self.conn.request("name", name=name)
        self[name] = value
        return value


class _SolutionModule(types.ModuleType):
    """`solution` in the test code (`import solution`, `from solution import f`): the program's module,
    its attributes looked up like the test code's own free names."""

    def __init__(self, ns):
        super().__init__("solution")
        object.__setattr__(self, "_ns", ns)

    def __call__(self, *args, **kwargs):
        """A program whose function under test is named `solution` (`assert solution([1, 2]) == 3, "msg"`):
        the program's own object of that name, called there, as the module never is."""
        return self._ns.conn.request("name", name="solution")(*args, **kwargs)

    def __getattr__(self, name):
        ns = self._ns
        try:
            if name in ns.own:  # a helper name the program also defines: here, the program's own object
                return ns.conn.request("name", name=name)
            return ns[name]
        except KeyError:
            raise AttributeError(name) from None


ASSERT_TICK = "__klear_assert_ran__"  # called before every check of the test code (counting_asserts)


def counting_asserts(source):
    """The unit's code compiled with a call of ASSERT_TICK before each of its checks, at any depth (a helper
    function's included), so the checker knows whether a test checked anything. A check is an assert
    statement, or what decides a failure by absence: an assert of a constant false value (`assert False`,
    `assert 0, "msg"`) or a `raise AssertionError` fails whenever it is reached, so the check is the
    statement right around it, the `if`, `try`, loop, `with` or `match` one of whose branches holds it
    (`if f(3) != 3: assert False`, `try: f(-1); assert False` / `except ValueError: pass`, `for x in f():
    assert False`, a loop whose `else` fails), ticked each time it runs: in a loop over an empty result an
    `if got != want: assert False` never runs, and the unit checked nothing. A `try` whose `except` alone
    fails while its body holds asserts checks by those asserts: the `except` only turns errors into failures."""
    import ast

    def tick(node):
        return ast.copy_location(ast.Expr(ast.Call(ast.Name(ASSERT_TICK, ast.Load()), [], [])), node)

    def fails_when_reached(node):
        if isinstance(node, ast.Assert):
            return isinstance(node.test, ast.Constant) and not node.test.value
        if not isinstance(node, ast.Raise):
            return False
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "AssertionError"

    def branches(node):
        """(name, statements) of every block of a statement: body, orelse, finalbody, and each except's or
        case's body as "handler"."""
        for name in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, name, None), list):
                yield name, getattr(node, name)
        for part in getattr(node, "handlers", None) or getattr(node, "cases", None) or ():
            yield "handler", part.body

    def guards_a_failure(node):
        where = {name for name, stmts in branches(node) if any(map(fails_when_reached, stmts))}
        if where == {"handler"} and isinstance(node, TRY_NODES) and any(
                isinstance(n, ast.Assert) for stmt in node.body for n in ast.walk(stmt)):
            return False
        return bool(where)

    def block(stmts):
        out = []
        for node in stmts:
            if isinstance(node, ast.Assert) or guards_a_failure(node):
                out.append(tick(node))
            for name in ("body", "orelse", "finalbody"):
                if isinstance(getattr(node, name, None), list):
                    setattr(node, name, block(getattr(node, name)))
            for part in getattr(node, "handlers", None) or getattr(node, "cases", None) or ():
                part.body = block(part.body)
            out.append(node)
        return out

    TRY_NODES = (ast.Try, getattr(ast, "TryStar", ast.Try))
    tree = ast.parse(source)
    tree.body = block(tree.body)
    return compile(ast.fix_missing_locations(tree), "<tests>", "exec")


NO_ASSERT_RAN = {"verdict": "wrong_answer", "message": "no assert ran: the test checked nothing"}


def check_run(units, chan_fd, out, free=(), tested=()):
    """Run one snippet's units against the program at the other end of `chan_fd`; write one result line
    per test unit with `out(obj)`. Never loads the program's code. `free`: the names the snippet uses and
    does not bind (the host's reading, sandbox/asserts.py), for the header-helper rule (_TestGlobals).

    A test passes when its unit runs to the end having run at least one check (counting_asserts: an assert,
    or the statement around an `assert False`): a unit whose checks the program kept from running (an empty result
    its `for` loop or `zip` runs over, a StopIteration, a condition its value decides) checked nothing, and
    is a wrong answer (NO_ASSERT_RAN)."""
    NAMEDTUPLES.clear()
    units = [(kind, counting_asserts(source)) for kind, source in units]
    conn = _Conn(chan_fd)
    ran = [0]

    def tick():
        ran[0] += 1
    test, pending_error, ns = 0, None, None
    try:
        first = conn.chan.recv()
        names = first.get("names") if isinstance(first, dict) else None
        if type(names) is not list:
            raise ProgramGone("gone")
        bound, header = first.get("bound"), first.get("header")
        ns = _TestGlobals(conn, [n for n in names if isinstance(n, str)],
                          [n for n in header if isinstance(n, str)] if type(header) is list else (),
                          bound if isinstance(bound, dict) else None, free, tested)
        ns[ASSERT_TICK] = tick
    except OverflowError:
        pending_error = {"gone": "output_limit"}
    except BaseException:
        pending_error = {"gone": "gone"}
    sys.modules["solution"] = ns["solution"] if ns is not None else types.ModuleType("solution")
    for kind, code in units:
        if kind == "test":
            if pending_error is not None:
                out({"test": test, **pending_error})
            else:
                try:
                    ran[0] = 0
                    exec(code, ns)
                    out({"test": test, "ok": True} if ran[0] else {"test": test, **NO_ASSERT_RAN})
                except ProgramGone as exc:
                    out({"test": test, "gone": str(exc)})
                    pending_error = {"gone": str(exc)}
                except BaseException as exc:
                    out({"test": test, **_test_failure(exc)})
            test += 1
        elif pending_error is None:
            try:
                exec(code, ns)
            except ProgramGone as exc:
                pending_error = {"gone": str(exc)}
            except BaseException as exc:
                pending_error = _test_failure(exc, "setup: ")
    conn.chan.close()


def checker_main(sock):
    """The checker process, forked by PID 1 and kept across runs (it is not dumpable, so neither its
    memory nor its fds are open to programs of the same uid). Per run: a datagram b"T" with fds [units
    memfd, program channel, results pipe]; it answers b"d" when the run is done."""
    os.chdir("/")
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and not p.startswith(("/tmp", "/dev"))]
    os.environ.clear()
    os.environ.update(CHILD_ENV)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    if not HEADER_NAMES:
        load_header()  # the objects the checker binds for the header names a program uses
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 8)
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 3:
            os._exit(0)
        units_fd, chan_fd, res_fd = fds
        try:
            os.lseek(units_fd, 0, os.SEEK_SET)
            with os.fdopen(units_fd, "rb") as fh:
                job = json.loads(fh.read())
            free, tested = (job.get(k) if type(job.get(k)) is list else [] for k in ("free", "tested"))

            def out(obj, fd=res_fd):
                _write_all(fd, (json.dumps(obj) + "\n").encode())
            check_run(job["units"], chan_fd, out, [n for n in free if type(n) is str],
                      [n for n in tested if type(n) is str])
        except BaseException:
            try:
                os.close(chan_fd)
            except OSError:
                pass
        finally:
            try:
                os.close(res_fd)
            except OSError:
                pass
        try:
            sock.sendall(b"d")
        except OSError:
            os._exit(0)


def _test_failure(exc, prefix=""):
    """A failed test unit: an assert that does not hold is a wrong answer; an exception the program
    raised is a runtime error (a MemoryError, the memory limit); anything else raised while testing the
    program's values (a TypeError on a value it returned, a NameError for a name it does not define) is a
    runtime error too."""
    remote = getattr(exc, "klear_remote", None)
    message = _safe_text(str(exc), 300)
    if isinstance(exc, AssertionError) and remote is None:
        return {"verdict": "wrong_answer", "message": prefix + ("assertion failed" + (f": {message}" if message else ""))}
    if remote == "MemoryError":
        return {"verdict": "memory_limit", "message": prefix + "MemoryError in the program"}
    name = remote or type(exc).__name__
    where = "the program raised" if remote else "the test raised"
    return {"verdict": "runtime_error", "message": f"{prefix}{where} {name}" + (f": {message}" if message else "")}


# --------------------------------------------------------------------------------------- zygote
# Debian's python3-* packages (the image's sortedcontainers): `site` would put them on the path, and the
# zygote runs without it; after the standard library, so they never shadow it
DIST_PACKAGES = "/usr/lib/python3/dist-packages"
PRELOAD = LCB_MODULES + ("typing",)  # what the header imports, and nothing else: every page the zygote
#   holds is copied into (page tables) and torn down from (at exit) every test process


def zygote_main(sock_fd):
    """Fork test processes on request, holding nothing but its own code, and the pids, wait statuses
    and resource usage of the processes it forked. Requests (one datagram each): b"S" + fds (start a
    test process: the spare if there is one, else a fresh fork; it reads its setup from the first fd;
    answers the pid), b"F" (fork a spare now: a child that waits for the fds of the next b"S", so that
    fork is paid between tests, not in one; answers its pid), b"W" + pid (wait for that child: answers
    its status and rusage), b"R" (reap any child), b"P" (ping). PID 1 asks for a spare only after a
    test's cleanup, so no program ever runs beside one."""
    os.umask(0o077)
    if os.path.isdir(DIST_PACKAGES):
        sys.path.append(DIST_PACKAGES)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    load_header()
    try:  # every child inherits it: the program is the OOM killer's first choice, with no write per test
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    _prctl(PR_SET_DUMPABLE, 0)  # from here on: nothing of the zygote is readable by the uid
    import gc
    gc.collect()
    gc.freeze()  # a child's garbage collections never walk (and so never copy) the zygote's objects
    try:  # hand back what compiling and importing freed: fewer pages to map into (and tear down from) each child
        _libc().malloc_trim(0)
    except Exception:
        pass
    sock = socket.socket(fileno=sock_fd)
    spare = None  # (pid, socket): a child forked ahead, waiting for the fds of its test

    def fork_spare():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                mine.close()
                got, fds, _, _ = socket.recv_fds(theirs, 16, 16)
                if got == b"G":
                    theirs.send(b"g")
                    theirs.close()
                    _test_process(fds)
            finally:
                os._exit(SETUP_FAILED)
        theirs.close()
        return pid, mine

    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 16)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        op = msg[:1]
        if op == b"S":
            pid = None
            if spare is not None:
                pid, spare_sock = spare
                spare = None
                try:  # it answers once it holds the fds; one that died (the OOM killer's pick, say)
                    spare_sock.settimeout(1.0)  # is reaped by a later W or R, and a fresh fork runs the test
                    socket.send_fds(spare_sock, [b"G"], fds)
                    if spare_sock.recv(1) != b"g":
                        pid = None
                except OSError:
                    pid = None
                spare_sock.close()
            if pid is None:
                pid = os.fork()
                if pid == 0:
                    try:
                        _test_process(fds)
                    finally:
                        os._exit(SETUP_FAILED)
            for fd in fds:
                os.close(fd)
            answer = b"%d" % pid
        elif op == b"F":
            if spare is None:
                spare = fork_spare()
            answer = b"%d" % spare[0]
        elif op == b"W":
            try:
                _, status, ru = os.wait4(int(msg[1:]), 0)
                answer = json.dumps([status, ru.ru_utime + ru.ru_stime, ru.ru_maxrss]).encode()
            except (OSError, ValueError):
                answer = b"null"
        elif op == b"R":
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
            answer = b"r"
        else:
            answer = b"p"
        try:
            sock.sendall(answer)
        except OSError:
            os._exit(0)


def _test_process(fds):
    """In the zygote's child: wire the fds, read the setup, run. Not dumpable while it reads (the
    zygote's state), so no other process of the uid can read its memory; its OOM score is the zygote's
    (1000: under memory pressure a program dies first)."""
    try:
        os.setsid()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
        setup_fd, ready_fd, io_fds = high[0], high[1], high[2:]
        for target, fd in zip((0, 1, 2, REPORT_FD, CHAN_FD), io_fds):
            os.dup2(fd, target)
        os.dup2(ready_fd, READY_FD)
        os.lseek(setup_fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            chunk = os.read(setup_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        os.closerange(CHAN_FD + 1 if len(io_fds) > 4 else READY_FD + 1, 65536)
        setup = json.loads(b"".join(chunks))
        del chunks
    except BaseException:
        os._exit(SETUP_FAILED)
    _program(setup)


# ------------------------------------------------------------------------------ in the runner
HELPERS_REAPED = [0.0]  # CPU seconds of helpers PID 1 has reaped: in RUSAGE_CHILDREN, never a test's


class Helper:
    """PID 1's handle on a helper process it talks to in datagrams (the zygote, the checker), restarted
    when it is gone or does not answer: a program of the same uid may kill or stop it, nothing more
    (helpers are not dumpable)."""

    def __init__(self, start_process, name):
        self.start_process = start_process  # () -> (pid, socket): the new helper, ready for requests
        self.name = name
        self.pid = self.sock = None

    def ensure(self):
        if self.pid is None:
            self.pid, self.sock = self.start_process()
        return self

    def stop(self):
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                ru = os.wait4(self.pid, 0)[2]
                HELPERS_REAPED[0] += ru.ru_utime + ru.ru_stime
            except (OSError, ChildProcessError):
                pass
        if self.sock is not None:
            self.sock.close()
        self.pid = self.sock = None

    def gone(self):
        """The helper was reaped (or must be replaced): forget it; the next use starts another."""
        if self.sock is not None:
            self.sock.close()
        self.pid = self.sock = None

    def send(self, msg, fds=(), start=True):
        if start:
            self.ensure()
        elif self.pid is None:
            raise OSError(f"no {self.name}")
        try:
            os.kill(self.pid, signal.SIGCONT)  # a program may have stopped it
        except OSError:
            pass
        socket.send_fds(self.sock, [msg], list(fds))

    def recv(self, timeout):
        """The helper's answer within `timeout` seconds, waking it every 20 ms: a program may stop it
        (SIGSTOP) as often as it likes, and each stop then costs at most one slice."""
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.001, min(0.02, deadline - time.monotonic())))
            try:
                answer = self.sock.recv(4096)
            except (socket.timeout, BlockingIOError):
                if time.monotonic() >= deadline:
                    raise OSError(f"{self.name} did not answer within {timeout:.1f}s") from None
                try:
                    os.kill(self.pid, signal.SIGCONT)
                except OSError:
                    pass
                continue
            if not answer:
                raise OSError(f"{self.name} closed its socket")
            return answer

    def ask(self, msg, fds=(), timeout=5.0, retry=True):
        """The helper's answer, restarting it once (when `retry`) if it does not give one; without
        `retry` a helper that is gone is not restarted (OSError)."""
        for attempt in (0, 1):
            try:
                self.send(msg, fds, start=retry)
                return self.recv(timeout)
            except OSError:
                self.stop()
                if not retry or attempt:
                    raise
        raise OSError(f"{self.name} does not answer")


def start_zygote():
    """A fresh interpreter (exec'd: it never held anything of PID 1's) running zygote_main."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            fd = theirs.fileno()
            os.set_inheritable(fd, True)
            os.closerange(3, fd)
            os.closerange(fd + 1, 65536)
            os.execv(sys.executable, [sys.executable, "-I", "-S", os.path.abspath(__file__), "--zygote", str(fd)])
        finally:
            os._exit(SETUP_FAILED)
    theirs.close()
    try:
        mine.settimeout(60)  # the first answer waits for the new interpreter's imports
        socket.send_fds(mine, [b"P"], [])
        if mine.recv(16) != b"p":
            raise OSError("the zygote did not start")
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        mine.close()
        raise
    return pid, mine


def start_checker():
    """The checker, forked from PID 1 (it inherits PID 1's memory, which no program can read: the
    checker is not dumpable, as PID 1 is not)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            mine.close()
            fd = theirs.fileno()
            os.dup2(fd, 3)
            os.closerange(4, 65536)
            os.setsid()
            checker_main(socket.socket(fileno=3))
        finally:
            os._exit(0)
    theirs.close()
    return pid, mine


class Runner:
    def __init__(self, sandboxed):
        self.sandboxed = sandboxed
        self.sockets_at_start = inet_sockets() if sandboxed else set()
        if sandboxed:
            self.scratch_roots = ("/tmp", "/dev/shm", "/dev/mqueue")
            self.work_dir = "/tmp/run"  # fresh per test; the program's cwd, HOME and TMPDIR
            self.build_dir = "/tmp/.klear-build"  # compiled C++ binary, written afresh per test
        else:
            import atexit
            import shutil
            import tempfile

            base = tempfile.mkdtemp(prefix="klear-runner-")
            atexit.register(shutil.rmtree, base, True)
            self.scratch_roots = (base,)
            self.work_dir, self.build_dir = os.path.join(base, "run"), os.path.join(base, "build")
        self.zygote = Helper(start_zygote, "zygote").ensure()
        self.checker = Helper(start_checker, "checker")
        self.groups = []  # development mode: process groups of this test's processes
        self.spare = None  # (zygote pid, spare pid) once the zygote has said it forked one
        self.spare_asked = False  # an b"F" whose answer is not read yet

    def ask_spare(self):
        """Have the zygote fork the next test process now, between tests (after a cleanup: no program
        runs beside it); its answer is read by the next request."""
        if self.spare is None and not self.spare_asked and self.zygote.pid is not None:
            try:
                self.zygote.send(b"F", start=False)
                self.spare_asked = True
            except OSError:
                self.zygote.stop()

    def settle_spare(self):
        """Read the answer to an b"F" still in flight (the pid sweep must spare)."""
        if self.spare_asked:
            self.spare_asked = False
            try:
                self.spare = (self.zygote.pid, int(self.zygote.recv(1.0)))
            except (OSError, ValueError):
                self.zygote.stop()
        if self.spare is not None and self.spare[0] != self.zygote.pid:
            self.spare = None  # that zygote is gone, and with it its spare's channel: the spare exits

    # ---------------------------------------------------------------------------- processes
    def spawn(self, setup, io_fds):
        """Have the zygote fork a test process reading `setup`; (pid, ready read end) or (None, None)."""
        setup_fd = os.memfd_create("setup", 0)
        _write_all(setup_fd, json.dumps(setup).encode("utf-8", "surrogateescape"))
        ready_r, ready_w = os.pipe()
        self.settle_spare()
        self.spare = None  # taken by this b"S" (or gone with a zygote that does not answer)
        try:
            pid = int(self.zygote.ask(b"S", [setup_fd, ready_w] + list(io_fds)))
        except (OSError, ValueError):
            os.close(ready_r)
            return None, None
        finally:
            os.close(setup_fd)
            os.close(ready_w)
        if not self.sandboxed:
            self.groups.append(pid)
        return pid, ready_r

    def wait_test(self, pid):
        """(wait status, CPU seconds, peak RSS KiB) of a test process the zygote forked (it has exited
        or was killed), or Nones when the zygote could not tell."""
        self.settle_spare()
        try:
            answer = json.loads(self.zygote.ask(b"W%d" % pid, retry=False, timeout=1.0))
            status, cpu, rss = answer
            return status, float(cpu), rss
        except (OSError, ValueError, TypeError):
            self.zygote.stop()
        try:  # the zygote is gone (a program may kill it): its child is PID 1's now
            _, status, ru = os.wait4(pid, 0)
            return status, ru.ru_utime + ru.ru_stime, ru.ru_maxrss
        except ChildProcessError:
            return None, None, None

    def _others(self):
        self.settle_spare()
        keep = {1, os.getpid(), self.zygote.pid, self.checker.pid, self.spare and self.spare[1]}
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep:
                pids.append(int(name))
        return pids

    def sweep(self):
        """SIGKILL every process but PID 1, the zygote and the checker, and reap them; True once none
        are left. Repeated until a scan of /proc finds none (a process forked while one pass kills is
        killed by the next; a fork bomb is bounded by RLIMIT_NPROC and the pids cgroup)."""
        deadline = time.monotonic() + 2.0
        self.settle_spare()
        while True:
            if self.sandboxed:
                others = self._others()
                for pid in others:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                alive = bool(others)
            else:
                alive = False
                for pgid in self.groups:
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                        alive = True
                    except OSError:
                        pass
            try:  # a test process the zygote forked but was never asked to wait for is its zombie
                if alive and self.zygote.pid is not None:
                    self.zygote.ask(b"R", retry=False)
            except OSError:
                self.zygote.stop()
            self._reap()
            if not alive:
                self.groups = []
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)

    def _reap(self):
        while True:
            try:
                pid, _, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for helper in (self.zygote, self.checker):
                if pid == helper.pid:
                    helper.gone()
                    HELPERS_REAPED[0] += ru.ru_utime + ru.ru_stime

    def cleanup(self):
        ok = self.sweep()
        if self.sandboxed:
            ok = _remove_ipc() and ok
            ok = _sockets_gone(self.sockets_at_start) and ok
        for root in self.scratch_roots:
            ok = wipe(root) and ok
        return ok

    # ---------------------------------------------------------------------------------- a test
    def run_test(self, job, test, limits, argv=None, keep=None):
        """One test (or a compile) in a fresh process; the raw facts about how it went. `keep`: a file the
        process leaves (a compile's binary), read into the facts' "kept" (None if absent) before the cleanup
        wipes every file."""
        os.makedirs(self.work_dir, mode=0o700, exist_ok=True)
        mode = job.get("mode")
        checked = mode == "assert" and argv is None and "units" in test
        stdin_fd = os.memfd_create("stdin", 0)
        _write_all(stdin_fd, test.get("stdin", "").encode("utf-8", "surrogateescape"))
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rep_r, rep_w = os.pipe()
        setup = {"work": self.work_dir, "limits": limits, "mode": mode, "argv": argv}
        if argv is None:
            setup.update(code=job["code"], fn_name=job.get("fn_name"), args=test.get("args", []),
                         calls=test.get("calls"))
        prog_fds = [stdin_fd, out_w, err_w, rep_w]
        chans = socket.socketpair() if checked else None
        if checked:
            prog_fds.append(chans[0].fileno())
        self.zygote.ensure()  # (re)started before the test's CPU is counted, never during it
        if checked:
            self.checker.ensure()
        oom_before = _oom_kills()
        helpers_before = HELPERS_REAPED[0]
        tree_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        box_before, self_before = _container_cpu(self.sandboxed), _self_cpu()
        zygote_before = _proc_cpu(self.zygote.pid)
        t0 = time.monotonic()
        pid, ready_r = self.spawn(setup, prog_fds)
        for fd in (stdin_fd, out_w, err_w, rep_w):
            os.close(fd)
        check_r = None
        checker_before = 0.0
        if checked:
            chans[0].close()
            if pid is not None:
                check_r, res_w = os.pipe()
                units_fd = os.memfd_create("units", 0)
                _write_all(units_fd, json.dumps({"units": test["units"], "free": test.get("free", []),
                                                 "tested": test.get("tested", [])})
                           .encode("utf-8", "surrogateescape"))
                checker_before = _proc_cpu(self.checker.pid)
                try:
                    self.checker.send(b"T", [units_fd, chans[1].fileno(), res_w], start=False)
                except OSError:
                    self.checker.stop()
                    os.close(check_r)
                    check_r = None
                os.close(units_fd)
                os.close(res_w)
            chans[1].close()
        if pid is None or (checked and check_r is None):
            for fd in (out_r, err_r, rep_r, ready_r):
                if fd is not None:
                    os.close(fd)
            clean = self.sweep()
            return {"exit": None, "signal": None, "timed_out": False, "output_exceeded": False, "oom": False,
                    "cpu": 0.0, "wall": 0.0, "maxrss_kb": None, "stdout_b64": "", "stderr": "",
                    "setup_failed": True, "unclean": not clean or None}
        streams = {out_r: "stdout", err_r: "stderr", rep_r: "report"}
        if checked:
            streams[check_r] = "checks"
        bufs = {name: [] for name in streams.values()}
        sizes = dict.fromkeys(bufs, 0)
        # stdout is judged only for stdin/stdout programs (LiveCodeBench ignores a call's prints); stderr
        # never: past the cap, what is not judged is read and discarded (only its tail is kept)
        judged_stdout = mode == "stdio" or argv is not None
        caps = {"stdout": limits["output_bytes"], "report": limits["output_bytes"], "stderr": None,
                "checks": 64 * 1024 + 1024 * len(test.get("units", ()))}
        if not judged_stdout:
            caps["stdout"] = None
        exceeded = timed_out = False
        pidfd = os.pidfd_open(pid)
        sel = selectors.DefaultSelector()
        sel.register(pidfd, selectors.EVENT_READ, None)
        for fd, name in streams.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        deadline = t0 + limits["wall_s"]
        pending = {"program"} | ({"checks"} if checked else set())

        def pump(fd, name):
            nonlocal exceeded
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                pending.discard(name)
                return False
            sizes[name] += len(chunk)
            bufs[name].append(chunk)
            if caps[name] is None:  # not judged: keep the tail, discard the rest
                if len(bufs[name]) > 2:
                    bufs[name] = [b"".join(bufs[name])[-STDERR_KEEP:]]
                return True
            if sizes[name] > caps[name]:
                exceeded = exceeded or name != "checks"
                return False
            return True

        while pending and not exceeded:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                if key.data is None:
                    pending.discard("program")
                    sel.unregister(key.fd)
                elif not pump(key.fd, key.data):
                    sel.unregister(key.fd)
        wall = time.monotonic() - t0
        if "program" in pending:
            self._kill_now(pid)
        status, cpu, maxrss = self.wait_test(pid)
        os.close(pidfd)
        checker_cpu, checker_done = 0.0, not checked
        if checked:
            checker_cpu = max(0.0, _proc_cpu(self.checker.pid) - checker_before)
            try:  # the program is gone, so the checker ends its run at once unless its own code is stuck
                checker_done = self.checker.recv(0.5 if "checks" not in pending else 0.2) == b"d"
            except OSError:
                checker_done = False
            if not checker_done:
                self.checker.stop()
        kept = _read_or_none(keep) if keep else None
        clean = self.cleanup()  # every process, IPC object and file is gone before anything is parsed
        self.ask_spare()
        tree_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        orphans_cpu = ((tree_after.ru_utime + tree_after.ru_stime) - (tree_before.ru_utime + tree_before.ru_stime)
                       - (HELPERS_REAPED[0] - helpers_before))
        tree_cpu = (cpu or 0.0) + max(0.0, orphans_cpu)
        box_after, self_after = _container_cpu(self.sandboxed), _self_cpu()
        if box_before is not None and box_after is not None:  # what no wait() reports
            zygote_cpu = max(0.0, _proc_cpu(self.zygote.pid) - zygote_before)
            tree_cpu = max(tree_cpu, (box_after - box_before) - (self_after - self_before) - checker_cpu
                           - zygote_cpu)
        for fd, name in streams.items():  # every writer is dead: drain what is left, within the caps
            while (caps[name] is None or sizes[name] <= caps[name]) and pump(fd, name):
                pass
            os.close(fd)
        sel.close()
        ready = self._drain(ready_r)
        oom_after = _oom_kills()
        result = {
            "exit": os.waitstatus_to_exitcode(status) if status is not None and os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None,
            "timed_out": timed_out,
            "output_exceeded": exceeded,
            "oom": bool(oom_before is not None and oom_after is not None and oom_after > oom_before),
            "cpu": round(tree_cpu, 4),
            "wall": round(wall, 4),
            "maxrss_kb": maxrss,
            # base64, not JSON text: control bytes would grow 6x as \u escapes in the response
            "stdout_b64": base64.b64encode(b"".join(bufs["stdout"])[:limits["output_bytes"] + 1]).decode("ascii"),
            "stderr": b"".join(bufs["stderr"])[-STDERR_KEEP:].decode("utf-8", "replace"),
            "stderr_bytes": sizes["stderr"],
        }
        if not clean:
            result["unclean"] = True
        if keep:
            result["kept"] = kept
        if ready.startswith(b"LC"):
            result["compile_error"] = ready[2:].decode("utf-8", "replace")  # told before the program ran
        elif not ready.startswith(b"L") and not timed_out:
            result["setup_failed"] = True  # decided here, from a pipe the program never held
        result["report"] = _last_report(b"".join(bufs["report"]))
        if checked:
            result["checks"] = _checks(b"".join(bufs["checks"]), len([u for u in test["units"] if u[0] == "test"]))
        return result

    def _kill_now(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    @staticmethod
    def _drain(fd):
        os.set_blocking(fd, False)
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            data = b""
        os.close(fd)
        return data

    # ---------------------------------------------------------------------------------- a job
    def run_job(self, job):
        started = time.monotonic()
        limits = dict(LIMIT_DEFAULTS, **job.get("limits", {}))
        budget = job.get("deadline_s")
        language = job.get("language", "python")
        results, timeouts, clean, compiled = [], 0, True, None
        argv = None
        if language == "cpp" and not os.path.exists("/usr/bin/g++"):
            return {"ok": True, "clean": True,
                    "unsupported": "this image has no g++ (build it with `klear sandbox build --cpp`)"}
        if language == "cpp":
            os.makedirs(self.build_dir, mode=0o700, exist_ok=True)
            with open(os.path.join(self.build_dir, "main.cpp"), "w") as fh:
                fh.write(job["code"])
            compile_limits = dict(limits, cpu_s=limits["compile_wall_s"], wall_s=limits["compile_wall_s"],
                                  memory_bytes=limits["compile_memory_bytes"],
                                  fsize_bytes=max(limits["fsize_bytes"], 256 << 20), nproc=max(limits["nproc"], 32))
            binary = os.path.join(self.build_dir, "prog")
            compiled = self.run_test(job, {}, compile_limits, ["/usr/bin/g++", "-O2", "-std=c++17", "-pipe",
                                                               "-o", binary, os.path.join(self.build_dir, "main.cpp")],
                                     keep=binary)
            compiled.pop("stdout_b64", None)
            program = compiled.pop("kept", None)  # held here: each test gets a fresh copy no test has touched
            clean = not compiled.get("unclean") and clean
            if compiled["exit"] != 0 or program is None:
                return {"ok": True, "compile": compiled, "results": [], "clean": clean}
            argv = [binary]
        elif language != "python":
            return {"ok": True, "clean": True, "unsupported": f"unsupported language {language!r}"}
        for test in job["tests"]:
            if timeouts >= limits["max_timeouts"]:
                results.append({"skipped": True})
                continue
            if budget is not None and time.monotonic() - started + limits["wall_s"] + 0.5 > budget:
                results.append({"skipped": True, "reason": "job deadline"})
                continue
            if argv is not None:
                _install(binary, program)
            raw = self.run_test(job, test, limits, argv)
            results.append(raw)
            clean = not raw.get("unclean") and clean
            if raw.get("compile_error"):  # from the ready pipe: nothing the program wrote stops the job
                break
            if _timed_out(raw, limits):
                timeouts += 1
        return {"ok": True, "compile": compiled, "results": results, "clean": clean}


def _last_report(data):
    """The call's value: the last non-blank line the test wrote on its report pipe, as a JSON object, or
    {"garbled": true}. Only that one line is parsed, so a flood of report lines costs one split."""
    data = data.rstrip(b"\n \t\r")
    if not data:
        return None
    line = data[data.rfind(b"\n") + 1:]
    return parse_report(line)


def _depth_ok(obj, depth=0):
    if depth > MAX_REPORT_DEPTH:
        return False
    if isinstance(obj, dict):
        return all(_depth_ok(v, depth + 1) for v in obj.values())
    if isinstance(obj, list):
        return all(_depth_ok(v, depth + 1) for v in obj)
    return True


def parse_report(line):
    """One report line as a JSON object, or {"garbled": true}: whatever the program wrote (a non-object,
    a 5,000-digit int, 100,000 nested lists, or nesting deeper than the host's JSON reader takes) is
    data, never a runner crash nor a response the host cannot read."""
    try:
        obj = json.loads(line)
        if isinstance(obj, dict) and _depth_ok(obj):
            json.dumps(obj)  # what we send back must encode
            return obj
    except Exception:
        pass
    return {"garbled": True}


def _checks(data, n):
    """The checker's results: test index -> {"ok": true} | {"verdict", "message"} | {"gone": why}."""
    out = {}
    for line in data.splitlines()[: n + 2]:
        obj = parse_report(line)
        k = obj.get("test")
        if type(k) is int and 0 <= k < n and k not in out:
            out[k] = {key: obj[key] for key in ("ok", "verdict", "message", "gone") if key in obj}
    return {str(k): v for k, v in sorted(out.items())}


def _timed_out(raw, limits):
    return raw["timed_out"] or raw["signal"] == signal.SIGXCPU or (
        raw["cpu"] is not None and raw["cpu"] > limits["cpu_s"])


def _read_or_none(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _install(path, data):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--zygote":
        zygote_main(int(sys.argv[2]))
        return
    is_init = os.getpid() == 1
    # Destructive housekeeping (kill(-1), wiping /tmp) happens only when all three say we are the sandbox
    # container's init: started with --sandbox, as PID 1, not as root. Anywhere else (a developer running
    # this file by hand) the runner uses a private temp dir and kills only its children's groups.
    sandboxed = is_init and os.getuid() != 0 and "--sandbox" in sys.argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # no handlers at all: PID 1 then ignores every signal
    _prctl(PR_SET_DUMPABLE, 0)
    if not is_init:
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
    runner = Runner(sandboxed)
    hello = {"hello": VERSION, "sandboxed": sandboxed, "pid": os.getpid(), "python": sys.version.split()[0],
             "gpp": os.path.exists("/usr/bin/g++"), "oom_counter": _oom_kills() is not None,
             "clean": runner.cleanup()}
    _write_all(proto_out, (json.dumps(hello) + "\n").encode())
    served = 0
    for line in reader:
        req = resp = None
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "ping":
                resp = {"ok": True, "pong": True}
            elif op == "run":
                served += 1
                started = time.monotonic()
                resp = runner.run_job(req)
                resp["runner_s"] = round(time.monotonic() - started, 4)
            elif op == "exit":
                break
            else:
                resp = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # a runner bug: report it; the host recycles this container
            resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            try:
                runner.cleanup()
            except Exception:
                pass
        resp["served"] = served
        del req
        _write_all(proto_out, (json.dumps(resp) + "\n").encode())
        del resp
    runner.zygote.stop()
    runner.checker.stop()


if __name__ == "__main__":
    main()
