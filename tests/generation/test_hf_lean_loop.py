"""HFGenerator's own decode loop (loop="lean") against the model itself and against transformers `generate`:
raw log-probs equal a full forward pass, greedy equals `generate` greedy, seeding, top-p, eos, ragged batches,
eviction not changing results, and the fallback rule."""
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from tasks.generation.base import SamplingParams, chat_prompt
from tasks.generation.hf_backend import HFGenerator, lean_loop_supported, sample_tokens, top_p_filter

pytestmark = pytest.mark.slow  # trains and samples a real (tiny) model

QUESTIONS = ["1+2?", "a much longer question about 13+24, please think?", "7+8?"]


@pytest.fixture(scope="module")
def lean(trained):
    model, tok = trained
    g = HFGenerator(model, tok)
    assert g.lean  # a Qwen2 causal LM: the loop drives it
    return g


def prompts(tok, qs=QUESTIONS):
    return [chat_prompt(tok, q) for q in qs]


def forward_logprobs(model, tok, prompt, token_ids):
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([p_ids + token_ids])).logits[0, len(p_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(token_ids)[:, None])[:, 0]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_logprobs_equal_a_full_forward_pass(lean, temperature, top_p):
    """Raw-policy log-probs (temperature 1, no top-p) whatever the sampling settings, on a ragged batch
    (left padding, shared prefill, evicted rows) — within 1e-4 of one unpadded forward pass per completion."""
    ps = prompts(lean.tok)
    out = lean.generate(ps, SamplingParams(n=3, temperature=temperature, top_p=top_p, max_tokens=24, seed=5))
    assert [len(cs) for cs in out] == [3, 3, 3]
    worst = 0.0
    for p, cs in zip(ps, out):
        for c in cs:
            assert len(c.logprobs) == len(c.token_ids) > 0
            ref = forward_logprobs(lean.model, lean.tok, p, c.token_ids)
            worst = max(worst, float((ref - torch.tensor(c.logprobs)).abs().max()))
    assert worst < 1e-4


def test_greedy_equals_transformers_generate(trained):
    model, tok = trained
    ps = prompts(tok)
    sp = SamplingParams(n=1, temperature=0.0, max_tokens=30, seed=0)
    ours = HFGenerator(model, tok, loop="lean").generate(ps, sp)
    ref = HFGenerator(model, tok, loop="hf").generate(ps, sp)
    assert [c[0].token_ids for c in ours] == [c[0].token_ids for c in ref]
    assert [c[0].finish_reason for c in ours] == [c[0].finish_reason for c in ref]
    assert len({tuple(c[0].token_ids) for c in ours}) > 1  # not one repeated token for every prompt
    for a, b in zip(ours, ref):
        assert torch.allclose(torch.tensor(a[0].logprobs), torch.tensor(b[0].logprobs), atol=1e-4)


@pytest.mark.parametrize("loop", ["lean", "hf"])
def test_top_k_of_one_samples_the_greedy_tokens(trained, loop):
    """top_k = 1 leaves one token to draw at every step: at temperature 1 both loops return the greedy
    completion n times."""
    model, tok = trained
    ps = prompts(tok)
    greedy = HFGenerator(model, tok, loop=loop).generate(ps, SamplingParams(n=1, temperature=0.0, max_tokens=20))
    top1 = HFGenerator(model, tok, loop=loop).generate(ps, SamplingParams(n=3, temperature=1.0, top_p=1.0,
                                                                          max_tokens=20, seed=5, top_k=1))
    assert [[c.token_ids for c in cs] for cs in top1] == [[g[0].token_ids] * 3 for g in greedy]


def test_same_seed_same_output_other_seed_differs(lean):
    ps = prompts(lean.tok)
    sp = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=16, seed=11)
    a, b = lean.generate(ps, sp), lean.generate(ps, sp)
    c = lean.generate(ps, SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=16, seed=12))
    ids = lambda out: [[x.token_ids for x in cs] for cs in out]  # noqa: E731
    assert ids(a) == ids(b)
    assert [[x.logprobs for x in cs] for cs in a] == [[x.logprobs for x in cs] for cs in b]
    assert ids(a) != ids(c)
    assert len({tuple(x.token_ids) for x in a[0]}) > 1  # the n samples of one prompt differ


@pytest.mark.parametrize("loop", ["lean", "hf"])
def test_per_prompt_seeds_do_not_depend_on_the_other_prompts(trained, loop):
    """generate(..., seeds=...) (base.py "Seeding"): a prompt's samples come from its own seed, whether it is
    sampled alone, with others, in another order or in another batch size (the transformers fallback too)."""
    model, tok = trained
    ps = prompts(tok, QUESTIONS + ["2+2?", "9+1?"])
    seeds = [101, 202, 303, 404, 505]
    sp = SamplingParams(n=3, temperature=0.6, top_p=0.95, max_tokens=16, seed=0)
    ids = lambda out: [[x.token_ids for x in cs] for cs in out]  # noqa: E731
    gen = HFGenerator(model, tok, batch_size=6, loop=loop)  # two prompts (× 3 rows) per batch
    together = ids(gen.generate(ps, sp, seeds=seeds))
    assert ids(gen.generate(ps[::-1], sp, seeds=seeds[::-1]))[::-1] == together
    assert [ids(gen.generate([p], sp, seeds=[s]))[0] for p, s in zip(ps, seeds)] == together
    assert ids(HFGenerator(model, tok, batch_size=64, loop=loop).generate(ps, sp, seeds=seeds)) == together
    assert ids(gen.generate(ps, sp, seeds=[1, 202, 303, 404, 505]))[1:] == together[1:]  # only prompt 0 moved
    assert ids(gen.generate(ps, sp, seeds=[1, 202, 303, 404, 505]))[0] != together[0]
    assert len({tuple(x) for x in together[1]}) > 1  # the n samples of one prompt differ
    with pytest.raises(ValueError, match="2 seeds for 5 prompts"):
        gen.generate(ps, sp, seeds=[1, 2])


def test_eviction_and_batch_size_rules_do_not_change_completions(trained):
    """Eviction only changes speed: noise is drawn per row of the batch, evicted or not."""
    model, tok = trained
    ps = prompts(tok)
    sp = SamplingParams(n=4, temperature=1.0, top_p=0.95, max_tokens=20, seed=3)
    runs = [HFGenerator(model, tok, evict_frac=f).generate(ps, sp) for f in (0.0, 0.125, 2.0)]
    ids = [[[x.token_ids for x in cs] for cs in out] for out in runs]
    assert ids[0] == ids[1] == ids[2]


@pytest.mark.parametrize("seeds", [None, [11, 22, 33]])
def test_looking_for_ended_rows_every_few_steps_does_not_change_completions(trained, seeds):
    """A GPU looks at which rows ended every few decode steps (each look waits for the device): the same
    completions and finish reasons as looking at every step, for one batch seed or one per prompt; the
    log-probs within float rounding (rows are evicted at other steps, and a batch's size moves a logit by
    ~1e-6, as eviction itself does)."""
    model, tok = trained
    ps = prompts(tok)
    sp = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=20, seed=3)
    runs = [HFGenerator(model, tok, eos_check_every=k).generate(ps, sp, seeds=seeds) for k in (1, 3, 8, 64)]
    flat = [[(c.token_ids, c.finish_reason) for cs in out for c in cs] for out in runs]
    assert flat[0] == flat[1] == flat[2] == flat[3]
    assert {f for _, f in flat[0]} == {"stop", "length"}  # some rows end early, some run out
    lps = [torch.tensor([x for cs in out for c in cs for x in c.logprobs]) for out in runs]
    assert all((lp - lps[0]).abs().max() < 1e-4 for lp in lps[1:])


def test_eos_handling(trained):
    """Stop at the first eos id (kept in token_ids, not in the text); rows without one run to max_tokens."""
    model, tok = trained
    ps = prompts(tok)
    g = HFGenerator(model, tok)
    sp = SamplingParams(n=1, temperature=0.0, max_tokens=12, seed=0)
    base = g.generate(ps, sp)
    stop_tok = base[1][0].token_ids[4]  # make a token the 2nd prompt greedily writes an eos token
    g.eos_ids = g.eos_ids | {stop_tok}
    out = g.generate(ps, sp)
    for b, o in zip(base, out):
        b, o = b[0], o[0]
        if stop_tok in b.token_ids[:12]:
            k = b.token_ids.index(stop_tok)
            assert o.token_ids == b.token_ids[:k + 1] and o.finish_reason == "stop"
            assert o.text == tok.decode(b.token_ids[:k], skip_special_tokens=False)
        else:
            assert o.token_ids == b.token_ids
    assert out[1][0].finish_reason == "stop" and len(out[1][0].token_ids) <= 5
    g = HFGenerator(model, tok)  # the model's own eos ids
    sampled = [c for cs in g.generate(ps, SamplingParams(n=3, temperature=1.0, top_p=1.0, max_tokens=24, seed=5))
               for c in cs]
    assert {c.finish_reason for c in sampled} == {"stop", "length"}  # both kinds, so rows were evicted
    for c in sampled:
        if c.finish_reason == "stop":
            assert c.token_ids[-1] in g.eos_ids and not set(c.token_ids[:-1]) & g.eos_ids
        else:
            assert len(c.token_ids) == 24 and not set(c.token_ids) & g.eos_ids


def test_ragged_batch_equals_one_prompt_at_a_time(trained):
    """Left padding must not change anything: greedy on a ragged batch = greedy per prompt alone."""
    model, tok = trained
    ps = prompts(tok)
    g = HFGenerator(model, tok)
    sp = SamplingParams(n=2, temperature=0.0, max_tokens=20, seed=0)
    together = g.generate(ps, sp)
    alone = [g.generate([p], sp)[0] for p in ps]
    assert [[c.token_ids for c in cs] for cs in together] == [[c.token_ids for c in cs] for cs in alone]
    for t, a in zip(together, alone):
        assert torch.allclose(torch.tensor(t[0].logprobs), torch.tensor(a[0].logprobs), atol=1e-4)


def test_top_p_filter_keeps_the_nucleus():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]])
    kept = top_p_filter(probs.log(), 0.75) > float("-inf")
    assert kept.tolist() == [[True, True, False, False], [False, False, True, True]]  # 0.5 < 0.75 ≤ 0.8
    kept = top_p_filter(probs.log(), 0.8) > float("-inf")  # mass before the 3rd token is 0.8: dropped
    assert kept.tolist() == [[True, True, False, False], [False, False, True, True]]
    kept = top_p_filter(probs.log(), 1e-9) > float("-inf")  # the most likely token always stays
    assert kept.sum(-1).tolist() == [1, 1] and kept[0, 0] and kept[1, 3]


def test_sampler_is_exact_and_respects_top_p():
    """Gumbel-max frequencies match softmax(logits / T) restricted to the nucleus."""
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, -3.0]])
    g = torch.Generator().manual_seed(0)
    draws = 40_000
    for temperature, top_p in [(1.0, 1.0), (0.5, 1.0), (1.0, 0.8)]:
        x = logits.expand(draws, -1)
        tok = sample_tokens(x, x.log_softmax(-1), temperature, top_p, torch.rand(x.shape, generator=g))
        freq = torch.bincount(tok, minlength=5).float() / draws
        want = top_p_filter(logits[0] / temperature, top_p).softmax(-1)
        assert (freq - want).abs().max() < 0.01
        if top_p < 1:
            assert freq[want == 0].sum() == 0


def test_tiny_top_p_is_greedy(lean):
    ps = prompts(lean.tok)
    greedy = lean.generate(ps, SamplingParams(n=1, temperature=0.0, max_tokens=15, seed=0))
    nucleus = lean.generate(ps, SamplingParams(n=2, temperature=1.0, top_p=1e-6, max_tokens=15, seed=9))
    for g, cs in zip(greedy, nucleus):
        assert all(c.token_ids == g[0].token_ids for c in cs)


def test_attention_implementation_restored_and_eager_models_work(trained, tmp_path):
    model, tok = trained
    assert model.config._attn_implementation == "sdpa"
    HFGenerator(model, tok).generate(prompts(tok)[:1], SamplingParams(n=2, max_tokens=5))
    assert model.config._attn_implementation == "sdpa"
    model.save_pretrained(tmp_path)
    eager = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    g = HFGenerator(eager, tok)
    assert g.lean
    ps = prompts(tok)
    for p, cs in zip(ps, g.generate(ps, SamplingParams(n=2, temperature=1.0, top_p=1.0, max_tokens=10, seed=2))):
        for c in cs:
            ref = forward_logprobs(model, tok, p, c.token_ids)
            assert (ref - torch.tensor(c.logprobs)).abs().max() < 1e-4


def test_fallback_rule(trained):
    model, _ = trained
    assert lean_loop_supported(model)
    fwd = model.forward

    def fake(**cfg):
        base = dict(is_encoder_decoder=False, sub_configs={}, layer_types=["full_attention"], sliding_window=None)
        return SimpleNamespace(config=SimpleNamespace(**{**base, **cfg}), forward=fwd)

    assert lean_loop_supported(fake())
    assert not lean_loop_supported(fake(is_encoder_decoder=True))
    assert not lean_loop_supported(fake(sub_configs={"vision_config": object}))
    assert not lean_loop_supported(fake(layer_types=["full_attention", "sliding_attention"]))
    assert not lean_loop_supported(SimpleNamespace(config=fake().config, forward=lambda input_ids: None))
