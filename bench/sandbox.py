"""Sandbox throughput: klear's warm pool vs bare unsandboxed processes vs llm-sandbox, same programs.

    python bench/sandbox.py [--programs 320] [--parallel 2] [--llm-sandbox N] [--skip-dask] [--repeat R]

Function-style programs with assert tests (a quarter of them broken), all run `--parallel` at a time:
- bare:        `/usr/bin/python3 -c PROGRAM+ASSERTS` per program, no isolation (the baseline; not the
               pyenv `python3` shim, whose ≈ 100 ms start-up would flatter the ratio)
- klear warm:  verify_submission on a started SandboxPool (full isolation, one round trip per program)
- klear verify: verify_rows over a fresh Dask LocalCluster, start-up and close included (worker threads,
               the default; and `--processes`, one worker process each)
- klear verify CLI: the `klear verify IN --out OUT` command end to end (interpreter start, imports,
               reading and writing the files included)
- llm-sandbox: a fresh container per program (PyPI `llm-sandbox`, on a copy of our image with `python`)
Bare runs before and after every runner (the host is shared and its load drifts); each ratio is against
the mean of the two bare runs around it. Prints throughput and ratios (medians over --repeat runs); the
verdicts of every runner must agree with bare's exit codes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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


def run_klear_dask(rows, parallel, processes=False):
    from tasks.verification import VerifyConfig, verify_rows

    config = VerifyConfig(workers=parallel, processes=processes)
    return [r["verdict"] == "accepted" for r in verify_rows(rows, config)]


def run_klear_cli(rows, parallel):
    import tempfile

    root = Path(__file__).resolve().parents[1]  # `klear` of this checkout (the console script runs flows.cli)
    with tempfile.TemporaryDirectory(prefix="klear-bench-") as work:
        inp, out = Path(work) / "in.jsonl", Path(work) / "out.jsonl"
        inp.write_text("".join(json.dumps({k: r[k] for k in ("id", "code", "tests")}) + "\n" for r in rows))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "flows.cli", "verify", str(inp), "--out", str(out), "--workers",
                        str(parallel)], check=True, capture_output=True, cwd=root)
        seconds = time.perf_counter() - t0
        return [json.loads(line)["verdict"] == "accepted" for line in out.read_text().splitlines()], seconds


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
    ap.add_argument("--repeat", type=int, default=1, help="run the whole sequence this many times; report medians")
    args = ap.parse_args()
    rows = programs(args.programs)
    expected = [not r["broken"] for r in rows]
    import docker

    from sandbox.image import ensure_image

    client = docker.from_env()
    image = ensure_image()

    def timed_run(fn):
        def run():
            out, seconds = timed("", fn)
            return out, seconds, {}
        return run

    def warm():
        (out, t_warm), t_all = timed("warm", lambda: run_klear_warm(rows, args.parallel))
        return out, t_warm, {"pool start + close s": round(t_all - t_warm, 2)}

    runners = {"klear warm pool": warm}
    if not args.skip_dask:
        runners["klear verify (Dask, cold)"] = timed_run(lambda: run_klear_dask(rows, args.parallel))
        runners["klear verify --processes (cold)"] = timed_run(lambda: run_klear_dask(rows, args.parallel, True))
        runners["klear verify CLI (end to end)"] = lambda: (*run_klear_cli(rows, args.parallel), {})
    n_llm = len(rows) if args.llm_sandbox is None else args.llm_sandbox
    if n_llm:
        try:
            import llm_sandbox  # noqa: F401

            llm_img = llm_sandbox_image(client, image)

            def llm():
                try:
                    out, t = timed("llm", lambda: run_llm_sandbox(rows[:n_llm], args.parallel, llm_img))
                finally:  # llm-sandbox leaves a container behind when one fails to start
                    for c in client.containers.list(all=True, filters={"ancestor": llm_img}):
                        c.remove(force=True)
                return out + expected[n_llm:], t * len(rows) / n_llm, {"programs": n_llm}
            runners["llm-sandbox (fresh container)"] = llm
        except ImportError:
            print("llm-sandbox not installed (pip install llm-sandbox): skipped", file=sys.stderr)

    # The host is shared: its load drifts. Bare runs before and after every runner, and each runner is
    # compared with the mean of the two bare runs around it.
    n = len(rows)
    runs = {name: [] for name in ["bare", *runners]}
    for _ in range(args.repeat):
        bare, t = timed("bare", lambda: run_bare(rows, args.parallel))
        runs["bare"].append({"per_s": n / t, "vs_bare": 1.0, "agree": bare == expected})
        for name, fn in runners.items():
            out, seconds, extra = fn()
            bare, t_after = timed("bare", lambda: run_bare(rows, args.parallel))
            runs["bare"].append({"per_s": n / t_after, "vs_bare": 1.0, "agree": bare == expected})
            base = n / ((t + t_after) / 2)
            runs[name].append({"per_s": n / seconds, "vs_bare": (n / seconds) / base, "agree": out == expected,
                               "bare_per_s": base, **extra})
            t = t_after

    results = {}
    for name, rs in runs.items():
        results[name] = {"per_s": round(statistics.median(r["per_s"] for r in rs), 1),
                         "vs_bare": round(statistics.median(r["vs_bare"] for r in rs), 2),
                         "vs_bare_all": [round(r["vs_bare"], 2) for r in rs] if name != "bare" else [],
                         "agree": all(r["agree"] for r in rs),
                         **{k: v for k, v in rs[-1].items() if k not in ("per_s", "vs_bare", "agree", "bare_per_s")}}
    print(f"{n} function-style programs with assert tests, {args.parallel} at a time "
          f"({sum(r['broken'] for r in rows)} broken); median of {args.repeat} run(s), load {os.getloadavg()[0]:.1f}")
    print(f"{'runner':34} {'programs/s':>10} {'vs bare':>8}  verdicts")
    for name, r in results.items():
        extra = f"  (pool start+close {r['pool start + close s']}s)" if "pool start + close s" in r else ""
        spread = f"  [{', '.join(map(str, r['vs_bare_all']))}]" if args.repeat > 1 and name != "bare" else ""
        print(f"{name:34} {r['per_s']:10.1f} {r['vs_bare']:8.2f}  {'agree' if r['agree'] else 'DISAGREE'}{extra}{spread}")
    if "llm-sandbox (fresh container)" in results:
        ratio = results["klear warm pool"]["per_s"] / results["llm-sandbox (fresh container)"]["per_s"]
        print(f"klear warm pool vs llm-sandbox: {ratio:.1f}x")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "sandbox.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
