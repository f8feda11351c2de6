"""SFT's blocked NLL (tasks/training/sft_loss.py) against the one-shot cross-entropy it replaces: the same value
and the same gradient, element for element, whatever the block size; ignored labels add nothing."""
import pytest
import torch

from tasks.training import sft_loss
from tasks.training.sft_loss import summed_nll

IGNORE = -100


def _reference(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                             labels[:, 1:].reshape(-1), ignore_index=IGNORE, reduction="sum")


def _batch(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 7, 11, generator=g) * 3).to(dtype).requires_grad_()
    labels = torch.randint(0, 11, (3, 7), generator=g)
    labels[0, :3] = IGNORE  # a prompt
    labels[2, 5:] = IGNORE  # padding at the end of a pack
    return logits, labels


def _value_and_grad(fn, logits, labels):
    logits.grad = None
    out = fn(logits, labels)
    out.backward()
    return out.detach(), logits.grad.clone()


@pytest.mark.parametrize("block", [1, 4, 7, 21, 4096])
def test_blocks_give_the_one_shot_value_and_the_same_gradient_element_for_element(monkeypatch, block):
    monkeypatch.setattr(sft_loss, "NLL_BLOCK", block)
    logits, labels = _batch()
    ref, ref_grad = _value_and_grad(_reference, logits, labels)
    out, grad = _value_and_grad(summed_nll, logits, labels)
    assert torch.allclose(out, ref, rtol=1e-6, atol=0)
    assert torch.equal(grad, ref_grad)  # training follows the same weights, bit for bit


def test_bf16_logits_give_an_fp32_loss_and_a_bf16_gradient_equal_to_the_one_shot_form(monkeypatch):
    monkeypatch.setattr(sft_loss, "NLL_BLOCK", 5)
    logits, labels = _batch(torch.bfloat16)
    ref, ref_grad = _value_and_grad(_reference, logits, labels)
    out, grad = _value_and_grad(summed_nll, logits, labels)
    assert out.dtype == torch.float32 and grad.dtype == torch.bfloat16
    assert torch.allclose(out, ref, rtol=1e-6, atol=0) and torch.equal(grad, ref_grad)


def test_a_pack_with_every_label_ignored_adds_zero_and_a_zero_gradient_but_stays_in_the_graph():
    """The filler pack of a rank whose share ran out: DDP and FSDP need its backward to reach every weight."""
    logits, labels = _batch()
    out, grad = _value_and_grad(summed_nll, logits, torch.full_like(labels, IGNORE))
    assert out.item() == 0.0 and not grad.any()


def test_the_last_position_of_each_row_predicts_nothing():
    logits, labels = _batch()
    _, grad = _value_and_grad(summed_nll, logits, labels)
    assert not grad[:, -1].any()
