"""The GPPO update on fixed rollouts: rank sharing by tokens, the α·NLL term's golden value, the overlong
filter, no optimizer or scheduler step when every group is filtered, and N ranks (ddp, fsdp) giving the
one-process update."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.training.config import RLConfig
from tasks.training.rl_update import Rollout, balance, logprobs, update_policy

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))


def _rollouts(vocab: int, rewards: list[list[float]], truncated: set[int] = frozenset()) -> list[Rollout]:
    import random

    rng = random.Random(1)
    out = []
    for g, rs in enumerate(rewards):
        prompt = [rng.randrange(1, vocab) for _ in range(rng.randint(3, 9))]
        for r in rs:
            out.append(Rollout(g, "math", prompt, [rng.randrange(1, vocab) for _ in range(rng.randint(2, 12))],
                               r, r == 1.0, len(out) in truncated))
    return out


def _frozen(model):
    """An optimizer too slow to move a weight: the update's loss is then the loss of the given policy."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-30)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)


def test_balance_shares_by_tokens_and_keeps_one_rank_in_order():
    sizes = [50, 10, 40, 30, 20, 60, 5]
    assert balance(sizes, 1) == [list(range(7))]
    shares = balance(sizes, 3)
    assert sorted(i for s in shares for i in s) == list(range(7)) and all(s == sorted(s) for s in shares)
    loads = [sum(sizes[i] for i in s) for s in shares]
    assert max(loads) - min(loads) <= max(sizes)           # LPT: within one item of even
    assert balance(sizes, 3) == shares                      # deterministic
    assert balance([7, 7], 4) == [[0], [1], [], []]         # more ranks than rollouts: some get none


def test_sft_alpha_adds_the_mean_nll_of_correct_rollouts(tiny):
    """L(α) − L(0) = α · (−Σ log π over correct rollouts' tokens) / their token count (one mini-batch)."""
    rs = _rollouts(tiny.config.vocab_size, [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    cfg = dict(mini_batches=1, micro_batch_size=3, backend="hf", old_logprobs="recompute")
    with_nll = update_policy(tiny, *_frozen(tiny), rs, RLConfig(sft_alpha=0.3, **cfg), CPU, 0)["loss"]
    without = update_policy(tiny, *_frozen(tiny), rs, RLConfig(sft_alpha=0.0, **cfg), CPU, 0)["loss"]
    ok = [(r, 0.0) for r in rs if r.correct]
    with torch.no_grad():
        lp, mask, _ = logprobs(tiny, ok, CPU)
    nll = float(-(lp * mask).sum() / mask.sum())
    assert with_nll - without == pytest.approx(0.3 * nll, rel=1e-5)


def test_overlong_filter_trains_as_if_truncated_rollouts_were_absent(tiny):
    rs = _rollouts(tiny.config.vocab_size, [[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]], truncated={1, 6})
    cfg = dict(mini_batches=1, micro_batch_size=8, backend="hf", overlong_filter=True)
    filtered = update_policy(tiny, *_frozen(tiny), rs, RLConfig(**cfg), CPU, 0)
    kept = [r for r in rs if not r.truncated]
    absent = update_policy(tiny, *_frozen(tiny), kept, RLConfig(**cfg), CPU, 0)
    assert filtered["trained_rollouts"] == absent["trained_rollouts"] == 6
    assert filtered["loss"] == pytest.approx(absent["loss"], rel=1e-6)
    assert update_policy(tiny, *_frozen(tiny), rs, RLConfig(**{**cfg, "overlong_filter": False}), CPU,
                         0)["trained_rollouts"] == 8


def test_no_optimizer_or_scheduler_step_when_every_group_is_filtered(tiny):
    rs = _rollouts(tiny.config.vocab_size, [[1.0, 1.0], [0.0, 0.0]])  # zero variance in every group
    before = {n: p.clone() for n, p in tiny.named_parameters()}
    opt = torch.optim.AdamW(tiny.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
    values = update_policy(tiny, opt, sched, rs, RLConfig(backend="hf"), CPU, 0)
    assert values["trained_rollouts"] == 0 and values["filtered_group_frac"] == 1.0
    assert sched.last_epoch == 0 and not opt.state
    assert all(torch.equal(p, before[n]) for n, p in tiny.named_parameters())


@pytest.mark.slow
def test_two_ranks_ddp_and_fsdp_give_the_one_process_update(tmp_path):
    """One fixed batch of rollouts (uneven lengths, so ranks get different micro-batch counts and run
    filler passes; two mini-batches, recomputed π_old, α·NLL, a zero-variance group): the parameters after
    the update on 2 gloo ranks, DDP and FSDP, equal one process's within 1e-5 (train_rl's lr for this
    width, 1e-4: two AdamW steps move every weight by ~2e-4, and Adam's normalisation turns float-order
    noise in the smallest gradients into ~1e-6 here, ~1e-5 at lr 1e-3)."""
    from tasks.models.factory import init_model

    model = init_model(tmp_path / "base", [f"What is {a} plus {b}? It is {a + b}." for a in range(6)
                                           for b in range(6)], seed=0)
    runs = {}
    for nproc, strategy in [(1, "ddp"), (2, "ddp"), (2, "fsdp")]:
        out = tmp_path / f"{nproc}-{strategy}"
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                            str(ROOT / "tests/training/rl_ranks.py"), str(model), str(out), strategy],
                           cwd=ROOT, timeout=600, capture_output=True, text=True)
        assert r.returncode == 0, f"{nproc} ranks, {strategy}: exit {r.returncode}\n{r.stderr[-5000:]}"
        runs[(nproc, strategy)] = (torch.load(out / "params.pt"), json.loads((out / "values.json").read_text()))
    one, one_values = runs[(1, "ddp")]
    assert one_values["trained_rollouts"] == 20
    from transformers import AutoModelForCausalLM

    base = dict(AutoModelForCausalLM.from_pretrained(str(model)).named_parameters())
    assert max((one[k] - base[k]).abs().max().item() for k in one) > 1e-4  # the update moved the weights
    for key in [(2, "ddp"), (2, "fsdp")]:
        params, values = runs[key]
        assert params.keys() == one.keys()
        assert max((params[k] - one[k]).abs().max().item() for k in one) <= 1e-5, key
        assert values["loss"] == pytest.approx(one_values["loss"], rel=1e-5)
        assert values["clip_frac_high"] == pytest.approx(one_values["clip_frac_high"], abs=1e-6)
        assert 1.0 <= values["rank_token_imbalance"] < 1.2


def test_blocked_logprobs_equal_the_full_log_softmax_and_its_gradient(tiny, monkeypatch):
    """logprobs keeps only response logits and takes log-probs in checkpointed blocks: the values and the
    gradient equal a plain log_softmax over the full logits (any block size)."""
    from tasks.training import rl_update

    rs = _rollouts(tiny.config.vocab_size, [[1.0, 0.0, 1.0], [0.0, 1.0]])
    chunk = [(r, 0.0) for r in rs]

    def plain():
        seqs = [r.prompt_ids + r.response_ids for r in rs]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
        attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
        lg = tiny(input_ids=ids, attention_mask=attn).logits.float()
        rows = [torch.log_softmax(lg[i, len(r.prompt_ids) - 1:len(r.prompt_ids) - 1 + len(r.response_ids)], -1)
                .gather(-1, torch.tensor(r.response_ids)[:, None]).squeeze(-1) for i, r in enumerate(rs)]
        return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)

    def grad_of(fn):
        tiny.zero_grad()
        out = fn()
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        return out.detach(), {n: p.grad.clone() for n, p in tiny.named_parameters()}

    ref, ref_grad = grad_of(plain)
    for block in (3, 4096):
        monkeypatch.setattr(rl_update, "LOGPROB_BLOCK", block)
        out, grads = grad_of(lambda: logprobs(tiny, chunk, CPU)[0])
        assert (out - ref).abs().max() < 1e-5
        assert max((grads[n] - ref_grad[n]).abs().max().item() for n in grads) < 1e-5


def test_a_non_finite_loss_stops_before_the_update():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS
    from tasks.training.metrics import NonFiniteLoss

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    with torch.no_grad():
        model.lm_head.weight.fill_(float("nan"))  # what a far too large learning rate leaves behind
    before = {n: p.clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    rs = _rollouts(model.config.vocab_size, [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(NonFiniteLoss, match=r"^RL step 1, mini-batch 1: loss nan, gradient norm nan: stopped"):
        update_policy(model, opt, sched, rs, RLConfig(backend="hf", mini_batches=1), CPU, 0)
    assert not opt.state and sched.last_epoch == 0
    assert all(torch.equal(p, before[n]) or torch.isnan(p).all() for n, p in model.named_parameters())
