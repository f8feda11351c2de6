"""A grading worker: `python -m tasks.grading.worker`, started and driven by timeouts.py over pipes.

Frames on stdin/stdout are a 4-byte big-endian length and a pickle. Requests and replies:
    ("warm", module)                      import module, run its warm_up() if any  → ("ready",)
    ("call", module, name, args, cpu_s)   name(*args); a generator's values stream → ("item", v) ...,
                                          then ("done", return value); an exception → ("error", text)
The worker is its own process from its first line (no multiprocessing, so nothing re-imports the
caller's __main__: a script without a `__main__` guard can grade). It ends:
- at end of input (its caller closed the pipe or is gone while it waits);
- within a second of its caller's death while it runs Python (process_lifetime.exit_with_parent);
- when a step overruns its CPU budget with nobody left to kill it (a computation that holds the GIL for
  good included): before each call and each streamed value the CPU limit (RLIMIT_CPU) is set to the
  CPU time used + 2 × cpu_s + 5 s, past which the kernel ends the process (SIGXCPU);
- with `--memory-mb N`, an address-space limit turns an answer that would exhaust memory into a
  MemoryError inside the call (math-verify then answers False) instead of the host's OOM killer.
What the called code prints goes to stderr: stdout carries frames only.
"""
from __future__ import annotations

import importlib
import math
import os
import pickle
import resource
import signal
import struct
import sys
import traceback

from tasks.process_lifetime import exit_with_parent

HEADER = struct.Struct(">I")


def read_frame(stream):
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    size, = HEADER.unpack(head)
    body = stream.read(size)
    return pickle.loads(body) if len(body) == size else None


def write_frame(stream, obj) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()


def _limit_cpu(cpu_s: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + 2 * cpu_s + 5)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _serve(inp, out) -> None:
    while (msg := read_frame(inp)) is not None:
        try:
            if msg[0] == "warm":
                _, hard = resource.getrlimit(resource.RLIMIT_CPU)
                resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))  # start-up has no CPU budget
                warm_up = getattr(importlib.import_module(msg[1]), "warm_up", None)
                if callable(warm_up):
                    warm_up()
                write_frame(out, ("ready",))
                continue
            _, module, name, args, cpu_s = msg
            _limit_cpu(cpu_s)
            result = getattr(importlib.import_module(module), name)(*args)
            if hasattr(result, "__next__") and hasattr(result, "send"):  # a generator: stream its values
                for value in result:
                    write_frame(out, ("item", value))
                    _limit_cpu(cpu_s)
                result = None
            write_frame(out, ("done", result))
        except BrokenPipeError:
            return  # the caller is gone
        except Exception:
            write_frame(out, ("error", traceback.format_exc()))


def main(argv: list[str]) -> None:
    exit_with_parent(os.getppid())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # ended by SIGXCPU: no core file in the caller's directory
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it closes our input
    if "--memory-mb" in argv:
        limit = int(argv[argv.index("--memory-mb") + 1]) * 2 ** 20
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() in the called code goes to stderr, never into the frame stream
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main(sys.argv[1:])
