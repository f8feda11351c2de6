"""bench/threads: SFT steps on CPU with busy processes beside them, under each of tasks/cpu_threads.py's
thread policies, in one run:

- `fixed`: every CPU of the process's affinity, OpenMP's brief spin before sleeping (the default:
  GOMP_SPINCOUNT=10000, repeatable);
- `fixed-passive`: the same count, threads sleep at once (OMP_WAIT_POLICY=PASSIVE);
- `fixed-spin`: the same count with OpenMP's own waiting (threads spin ~3 ms at every barrier: torch's
  default, the baseline);
- `auto`: the count follows the CPUs other processes leave free (KLEAR_TORCH_THREADS=auto).

    python bench/threads.py [--busy 6] [--steps 40] [--repeats 2]

Each arm trains `--steps` SFT steps of the tiny preset model at the demo's shapes (batch 8 packs of 256
tokens; rows of the test suite's additions) in a child process, while `--busy` other processes spin; arms
alternate. Prints each arm's seconds per step (from its metrics, the first 3 steps left out: start-up is
the same for all), its CPU seconds, and its time over the baseline's (< 1: faster than torch's default).
Then the same arms idle (`--busy 0`).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS = [{"problem": f"What is {a} plus {b}?", "response": f"<think>\n{a} + {b} = {a + b}\n</think>\n\\boxed{{{a + b}}}"}
        for a in range(48) for b in range(48)]
CHILD = """
import json, os, sys, time
{first}
sys.path.insert(0, {root!r})
from tasks.training.sft import SFTConfig, train_sft
t0, c0 = time.perf_counter(), os.times()
train_sft({model!r}, {data!r}, {out!r}, SFTConfig(max_steps={steps}, batch_size=8, micro_batch_size=8, seq_len=256,
                                                  save_every=10**6))
c1 = os.times()
rows = [json.loads(line) for line in open(os.path.join({out!r}, "metrics.jsonl"))][3:]
step = sum(r["input_tokens"] / r["input_tokens_per_s"] for r in rows) / len(rows)
print(json.dumps({{"wall": time.perf_counter() - t0, "cpu": c1.user + c1.system - c0.user - c0.system, "step": step}}))
"""


def spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


ARMS = {"fixed": {}, "fixed-passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "fixed-spin": {},
        "auto": {"KLEAR_TORCH_THREADS": "auto"}}
BASELINE = "fixed-spin"  # torch imported before the package: OpenMP reads its own default waiting policy


def run_arm(model: str, data: str, work: Path, steps: int, arm: str, tag: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "KLEAR_TORCH_THREADS",
                                                           "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(ARMS[arm])
    code = CHILD.format(root=str(ROOT), model=model, data=data, out=str(work / tag), steps=steps,
                        first="import torch" if arm == BASELINE else "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"bench/threads: arm {arm} failed: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--busy", type=int, default=6)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.steps <= 3:
        ap.error("--steps: more than 3 (the first 3 steps of each arm are left out)")
    from tasks.models.factory import init_model

    with tempfile.TemporaryDirectory(prefix="klear-bench-threads-") as tmp:
        work = Path(tmp)
        data = work / "data.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
        model = str(init_model(work / "base", [r["problem"] + r["response"] for r in ROWS], seed=0))
        for busy in dict.fromkeys((args.busy, 0)):
            results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
            for r in range(args.repeats):
                for arm in ARMS:
                    spinners = [mp.Process(target=spin, args=(time.monotonic() + 3600,)) for _ in range(busy)]
                    for p in spinners:
                        p.start()
                    try:
                        results[arm].append(run_arm(model, str(data), work, args.steps, arm, f"{arm}-{busy}-{r}"))
                    finally:
                        for p in spinners:
                            p.terminate()
                            p.join()
            step = {a: statistics.median(x["step"] for x in v) for a, v in results.items()}
            wall = {a: statistics.median(x["wall"] for x in v) for a, v in results.items()}
            cpu = {a: statistics.median(x["cpu"] for x in v) for a, v in results.items()}
            print(f"busy processes: {busy}, {args.steps} steps, median of {args.repeats}")
            for a in results:
                print(f"  {a:13s} {step[a]:.3f} s/step  wall {wall[a]:6.1f} s  cpu {cpu[a]:6.1f} s"
                      f"  step / {BASELINE}'s: x{step[a] / step[BASELINE]:.2f}")


if __name__ == "__main__":
    main()
