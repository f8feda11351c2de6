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
