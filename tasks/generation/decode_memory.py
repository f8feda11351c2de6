"""How much GPU memory the transformers engine's decode batches may hold, and how much one row holds.

A GPU decodes a whole RL step's rows at once (tasks/training/rl_engine.rollout_batch_rows), as memory
allows: each batch is cut to the rows whose memory fits the engine's share of the GPU.

The share (ENGINE_GPU_SHARE, the same rule as a vLLM engine's `gpu_memory_utilization`): the engine's own
weights (its inference copy, when it has one) plus its decode memory take at most that fraction of the
GPU; the trainer's state lives in the rest. `engine_memory_budget` = share · GPU memory − copy bytes.

One row of a batch (`decode_bytes_per_row`) at the larger of its two phases, prompt width L (the batch's
longest prompt, left-padded), T = max_tokens, n rows per prompt, e bytes per element of the engine's weights,
for a model with `layers` layers, `heads` query heads, `kv_heads` KV heads of `head_dim`, hidden size h, MLP
size I and vocabulary V; KV = 2 · layers · kv_heads · head_dim · (L + T) · e:

    decode        KV + KV / (n · layers)       the row's cache; the prompt's buffers of the layer being
                                               copied to its n rows when decoding starts
                  + V · (2e + 32)              a step's logits in the weights' dtype (and another bucket's
                                               graph output, kept in the shared pool), then fp32 buffers of
                                               4 bytes each: the copy, log-softmax, the noise buffer, its
                                               per-row gather, the Gumbel noise, the perturbed scores, the
                                               scores over the temperature and top-p's work buffer
                  + 12 · T                     the sampled tokens (8 bytes) and their log-probs (4)
    prefill       (KV + L · (4h + 3I) · e + L² · (1 + 4 · heads)) / n
                                               one prompt's cache, its largest activations at once (the layer
                                               input, q/k/v and output around attention, the MLP's gate, up
                                               and product), its L × L boolean mask and attention scores in
                                               fp32 (sdpa's math kernel under a mask), shared by its n rows

Rows per batch = ⌊budget / bytes per row⌋, in whole prompts (n rows each). A budget that cannot hold one
prompt's n rows is refused in one line, before anything is allocated. Estimates, not allocator figures: the
bench (bench/gpu.sh, hf_rollout) prints the measured peak beside this plan.
"""
from __future__ import annotations

ENGINE_GPU_SHARE = 0.5  # a rollout engine's share of its GPU while it generates: vLLM's gpu_memory_utilization
#                         here (VLLMGenerator's default) and the transformers engine's budget (module docstring)


def decode_bytes_per_row(*, layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int, intermediate: int,
                         vocab: int, prompt_width: int, max_tokens: int, n: int, elem_bytes: int) -> int:
    """Bytes one row of a decode batch holds at its peak: the larger phase (module docstring)."""
    L, T, e = prompt_width, max_tokens, elem_bytes
    kv = 2 * layers * kv_heads * head_dim * (L + T) * e
    decode = kv + kv // (n * layers) + vocab * (2 * e + 32) + 12 * T
    prefill = (kv + L * (4 * hidden + 3 * intermediate) * e + L * L * (1 + 4 * heads)) // n
    return max(decode, prefill)


def model_bytes_per_row(config, prompt_width: int, max_tokens: int, n: int, elem_bytes: int) -> int:
    """`decode_bytes_per_row` for a transformers model config."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return decode_bytes_per_row(layers=config.num_hidden_layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                hidden=config.hidden_size, intermediate=config.intermediate_size,
                                vocab=config.vocab_size, prompt_width=prompt_width, max_tokens=max_tokens, n=n,
                                elem_bytes=elem_bytes)


def engine_memory_budget(gpu_bytes: int, copy_bytes: int, share: float = ENGINE_GPU_SHARE) -> int:
    """Bytes the engine's decode batches may hold: its share of the GPU less its own weights' copy (0 when the
    policy itself generates)."""
    return max(0, int(share * gpu_bytes) - copy_bytes)


def prompts_that_fit(budget: int, per_row: int, n: int, max_tokens: int) -> int:
    """Prompts (n rows each) per batch within `budget`; one line when not even one prompt fits."""
    prompts = budget // (per_row * n)
    if prompts < 1:
        gib = 1 << 30
        raise ValueError(f"the transformers engine's memory budget ({budget / gib:.2f} GiB) cannot hold one "
                         f"prompt's {n} rows of ≤ {max_tokens} tokens ({per_row * n / gib:.2f} GiB); lower "
                         f"max_tokens or rollouts_per_prompt, or use the vLLM backend")
    return prompts
