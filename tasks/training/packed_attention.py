"""Packed attention without an L×L mask: every token of a pack attends only to earlier tokens of its own
document (tasks/training/sft_data.py: the rule reads per-token document ids; padding attends to itself).
Kernels (SFTConfig.attention, config.ATTENTIONS): FlexAttention with a tile-level BlockMask built from
the document ids (GPU), causal SDPA per document span (`varlen`, CPU and GPU), and the dense [B, 1, L, L]
mask, kept as the reference."""
from __future__ import annotations

import functools

import torch

from tasks.training.sft_data import dense_attention_mask, document_spans

FLEX_TILE = 128            # FlexAttention's default sparse block (tokens per tile side)
VARLEN_ATTENTION = "klear_varlen"  # the name `varlen_attention` is registered under with transformers


def has_sliding_window(model_config) -> bool:
    """Whether some layer of the model attends through a sliding window (Gemma 3: five of every six layers;
    `layer_types` names each layer's kind); Qwen-style configs carry a `sliding_window` size with every layer
    "full_attention", which is no window."""
    return "sliding_attention" in (getattr(model_config, "layer_types", None) or ())


def resolve_attention(attention: str, device: torch.device, model_config=None) -> str:
    """The attention kernel of a run (SFTConfig.attention): `auto` → flex on a CUDA device, varlen elsewhere,
    and varlen for a model with sliding-window layers (`has_sliding_window`): the document BlockMask is one
    mask for every layer, so it cannot give a window to some. `flex` off CUDA is refused in one line:
    FlexAttention (torch 2.13) has no backward on CPU (it raises NotImplementedError when its inputs require
    grad), so it cannot train there; `flex` for a sliding-window model is refused too."""
    sliding = model_config is not None and has_sliding_window(model_config)
    if attention == "auto":
        return "flex" if device.type == "cuda" and not sliding else "varlen"
    if attention == "flex" and device.type != "cuda":
        raise ValueError(f"attention (--attention) flex needs a CUDA GPU (FlexAttention has no backward on "
                         f"{device.type}); use varlen or auto")
    if attention == "flex" and sliding:
        raise ValueError("attention (--attention) flex gives every layer one document mask, and this model has "
                         "sliding-window layers; use varlen or auto")
    return attention


def attn_implementation(attention: str) -> str | None:
    """The transformers `attn_implementation` of a resolved attention: flex → flex_attention (transformers'
    FlexAttention forward; it takes our BlockMask as the 4-D attention mask unchanged), varlen → our
    `varlen_attention` (registered here, outside compiled blocks' graphs: its loop follows each batch's
    documents, compile.py; wrapped here, not at import, as torch.compiler.disable imports TorchDynamo, a
    second of start-up), dense → None (transformers' default, SDPA with the 4-D mask)."""
    if attention == "varlen":
        from transformers import AttentionInterface

        AttentionInterface.register(VARLEN_ATTENTION, _uncompiled_varlen_attention())
        return VARLEN_ATTENTION
    return {"flex": "flex_attention", "dense": None}[attention]


@functools.cache
def _uncompiled_varlen_attention():
    """`varlen_attention` behind torch.compiler.disable, made once (scoring() registers it each micro-batch)."""
    return torch.compiler.disable(varlen_attention)


def document_block_mask(document_ids: torch.Tensor, tile: int = FLEX_TILE):
    """FlexAttention's BlockMask of the packed-attention rule (sft_data) for a [B, L] batch of document ids,
    built from the ids tile by tile, never as an L×L tensor: O(B·(L/tile)²) memory, no compilation.

    The sequence is cut into n = ⌈L/tile⌉ tiles (positions past L count as padding). For tile pair (i, j)
    of a row (queries in tile i, keys in tile j):
      - j > i: empty (every key comes after every query);
      - j = i: partial (causal inside the tile; padding's self-attention);
      - j < i: full when both tiles lie inside one document (every pair allowed), partial when some document
        has tokens in both, else empty.
    The kernel skips empty tiles, computes full ones without the mask and applies the token rule (mask_mod)
    on partial ones, so a sequence costs ~Σ_documents len²/2 plus a tile row per document boundary — the
    classification torch's create_block_mask would derive by evaluating mask_mod on all L² pairs (eagerly
    an L×L tensor: 20 GB at L = 32K; compiled, seconds per call on CPU). Why not let transformers derive
    the documents from position_ids resets: it does so only when the forward uses no KV cache (else, e.g.
    with the config's use_cache=True, it silently gives one causal mask over the whole pack), and it builds
    its BlockMask through that compiled create_block_mask."""
    from torch.nn.attention.flex_attention import BlockMask

    b, length = document_ids.shape
    n = -(-length // tile)
    doc = torch.nn.functional.pad(document_ids, (0, n * tile - length), value=-1)
    tiles = doc.view(b, n, tile)
    real = tiles >= 0
    docs = int(doc.max()) + 1
    present = torch.zeros(b, n, docs + 1, dtype=torch.float32, device=doc.device)  # [row, tile, document]
    present.scatter_(2, torch.where(real, tiles, docs), 1.0)
    present = present[:, :, :docs]
    shared = (present @ present.transpose(1, 2)) > 0  # some document has tokens in both tiles
    one_doc = real.all(-1) & (tiles.amin(-1) == tiles.amax(-1))
    below = torch.ones(n, n, dtype=torch.bool, device=doc.device).tril(-1)
    full = below & one_doc[:, :, None] & one_doc[:, None, :] & (tiles[:, :, None, 0] == tiles[:, None, :, 0])
    partial = (below & shared & ~full) | torch.eye(n, dtype=torch.bool, device=doc.device)

    def ordered(tile_set: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(count per query tile, key-tile indices with the tile set's first), as BlockMask stores them."""
        order = torch.argsort(tile_set.to(torch.int8), dim=-1, descending=True, stable=True)
        return tile_set.sum(-1, dtype=torch.int32)[:, None], order.to(torch.int32)[:, None]

    def mask_mod(bi, h, q, k):
        return ((doc[bi, q] == doc[bi, k]) & (doc[bi, q] >= 0) & (k <= q)) | (q == k)

    return BlockMask.from_kv_blocks(*ordered(partial), *ordered(full), BLOCK_SIZE=tile, mask_mod=mask_mod,
                                    seq_lengths=(length, length))


def varlen_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask,
                     scaling: float | None = None, dropout: float = 0.0, document_spans=None, **kwargs):
    """Packed attention document by document: for each span (row, s, e, padding) of `document_spans`
    (sft_data.document_spans), out[row, :, s:e] = softmax(q·kᵀ·scaling + causal mask) v over that span alone —
    torch's SDPA with is_causal and no mask, a memory-efficient kernel on CPU and GPU (O(span) memory,
    Σ span² work instead of L²); a padding token attends to itself only, so its output is its own value.
    Grouped-query heads read their shared key/value head (query head h: kv head h // (H/H_kv)).
    Transformers calls it with q [B, H, L, D] and k, v [B, H_kv, L, D]; it returns [B, L, H, D]. A layer with
    a sliding window w (transformers passes `sliding_window`: query i sees keys j with i − w < j ≤ i) gives a
    span longer than w that banded causal mask (`window_mask`, span × span booleans); a shorter span is
    plainly causal, as the window cannot reach past its start."""
    if document_spans is None:
        raise ValueError("varlen attention needs document_spans (sft_data.document_spans of the batch)")
    if isinstance(document_spans, torch.Tensor):  # span_table's form
        document_spans = document_spans.tolist()
    window = kwargs.get("sliding_window")

    def attend(qs, ks, vs):
        n = qs.shape[1]
        banded = window is not None and n > window
        return torch.nn.functional.scaled_dot_product_attention(
            qs[None], ks[None], vs[None], dropout_p=dropout, is_causal=not banded, scale=scaling,
            attn_mask=window_mask(n, window, qs.device) if banded else None)[0]

    rep = query.shape[1] // key.shape[1]
    if rep > 1:
        key, value = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    spans: list[list[tuple[int, bool]]] = [[] for _ in range(query.shape[0])]
    for row, s, e, padding in document_spans:
        spans[row].append((e - s, padding))
    rows = []
    # split, not slice: a slice's backward writes its gradient into a zero tensor of the whole input
    # (O(L) per span, O(L²/len) per sequence); split's backward is one concatenation
    for q, k, v, row in zip(query.unbind(0), key.unbind(0), value.unbind(0), spans):
        sizes = [n for n, _ in row]
        parts = zip(q.split(sizes, dim=1), k.split(sizes, dim=1), v.split(sizes, dim=1), row)
        rows.append(torch.cat([vs if padding else attend(qs, ks, vs) for qs, ks, vs, (_, padding) in parts], dim=1))
    return torch.stack(rows).transpose(1, 2).contiguous(), None


def window_mask(n: int, window: int, device: torch.device) -> torch.Tensor:
    """[n, n] booleans, True where query i may attend key j: causal within a sliding window, i − w < j ≤ i."""
    i = torch.arange(n, device=device)
    gap = i[:, None] - i[None, :]
    return (gap >= 0) & (gap < window)


def attention_inputs(batch: dict, attention: str) -> dict:
    """The model's attention arguments for a collated batch (on its device) under a resolved attention:
    dense → the 4-D mask (sft_data.dense_attention_mask, made here from the document ids); flex →
    document_block_mask; varlen → the document spans."""
    if attention == "dense":
        return {"attention_mask": dense_attention_mask(batch["document_ids"])}
    if attention == "flex":
        return {"attention_mask": document_block_mask(batch["document_ids"])}
    return {"document_spans": span_table(document_spans(batch["document_ids"]))}


def span_table(spans: list[tuple[int, int, int, bool]]) -> torch.Tensor:
    """document_spans as a [n, 4] int64 tensor on the CPU, the form the model's forward carries to
    varlen_attention: a compiled decoder block (compile.py) takes a tensor's length as a dynamic size, where
    a Python list's length is a guard, one compilation per number of documents in a micro-batch. On the CPU,
    so reading it back costs no device synchronisation."""
    return torch.tensor(spans, dtype=torch.long).reshape(-1, 4)
