"""One GPPO update on a fixed batch of rollouts, in one process or as one torchrun rank, for the
rank-equivalence test (test_rl_distributed.py):

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/training/rl_ranks.py MODEL OUT STRATEGY

Rank 0 (or the one process) saves the updated parameters, whole, and the step's metrics to OUT."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks.training import distributed as dist_utils  # noqa: E402
from tasks.training.config import RLConfig  # noqa: E402
from tasks.training.rl_update import Rollout, update_policy  # noqa: E402

CFG = RLConfig(mini_batches=2, micro_batch_size=3, old_logprobs="recompute", backend="hf", sft_alpha=0.1)
LR = 1e-4  # the scale test_rl_update's tolerances are set for (the tiny width's default is 3.2e-5)


def fixed_rollouts(vocab: int, groups: int = 6, per_group: int = 4) -> list[Rollout]:
    """Groups of rollouts with uneven lengths; rewards 0/1 within a group (advantages ≠ 0), one flat group."""
    rng = random.Random(7)
    out = []
    for g in range(groups):
        prompt = [rng.randrange(1, vocab) for _ in range(rng.randint(4, 20))]
        for i in range(per_group):
            reward = 0.5 if g == groups - 1 else float((i + g) % 2)
            out.append(Rollout(g, "math", prompt, [rng.randrange(1, vocab) for _ in range(rng.randint(2, 40))],
                               reward, reward == 1.0, False))
    return out


def run(model_dir: str, out: str, strategy: str) -> None:
    from transformers import AutoModelForCausalLM

    ctx = dist_utils.setup()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(ctx.device)
    policy = dist_utils.wrap(model, ctx, strategy)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    values = update_policy(model, opt, sched, fixed_rollouts(model.config.vocab_size), CFG, ctx.device, 0,
                           policy=policy, ctx=ctx)
    params = {n: t.clone() for n, t in dist_utils.full_parameters(policy)}
    if ctx.is_main:
        Path(out).mkdir(parents=True, exist_ok=True)
        torch.save(params, Path(out) / "params.pt")
        (Path(out) / "values.json").write_text(json.dumps(values))
    dist_utils.teardown(ctx)


if __name__ == "__main__":
    run(*sys.argv[1:4])
