"""Packed SFT attention without an L×L mask (tasks/training/sft.py: varlen, flex; the rule: sft_data): the
same loss and gradients as the dense [B, 1, L, L] reference, documents that never see each other, padding
that changes nothing, and no tensor of L² elements on the way."""
import copy
import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tasks.config_checks import ConfigError
from tasks.models.presets import PRESETS
from tasks.training.config import SFTConfig
from tasks.training.distributed import DistContext
from tasks.training.packed_attention import (attention_inputs, attn_implementation, document_block_mask,
                                             resolve_attention)
from tasks.training.sft import train_step
from tasks.training.sft_data import IGNORE, Example, Pack, collate, document_spans, pack_examples

SEQ_LEN = 256
CPU = DistContext(0, 1, torch.device("cpu"))


def _chain(rng: random.Random) -> tuple[list[int], list[int]]:
    """A demo-like example as token ids: a prompt (labels ignored), then a step-by-step response whose
    length varies as the demo's arithmetic chains do (a few to ~40 steps of 4 tokens)."""
    prompt = [rng.randrange(3, 512) for _ in range(rng.randint(8, 24))]
    response = [rng.randrange(3, 512) for _ in range(4 * rng.randint(2, 40))] + [2]
    return prompt + response, [IGNORE] * len(prompt) + response


@pytest.fixture(scope="module")
def packs() -> list[Pack]:
    rng = random.Random(0)
    examples = [Example(*_chain(rng)) for _ in range(16)]
    packs, truncated = pack_examples(examples, SEQ_LEN, pad_id=0, seed=0, epoch=0)
    assert truncated == 0 and len(packs) >= 3
    assert any(-1 in p.segments for p in packs) and any(len(set(p.segments)) > 3 for p in packs)
    return packs


@pytest.fixture(scope="module")
def model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    m = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict(), use_cache=False)).float()
    return m


def _as(model, attention: str):
    m = copy.deepcopy(model)
    m.config._attn_implementation = attn_implementation(attention) or "sdpa"
    return m


def _logits(model, packs: list[Pack], attention: str) -> torch.Tensor:
    t = collate(packs, dense_mask=attention == "dense")
    with torch.no_grad():
        return model(input_ids=t["input_ids"], position_ids=t["position_ids"], **attention_inputs(t, attention)).logits


def _rule(doc: torch.Tensor):
    def mask_mod(b, h, q, k):
        return ((doc[b, q] == doc[b, k]) & (doc[b, q] >= 0) & (k <= q)) | (q == k)
    return mask_mod


@pytest.mark.parametrize("tile, segments", [
    (16, [[0] * 70 + [1] * 20 + [2] * 50 + [-1] * 13]),          # long documents: full tiles; L not a multiple
    (16, [[0] * 5 + [1] * 40 + [-1] * 83, [-1] * 128]),           # an all-padding row
    (128, [[0] * 300 + [1] * 100 + [-1] * 112, list(range(512))]),  # one-token documents
    (128, [sorted(random.Random(1).choices(range(30), k=640)) + [-1] * 60]),
])
def test_block_mask_is_the_rules_tile_classification(tile, segments):
    """document_block_mask gives the BlockMask torch's create_block_mask derives by evaluating the rule on
    all L² pairs: the same partial and full tiles per query tile, the same visited set."""
    from torch.nn.attention.flex_attention import create_block_mask

    doc = torch.tensor(segments)
    b, length = doc.shape
    ours = document_block_mask(doc, tile=tile)
    ref = create_block_mask(_rule(doc), b, None, length, length, device="cpu", BLOCK_SIZE=tile)
    assert torch.equal(ours.kv_num_blocks, ref.kv_num_blocks)
    assert torch.equal(ours.full_kv_num_blocks, ref.full_kv_num_blocks)
    assert torch.equal(ours.to_dense(), ref.to_dense())
    n = ours.kv_num_blocks.shape[-1]
    for kind in ("kv", "full_kv"):
        num, idx = getattr(ours, f"{kind}_num_blocks"), getattr(ours, f"{kind}_indices")
        ref_num, ref_idx = getattr(ref, f"{kind}_num_blocks"), getattr(ref, f"{kind}_indices")
        for r in range(b):
            for i in range(n):
                k = int(num[r, 0, i])
                assert sorted(idx[r, 0, i, :k].tolist()) == sorted(ref_idx[r, 0, i, :int(ref_num[r, 0, i])].tolist())


class _Largest(TorchDispatchMode):
    """Records the largest tensor any aten op returns (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _long_packs(length: int) -> list[Pack]:
    rng = random.Random(2)
    examples = [Example(*_chain(rng)) for _ in range(length // 90)]
    packs, _ = pack_examples(examples, length, pad_id=0, seed=0, epoch=0)
    return packs[:1]


def test_no_tensor_of_L_squared_elements(model):
    """At L = 2048 the dense path makes [1, 1, L, L] masks and [1, H, L, L] scores; varlen's forward and
    backward and the flex BlockMask stay far below L² elements (the largest are the logits, L × vocab)."""
    length = 2048
    packs = _long_packs(length)
    sizes = {}
    for attention in ("dense", "varlen"):
        m = _as(model, attention)
        t = collate(packs, dense_mask=attention == "dense")
        with _Largest() as rec:
            inputs = attention_inputs(t, attention)
            logits = m(input_ids=t["input_ids"], position_ids=t["position_ids"], **inputs).logits
            logits.sum().backward()
        sizes[attention] = rec.largest
    with _Largest() as rec:
        document_block_mask(collate(packs)["document_ids"])
    sizes["flex block mask"] = rec.largest
    assert sizes["dense"] >= length * length
    assert sizes["varlen"] <= length * PRESETS["tiny"].vocab_size <= length * length // 4
    assert sizes["flex block mask"] < length * length // 1000, sizes


@pytest.mark.parametrize("micro", [1, 3])
def test_varlen_loss_and_gradients_equal_the_dense_reference(model, packs, micro):
    """One optimizer step's forward/backward (sft.train_step, the training code path) over packed demo-like
    sequences with padding: the loss within 1e-4 and every gradient within 1e-4 of the dense path's."""
    results = {}
    for attention in ("dense", "varlen"):
        m = _as(model, attention)
        cfg = SFTConfig(batch_size=len(packs), micro_batch_size=micro, attention=attention)
        loss, n_tok = train_step(m, packs, cfg, CPU, bf16=False)
        results[attention] = loss, n_tok, {k: p.grad.clone() for k, p in m.named_parameters()}
    (ld, nd, gd), (lv, nv, gv) = results["dense"], results["varlen"]
    assert nd == nv > 0 and abs(ld - lv) <= 1e-4 and ld > 1.0
    for k in gd:
        assert torch.allclose(gd[k], gv[k], atol=1e-4, rtol=1e-3), k
    assert max((gd[k] - gv[k]).abs().max().item() for k in gd) < 1e-5


def test_varlen_logits_equal_dense_on_every_token_padding_included(model, packs):
    filler = Pack([0] * SEQ_LEN, [IGNORE] * SEQ_LEN, [0] * SEQ_LEN, [-1] * SEQ_LEN)  # an all-padding row
    batch = [*packs, filler]
    dense = _logits(_as(model, "dense"), batch, "dense")
    varlen = _logits(_as(model, "varlen"), batch, "varlen")
    assert torch.isfinite(varlen).all()
    assert (varlen - dense).abs().max() < 1e-4


def _edit_document(pack: Pack, seg: int, rng: random.Random) -> Pack:
    ids = [rng.randrange(3, 512) if s == seg else t for t, s in zip(pack.input_ids, pack.segments)]
    return Pack(ids, pack.labels, pack.position_ids, pack.segments)


@pytest.mark.parametrize("attention", ["varlen", "dense"])
def test_packed_documents_do_not_see_each_other(model, packs, attention):
    """Changing document A's tokens changes A's logits and leaves every other token's logits (documents
    before and after A, and the padding) unchanged."""
    pack = max(packs, key=lambda p: len(set(p.segments)))
    m = _as(model, attention)
    seg = torch.tensor(pack.segments)
    a = 1  # a document with neighbours on both sides
    assert (seg == a - 1).any() and (seg == a + 1).any()
    before = _logits(m, [pack], attention)[0]
    after = _logits(m, [_edit_document(pack, a, random.Random(3))], attention)[0]
    changed = (after - before).abs().amax(-1)
    assert changed[seg == a].max() > 1e-2
    assert changed[seg != a].max() < 1e-6


def test_document_spans_tile_each_row():
    doc = torch.tensor([[0, 0, 1, 1, 1, 2, -1, -1], [0] * 8, [-1] * 8])
    assert document_spans(doc) == [(0, 0, 2, False), (0, 2, 5, False), (0, 5, 6, False), (0, 6, 8, True),
                                   (1, 0, 8, False), (2, 0, 8, True)]


def test_attention_choice_by_device_and_config():
    assert resolve_attention("auto", torch.device("cpu")) == "varlen"
    assert resolve_attention("auto", torch.device("cuda")) == "flex"
    assert resolve_attention("dense", torch.device("cpu")) == "dense"
    with pytest.raises(ValueError, match="flex needs a CUDA GPU"):
        resolve_attention("flex", torch.device("cpu"))
    assert SFTConfig().attention == "auto"
    with pytest.raises(ConfigError, match="attention"):
        SFTConfig(attention="sdpa")
    assert "attention_mask" not in collate([Pack([1, 2], [1, 2], [0, 1], [0, 0])])


@pytest.mark.slow  # compiles FlexAttention for CPU (~20-30 s on 2 cores)
def test_flex_forward_equals_dense_and_keeps_documents_apart(model, packs):
    """FlexAttention with the document BlockMask (the GPU path), forward only: torch 2.13 has no
    FlexAttention backward on CPU, so the gradients are checked on the varlen path and on a GPU."""
    filler = Pack([0] * SEQ_LEN, [IGNORE] * SEQ_LEN, [0] * SEQ_LEN, [-1] * SEQ_LEN)
    batch = [*packs, filler]
    flex_model = _as(model, "flex")
    dense = _logits(_as(model, "dense"), batch, "dense")
    flex = _logits(flex_model, batch, "flex")
    assert (flex - dense).abs().max() < 1e-4
    pack = max(packs, key=lambda p: len(set(p.segments)))
    seg = torch.tensor(pack.segments)
    before = _logits(flex_model, [pack], "flex")[0]
    after = _logits(flex_model, [_edit_document(pack, 1, random.Random(3))], "flex")[0]
    changed = (after - before).abs().amax(-1)
    assert changed[seg == 1].max() > 1e-2 and changed[seg != 1].max() < 1e-6


@pytest.mark.slow  # compiles FlexAttention for CPU twice (~15 s on 2 cores)
def test_flex_compiles_a_handful_of_graphs_for_rows_of_any_length(model, packs):
    """The trainers run each micro-batch as one row of its own length (collate_micro_batch); a compile per
    length would cost seconds at every micro-batch on a GPU. torch.compile's automatic dynamic shapes (which
    transformers' compiled flex_attention relies on) must compile the static first length, then one dynamic
    graph that every later length reuses."""
    from torch._dynamo.utils import counters

    from tasks.training.sft_data import collate_micro_batch

    flex_model = _as(model, "flex").train()  # the trainers' mode (transformers compiles per mode)
    rows = [collate_micro_batch(packs[:k], "flex") for k in range(1, len(packs) + 1)]
    lengths = {t["input_ids"].shape[1] for t in rows}
    assert len(lengths) == len(rows) >= 3
    before = counters["stats"]["unique_graphs"]
    for t in rows:
        with torch.no_grad():
            flex_model(input_ids=t["input_ids"], position_ids=t["position_ids"], **attention_inputs(t, "flex"))
    assert counters["stats"]["unique_graphs"] - before <= 2, (lengths, counters["stats"]["unique_graphs"] - before)


def test_sliding_window_models_pack_as_each_document_alone():
    """A Gemma 3 shape (sliding-window layers beside full ones, window 4): two documents longer than the window
    packed in one row under varlen give each token the logits and gradients of its document run alone with
    transformers' own masks; `auto` picks varlen for it on any device and flex is refused."""
    from transformers import Gemma3TextConfig, Gemma3ForCausalLM

    cfg = Gemma3TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=4,
                           layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                           max_position_embeddings=64)
    assert resolve_attention("auto", torch.device("cuda"), cfg) == "varlen"
    with pytest.raises(ValueError, match="sliding-window layers"):
        resolve_attention("flex", torch.device("cuda"), cfg)
    torch.manual_seed(0)
    cfg._attn_implementation = "eager"
    alone_model = Gemma3ForCausalLM(cfg).eval()
    packed_model = copy.deepcopy(alone_model)
    packed_model.config._attn_implementation = attn_implementation("varlen")
    docs = [torch.randint(3, 64, (9,)), torch.randint(3, 64, (7,))]
    alone = [alone_model(d[None], use_cache=False).logits[0] for d in docs]
    ids = torch.cat(docs)[None]
    position_ids = torch.cat([torch.arange(len(d)) for d in docs])[None]
    document_ids = torch.cat([torch.full((len(d),), i) for i, d in enumerate(docs)])[None]
    packed = packed_model(ids, position_ids=position_ids, use_cache=False,
                          **attention_inputs({"document_ids": document_ids}, "varlen")).logits[0]
    assert (packed - torch.cat(alone)).abs().max() < 1e-5
    sum(a.sum() for a in alone).backward()
    packed.sum().backward()
    for (name, p), q in zip(alone_model.named_parameters(), packed_model.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-4), name
    # the window matters here: the same weights with every layer full see other logits past the window
    full = Gemma3ForCausalLM(Gemma3TextConfig(**{**cfg.to_dict(), "layer_types": ["full_attention"] * 3})).eval()
    full.load_state_dict(alone_model.state_dict())
    assert (full(docs[0][None], use_cache=False).logits[0] - alone[0].detach()).abs().max() > 1e-3
