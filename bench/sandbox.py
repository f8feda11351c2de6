"""Sandbox throughput: klear's warm pool vs bare unsandboxed processes vs llm-sandbox, same programs.

    python bench/sandbox.py [--programs 320] [--parallel 2] [--llm-sandbox N] [--skip-dask]

Function-style programs with assert tests (a quarter of them broken), all run `--parallel` at a time:
- bare:        `/usr/bin/python3 -c PROGRAM+ASSERTS` per program, no isolation (the baseline; not the
               pyenv `python3` shim, whose ≈ 100 ms start-up would flatter the ratio)
- klear warm:  verify_submission on a started SandboxPool (full isolation, one round trip per program)
- klear verify: verify_rows over a fresh Dask LocalCluster, start-up included (what `klear verify` does)
- llm-sandbox: a fresh container per program (PyPI `llm-sandbox`, on a copy of our image with `python`)
Prints throughput and ratios; the verdicts of every runner must agree with bare's exit codes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEMPLATES = [
    ("def f(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
     "def f(n):\n    return n", lambda n: _fib(n), lambda i: i % 25),
    ("def f(a):\n    return sorted(a)", "def f(a):\n    return a", sorted,
     lambda i: [(i * 7 + k * 13) % 17 for k in range(i % 9 + 2)]),
    ("def f(s):\n    return s[::-1]", "def f(s):\n    return s", lambda s: s[::-1], lambda i: "abcxyz"[: i % 6 + 2] + str(i)),
    ("import math\ndef f(a):\n    return math.gcd(a, 84)", "def f(a):\n    return a % 84", lambda a: __import__("math").gcd(a, 84),
     lambda i: i * 6 + 1),
    ("def f(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
     "def f(n):\n    return n % 2 == 1", lambda n: n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)),
     lambda i: i * 3 + 7),
    ("def f(s):\n    return {c: s.count(c) for c in set(s)}", "def f(s):\n    return {}",
     lambda s: {c: s.count(c) for c in set(s)}, lambda i: "mississippi"[: i % 11 + 1]),
    ("def f(n):\n    return sum(int(d) for d in str(n))", "def f(n):\n    return len(str(n))",
     lambda n: sum(int(d) for d in str(n)), lambda i: i * 9973),
    ("class Solution:\n    def go(self, a):\n        return max(a) - min(a)\ndef f(a):\n    return Solution().go(a)",
     "def f(a):\n    return max(a)", lambda a: max(a) - min(a), lambda i: [i, i * 3 % 11, 5, i % 7]),
]


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def programs(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        good, bad, oracle, arg = TEMPLATES[i % len(TEMPLATES)]
        broken = i % 4 == 3
        asserts = "\n".join(f"assert f({arg(i + k)!r}) == {oracle(arg(i + k))!r}" for k in range(4))
        rows.append({"id": f"p{i}", "code": bad if broken else good, "tests": {"assert_code": asserts},
                     "broken": broken})
    return rows


def timed(label: str, fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_bare(rows, parallel):
    def one(r):
        p = subprocess.run(["/usr/bin/python3", "-c", r["code"] + "\n" + r["tests"]["assert_code"]],
                           capture_output=True, timeout=30)
        return p.returncode == 0
    with ThreadPoolExecutor(parallel) as ex:
        return list(ex.map(one, rows))


def run_klear_warm(rows, parallel):
    from sandbox import PoolConfig, SandboxPool, verify_submission

    with SandboxPool(PoolConfig(size=parallel)) as pool:
        verify_submission(rows[0], pool)  # warm-up: first fork, first import of the harness
        t0 = time.perf_counter()
        with ThreadPoolExecutor(parallel) as ex:
            out = list(ex.map(lambda r: verify_submission(r, pool)["verdict"] == "accepted", rows))
        return out, time.perf_counter() - t0


def run_klear_dask(rows, parallel):
    from tasks.verification import VerifyConfig, verify_rows

    return [r["verdict"] == "accepted" for r in verify_rows(rows, VerifyConfig(workers=parallel))]


def llm_sandbox_image(client, base: str) -> str:
    """Our image plus what llm-sandbox expects: root, a `python` on PATH, /sandbox."""
    tag = f"klear-bench-llm-sandbox:{base.split(':')[1]}"
    try:
        client.images.get(tag)
        return tag
    except Exception:
        pass
    c = client.containers.run(base, ["/bin/sh", "-c", "ln -s /usr/bin/python3 /usr/bin/python && mkdir /sandbox"],
                              user="root", detach=True)
    c.wait()
    c.commit(*tag.split(":"), changes=["USER root", 'CMD ["tail", "-f", "/dev/null"]'])
    c.remove(force=True)
    return tag


def run_llm_sandbox(rows, parallel, image):
    from llm_sandbox import SandboxSession

    def one(r):
        # init=True: tini as PID 1 passes `docker stop`'s SIGTERM on, so closing takes ms, not the 10 s grace
        with SandboxSession(lang="python", image=image, keep_template=True, skip_environment_setup=True,
                            verbose=False, runtime_configs={"init": True}) as s:
            res = s.run(r["code"] + "\n" + r["tests"]["assert_code"])
            return res.exit_code == 0
    with ThreadPoolExecutor(parallel) as ex:
        return list(ex.map(one, rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=320)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--llm-sandbox", type=int, default=None, help="programs for llm-sandbox (default: all; 0 skips)")
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()
    rows = programs(args.programs)
    expected = [not r["broken"] for r in rows]
    import docker

    from sandbox.image import ensure_image

    client = docker.from_env()
    image = ensure_image()
    results = {}

    bare, t = timed("bare", lambda: run_bare(rows, args.parallel))
    results["bare"] = {"n": len(rows), "seconds": t, "agree": bare == expected}
    (warm, t_warm), t_all = timed("warm", lambda: run_klear_warm(rows, args.parallel))
    results["klear warm pool"] = {"n": len(rows), "seconds": t_warm, "agree": warm == expected,
                                  "pool start + close s": round(t_all - t_warm, 2)}
    if not args.skip_dask:
        dask_out, t = timed("dask", lambda: run_klear_dask(rows, args.parallel))
        results["klear verify (Dask, cold)"] = {"n": len(rows), "seconds": t, "agree": dask_out == expected}
    n_llm = len(rows) if args.llm_sandbox is None else args.llm_sandbox
    if n_llm:
        try:
            import llm_sandbox  # noqa: F401

            llm_img = llm_sandbox_image(client, image)
            sub = rows[:n_llm]
            try:
                out, t = timed("llm", lambda: run_llm_sandbox(sub, args.parallel, llm_img))
            finally:  # llm-sandbox leaves a container behind when one fails to start
                for c in client.containers.list(all=True, filters={"ancestor": llm_img}):
                    c.remove(force=True)
            results["llm-sandbox (fresh container)"] = {"n": len(sub), "seconds": t, "agree": out == expected[:n_llm]}
        except ImportError:
            print("llm-sandbox not installed (pip install llm-sandbox): skipped", file=sys.stderr)

    base = results["bare"]["n"] / results["bare"]["seconds"]
    print(f"{len(rows)} function-style programs with assert tests, {args.parallel} at a time "
          f"({sum(r['broken'] for r in rows)} broken)")
    print(f"{'runner':34} {'programs/s':>10} {'vs bare':>8}  verdicts")
    for name, r in results.items():
        rate = r["n"] / r["seconds"]
        r["per_s"] = round(rate, 1)
        r["vs_bare"] = round(rate / base, 2)
        extra = f"  (pool start+close {r['pool start + close s']}s)" if "pool start + close s" in r else ""
        print(f"{name:34} {rate:10.1f} {rate / base:8.2f}  {'agree' if r['agree'] else 'DISAGREE'}{extra}")
    if "llm-sandbox (fresh container)" in results:
        llm = results["llm-sandbox (fresh container)"]
        ratio = results["klear warm pool"]["per_s"] / llm["per_s"]
        print(f"klear warm pool vs llm-sandbox: {ratio:.1f}x")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "sandbox.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
