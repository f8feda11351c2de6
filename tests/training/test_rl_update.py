"""The GPPO update on fixed rollouts: rank sharing by tokens, micro-batches by a token budget, the α·NLL term's
golden value, the overlong filter, no optimizer or scheduler step when every group is filtered, N ranks (ddp,
fsdp) giving the one-process update, packed rows giving the padded ones' update, log-probs from the hidden
states equal to the full log-softmax at the sampling temperature, and bf16 autocast that sees the updated
weights in every mini-batch."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.training.config import RLConfig
from tasks.training.scoring import PADDED, rollout_logprobs
from tasks.training.rl_update import Rollout, balance, even_split, micro_batches, update_policy

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
    with torch.no_grad():
        lp, _, _ = rollout_logprobs(tiny, tiny, [r for r in rs if r.correct], "varlen", CPU)
    nll = float(-lp.sum() / lp.numel())
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


def test_an_oversampled_step_trains_the_first_prompts_per_step_groups_the_filter_leaves():
    """The paper's generation batch: 2× the prompts drawn, zero-variance groups dropped, the first
    prompts_per_step of the rest trained (in the order drawn), no refill when fewer are left. The trained
    groups' advantages are their own group's, whatever else was generated."""
    from tasks.training.rl_update import trained_minibatches

    #          g0 flat     g1          g2 flat     g3          g4          g5
    rewards = [[1., 1.], [1., 0.], [0., 0.], [0., 1.], [1., 0.], [0., 1.]]
    rs = _rollouts(512, rewards)
    cfg = RLConfig(prompts_per_step=3, oversample=2.0, mini_batches=1, backend="hf")
    values, minis = trained_minibatches(rs, cfg, 0)
    assert sorted({r.group for r, _ in minis[0]}) == [1, 3, 4]
    assert (values["trained_groups"], values["surplus_groups"], values["trained_rollouts"]) == (3, 1, 6)
    assert values["generated_groups"] == 6
    assert values["filtered_group_frac"] == pytest.approx(2 / 6)
    alone = dict((id(r), a) for r, a in trained_minibatches([r for r in rs if r.group in (1, 3, 4)],
                                                            RLConfig(prompts_per_step=3, mini_batches=1), 0)[1][0])
    assert all(a == alone[id(r)] for r, a in minis[0])
    few = _rollouts(512, [[1., 1.], [1., 0.], [0., 0.], [0., 0.], [0., 0.], [1., 1.]])  # one group left: no refill
    values, minis = trained_minibatches(few, cfg, 0)
    assert (values["trained_groups"], values["surplus_groups"], values["trained_rollouts"]) == (1, 0, 2)


def test_oversampling_below_one_or_without_the_filter_is_refused_and_rounds_up():
    from tasks.config_checks import ConfigError

    with pytest.raises(ConfigError, match="oversample"):
        RLConfig(oversample=0.5)
    with pytest.raises(ConfigError, match="zero-variance filter"):
        RLConfig(oversample=2.0, filter_zero_variance=False)
    assert RLConfig(oversample=1.0, filter_zero_variance=False).generated_prompts == 16
    assert RLConfig().generated_prompts == 16 and RLConfig(oversample=2.0).generated_prompts == 32
    assert RLConfig(prompts_per_step=10, oversample=1.1).generated_prompts == 11  # not 12 from float error
    assert RLConfig(prompts_per_step=10, oversample=1.15).generated_prompts == 12


def test_a_step_that_is_not_oversampled_trains_every_group_it_is_given():
    """The cap is the oversample's: a caller passing more groups than prompts_per_step (a bench, a test) at
    oversample 1 trains them all, as before."""
    from tasks.training.rl_update import trained_minibatches

    rs = _rollouts(512, [[1., 0.]] * 5)
    values, _ = trained_minibatches(rs, RLConfig(prompts_per_step=2, mini_batches=1), 0)
    assert (values["trained_groups"], values["surplus_groups"], values["trained_rollouts"]) == (5, 0, 10)


@pytest.mark.parametrize("left, fixed, steps", [(8, True, 4), (5, True, 3), (1, True, 1), (5, False, 4),
                                                 (0, True, 0)])
def test_a_fixed_mini_batch_takes_as_many_optimizer_steps_as_the_groups_left_fill(left, fixed, steps):
    """prompts_per_step 8 in 4 mini-batches: 2 prompts each. With fixed_mini_batch (the paper's 16 prompts of
    128) a step whose filter left 5 groups takes ⌈5·4/8⌉ = 3 steps; without, always 4, smaller ones."""
    from tasks.training.rl_update import trained_minibatches

    rs = _rollouts(512, [[1., 0.]] * left + [[1., 1.]] * (8 - left))  # the flat groups are filtered out
    cfg = RLConfig(prompts_per_step=8, rollouts_per_prompt=2, mini_batches=4, fixed_mini_batch=fixed)
    values, minis = trained_minibatches(rs, cfg, 0)
    assert len(minis) == values["optimizer_steps"] == steps
    assert sum(map(len, minis)) == 2 * left and (not minis or max(map(len, minis)) - min(map(len, minis)) <= 1)


@pytest.mark.slow
def test_two_ranks_ddp_and_fsdp_give_the_one_process_update(tmp_path):
    """One fixed batch of rollouts (uneven lengths, so ranks get different micro-batch counts and run
    filler passes; two mini-batches, recomputed π_old, α·NLL, a zero-variance group): the parameters after
    the update on 2 gloo ranks, DDP and FSDP, equal one process's within 1e-5 (lr 1e-4: two AdamW steps
    move every weight by ~2e-4, and Adam's normalisation turns float-order noise in the smallest gradients
    into ~1e-6 here, ~1e-5 at lr 1e-3)."""
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


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_scored_logprobs_equal_the_full_log_softmax_and_its_gradient(tiny, monkeypatch, temperature):
    """Packed rows (varlen, dense mask) and padded rows, log-probs taken from the hidden states in chunks of any
    size: the values and the gradient equal a plain log_softmax(logits / τ) over the model's full logits."""
    from tasks.training import linear_logprobs

    rs = _rollouts(tiny.config.vocab_size, [[1.0, 0.0, 1.0], [0.0, 1.0]])

    def plain():
        seqs = [r.prompt_ids + r.response_ids for r in rs]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
        attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
        lg = tiny(input_ids=ids, attention_mask=attn).logits.float() / temperature
        rows = [torch.log_softmax(lg[i, len(r.prompt_ids) - 1:len(r.prompt_ids) - 1 + len(r.response_ids)], -1)
                .gather(-1, torch.tensor(r.response_ids)[:, None]).squeeze(-1) for i, r in enumerate(rs)]
        return torch.cat(rows)

    def grad_of(fn):
        tiny.zero_grad()
        out = fn()
        (out * torch.linspace(-1, 1, out.numel())).sum().backward()
        return out.detach(), {n: p.grad.clone() for n, p in tiny.named_parameters()}

    ref, ref_grad = grad_of(plain)
    for attention in ("varlen", "dense", PADDED):
        for chunk in (3, 4096):
            monkeypatch.setattr(linear_logprobs, "LOGPROB_CHUNK", chunk)
            monkeypatch.setattr(linear_logprobs.linear_logprobs, "__defaults__", (1.0, chunk))
            out, grads = grad_of(lambda: rollout_logprobs(tiny, tiny, rs, attention, CPU, temperature)[0])
            assert (out - ref).abs().max() < 1e-5, (attention, chunk)
            assert max((grads[n] - ref_grad[n]).abs().max().item() for n in grads) < 1e-5, (attention, chunk)


def test_a_model_whose_logits_are_transformed_is_scored_from_its_own_logits():
    """A model with a step after its output layer (here the config's final_logit_softcapping, which Gemma 2
    applies; Qwen2 ignores it, so the two paths must agree) is scored through its own forward's logits, not
    the hidden-state chunks: SFT and RL still train it."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS
    from tasks.training.scoring import hidden_state_scoring_problem

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    rs = _rollouts(model.config.vocab_size, [[1.0, 0.0, 1.0], [0.0, 1.0]])
    chunked, ent, _ = rollout_logprobs(model, model, rs, "varlen", CPU, 0.7)
    model.config.final_logit_softcapping = 30.0
    assert hidden_state_scoring_problem(model) is not None
    full, ent_full, _ = rollout_logprobs(model, model, rs, "varlen", CPU, 0.7)
    assert (full - chunked).abs().max() < 1e-5 and (ent_full - ent).abs().max() < 1e-4
    full.sum().backward()
    assert model.lm_head.weight.grad is not None


def test_every_scoring_forward_builds_no_kv_cache(tiny):
    seen = []
    hook = tiny.model.register_forward_pre_hook(lambda mod, args, kw: seen.append(kw.get("use_cache")),
                                                with_kwargs=True)
    try:
        rs = _rollouts(tiny.config.vocab_size, [[1.0, 0.0], [0.0, 1.0]])
        update_policy(tiny, *_frozen(tiny), rs, RLConfig(backend="hf", mini_batches=2, old_logprobs="recompute"),
                      CPU, 0)
    finally:
        hook.remove()
    assert seen and all(u is False for u in seen)  # π_old pass and both training passes


def test_micro_batches_fill_a_token_budget():
    sizes = [50, 10, 40, 30, 20, 60, 5, 85]
    bins = micro_batches(sizes, 100)
    assert sorted(i for b in bins for i in b) == list(range(8))
    assert all(sum(sizes[i] for i in b) <= 100 or len(b) == 1 for b in bins)
    assert len(bins) == 3                                   # 300 tokens: the fewest bins of 100 (all full)
    assert micro_batches([150, 20], 100) == [[0], [1]]      # over the budget: alone
    assert all(len(b) <= 2 for b in micro_batches(sizes, 1000, cap=2))


def _grpo_batch(vocab: int) -> list[Rollout]:
    import random

    rng = random.Random(1)
    out = []
    for g in range(8):
        prompt = [rng.randrange(1, vocab) for _ in range(rng.randint(3, 9))]
        for k in range(4):
            out.append(Rollout(g, "math", prompt, [rng.randrange(1, vocab) for _ in range(rng.randint(8, 24))],
                               float(k % 2), k % 2 == 1, False))
    return out


def _fresh_update(cfg: RLConfig, lr: float = 3e-3) -> tuple[dict, dict]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    values = update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
                           _grpo_batch(model.config.vocab_size), cfg, CPU, 0)
    return values, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_bf16_updates_see_the_weights_of_the_previous_mini_batch():
    """4 mini-batches: π_θ moves away from π_old after each optimizer step. Under bf16 autocast the later
    mini-batches must run on the updated weights: their staleness |log π_θ − log π_old| is the fp32 run's
    (an autocast context held across the optimizer steps reuses its bf16 copies of the first weights:
    staleness 0.112 against fp32's 0.235 here, only the tied embedding moving)."""
    cfg = dict(backend="hf", mini_batches=4, micro_batch_size=8, old_logprobs="recompute")
    fp32, _ = _fresh_update(RLConfig(bf16=False, **cfg))
    bf16, _ = _fresh_update(RLConfig(bf16=True, **cfg))
    assert fp32["stale_logratio"] > 0.1
    assert bf16["stale_logratio"] == pytest.approx(fp32["stale_logratio"], rel=0.1)


def test_packed_rows_give_the_padded_update():
    """The same rollouts, packed into token-budget rows (varlen, dense mask) or padded one per row: the same
    loss, metrics and weights after 2 mini-batches (fp32 summation order aside: at lr 1e-4 Adam's
    normalisation turns it into ~1e-6 in the weights, as in the ranks test above)."""
    cfg = dict(backend="hf", mini_batches=2, old_logprobs="recompute", micro_batch_tokens=256)
    ref, ref_w = _fresh_update(RLConfig(packing=False, **cfg), lr=1e-4)
    for attention in ("varlen", "dense"):
        got, w = _fresh_update(RLConfig(packing=True, attention=attention, **cfg), lr=1e-4)
        for k in ("loss", "entropy", "clip_frac_low", "clip_frac_high", "stale_logratio", "grad_norm"):
            assert got[k] == pytest.approx(ref[k], rel=1e-4, abs=1e-6), (attention, k)
        assert max((w[n] - ref_w[n]).abs().max().item() for n in w) < 1e-5, attention


def test_the_gradient_shares_do_not_depend_on_the_micro_batching():
    """grad_share_low/high over a step are Σ_low|g| / Σ|g| over all its tokens (losses.gradient_shares), not a
    token-weighted mean of each micro-batch's ratio, so cutting the same update finer leaves them as they are
    (a mean of ratios moved them by a third here)."""
    cfg = dict(backend="hf", mini_batches=2, old_logprobs="recompute")
    whole, _ = _fresh_update(RLConfig(**cfg), lr=3e-2)
    assert whole["grad_share_low"] > 0 and whole["grad_share_high"] > 0
    for size in (1, 3):
        cut, _ = _fresh_update(RLConfig(micro_batch_size=size, **cfg), lr=3e-2)
        for k in ("clip_frac_low", "clip_frac_high", "grad_share_low", "grad_share_high"):
            assert cut[k] == pytest.approx(whole[k], rel=1e-4, abs=1e-7), (size, k)


def test_a_step_takes_mini_batches_optimizer_steps():
    """`mini_batches` pieces whose sizes differ by at most one: 12 trained rollouts in 8 mini-batches are 8
    optimizer steps (a cut by ⌈12/8⌉ = 2 gave 6), fewer only when fewer rollouts are trained."""
    assert [len(p) for p in even_split(list(range(12)), 8)] == [2, 2, 2, 2, 1, 1, 1, 1]
    assert [len(p) for p in even_split(list(range(32)), 2)] == [16, 16]
    assert [len(p) for p in even_split(list(range(3)), 8)] == [1, 1, 1] and even_split([], 4) == []
    assert [x for p in even_split(list(range(13)), 5) for x in p] == list(range(13))  # in order, all kept
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS

    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    steps = []
    opt.register_step_post_hook(lambda *_: steps.append(1))
    rs = _rollouts(model.config.vocab_size, [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
    values = update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), rs,
                           RLConfig(backend="hf", mini_batches=8, old_logprobs="recompute"), CPU, 0)
    assert values["trained_rollouts"] == 12 and len(steps) == 8


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
