"""Top-p sampling at a 151K-token vocabulary: the lean loop's sampler tests the global Gumbel-max pick for
nucleus membership and sorts only the rows whose pick falls outside; it must draw exactly the tokens that
filtering every row first would (same noise), whatever the nucleus's size, and keep tied tokens together."""
import pytest
import torch

from tasks.generation.hf_backend import in_nucleus, sample_tokens, top_p_filter

VOCAB = 151936


@pytest.mark.parametrize("sharpness", [0.1, 3.0, 8.0])   # nearly flat (a random model) … peaked (a trained one)
@pytest.mark.parametrize("temperature, top_p", [(1.0, 0.95), (0.6, 0.95), (1.0, 0.5)])
def test_same_tokens_as_filtering_every_row(sharpness, temperature, top_p):
    g = torch.Generator().manual_seed(int(sharpness * 10 + top_p * 100))
    logits = torch.randn(16, VOCAB, generator=g) * sharpness
    noise = torch.rand(16, VOCAB, generator=g)
    logp = logits.log_softmax(-1)
    scores = logp if temperature == 1.0 else logits / temperature
    reference = (top_p_filter(scores, top_p) - noise.log().neg().log()).argmax(-1)
    assert torch.equal(sample_tokens(logits, logp, temperature, top_p, noise), reference)


def test_membership_and_ties():
    scores = torch.tensor([[0.0, 0.0, -1.0, -5.0]]).log_softmax(-1)  # two equally likely tokens first
    for token, kept in [(0, True), (1, True), (2, True), (3, False)]:
        assert in_nucleus(scores, torch.tensor([token]), 0.9).item() is kept
    # the tie straddles top_p = 0.4: both tied tokens stay (the mass above either is 0 < 0.4)
    assert (top_p_filter(scores, 0.4) > float("-inf")).tolist() == [[True, True, False, False]]


@pytest.mark.parametrize("top_k, top_p", [(20, 1.0), (20, 0.95), (1, 1.0), (VOCAB, 0.95)])
def test_top_k_keeps_the_k_most_likely_then_takes_the_nucleus_of_them(top_k, top_p):
    """top_k (the paper's code evaluation: 20) restricts the draw to the row's k most likely tokens before
    top-p, and the nucleus is taken over those k renormalised (vLLM's order): the same tokens as filtering
    both by hand with the same noise; k = 1 is greedy and k ≥ the vocabulary changes nothing."""
    g = torch.Generator().manual_seed(top_k)
    logits = torch.randn(16, VOCAB, generator=g) * 3.0
    noise = torch.rand(16, VOCAB, generator=g)
    logp = logits.log_softmax(-1)
    scores = logits / 0.6
    kth = scores.topk(min(top_k, VOCAB), dim=-1).values[:, -1:]
    kept = scores.masked_fill(scores < kth, float("-inf"))
    reference = (top_p_filter(kept, top_p) - noise.log().neg().log()).argmax(-1)
    picked = sample_tokens(logits, logp, 0.6, top_p, noise, top_k)
    assert torch.equal(picked, reference)
    assert bool((scores.gather(-1, picked[:, None]) >= kth).all())            # always among the k
    if top_k == 1:
        assert torch.equal(picked, logits.argmax(-1))
    if top_k >= VOCAB:
        assert torch.equal(picked, sample_tokens(logits, logp, 0.6, top_p, noise))


def test_top_k_is_a_sampling_setting_of_every_sampling_stage():
    """`--top-k` reaches the engines' SamplingParams from the configs that sample (evaluation, difficulty
    tags); a negative k is refused in one line."""
    from tasks.config_checks import ConfigError
    from tasks.evaluation.config import DifficultyConfig, EvalConfig

    assert EvalConfig(top_k=20).sampling_params(4).top_k == 20
    assert DifficultyConfig().sampling_params(4).top_k == 0
    with pytest.raises(ConfigError, match="top_k"):
        EvalConfig(top_k=-1)


def test_rl_refuses_a_top_k_the_update_would_not_score():
    from tasks.config_checks import ConfigError
    from tasks.training.config import RLConfig

    with pytest.raises(ConfigError, match="top_k"):
        RLConfig(top_k=20)
