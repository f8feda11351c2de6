"""bench/rl_update: the RL update alone (tasks/training/rl_update.update_policy) on fixed rollouts at the demo's
lengths, CPU, fp32: packed rows with chunked log-probs from the hidden states (today) against the padded layout
(`packing=False`, the reference kept in the product) and, when git can show it, the update as it was before
packing (`--baseline-rev`, loaded from the repository's history: right-padded micro-batches of 32 rollouts,
full-vocabulary logits). Same model weights, rollouts, losses and seeds for every arm.

    python bench/rl_update.py [--rollouts 128] [--group 8] [--mini-batches 2] [--repeats 5] [--threads 1]
                              [--baseline-rev 6c4ef6f] [--vocab 512]

Model: the tiny preset (tasks/models/presets.py: 2 layers, hidden 128) with random weights and a `--vocab`
-row embedding (512: the demo tokenizer's size). Rollouts: `--rollouts` in groups of `--group`, prompts of
30–70 tokens and responses of 10–150 (the demo SFT model's: its math answers stop on their own; uniform,
seeded), rewards alternating 0/1 in each group so every rollout is trained. An update = `--mini-batches`
optimizer steps with π_old recomputed (`old_logprobs="recompute"`: the same work for every arm).

Each arm runs in turn in one process (`--threads` torch threads), the arms alternating, `--repeats` times
after one warm-up round, each on a fresh copy of the same weights. tokens/s = (prompt + response tokens of
the trained rollouts) × (1 + the π_old pass's share) / median seconds of an update — reported plainly as
rollout tokens per second of update. The ratio is the arm's median tokens/s over the baseline's, measured
in the same run; `loss` is each arm's update loss (the same within float rounding). Writes
bench/out/rl_update.json.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def demo_length_rollouts(n: int, group: int, vocab: int, seed: int = 0) -> list:
    """`n` rollouts in groups of `group` at the demo's lengths (module docstring), rewards 0/1 alternating."""
    from tasks.training.rl_update import Rollout

    rng = random.Random(seed)
    out = []
    for g in range(n // group):
        prompt = [rng.randrange(1, vocab) for _ in range(rng.randint(30, 70))]
        for k in range(group):
            response = [rng.randrange(1, vocab) for _ in range(rng.randint(10, 150))]
            out.append(Rollout(g, "math", prompt, response, float(k % 2), k % 2 == 1, False))
    return out


def baseline_update(rev: str):
    """update_policy of rl_update.py at git revision `rev`, or None with the reason when git cannot show it."""
    try:
        src = subprocess.run(["git", "show", f"{rev}:tasks/training/rl_update.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, f"git show {rev} failed ({str(e).splitlines()[0][:80]})"
    path = Path(tempfile.mkdtemp()) / f"rl_update_{rev}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"rl_update_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.update_policy, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=128)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--mini-batches", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--baseline-rev", default="6c4ef6f")
    a = ap.parse_args()

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS
    from tasks.training.config import RLConfig
    from tasks.training.rl_update import update_policy

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    base = Qwen2ForCausalLM(Qwen2Config(**{**PRESETS["tiny"].to_dict(), "vocab_size": a.vocab}))
    rollouts = demo_length_rollouts(a.rollouts, a.group, a.vocab)
    tokens = sum(r.tokens for r in rollouts)
    common = dict(backend="hf", mini_batches=a.mini_batches, old_logprobs="recompute", lr=1e-4, bf16=False)
    arms = {"packed": (update_policy, RLConfig(**common)),
            "padded": (update_policy, RLConfig(packing=False, **common))}
    old, why = baseline_update(a.baseline_rev)
    if old is not None:
        arms[f"before ({a.baseline_rev})"] = (old, RLConfig(micro_batch_size=32, **common))
    else:
        print(f"baseline before packing skipped: {why}")
    cpu = torch.device("cpu")
    times: dict[str, list[float]] = {k: [] for k in arms}
    losses: dict[str, float] = {}
    for round_ in range(a.repeats + 1):
        for name, (fn, cfg) in arms.items():
            model = copy.deepcopy(base)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
            t0 = time.perf_counter()
            values = fn(model, opt, sched, rollouts, cfg, cpu, 0)
            if round_:  # round 0 warms up
                times[name].append(time.perf_counter() - t0)
            losses[name] = values["loss"]
    ref = next(k for k in reversed(list(arms)))
    res = {}
    print(f"{a.rollouts} rollouts ({tokens:,} tokens), {a.mini_batches} mini-batches, π_old recomputed, fp32, "
          f"{a.threads} thread(s), {a.repeats} measured rounds; baseline: {ref}")
    print(f"{'arm':>18} {'median s':>9} {'tokens/s':>10} {'vs baseline':>12} {'loss':>12}")
    for name in arms:
        med = statistics.median(times[name])
        res[name] = {"median_s": med, "tokens_per_s": tokens / med, "loss": losses[name], "runs_s": times[name]}
    for name, r in res.items():
        r["ratio"] = r["tokens_per_s"] / res[ref]["tokens_per_s"]
        print(f"{name:>18} {r['median_s']:>9.3f} {r['tokens_per_s']:>10,.0f} {'x%.2f' % r['ratio']:>12} "
              f"{r['loss']:>12.6f}")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "rl_update.json").write_text(json.dumps({"args": vars(a), "tokens": tokens, "arms": res}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
