"""Golden values and gradients of every policy loss on hand-made tokens, one per clip region.

Token (δ, Â):  inside (1.0, +1) | above, Â>0 (1.5, +1) | below, Â<0 (0.5, −1) | below, Â>0 (0.5, +1) |
above, Â<0 (1.5, −1). With ε_l = 0.2, ε_h = 0.28 and loss = −Σ J / N, dloss/dlogp_t = −F_t·Â_t / N.
"""
import math

import pytest
import torch

from tasks.training.losses import POLICY_LOSSES, policy_loss

RATIOS = [1.0, 1.5, 0.5, 0.5, 1.5]
ADV = [1.0, 1.0, -1.0, 1.0, -1.0]
N = len(RATIOS)

# expected per-token objective J and gradient factor F (dJ/dlogp = F·Â)
EXPECTED = {
    "grpo": {"J": [1.0, 1.28, -0.8, 0.5, -1.5], "F": [1.0, 0.0, 0.0, 0.5, 1.5]},
    "gppo": {"J": [1.0, 1.28, -0.8, 0.5, -1.5], "F": [1.0, 1.28, 0.8, 0.5, 1.5]},
    # CISPO: J = sg(clip δ)·Â·log π, F = clip(δ, 0.8, 1.28)
    "cispo": {"F": [1.0, 1.28, 0.8, 0.8, 1.28]},
}


def _tensors():
    logp = torch.tensor([[-1.0, -2.0, -0.5, -1.5, -0.7]], requires_grad=True)
    old = logp.detach() - torch.log(torch.tensor([RATIOS]))
    return logp, old, torch.tensor([ADV]), torch.ones(1, N)


@pytest.mark.parametrize("name", ["grpo", "gppo", "cispo"])
def test_value_and_gradient_in_every_clip_region(name):
    logp, old, adv, mask = _tensors()
    loss, metrics = policy_loss(name, logp, old, adv, mask)
    loss.backward()
    exp = EXPECTED[name]
    if "J" in exp:
        assert loss.item() == pytest.approx(-sum(exp["J"]) / N, abs=1e-6)
    else:  # cispo's value is a surrogate: −Σ clip(δ)·Â·logp / N
        clipped = [min(max(r, 0.8), 1.28) for r in RATIOS]
        assert loss.item() == pytest.approx(-sum(c * a * l for c, a, l in zip(clipped, ADV, logp[0].tolist())) / N, abs=1e-6)
    assert logp.grad[0].tolist() == pytest.approx([-f * a / N for f, a in zip(exp["F"], ADV)], abs=1e-6)
    assert metrics["clip_frac_low"] == pytest.approx(1 / N) and metrics["clip_frac_high"] == pytest.approx(1 / N)


def test_gppo_forward_equals_clip_higher_grpo():
    torch.manual_seed(0)
    logp, old = torch.randn(4, 16), torch.randn(4, 16)
    adv, mask = torch.randn(4), (torch.rand(4, 16) > 0.2).float()
    a, _ = policy_loss("gppo", logp, old, adv, mask)
    b, _ = policy_loss("grpo", logp, old, adv, mask)
    assert a.item() == pytest.approx(b.item(), abs=1e-6)


def test_gppo_general_form_scales_clipped_branches():
    logp, old, adv, mask = _tensors()
    loss, _ = policy_loss("gppo", logp, old, adv, mask, beta1=0.5, beta2=0.25)
    loss.backward()
    F = [1.0, 0.25 * 1.28, 0.5 * 0.8, 0.5, 1.5]
    assert logp.grad[0].tolist() == pytest.approx([-f * a / N for f, a in zip(F, ADV)], abs=1e-6)


def test_dual_clip_bounds_negative_advantage_tokens():
    logp = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-math.log(20.0)]])  # δ = 20, Â = −1: PPO value −20, dual-clip (c=10) value −10
    for name in ("grpo", "gppo"):
        plain, _ = policy_loss(name, logp, old, torch.tensor([-1.0]), torch.ones(1, 1))
        dual, _ = policy_loss(name, logp, old, torch.tensor([-1.0]), torch.ones(1, 1), dual_clip=10.0)
        assert plain.item() == pytest.approx(20.0) and dual.item() == pytest.approx(10.0)


def test_mask_and_global_token_mean_make_micro_batching_exact():
    torch.manual_seed(1)
    logp = torch.randn(6, 10, requires_grad=True)
    old, adv = logp.detach() + 0.3 * torch.randn(6, 10), torch.randn(6)
    mask = (torch.rand(6, 10) > 0.3).float()
    full, _ = policy_loss("gppo", logp, old, adv, mask)
    g_full, = torch.autograd.grad(full, logp)
    n = mask.sum()
    parts = [policy_loss("gppo", logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], num_tokens=n)[0]
             for i in range(0, 6, 2)]
    g_parts, = torch.autograd.grad(sum(parts), logp)
    assert sum(parts).item() == pytest.approx(full.item(), abs=1e-6)
    assert torch.allclose(g_full, g_parts, atol=1e-7)
    assert torch.all(g_full[mask == 0] == 0)


def test_unknown_loss_lists_names():
    logp, old, adv, mask = _tensors()
    with pytest.raises(ValueError, match="unknown policy loss 'ppo2'.*cispo, gppo, grpo"):
        policy_loss("ppo2", logp, old, adv, mask)
    assert {"gppo", "grpo", "cispo"} <= set(POLICY_LOSSES)


@pytest.mark.parametrize("name, low, high, total", [
    ("gppo", 0.8 / 3.08, 1.28 / 3.08, 3.08),   # β1(1−ε_l)·|Â| = 0.8, β2(1+ε_h)·|Â| = 1.28 beside δ·Â = 1
    ("cispo", 0.8 / 3.08, 1.28 / 3.08, 3.08),  # sg(clip δ)·Â: the same weights on those two tokens
    ("grpo", 0.0, 0.0, 1.0),                   # PPO's clipped tokens carry no gradient
])
def test_gradient_shares_of_the_clipped_regions(name, low, high, total):
    # three tokens: δ = 0.5 with Â < 0 (low region), δ = 1 inside, δ = 2 with Â > 0 (high region)
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[0.5, 1.0, 2.0]]))
    adv = torch.tensor([[-1.0, 1.0, 1.0]])
    _, metrics = policy_loss(name, logp.requires_grad_(), old, adv, torch.ones(1, 3))
    assert metrics["grad_share_low"] == pytest.approx(low) and metrics["grad_share_high"] == pytest.approx(high)
    assert metrics["grad_abs_sum"] == pytest.approx(total)  # Σ|g_t|: what a split batch weights the shares by
