"""Fixed-shape decode steps for the transformers engine, replayed as CUDA graphs on a GPU.

A decode step of a small model is bound by kernel launches, not by the GPU: one token per row means tens
of small operators per decoder layer, hundreds per step (bench/decode_ops.py counts them), each a kernel
launch behind transformers' Python, while the matrix products themselves take a fraction of a millisecond.
A CUDA graph records a step's kernels once and replays them with one launch; it requires that every
replay reads and writes the same memory with the same shapes. The dynamic loop (hf_backend.py) breaks both:
its mask and cache views grow by one position every step and its batch shrinks as rows end. Here each step
has the same shapes:

* KV cache. The prefill's preallocated (rows, kv_heads, cap, head_dim) buffers (cap = prompt width L +
  max_tokens), used whole. A step writes its key and value at position `at` (a one-element device tensor the
  loop sets to L + t before step t) with index_copy_, and attention reads all cap positions. The positions
  not yet written are zeros (zeroed once, so masked-out keys and values are finite: 0 · NaN would be NaN).
* Mask. A (rows, 1, 1, cap) boolean buffer, key j visible when it is a prompt token (not padding) or an
  already generated one; the loop sets column L + t in place. Masked keys get probability exactly 0, so a
  step's attention is the dynamic loop's over the filled prefix, up to float rounding of the longer sum.
* Rows in buckets. The batch keeps its row count (finished rows run along, their outputs ignored, as in the
  dynamic loop) until the rows still generating fit in half of it: then they, topped up with finished rows
  to `bucket_rows(live)` = max(min_rows, the next power of two ≥ live), are copied to the front of every
  buffer (the filled prefix only) and later steps run on that many rows. So a call uses at most
  log2(rows / min_rows) + 1 shapes, each captured once, instead of a new shape at every eviction.
* Attention. A step has one query position, so the g = heads / kv_heads query heads that share a KV head
  are handed to sdpa as g query positions of that KV head: query (rows, kv_heads, g, head_dim) against
  keys (rows, kv_heads, cap, head_dim) under the (rows, 1, 1, cap) mask. Each head's softmax is its own, so
  this is the grouped attention exactly, without the (rows, heads, cap, head_dim) copy of every key and value
  that sdpa's `enable_gqa` makes under a mask (its math kernel repeats them), every layer, every step.
* Graphs. On a CUDA device each bucket's step is captured the first time it runs (one warm-up forward on a
  side stream, then torch.cuda.CUDAGraph capture, as torch's documentation prescribes) and replayed after
  that; inputs go in by in-place copies into the captured buffers. A call's graphs share one memory pool
  (captured largest bucket first and replayed in that order, the order torch allows for a shared pool).
  Parameters are read where they live, so a policy updated in place between calls needs nothing new (graphs
  live for one call; each capture synchronises the device and empties torch's cache of free blocks, as
  torch.cuda.graph does). Elsewhere (CPU), for a model whose forward cannot be captured (`graph_safe`), or
  when a capture fails, the same step runs eagerly: the same buffers, the same results. A failure is logged
  with its first error, kept in `StaticSteps.graph_error`, and turns graphs off for the generator's life
  (hf_backend.py): a failed capture can leave torch's graph memory pool unreleased, so it is not retried.

Sampling stays outside the step (hf_backend.py draws the noise from per-group generators), so the samples
are the dynamic loop's: which rows run together changes speed and float rounding, never the rule.
"""
from __future__ import annotations

import functools
import logging

import torch

DECODE_SDPA = "klear_sdpa_decode"  # the attention the static steps run (module docstring, "Attention")
MIN_BUCKET_ROWS = 8  # the smallest batch a call shrinks to: below it a step's launches cost the same for
#                      fewer rows, and each new bucket costs a capture (a warm-up forward and the capture)

log = logging.getLogger(__name__)


def graph_safe(config) -> bool:
    """Whether the model's forward can be captured: no rotary embedding whose frequencies the forward
    recomputes from the sequence length it sees (transformers' "dynamic" and "longrope" rope types branch on
    a tensor's value, a host sync that would break the capture)."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if not isinstance(rope, dict):
        return True
    kinds = [v for v in rope.values() if isinstance(v, dict)] or [rope]  # per layer type, or one for all
    return not any(k.get("rope_type", k.get("type")) in ("dynamic", "longrope") for k in kinds)


def bucket_rows(live: int, min_rows: int = MIN_BUCKET_ROWS) -> int:
    """Rows a batch with `live` rows still generating runs at: the next power of two ≥ live, at least
    min_rows."""
    return max(min_rows, 1 << max(0, live - 1).bit_length())


def sdpa_one_query(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **_):
    """Attention of one query position per row (module docstring, "Attention"): query (B, H, 1, D), key and
    value (B, KV, S, D), attention_mask (B, 1, 1, S) boolean. Query head h reads KV head h // (H / KV), as
    transformers' repeat_kv pairs them. Returns (B, 1, H, D), as transformers' attention functions do."""
    b, h, q_len, d = query.shape
    kv = key.shape[1]
    if q_len != 1:
        raise ValueError(f"{DECODE_SDPA} takes one query position, not {q_len}")
    q = query.reshape(b, kv, h // kv, d)
    out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling)
    return out.reshape(b, 1, h, value.shape[-1]), None


@functools.cache
def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(DECODE_SDPA, sdpa_one_query)


@functools.cache
def _static_layer_cls():
    from transformers.cache_utils import DynamicLayer

    class _StaticRowsLayer(DynamicLayer):
        """One layer's KV cache as views of fixed buffers: update writes at the shared position tensor `at`
        and returns the whole buffers (their shape never changes)."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, at: torch.Tensor, filled: list[int]):
            super().__init__()
            self.keys, self.values, self.at, self._filled = keys, values, at, filled
            self.dtype, self.device = keys.dtype, keys.device
            self.is_initialized = True

        def update(self, key_states, value_states, *a, **kw):
            self.keys.index_copy_(2, self.at, key_states)
            self.values.index_copy_(2, self.at, value_states)
            return self.keys, self.values

        def get_seq_length(self) -> int:  # a host-side count; the decode forward is given position_ids
            return self._filled[0]

    return _StaticRowsLayer


class StaticSteps:
    """The decode steps of one `HFGenerator._decode` call after its prefill (module docstring).

    `kv`: per layer the (keys, values) buffers of `rows` rows and `cap` positions, the first `prompt_width`
    filled; `valid`: (rows, cap) bool, key visible; `pos`: (rows, 1) long, the position of the next token.
    `forward(tokens, t)` runs the step that feeds token t (rows, ) and returns its logits (rows, V) — a view
    of the step's output buffer, valid until the next call. `keep(done, n_done)` shrinks the batch when its
    bucket can halve and returns the kept rows' old indices (the caller reorders its own per-row state), or
    None. The model runs sdpa (hf_backend checks); the steps switch it to `sdpa_one_query` while they run."""

    def __init__(self, model, kv: list[tuple[torch.Tensor, torch.Tensor]], valid: torch.Tensor, pos: torch.Tensor,
                 prompt_width: int, graphs: bool, min_rows: int = MIN_BUCKET_ROWS):
        self.model, self.min_rows = model, min_rows
        _register()
        self.L, self.rows = prompt_width, valid.shape[0]
        dev = valid.device
        self.kv = kv
        for k, v in kv:  # unwritten positions: finite zeros (module docstring, "KV cache")
            k[:, :, prompt_width:].zero_()
            v[:, :, prompt_width:].zero_()
        self.valid = valid[:, None, None, :]                   # (rows, 1, 1, cap): the mask the step reads
        self.pos = pos
        self.ids = torch.zeros(self.rows, 1, dtype=torch.long, device=dev)
        self.at = torch.zeros(1, dtype=torch.long, device=dev)
        self.filled = [prompt_width]                           # host-side count of written positions
        self.graphs = graphs and dev.type == "cuda" and graph_safe(model.config)
        self.pool = None                                       # one memory pool for the call's graphs
        self.graph_error: str | None = None
        self.captured = 0                                      # graphs captured by this call
        self.row_counts = [self.rows]                          # the batch's row count at each shape it ran
        self._steps: dict[int, tuple] = {}                     # bucket rows -> (graph | None, output, cache)

    def _cache(self, b: int):
        from transformers.cache_utils import DynamicCache

        layer = _static_layer_cls()
        cache = DynamicCache()
        cache.layers = [layer(k[:b], v[:b], self.at, self.filled) for k, v in self.kv]
        return cache

    def _run(self, b: int, cache) -> torch.Tensor:
        cfg = self.model.config
        saved, cfg._attn_implementation = cfg._attn_implementation, DECODE_SDPA
        try:
            return self.model(input_ids=self.ids[:b], attention_mask=self.valid[:b], position_ids=self.pos[:b],
                              past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
        finally:
            cfg._attn_implementation = saved

    def _capture(self, b: int, cache):
        """A CUDA graph of the b-row step (its warm-up writes this step's keys and values, which the replay
        writes again), or None when the capture fails (module docstring, "Graphs")."""
        dev = self.ids.device
        current = torch.cuda.current_stream(dev)
        try:
            with torch.cuda.device(dev):  # the capture stream and pool belong to the model's device
                side = torch.cuda.Stream(device=dev)
                side.wait_stream(current)
                try:
                    with torch.cuda.stream(side):
                        self._run(b, cache)
                finally:
                    current.wait_stream(side)
                if self.pool is None:
                    self.pool = torch.cuda.graph_pool_handle()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                    out = self._run(b, cache)
            self.captured += 1
            return graph, out
        except Exception as e:  # noqa: BLE001 — any capture failure: eager steps, reason kept and logged
            torch.cuda.set_stream(current)  # a failed capture_end leaves the capture stream current
            cause = e.__context__ if e.__context__ is not None else e  # the first error, not the follow-up
            self.graphs = False
            self.graph_error = f"{type(cause).__name__}: {cause}".splitlines()[0]
            log.warning("CUDA graph capture failed, decode steps run eagerly: %s", self.graph_error)
            return None

    def _replay(self, graph) -> None:
        with torch.cuda.device(self.ids.device):
            graph.replay()

    def forward(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        b = len(tokens)
        self.ids[:b, 0].copy_(tokens)
        self.valid[:b, 0, 0, self.L + t] = True
        self.at.fill_(self.L + t)
        if b not in self._steps:
            cache = self._cache(b)
            graph, out = (self._capture(b, cache) if self.graphs else None) or (None, None)
            self._steps[b] = (graph, out, cache)
        graph, out, cache = self._steps[b]
        if graph is not None:
            self._replay(graph)
            logits = out
        else:
            logits = self._run(b, cache)
        self.filled[0] = self.L + t + 1
        self.pos[:b].add_(1)
        return logits

    def keep(self, done: torch.Tensor, n_done: int) -> torch.Tensor | None:
        """Halve the batch (or more) when the live rows fit (module docstring, "Rows in buckets")."""
        b = len(done)
        live = b - n_done
        target = bucket_rows(live, self.min_rows)
        if target > b // 2:
            return None
        idx = torch.cat([(~done).nonzero()[:, 0], done.nonzero()[:, 0][:target - live]])
        n = self.filled[0]
        for k, v in self.kv:
            k[:target, :, :n] = k[idx, :, :n]
            v[:target, :, :n] = v[idx, :, :n]
        self.valid[:target] = self.valid[idx]
        self.pos[:target] = self.pos[idx]
        self.row_counts.append(target)
        return idx
