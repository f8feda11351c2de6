"""transformers backend (CPU or GPU): a lean decode loop of our own over the model's forward pass, with
transformers `generate` as the fallback for models the loop cannot drive.

Contract (base.py): same model, prompts and seed → the same completions; `token_ids` end with the eos token
when finish_reason is "stop"; `logprobs[i]` = log_softmax(raw logits)[token_i], the policy's distribution
at temperature 1 without top-p, whatever the sampling settings.

The loop, piece by piece (each rule is what makes it both exact and cheap):

* Batching. Prompts go in batches of `prompts_per_batch(batch_size, n)` = max(1, batch_size // n) prompts
  (n completions each), in order: prompts [0, b), [b, 2b), …; with `memory_budget_bytes` (a GPU's rollout
  engine), no more than the budget holds (tasks/generation/decode_memory.py), sized for the call's
  longest prompt, so the same call on the same kind of GPU is batched the same way.
* Seeding. Without `seeds`, each batch gets its own torch.Generator, seeded from one per-call generator
  seeded with `params.seed`, and all its rows draw from it: a call is a pure function of (model, prompts,
  params, batch_size). With `seeds` (one per prompt, base.py), each prompt gets a torch.Generator seeded
  with its seed, and its n rows draw their noise from it alone: a prompt's samples do not depend on the
  other prompts of the call. What can still differ with the batch is float rounding: a prompt's logits
  batched with longer prompts (more left padding) differ from its logits alone by a few 1e-6
  (docs/benchmarks.md), which flips a sample only when two Gumbel-perturbed scores tie that closely. Callers that
  need bit-identical samples across splits cut their prompts at multiples of `prompts_per_batch`, so
  every batch is one the unsplit call also runs (tasks/generation/parallel.py does).
* Prefill. Each distinct prompt of a batch is run once (left-padded, `position_ids` = cumsum of the
  attention mask − 1, so padding does not shift positions, `logits_to_keep=1`), and its KV rows and
  last-position logits are then repeated n times: the n samples of a prompt share its prefill.
* KV cache. `_BufferLayer` preallocates (rows, kv_heads, prompt_len + max_tokens, head_dim) per layer and
  writes each step's key/value in place, returning views of the filled prefix, instead of DynamicLayer's
  torch.cat of the whole cache every step. Dropping rows copies only the filled prefix.
* Attention. When the model runs sdpa, the loop passes its own 4-D boolean mask (key is not padding, and
  causal during prefill) and, for the duration of the call, switches the model to `klear_sdpa_gqa`: the
  same torch sdpa call as transformers' "sdpa" but with `enable_gqa=True` also when a mask is present, so
  the grouped KV heads are not materialised by repeat_kv every step. Other attention implementations get a
  2-D mask and build their own (same loop, no switch).
* Sampling. temperature ≤ 0: argmax of the raw logits. Otherwise scores = logits / temperature; with
  top_p < 1 only the nucleus may be drawn: a token is in it when the probability mass of the tokens more
  likely than it is < top_p (so the most likely token always is; tokens of equal probability are in or
  out together) — transformers' TopPLogitsWarper rule, ties aside. The token is the argmax over the
  nucleus of scores + G, G = −log(−log U), U ~ Uniform[0, 1) i.i.d. from the generator of the row's group
  (the batch; with `seeds`, the row's prompt). That is the Gumbel-max trick: an exact sample of
  softmax(scores) restricted to the nucleus (up to fp32 U's 2⁻²⁴ grid), and cheaper than
  torch.multinomial or exponential_ (docs/benchmarks.md). The nucleus is not sorted out for every row:
  the argmax over all tokens, when it lies in the nucleus (one O(V) mass test), is the argmax over the
  nucleus too; only rows whose argmax falls outside (about 1 − top_p of them) sort their scores. With
  top_k > 0 (the paper's code evaluation: 20) the scores below the k-th highest are −inf first (ties with
  it kept), so the nucleus is taken over the renormalised top k, as vLLM and transformers order them. Same
  tokens as sorting every row; a full-vocabulary sort per row and step is what a 151K-token vocabulary
  makes expensive (docs/benchmarks.md). U is drawn for all the rows
  of a group every step (evicted ones too) until every row of the group has finished, so a row's sample
  does not depend on which rows were evicted: `evict_frac` changes speed, never the completions.
  Per-prompt groups cost one torch.rand call per live prompt per step instead of one per batch, no
  cost above the run-to-run noise (docs/benchmarks.md).
* Stopping and eviction. A row stops at its first id of the stop set (base.py `stop_ids`: the model's
  eos ids ∪ the tokenizer's; kept in token_ids, finish "stop") or after max_tokens ("length"); its length
  and stop are recorded on the device at that step. The host looks at which rows ended every
  `eos_check_every` steps (1 on CPU, EOS_CHECK_EVERY_GPU on a GPU, where each look makes the host wait for
  the device): finished rows are dropped from the batch (KV rows, mask, positions) once they are ≥
  `evict_frac` (1/8) of the rows still in it (at least one row), so the batch shrinks as completions end and
  one compaction copy serves several finished rows; until then a finished row runs along and its outputs
  are ignored (a group whose rows all ended may draw noise a few steps longer, from its own generator). The
  loop ends at the first look after every row has finished. Neither setting changes a completion.
* Decode steps (`decode`). "dynamic": the steps above, each attending to the filled prefix of the cache,
  finished rows dropped at `evict_frac`. "static" (tasks/generation/static_decode.py): every step has the
  same shapes — the whole cache under a mask, rows shrinking only to power-of-two buckets — so on a GPU each
  bucket's step is captured once as a CUDA graph and replayed (`cuda_graphs`), one launch instead of
  hundreds (bench/decode_ops.py). "auto" (the default): static on a GPU when the model runs sdpa, dynamic
  elsewhere, so CPU completions stay what they were. Both give the same samples by the rules above; a
  step's logits differ by float rounding only. `last_decode` (a DecodeReport) says what the last batch ran.

Fallback: transformers `generate` (the old path, `loop="hf"`; it seeds torch's global RNG, so with `seeds`
it generates one prompt per call) for models the loop does not drive:
encoder-decoder or multimodal configs (sub-configs), sliding-window/non-"full_attention" layers, or a
forward without `past_key_values`/`position_ids`/`logits_to_keep`. `loop="lean"` forces the loop.

Speed against transformers `generate` and where a step's time goes: docs/benchmarks.md.
"""
from __future__ import annotations

import functools
import gc
import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from tasks.generation.base import Completion, SamplingParams, check_prompt_lengths, check_seeds, stop_ids
from tasks.generation.decode_memory import model_bytes_per_row, prompts_that_fit
from tasks.generation.static_decode import MIN_BUCKET_ROWS, StaticSteps

GQA_SDPA = "klear_sdpa_gqa"
EOS_CHECK_EVERY_GPU = 8  # decode steps between the host's looks at which rows ended, on a GPU (module docstring)
DECODE_MODES = ("auto", "dynamic", "static")  # the lean loop's steps; "auto": static on a GPU (module docstring)
BATCH_SIZE = 128  # rows (prompts × n) per decode batch: a decode step's Python and kernel-launch overhead
#   is shared by more rows (the demo SFT model on CPU: ×1.19 tokens per CPU-s against 64 rows, ×1.28 at 256;
#   docs/benchmarks.md), while the logits of one step stay small (128 × 151,936 fp32 = 78 MB at Qwen's vocab)


def prompts_per_batch(batch_size: int, n: int) -> int:
    """Prompts per decode batch: each brings n rows."""
    return max(1, batch_size // n)


def _sdpa_gqa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **_):
    """transformers' sdpa attention with the KV-head grouping left to torch (enable_gqa) even under a mask."""
    groups = getattr(module, "num_key_value_groups", 1)
    causal = bool(query.shape[2] > 1 and attention_mask is None and (is_causal if is_causal is not None
                                                                      else getattr(module, "is_causal", True)))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=causal,
        enable_gqa=groups > 1)
    return out.transpose(1, 2).contiguous(), None


@functools.cache
def _register() -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(GQA_SDPA, _sdpa_gqa)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)  # only used if a caller passes a 2-D mask


@functools.cache
def _buffer_layer_cls():
    from transformers.cache_utils import DynamicLayer

    class _BufferLayer(DynamicLayer):
        """A DynamicLayer over a preallocated (B, H, cap, D) buffer: update writes in place, returns views."""

        def __init__(self, cap: int):
            super().__init__()
            self.cap, self.n = cap, 0

        def lazy_initialization(self, key_states, value_states, *a, **kw) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            b, h, _, d = key_states.shape
            self.kbuf = key_states.new_empty(b, h, self.cap, d)
            self.vbuf = value_states.new_empty(b, h, self.cap, value_states.shape[-1])
            self.keys, self.values = self.kbuf[:, :, :0], self.vbuf[:, :, :0]
            self.is_initialized = True

        def update(self, key_states, value_states, *a, **kw):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            t = key_states.shape[2]
            self.kbuf[:, :, self.n:self.n + t] = key_states
            self.vbuf[:, :, self.n:self.n + t] = value_states
            self.n += t
            self.keys, self.values = self.kbuf[:, :, :self.n], self.vbuf[:, :, :self.n]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            """Keep rows `indices`, copying only the filled prefix (not the whole capacity) into new buffers."""
            bufs = []
            for buf in (self.kbuf, self.vbuf):
                new = buf.new_empty(len(indices), *buf.shape[1:])
                torch.index_select(buf[:, :, :self.n], 0, indices, out=new[:, :, :self.n])
                bufs.append(new)
            self.kbuf, self.vbuf = bufs
            self.keys, self.values = self.kbuf[:, :, :self.n], self.vbuf[:, :, :self.n]

    return _BufferLayer


def lean_loop_supported(model) -> bool:
    """Whether `_decode` can drive the model: a text-only decoder-only causal LM whose every layer is full
    attention and whose forward takes past_key_values, position_ids and logits_to_keep."""
    cfg = model.config
    if getattr(cfg, "is_encoder_decoder", False) or getattr(cfg, "sub_configs", None):
        return False
    types = getattr(cfg, "layer_types", None)
    if types is not None and any(t != "full_attention" for t in types):
        return False
    if types is None and getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return False
    params = inspect.signature(model.forward).parameters
    return all(k in params for k in ("past_key_values", "position_ids", "logits_to_keep"))


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """scores with every token outside the nucleus (module rule, "Sampling") set to −inf: sorted by
    probability, the least likely token whose preceding mass is < top_p sets the floor; every token scored
    at least that high is kept (ties with it too)."""
    sorted_s, _ = scores.sort(dim=-1, descending=True)
    probs = sorted_s.softmax(-1)
    last = ((probs.cumsum(-1) - probs) < top_p).sum(-1, keepdim=True).clamp(min=1) - 1
    return scores.masked_fill(scores < sorted_s.gather(-1, last), float("-inf"))


def in_nucleus(scores: torch.Tensor, tokens: torch.Tensor, top_p: float) -> torch.Tensor:
    """Per row, whether `tokens` lies in the top-p nucleus of softmax(scores): the mass of the tokens scored
    strictly higher is < top_p. One pass over the vocabulary, no sort."""
    probs = scores.softmax(-1)
    above = scores > scores.gather(-1, tokens[:, None])
    return (probs * above).sum(-1) < top_p


def top_k_filter(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """scores with every token scored below the row's k-th highest set to −inf (ties with it kept); all of
    them for top_k ≤ 0 or ≥ the vocabulary."""
    if top_k <= 0 or top_k >= scores.shape[-1]:
        return scores
    kth = scores.topk(top_k, dim=-1).values[:, -1:]
    return scores.masked_fill(scores < kth, float("-inf"))


def sample_tokens(logits: torch.Tensor, logp: torch.Tensor, temperature: float, top_p: float,
                  noise: torch.Tensor | None, top_k: int = 0) -> torch.Tensor:
    """One token per row: greedy for temperature ≤ 0, else an exact sample of softmax(logits / temperature)
    restricted to its top_k tokens (`top_k_filter`; 0: all) and then to the top-p nucleus of what is left, by
    Gumbel-max: the nucleus's argmax of scores + G with G = −log(−log U), `noise` = U ~ Uniform[0, 1)
    i.i.d., one per row and token. `logp` is log_softmax(logits), reused as the scores when temperature is
    1. Rows whose argmax over every token lies in the nucleus keep it (it is the nucleus's argmax too); the
    others are filtered (`top_p_filter`) and drawn again with the same noise."""
    if temperature <= 0:
        return logits.argmax(-1)
    scores = top_k_filter(logp if temperature == 1.0 else logits / temperature, top_k)
    gumbel = noise.log().neg_().log_().neg_()
    pick = (scores + gumbel).argmax(-1)
    if top_p < 1.0:
        out = (~in_nucleus(scores, pick, top_p)).nonzero()[:, 0]
        if len(out):
            pick[out] = (top_p_filter(scores[out], top_p) + gumbel[out]).argmax(-1)
    return pick


@dataclass(frozen=True)
class DecodeReport:
    """What one batch of the lean loop ran: its decode steps ("dynamic", or "static": static_decode.py), the
    batch's row count at each shape it ran (the first is prompts × n), how many CUDA graphs it captured, and
    why a capture failed (None when none did)."""

    steps: str
    row_counts: tuple[int, ...]
    graphs_captured: int
    graph_error: str | None


class _DynamicSteps:
    """The decode steps over the growing cache (module docstring, "KV cache" and "Stopping and eviction"):
    each step attends to the filled prefix only; finished rows are dropped once they are ≥ evict_frac of the
    batch. Same interface as static_decode.StaticSteps."""

    def __init__(self, model, cache, valid: torch.Tensor, pos: torch.Tensor, prompt_width: int, own_attn: bool,
                 evict_frac: float):
        self.model, self.cache, self.valid, self.pos = model, cache, valid, pos
        self.L, self.own_attn, self.evict_frac = prompt_width, own_attn, evict_frac
        self.captured, self.graph_error, self.row_counts = 0, None, [len(pos)]

    def forward(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        self.valid[:, self.L + t] = True
        k = self.L + t + 1
        m = self.valid[:, None, None, :k] if self.own_attn else self.valid[:, :k].long()
        logits = self.model(input_ids=tokens[:, None], attention_mask=m, position_ids=self.pos,
                            past_key_values=self.cache, use_cache=True, logits_to_keep=1).logits[:, -1]
        self.pos = self.pos + 1
        return logits

    def keep(self, done: torch.Tensor, n_done: int) -> torch.Tensor | None:
        if n_done < max(1, self.evict_frac * done.numel()):
            return None
        keep = (~done).nonzero()[:, 0]
        self.cache.batch_select_indices(keep)
        self.valid, self.pos = self.valid[keep], self.pos[keep]
        self.row_counts.append(len(keep))
        return keep


class HFGenerator:
    def __init__(self, model, tokenizer, batch_size: int = BATCH_SIZE, loop: str = "auto", evict_frac: float = 0.125,
                 eos_check_every: int | None = None, decode: str = "auto", cuda_graphs: bool = True,
                 min_bucket_rows: int = MIN_BUCKET_ROWS, memory_budget_bytes: int | None = None):
        if loop not in ("auto", "lean", "hf"):
            raise ValueError(f"loop must be auto, lean or hf, not {loop!r}")
        if decode not in DECODE_MODES:
            raise ValueError(f"decode must be one of {', '.join(DECODE_MODES)}, not {decode!r}")
        self.model, self.tok, self.batch_size = model, tokenizer, batch_size
        # prompts are left-padded per call (padding_side="left" below), never by changing the tokenizer:
        # callers share it (the RL trainer saves it with every checkpoint, training pads on the right)
        eos = model.generation_config.eos_token_id
        eos = eos if eos is not None else getattr(model.config, "eos_token_id", None)
        self.eos_ids = set(stop_ids(eos, tokenizer.eos_token_id))
        self.lean = lean_loop_supported(model) if loop == "auto" else loop == "lean"
        self.evict_frac = evict_frac
        if eos_check_every is None:  # a GPU waits for the host at every check; a CPU does not
            eos_check_every = EOS_CHECK_EVERY_GPU if next(model.parameters()).device.type == "cuda" else 1
        if eos_check_every < 1:
            raise ValueError(f"eos_check_every must be ≥ 1, not {eos_check_every}")
        self.eos_check_every = eos_check_every
        self.decode, self.cuda_graphs, self.min_bucket_rows = decode, cuda_graphs, min_bucket_rows
        self.last_decode: DecodeReport | None = None  # what the lean loop's last batch ran
        self.memory_budget_bytes = memory_budget_bytes  # None: batches of batch_size rows (decode_memory.py)
        self.context_length = getattr(model.config, "max_position_embeddings", None)
        self._threads = None  # on CPU: torch's thread count by tasks/cpu_threads.py's policy

    def _govern_threads(self) -> None:
        """On CPU, before each batch: the thread count of tasks/cpu_threads.py's policy (fixed, or with
        KLEAR_TORCH_THREADS=auto rechecked at most every few seconds). At the test suite's shapes the samples
        do not depend on it (tests/generation/test_hf_backend.py)."""
        if next(self.model.parameters()).device.type != "cpu":
            return
        if self._threads is None:
            from tasks.cpu_threads import ThreadGovernor

            self._threads = ThreadGovernor()
        self._threads()

    @classmethod
    def from_pretrained(cls, path: str, device: str | None = None, **kw) -> "HFGenerator":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()
        return cls(model, AutoTokenizer.from_pretrained(path), **kw)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], params: SamplingParams,
                 on_batch: Callable[[int, list[list[Completion]]], None] | None = None,
                 seeds: Sequence[int] | None = None) -> list[list[Completion]]:
        """Completions per prompt; `on_batch(start, completions)` after each batch of prompts, so a caller
        can grade and report while the rest generates (the samples are the same with or without it).
        `seeds`: one per prompt (module rule, "Seeding")."""
        check_seeds(seeds, prompts)
        out: list[list[Completion]] = []
        per_batch = min(prompts_per_batch(self.batch_size, params.n), self._prompts_in_budget(prompts, params))
        gen = torch.Generator(device="cpu").manual_seed(params.seed)
        for start in range(0, len(prompts), per_batch):
            self._govern_threads()
            batch = list(prompts[start:start + per_batch])
            if seeds is None:
                group_seeds = [int(torch.randint(0, 2**62, (1,), generator=gen))]  # one group: the batch
            else:
                group_seeds = [int(x) for x in seeds[start:start + per_batch]]      # a group per prompt
            if self.lean:
                comps = self._decode(batch, params, group_seeds)
            elif seeds is None:
                torch.manual_seed(group_seeds[0])
                comps = self._generate_batch(batch, params)
            else:  # transformers `generate` draws from the global RNG: one prompt, one seed, per call
                comps = []
                for prompt, seed in zip(batch, group_seeds):
                    torch.manual_seed(seed)
                    comps.extend(self._generate_batch([prompt], params))
            out.extend(comps)
            if on_batch is not None:
                on_batch(start, comps)
        return out

    def _prompts_in_budget(self, prompts: Sequence[str], p: SamplingParams) -> int:
        """Prompts per batch that `memory_budget_bytes` allows (decode_memory.py), sized for the call's longest
        prompt; unbounded without a budget. Every prompt's length is checked first (PromptTooLong)."""
        if self.memory_budget_bytes is None or not self.lean or not prompts:
            return prompts_per_batch(self.batch_size, p.n)
        widths = [len(ids) for ids in self.tok(list(prompts), add_special_tokens=False)["input_ids"]]
        check_prompt_lengths(widths, self.context_length, p.max_tokens)
        elem = next(self.model.parameters()).element_size()
        per_row = model_bytes_per_row(self.model.config, max(widths), p.max_tokens, p.n, elem)
        return prompts_that_fit(self.memory_budget_bytes, per_row, p.n, p.max_tokens)

    def close(self) -> None:
        """Drop the model reference (its weights go when nothing else holds them) and cached GPU memory;
        idempotent."""
        if getattr(self, "model", None) is None:
            return
        self.model = None
        gc.collect()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()

    def __enter__(self) -> "HFGenerator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ lean loop

    def _decode(self, prompts: list[str], p: SamplingParams, seeds: list[int]) -> list[list[Completion]]:
        """`seeds`: one per group of rows. The rows split evenly into len(seeds) consecutive groups (one
        seed: the whole batch; one per prompt: each prompt's n rows), each drawing from its own generator."""
        model, dev, n, T = self.model, self.model.device, p.n, p.max_tokens
        enc = self.tok(prompts, return_tensors="pt", padding=True, padding_side="left",
                       add_special_tokens=False).to(dev)
        ids, attn = enc["input_ids"], enc["attention_mask"].bool()
        check_prompt_lengths(attn.sum(-1).tolist(), self.context_length, T)  # before the cache is sized
        P, L = ids.shape
        B = P * n
        gens = [torch.Generator(device=dev).manual_seed(sd) for sd in seeds]
        per_group = B // len(seeds)
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long, device=dev)
        cfg = model.config
        own_attn = cfg._attn_implementation in ("sdpa", GQA_SDPA)
        static = self._static_steps(dev, own_attn)
        if own_attn:
            _register()
        saved_attn = cfg._attn_implementation
        cache = self._new_cache(L + T)

        valid = torch.zeros(P, L + T, dtype=torch.bool, device=dev)  # key j of row i is not padding
        valid[:, :L] = attn
        pos = (attn.long().cumsum(-1) - 1).clamp(min=0)
        if own_attn:
            causal = torch.ones(L, L, dtype=torch.bool, device=dev).tril()
            mask = (causal[None] & attn[:, None, :]) | torch.eye(L, dtype=torch.bool, device=dev)[None]
            mask = mask[:, None]  # (P, 1, L, L); the diagonal keeps padded queries finite
        else:
            mask = attn.long()
        steps = None
        try:
            if own_attn:
                cfg._attn_implementation = GQA_SDPA
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                           use_cache=True, logits_to_keep=1).logits[:, -1]
            share = torch.arange(P, device=dev).repeat_interleave(n)
            if n > 1:
                cache.batch_select_indices(share)
                logits = logits[share]
            valid, pos = valid[share], pos[share, -1:] + 1
            if static:
                steps = StaticSteps(model, [(layer.kbuf, layer.vbuf) for layer in cache.layers], valid, pos, L,
                                    graphs=self.cuda_graphs, min_rows=self.min_bucket_rows)
            else:
                steps = _DynamicSteps(model, cache, valid, pos, L, own_attn, self.evict_frac)

            rows = torch.arange(B, device=dev)               # global row of each live batch row
            done = torch.zeros(B, dtype=torch.bool, device=dev)
            toks = torch.zeros(B, T, dtype=torch.long, device=dev)
            lps = torch.zeros(B, T, device=dev)
            length = torch.full((B,), T, dtype=torch.long, device=dev)
            stopped = torch.zeros(B, dtype=torch.bool, device=dev)
            live_groups = list(range(len(gens)))  # groups with a row still generating
            noise_buf = None
            for t in range(T):
                logits = logits.float()
                logp = torch.log_softmax(logits, -1)
                noise = None
                if p.temperature > 0:  # drawn for every row of a live group: eviction never changes a sample
                    if noise_buf is None:
                        noise_buf = torch.empty(B, logits.shape[-1], device=dev)
                    for g in live_groups:
                        torch.rand(per_group, logits.shape[-1], device=dev, generator=gens[g],
                                   out=noise_buf[g * per_group:(g + 1) * per_group])
                    noise = noise_buf[rows]
                nxt = sample_tokens(logits, logp, p.temperature, p.top_p, noise, p.top_k)
                toks[rows, t] = nxt
                lps[rows, t] = logp.gather(-1, nxt[:, None])[:, 0]
                fin = torch.isin(nxt, eos) & ~done  # recorded on the device; the host looks every few steps
                done |= fin
                length[rows] = torch.where(fin, t + 1, length[rows])
                stopped[rows] |= fin
                if (t + 1) % self.eos_check_every == 0 or t == T - 1:
                    if len(gens) > 1:
                        live_groups = (~stopped.view(len(gens), per_group).all(1)).nonzero()[:, 0].tolist()
                    n_done = int(done.sum())
                    if n_done == done.numel():
                        break
                    keep = steps.keep(done, n_done)
                    if keep is not None:
                        rows, nxt, done = rows[keep], nxt[keep], done[keep]
                if t == T - 1:
                    break
                logits = steps.forward(nxt, t)
        finally:
            cfg._attn_implementation = saved_attn
            if steps is not None:
                self.last_decode = DecodeReport("static" if static else "dynamic", tuple(steps.row_counts),
                                                steps.captured, steps.graph_error)
                if steps.graph_error:  # not retried (static_decode.py, "Graphs")
                    self.cuda_graphs = False
        comps = []
        for row, row_lp, k, stop in zip(toks.tolist(), lps.tolist(), length.tolist(), stopped.tolist()):
            ids_ = row[:k]
            text_ids = ids_[:-1] if stop else ids_
            comps.append(Completion(self.tok.decode(text_ids, skip_special_tokens=False), ids_, row_lp[:k],
                                    "stop" if stop else "length"))
        return [comps[i * n:(i + 1) * n] for i in range(P)]

    def _static_steps(self, dev: torch.device, own_attn: bool) -> bool:
        """Whether this call's decode steps are fixed-shape (static_decode.py): decode="static", or "auto" on
        a GPU. They need the attention that takes a 4-D boolean mask (sdpa); "auto" falls back to the
        dynamic steps for other attention implementations, "static" refuses them."""
        if self.decode == "static" and not own_attn:
            raise ValueError(f"decode='static' needs sdpa attention; this model runs "
                             f"{self.model.config._attn_implementation!r}")
        return self.decode == "static" or (self.decode == "auto" and dev.type == "cuda" and own_attn)

    def _new_cache(self, cap: int):
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache()
        layer = _buffer_layer_cls()
        cache.layers = [layer(cap) for _ in range(self.model.config.num_hidden_layers)]
        return cache

    # ------------------------------------------------------------ fallback: transformers generate

    def _generate_batch(self, prompts: list[str], p: SamplingParams) -> list[list[Completion]]:
        enc = self.tok(prompts, return_tensors="pt", padding=True, padding_side="left",
                       add_special_tokens=False).to(self.model.device)
        check_prompt_lengths(enc["attention_mask"].sum(-1).tolist(), self.context_length, p.max_tokens)
        greedy = p.temperature <= 0
        res = self.model.generate(
            **enc, max_new_tokens=p.max_tokens, do_sample=not greedy, num_return_sequences=p.n,
            temperature=None if greedy else p.temperature, top_p=None if greedy else p.top_p,
            top_k=None if greedy or p.top_k <= 0 else p.top_k,
            output_logits=True, return_dict_in_generate=True, pad_token_id=self.tok.pad_token_id)
        new = res.sequences[:, enc["input_ids"].shape[1]:]
        logits = torch.stack(res.logits, dim=1).float()  # (B*n, T, V) raw logits
        lp = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        comps = []
        for row, row_lp in zip(new.tolist(), lp.tolist()):
            ids, stop = [], "length"
            for t in row:
                ids.append(t)  # the eos token stays in token_ids: training must learn to stop
                if t in self.eos_ids:
                    stop = "stop"
                    break
            text_ids = ids[:-1] if stop == "stop" else ids
            comps.append(Completion(self.tok.decode(text_ids, skip_special_tokens=False), ids, row_lp[:len(ids)], stop))
        return [comps[i * p.n:(i + 1) * p.n] for i in range(len(prompts))]
