"""A step's rollouts shared over the ranks as tensors, each rollout's tokens moved only to the rank that
trains it.

After generation rank r holds the prompt groups it generated and graded (rl_engine.rollout_share: a group
sits whole on one rank, in its sampling order). The update (rl_update.py) needs on every rank the step's
whole list in group order, but only for its bookkeeping (rewards, groups, flags and lengths decide the
advantages, the zero-variance filter, the seeded shuffle, the mini-batches and the token balance); it reads
the tokens of only the rollouts that rank trains. So `exchange_rollouts`:

1. all-gathers each rank's rollout metadata as one float64 tensor, a row of FIELDS per rollout (group,
   reward (NaN: none), correct, truncated, prompt / response / log-prob lengths, domain; float64 holds each
   exactly), padded to the longest share after a gather of the counts. Every rank orders the rows by group,
   ties in rank then local order: the order of the object gather it replaces (all_gather_objects of every
   rank's list, concatenated in rank order, then a stable sort by group).
2. builds that list with `Hollow` token lists (a length, no content) and runs the update's own schedule on
   it (rl_update.trained_minibatches, rank_micro_batches, filler), so every rank knows which rollouts each
   rank trains, plus the fewest-token rollout of each mini-batch where that rank runs a filler pass;
3. moves each rollout a rank needs but another rank holds, once, holder → needer, in one
   all_to_all_single of int64 per step: per rollout its prompt ids, response ids, then its log-probs as
   float64 bit patterns (exact); the receiver splits them by the lengths it has from step 1.

The list returned is the object gather's list, in the same order with the same metadata, where a rollout
this rank neither trains nor runs as a filler is hollow (reading its tokens raises). update_policy reads
tokens only of the rollouts its plan gives this rank, so it makes the same update and metrics as it does on
the gathered list (tests/training/test_rollout_exchange.py compares both on 2 ranks). Per step this moves
a few floats per rollout to every rank plus, per rank, the tokens of about (N−1)/N of the rollouts it
trains, instead of every rollout's tokens to every rank (N× the step's tokens, pickled).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist

from tasks.training.rl_update import Rollout, filler, rank_micro_batches, trained_minibatches

FIELDS = ("group", "reward", "correct", "truncated", "prompt_len", "response_len", "logprob_len", "domain")
DOMAINS = ("math", "code")  # a rollout's domain travels as its index here


class NotOnThisRank(RuntimeError):
    """The tokens of a rollout another rank trains were read here."""


class Hollow(Sequence):
    """A token (or log-prob) list of known length whose content stays on the rank that trains it."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        raise NotOnThisRank("this rollout's tokens are on the rank that trains it (rollout_exchange.py)")

    def __repr__(self) -> str:
        return f"Hollow({self.n})"


def exchange_rollouts(mine: list[Rollout], cfg, step: int, ctx) -> list[Rollout]:
    """The step's whole list on every rank, group order, hollow where this rank does not need the tokens
    (module rule); one process: `mine` in group order."""
    if ctx.world_size == 1:
        return sorted(mine, key=lambda r: r.group)
    rows, owner = _gather_metadata(mine, ctx)
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], owner[i]))  # stable: local order kept
    full = [_hollow(rows[i]) for i in order]
    holder = [owner[i] for i in order]
    local = [owner[i][1] for i in order]
    need = rank_needs(full, cfg, step, ctx.world_size)
    for i in range(len(full)):
        if holder[i][0] == ctx.rank:
            full[i] = mine[local[i]]
    _move_tokens(full, [h for h, _ in holder], need, ctx)
    return full


def rank_needs(rollouts: list[Rollout], cfg, step: int, world: int) -> list[set[int]]:
    """Per rank, the indices into `rollouts` whose tokens its update reads: its share of every mini-batch
    (rl_update.rank_micro_batches) and, where it has fewer micro-batches than another rank, the mini-batch's
    filler rollout."""
    index = {id(r): i for i, r in enumerate(rollouts)}
    need: list[set[int]] = [set() for _ in range(world)]
    for mb in trained_minibatches(rollouts, cfg, step)[1]:
        shares = rank_micro_batches(mb, world, cfg)
        most = max(map(len, shares))
        for rank, share in enumerate(shares):
            need[rank].update(index[id(mb[i][0])] for b in share for i in b)
            if len(share) < most:
                need[rank].add(index[id(filler(mb)[0])])
    return need


def _metadata(r: Rollout) -> list[float]:
    if r.domain not in DOMAINS:
        raise ValueError(f"rollout of group {r.group}: domain {r.domain!r} is not one of {', '.join(DOMAINS)}")
    return [r.group, math.nan if r.reward is None else r.reward, r.correct, r.truncated, len(r.prompt_ids),
            len(r.response_ids), len(r.logprobs), DOMAINS.index(r.domain)]


def _gather_metadata(mine: list[Rollout], ctx) -> tuple[list[list[float]], list[tuple[int, int]]]:
    """Every rank's metadata rows in rank order, and (rank, local index) of each."""
    count = torch.tensor([len(mine)], dtype=torch.int64, device=ctx.device)
    counts = [torch.zeros_like(count) for _ in range(ctx.world_size)]
    dist.all_gather(counts, count)
    counts = [int(c) for c in counts]
    local = torch.zeros(max(counts), len(FIELDS), dtype=torch.float64, device=ctx.device)
    if mine:
        local[:len(mine)] = torch.tensor([_metadata(r) for r in mine], dtype=torch.float64)
    shares = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(shares, local)
    rows, owner = [], []
    for rank, (share, n) in enumerate(zip(shares, counts)):
        rows += share[:n].cpu().tolist()
        owner += [(rank, i) for i in range(n)]
    return rows, owner


def _hollow(row: list[float]) -> Rollout:
    group, reward, correct, truncated, p, n, lp, domain = row
    return Rollout(int(group), DOMAINS[int(domain)], Hollow(int(p)), Hollow(int(n)),
                   None if math.isnan(reward) else reward, bool(correct), bool(truncated), Hollow(int(lp)))


def _payload_len(r: Rollout) -> int:
    return len(r.prompt_ids) + len(r.response_ids) + len(r.logprobs)


def _move_tokens(full: list[Rollout], holder: list[int], need: list[set[int]], ctx) -> None:
    """Step 3: fill in place the hollow rollouts this rank needs, from the ranks holding them."""
    world, me = ctx.world_size, ctx.rank
    sends = [[i for i in sorted(need[d]) if holder[i] == me] if d != me else [] for d in range(world)]
    recvs = [[i for i in sorted(need[me]) if holder[i] == s] if s != me else [] for s in range(world)]
    moved = sum(_payload_len(full[i]) for d in range(world) for i in need[d] if holder[i] != d)
    if not moved:  # the same sum on every rank: all skip together
        return
    parts = [torch.tensor(r.prompt_ids + r.response_ids, dtype=torch.int64).tolist() +
             torch.tensor(r.logprobs, dtype=torch.float64).view(torch.int64).tolist()
             for d in range(world) for r in (full[i] for i in sends[d])]
    send = torch.tensor([x for p in parts for x in p], dtype=torch.int64, device=ctx.device)
    recv_sizes = [sum(_payload_len(full[i]) for i in recvs[s]) for s in range(world)]
    recv = torch.empty(sum(recv_sizes), dtype=torch.int64, device=ctx.device)
    dist.all_to_all_single(recv, send, recv_sizes, [sum(_payload_len(full[i]) for i in sends[d])
                                                    for d in range(world)])
    flat, at = recv.cpu(), 0
    for i in (i for s in range(world) for i in recvs[s]):
        r = full[i]
        p, n, lp = len(r.prompt_ids), len(r.response_ids), len(r.logprobs)
        ids = flat[at:at + p + n].tolist()
        logprobs = flat[at + p + n:at + p + n + lp].view(torch.float64).tolist()
        full[i] = Rollout(r.group, r.domain, ids[:p], ids[p:], r.reward, r.correct, r.truncated, logprobs)
        at += p + n + lp
