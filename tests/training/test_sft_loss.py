"""SFT's NLL from the hidden states on label positions only (tasks/training/sft_loss.py) against the cross-entropy
over the model's full logits it replaces: the same value and gradient within float rounding, in fp32 and under
bf16 autocast, for every packed attention kernel; a pack with every label ignored adds 0 and stays in the
graph."""
import pytest
import torch

from tasks.training.sft_data import IGNORE, Example, collate, pack_examples
from tasks.training.sft_loss import label_batch, summed_nll


@pytest.fixture(scope="module")
def tiny():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))


def _packs(vocab: int):
    g = torch.Generator().manual_seed(0)
    examples = []
    for n in (9, 14, 5, 20, 11):
        ids = torch.randint(1, vocab, (n,), generator=g).tolist()
        examples.append(Example(ids, [IGNORE] * 3 + ids[3:]))  # a 3-token prompt
    packs, _ = pack_examples(examples, 32, 0, seed=0, epoch=0)
    return packs


def _reference(model, t, bf16):
    """The old form: the model's full logits (dense block-diagonal mask), then one fp32 cross-entropy."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(input_ids=t["input_ids"], position_ids=t["position_ids"],
                       attention_mask=t["attention_mask"]).logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                             t["labels"][:, 1:].reshape(-1), ignore_index=IGNORE, reduction="sum")


def _value_and_grads(model, fn):
    model.zero_grad()
    out = fn()
    out.backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("bf16, tol", [(False, 1e-5), (True, 3e-2)])
def test_the_hidden_state_nll_is_the_full_logits_cross_entropy(tiny, bf16, tol):
    t = collate(_packs(tiny.config.vocab_size), dense_mask=True)
    ref, ref_grads = _value_and_grads(tiny, lambda: _reference(tiny, t, bf16))
    for attention in ("varlen", "dense"):
        out, grads = _value_and_grads(tiny, lambda: summed_nll(tiny, tiny, t, attention, bf16))
        assert out.dtype == torch.float32
        assert out.item() == pytest.approx(ref.item(), rel=tol), attention
        scale = max(g.abs().max().item() for g in ref_grads.values())
        assert max((grads[n] - ref_grads[n]).abs().max().item() for n in grads) <= tol * scale, attention


def test_only_label_positions_are_scored_and_the_last_of_a_row_never():
    labels = torch.tensor([[IGNORE, IGNORE, 5, 6, IGNORE], [IGNORE, 7, 8, 9, 4]])
    t = {"labels": labels, "input_ids": labels.clamp_min(0), "position_ids": labels.clamp_min(0),
         "document_ids": torch.zeros_like(labels)}
    batch = label_batch(t, "varlen")
    assert batch.score_index.tolist() == [1, 2, 5, 6, 7, 8]   # position t scores label t+1
    assert batch.targets.tolist() == [5, 6, 7, 8, 9, 4]


def test_a_pack_with_every_label_ignored_adds_zero_and_a_zero_gradient_but_stays_in_the_graph(tiny):
    """The filler pack of a rank whose share ran out: DDP and FSDP need its backward to reach every weight."""
    packs = _packs(tiny.config.vocab_size)
    for p in packs:
        p.labels = [IGNORE] * len(p.labels)
    out, grads = _value_and_grads(tiny, lambda: summed_nll(tiny, tiny, collate(packs), "varlen"))
    assert out.item() == 0.0
    assert all(g is not None and not g.any() for g in grads.values())
