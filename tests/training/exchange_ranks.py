"""One GPPO update on 2 ranks from rollouts that each rank generated for its own groups, once through the
object gather train_rl used before (every rollout pickled to every rank) and once through
rollout_exchange.exchange_rollouts, each on a fresh copy of the model (test_rollout_exchange.py):

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/training/exchange_ranks.py MODEL OUT STRATEGY

Rank 0 saves both runs' parameters and metrics, and every rank's count of hollow and received rollouts."""
from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks.training import distributed as dist_utils  # noqa: E402
from tasks.training.rl import default_rl_lr  # noqa: E402
from tasks.training.rl_update import filler, rank_micro_batches, trained_minibatches, update_policy  # noqa: E402
from tasks.training.rollout_exchange import Hollow, exchange_rollouts  # noqa: E402
from tests.training.rl_ranks import CFG, fixed_rollouts  # noqa: E402

# three mini-batches of micro-batches of two: here two mini-batches give a rank fewer micro-batches than the
# other and a filler rollout that the other rank holds (checked in the test)
CFG = replace(CFG, mini_batches=3, micro_batch_size=2)


def step_rollouts(vocab: int) -> list:
    """rl_ranks' fixed groups plus: engine log-probs on every group but one (the metrics read them), an
    INFRA rollout (reward None), a code group, a truncated rollout."""
    rng = random.Random(11)
    out = []
    for r in fixed_rollouts(vocab, groups=8, per_group=4):
        logprobs = [] if r.group == 3 else [-3 * rng.random() for _ in r.response_ids]
        out.append(replace(r, logprobs=logprobs, domain="code" if r.group == 5 else "math"))
    out[1] = replace(out[1], reward=None, correct=False)
    out[6] = replace(out[6], truncated=True)
    return out


def update(model_dir: str, rollouts: list, ctx, strategy: str) -> tuple[dict, dict]:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(ctx.device)
    policy = dist_utils.wrap(model, ctx, strategy)
    opt = torch.optim.AdamW(model.parameters(), lr=default_rl_lr(model.config.hidden_size), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    values = update_policy(model, opt, sched, rollouts, CFG, ctx.device, 0, policy=policy, ctx=ctx)
    return {n: t.clone() for n, t in dist_utils.full_parameters(policy)}, values


def run(model_dir: str, out: str, strategy: str) -> None:
    from transformers import AutoConfig

    ctx = dist_utils.setup()
    every = step_rollouts(AutoConfig.from_pretrained(model_dir).vocab_size)
    mine = [r for r in every if r.group % ctx.world_size == ctx.rank]  # rl_engine.rollout_share, tp 1
    gathered = [r for share in dist_utils.all_gather_objects(mine, ctx) for r in share]
    gathered.sort(key=lambda r: r.group)
    exchanged = exchange_rollouts(mine, CFG, 0, ctx)
    fields = ("group", "domain", "reward", "correct", "truncated")
    same_metadata = len(exchanged) == len(gathered) and all(
        [getattr(a, f) for f in fields] + [len(a.prompt_ids), len(a.response_ids), len(a.logprobs)]
        == [getattr(b, f) for f in fields] + [len(b.prompt_ids), len(b.response_ids), len(b.logprobs)]
        for a, b in zip(exchanged, gathered))
    whole = [(a, b) for a, b in zip(exchanged, gathered) if not isinstance(a.response_ids, Hollow)]
    same_tokens = all(a == b for a, b in whole)
    _, minis = trained_minibatches(exchanged, CFG, 0)
    shares = [rank_micro_batches(mb, ctx.world_size, CFG) for mb in minis]
    fillers = sum(len(s[ctx.rank]) < max(map(len, s)) and filler(mb)[0].group % ctx.world_size != ctx.rank
                  for mb, s in zip(minis, shares))
    stats = {"rank": ctx.rank, "fillers_from_other_rank": fillers, "hollow": len(exchanged) - len(whole),
             "held": len(mine),
             "received": sum(1 for a, _ in whole if a not in mine), "same_metadata": same_metadata,
             "same_tokens": same_tokens}
    old_params, old_values = update(model_dir, gathered, ctx, strategy)
    new_params, new_values = update(model_dir, exchanged, ctx, strategy)
    stats = dist_utils.all_gather_objects(stats, ctx)
    if ctx.is_main:
        Path(out).mkdir(parents=True, exist_ok=True)
        torch.save({"old": old_params, "new": new_params}, Path(out) / "params.pt")
        result = {"old": old_values, "new": new_values, "ranks": stats}
        (Path(out) / "values.json").write_text(json.dumps(result))
    dist_utils.teardown(ctx)


if __name__ == "__main__":
    run(*sys.argv[1:4])
