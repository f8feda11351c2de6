"""SFT's NLL from the hidden states on label positions only (tasks/training/sft_loss.py) against the cross-entropy
over the model's full logits it replaces: the same value and gradient within float rounding, in fp32 and under
bf16 autocast, for every packed attention kernel and for a micro-batch's packs joined into one row without their
padding (what a training step runs); no position is scored across an example's end; a pack with every label
ignored adds 0 and stays in the graph."""
import pytest
import torch

from tasks.training.sft_data import (IGNORE, Example, Pack, collate, collate_micro_batch, join_packs, pack_examples,
                                     target_count)
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


@pytest.mark.parametrize("bf16, tol", [(False, 1e-5), (True, 3e-2)])
def test_packs_joined_into_one_row_without_padding_give_the_padded_reference(tiny, bf16, tol):
    packs = _packs(tiny.config.vocab_size)
    padded = collate(packs, dense_mask=True)
    ref, ref_grads = _value_and_grads(tiny, lambda: _reference(tiny, padded, bf16))
    row = collate_micro_batch(packs, "varlen")
    real = sum(s >= 0 for p in packs for s in p.segments)
    assert row["input_ids"].shape == (1, real)  # one row, no padding token
    out, grads = _value_and_grads(tiny, lambda: summed_nll(tiny, tiny, row, "varlen", bf16))
    assert out.item() == pytest.approx(ref.item(), rel=tol)
    scale = max(g.abs().max().item() for g in ref_grads.values())
    assert max((grads[n] - ref_grads[n]).abs().max().item() for n in grads) <= tol * scale
    assert collate_micro_batch(packs, "dense")["input_ids"].shape == padded["input_ids"].shape  # the reference


def test_joining_keeps_each_example_whole_and_apart():
    a = Pack([1, 2, 3, 0], [IGNORE, 2, 3, IGNORE], [0, 1, 2, 0], [0, 0, 0, -1])
    b = Pack([4, 5, 6, 7], [IGNORE, 5, IGNORE, 7], [0, 1, 0, 1], [0, 0, 1, 1])
    joined = join_packs([a, b])
    assert joined.input_ids == [1, 2, 3, 4, 5, 6, 7]
    assert joined.labels == [IGNORE, 2, 3, IGNORE, 5, IGNORE, 7]
    assert joined.position_ids == [0, 1, 2, 0, 1, 0, 1]
    assert joined.segments == [0, 0, 0, 1, 1, 2, 2]  # a's only example, then b's two: three documents
    # the first example of b starts a new document even though both packs number it 0
    assert target_count(collate([a, b])) == target_count(collate([joined])) == 4


def test_a_micro_batch_of_padding_alone_is_refused():
    with pytest.raises(ValueError, match="no token but padding"):
        join_packs([Pack([0, 0], [IGNORE, IGNORE], [0, 0], [-1, -1])])


def test_no_position_is_scored_across_an_examples_end():
    """Token 1 ends example 0 and token 2 starts example 1 with a label on its first token: predicting it from
    example 0 would train one example on another's text."""
    labels = torch.tensor([[IGNORE, 5, 6, 7]])
    t = {"labels": labels, "input_ids": labels.clamp_min(0), "position_ids": torch.tensor([[0, 1, 0, 1]]),
         "document_ids": torch.tensor([[0, 0, 1, 1]])}
    batch = label_batch(t, "varlen")
    assert batch.score_index.tolist() == [0, 2]
    assert batch.targets.tolist() == [5, 7]


def test_a_training_step_runs_each_micro_batch_as_one_unpadded_row(tiny):
    from tasks.training import distributed as dist_utils
    from tasks.training.config import SFTConfig
    from tasks.training.sft import train_step

    packs = _packs(tiny.config.vocab_size)
    shapes = []
    hook = tiny.model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                                with_kwargs=True)
    losses = {}
    try:
        for attention in ("varlen", "dense"):
            cfg = SFTConfig(batch_size=len(packs), micro_batch_size=2, attention=attention, logprob_kernel="chunked")
            tiny.zero_grad()
            losses[attention] = train_step(tiny, packs, cfg, dist_utils.setup(), False)
    finally:
        hook.remove()
    micro = [packs[i:i + 2] for i in range(0, len(packs), 2)]
    assert shapes[:len(micro)] == [(1, sum(s >= 0 for p in m for s in p.segments)) for m in micro]
    assert shapes[len(micro):] == [(len(m), 32) for m in micro]  # dense: the padded reference rows
    assert losses["varlen"][0] == pytest.approx(losses["dense"][0], rel=1e-5)
    assert losses["varlen"][1] == losses["dense"][1] == target_count(collate(packs))


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
