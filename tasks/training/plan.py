"""A memory plan for an RL run, made from shapes alone (no weights loaded), so a user sees before renting
GPUs whether a configuration fits, and why not. It counts what the trainer does, per GPU, with P parameters
over N ranks, B of them in one decoder block and R in the root module (embeddings, output layer, final norm):

    weights 4P, gradients 4P, AdamW moments 8P bytes (fp32)   ddp: each rank holds all (16P);
                           fsdp: each holds a 1/N shard (16P/N: fp32 master shard, its gradient, Adam's moments)
    fsdp gathered blocks   FSDP2 with a bf16 mixed-precision policy (bf16 all-gathers, fp32 reduce-scatter):
                           2 blocks gathered in bf16 at a time (the current one and the prefetched next), 2·2B
    fsdp root gathered     the root module is not resharded between forward and backward (FSDP2's rule for
                           the root): its parameters stay gathered in bf16 through the micro-batch, 2R
    fsdp gradients         every micro-batch reduce-scatters its gradients into the shards
                           (distributed.gradient_sync), so none stay unsharded between micro-batches; in
                           flight only the root's: bf16 and their fp32 copy for the reduce-scatter, 6R (a
                           block's are B-sized and freed as backward moves on)
    activations            per micro-batch of T tokens (RLConfig.micro_batch_tokens: one packed row, no padding;
                           a rollout longer than the budget is a micro-batch of its own), saved for backward in
                           bf16 (2 bytes/element; 4 without bf16), per layer and token: 7h + 2·kv + 4·I
                           elements (norm inputs/outputs, q/k/v, attention and o-projection outputs; SwiGLU
                           gate, up, act(gate) and product), h = hidden, kv = kv_heads·head_dim,
                           I = intermediate; with gradient checkpointing only each layer's input (h) is kept,
                           plus one layer's full set while it is recomputed
    log-prob chunk         no [tokens, V] logits exist: log-probs are taken from the hidden states through the
                           output embedding in chunks of C = min(LOGPROB_CHUNK, response tokens of a
                           micro-batch) positions (linear_logprobs.py): at most 8·C·V bytes at once (the
                           forward's fp32 logits and one fp32 work buffer; backward holds less), plus the
                           output embedding cast to bf16 (2·V·h) where it is fp32 (not under fsdp's bf16
                           policy: the gathered root is that copy).
                           tests/training/test_plan_logits.py measures it against scoring at V = 151,936.
    not counted            checkpoints (torch.distributed.checkpoint: each rank writes and reads its own
                           shards, nothing gathered to one rank, no optimizer state loaded whole) and model
                           loading (built on the meta device, weights read into the shards): neither adds
                           a full copy of anything to a GPU.

For a colocated vLLM engine on the same GPU (one per rank, or per tensor-parallel group of `tp` ranks):

    engine weights         2P/tp bytes (bf16)
    KV cache               whatever `gpu_memory_utilization` of the GPU leaves after the engine's weights;
                           2 (K and V) · layers · kv_heads · head_dim · 2 bytes per token for the whole
                           model; tensor parallelism splits the KV heads over the tp GPUs (each holds
                           ⌈kv_heads/tp⌉ of them), so one engine holds tp GPUs' KV caches of sequences

The peak is the largest of the step's phases:

    update                 the trainer terms above (+ the engine, when it does not sleep during the update)
    generation             the trainer's state that stays on the GPU (master weights and Adam moments, 12P/N
                           under fsdp, 12P under ddp; gradients are freed after each optimizer step) + engine
    weight sync            that state + the engine's weights + one whole parameter gathered in fp32 (the
                           largest, V·h), pushed while the KV cache still sleeps (vllm_backend.py)

A sleeping engine (vLLM sleep level 2) keeps nothing: no GPU memory and no host copy.
Without an engine (`engine` False: the policy generates with transformers, tasks/training/rl_engine.py):

    rollout copy           an fsdp run over several ranks keeps an unsharded copy of the policy per rank (a
                           sharded module cannot generate different prompts on different ranks), and a bf16
                           update a bf16 copy to generate from: half·P (2P in bf16; 4P for fsdp in fp32); a
                           trainer part, it stays through the update
    decode batch           the rank's ⌈generated prompts / N⌉ · n rollouts, or as many whole prompts as the
                           engine's share (gpu_memory_utilization · GPU − the copy) holds, at the bytes per row
                           of tasks/generation/decode_memory.py (prompt + max_tokens of KV cache, a step's
                           buffers over the vocabulary, the prefill's share)
    generation             the trainer's resident state (12P/N or 12P) + the copy + the decode batch

The plan refuses (one line, the largest term named, then the changes that would lower the peak) when the
peak passes the GPU's memory, or when the KV cache cannot hold one full-length sequence (prompt + max_tokens),
or (transformers engine) when its share cannot hold one prompt's n rows — the engine refuses that too.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.generation.decode_memory import (ENGINE_GPU_SHARE, decode_bytes_per_row, engine_memory_budget,
                                            prompts_that_fit)

GIB = 1 << 30

# HF config fields of model shapes a user may plan for without downloading them
SHAPES: dict[str, dict] = {
    "qwen3-8b": {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                 "tie_word_embeddings": False, "model_type": "qwen3",
                 "max_position_embeddings": 40960},  # the published Qwen3-8B context (its config.json)
    "qwen2.5-0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
                     "tie_word_embeddings": True, "model_type": "qwen2",
                     "max_position_embeddings": 32768},  # bench/gpu.sh's model shape (Qwen2.5-0.5B's config.json)
}


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool = False                # Qwen2 has biases on q, k, v
    qk_norm: bool = False                 # Qwen3 normalises q and k per head (two head_dim weights)

    @classmethod
    def from_hf_config(cls, cfg: dict) -> "Shape":
        heads = cfg["num_attention_heads"]
        return cls(hidden=cfg["hidden_size"], intermediate=cfg["intermediate_size"],
                   layers=cfg["num_hidden_layers"], heads=heads,
                   kv_heads=cfg.get("num_key_value_heads") or heads,
                   head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads, vocab=cfg["vocab_size"],
                   tied=bool(cfg.get("tie_word_embeddings", False)),
                   qkv_bias=cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias")),
                   qk_norm=cfg.get("model_type") == "qwen3")

    @property
    def block_params(self) -> int:
        """One decoder block: q, k, v, o projections (+ q/k/v biases, + q/k norms), SwiGLU MLP (3 matrices),
        two RMSNorms."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * q_out + 2 * self.hidden * kv_out + q_out * self.hidden
        attention += (q_out + 2 * kv_out) * self.qkv_bias + 2 * self.head_dim * self.qk_norm
        return attention + 3 * self.hidden * self.intermediate + 2 * self.hidden

    @property
    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * self.block_params + embeddings + self.hidden

    @property
    def root_params(self) -> int:
        """What no decoder block holds: embeddings, output layer (when untied), final norm."""
        return self.params - self.layers * self.block_params

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    def kv_bytes_per_token_per_gpu(self, tp: int) -> int:
        """One GPU's share under tensor parallelism: ⌈kv_heads/tp⌉ heads (vLLM replicates a KV head when
        there are fewer heads than GPUs)."""
        return 2 * self.layers * -(-self.kv_heads // tp) * self.head_dim * 2


@dataclass(frozen=True)
class Hardware:
    gpu_memory_gib: float = 80.0          # an A100/H100 80 GB
    nproc: int = 1                        # ranks (one GPU each)
    strategy: str = "ddp"                 # "ddp" (replicas) or "fsdp" (sharded)
    gradient_checkpointing: bool = True   # long responses need it
    engine: bool = True                   # a colocated vLLM engine per rank / tp group
    engine_sleeps: bool = True            # the engine frees its memory during the update
    tp: int = 1                           # tensor-parallel ranks per engine
    gpu_memory_utilization: float = ENGINE_GPU_SHARE  # the engine's share of the GPU while it runs
    bf16: bool = True                     # the update's forwards in bf16 (autocast; fsdp's bf16 policy)


@dataclass(frozen=True)
class Workload:
    prompts_per_step: int
    rollouts_per_prompt: int
    micro_batch_tokens: int               # the largest micro-batch (tokens per forward/backward)
    prompt_tokens: int                    # longest prompt
    max_tokens: int                       # longest response
    mini_batches: int = 1                 # optimizer steps per rollout batch (RLConfig.mini_batches)
    generated_prompts: int | None = None  # prompts generated per step (RLConfig.generated_prompts); None:
    #                                       prompts_per_step, all of them trained

    @property
    def generation_prompts(self) -> int:
        return self.generated_prompts or self.prompts_per_step

    @property
    def sequence_tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens

    def rank_rollouts(self, nproc: int) -> int:
        """Rollouts one rank trains per optimizer step at most: ⌈⌈rollouts / mini_batches⌉ / nproc⌉."""
        return -(-(-(-self.prompts_per_step * self.rollouts_per_prompt // self.mini_batches)) // nproc)

    @property
    def micro_batch_rollouts(self) -> int:
        """Full-length rollouts in the largest micro-batch (at least one: a longer rollout runs alone)."""
        return max(1, self.micro_batch_tokens // self.sequence_tokens)


@dataclass(frozen=True)
class Plan:
    lines: list[tuple[str, float]]        # (what, GiB per GPU)
    trainer_gib: float
    engine_gib: float
    peak_gib: float
    kv_cache_gib: float
    concurrent_sequences: int             # full-length sequences the KV cache holds at once
    tokens_per_step: int
    refusal: str | None                   # why it cannot run, or None
    title: str = ""                       # the run in one line (parameters, GPUs, strategy, engine, micro-batch)
    engine: bool = True                   # a separate rollout engine is planned (else the policy generates)
    generation_gib: float = 0.0           # the trainer's resident state + the engine, while it generates
    rank_rollouts: int = 0                # rollouts one rank generates per step

    def render(self) -> str:
        rows = [self.title] if self.title else []
        rows += [f"  {what:<34} {gib:10.2f} GiB" for what, gib in self.lines]
        rows.append(f"  {'trainer peak (update)':<34} {self.trainer_gib:10.2f} GiB")
        if self.engine:
            rows += [f"  {'engine (weights + KV cache)':<34} {self.engine_gib:10.2f} GiB",
                     f"  {'generation (trainer state + engine)':<34} {self.generation_gib:10.2f} GiB",
                     f"  {'peak per GPU':<34} {self.peak_gib:10.2f} GiB",
                     f"  KV cache {self.kv_cache_gib:.2f} GiB per GPU; an engine holds {self.concurrent_sequences} "
                     f"full-length sequences at once"]
        else:
            rows += [f"  {'decode batch (KV cache + buffers)':<34} {self.kv_cache_gib:10.2f} GiB",
                     f"  {'generation (trainer state + engine)':<34} {self.generation_gib:10.2f} GiB",
                     f"  {'peak per GPU':<34} {self.peak_gib:10.2f} GiB",
                     f"  rollouts: the policy generates (transformers), {self.concurrent_sequences} of a rank's "
                     f"{self.rank_rollouts} rollouts at once"]
        rows.append(f"  tokens generated per step (upper bound): {self.tokens_per_step:,}")
        verdict = f"refused: {self.refusal}" if self.refusal else "fits"
        return "\n".join(rows + [verdict])


def plan_rl(shape: Shape, work: Workload, hw: Hardware) -> Plan:
    """The per-GPU memory plan of an RL run (formulas in the module docstring)."""
    p, block, root = shape.params, shape.block_params, shape.root_params
    sharded = hw.strategy == "fsdp" and hw.nproc > 1
    share = hw.nproc if hw.strategy == "fsdp" else 1
    half = 2 if hw.bf16 else 4  # bytes of a compute-dtype element (bf16, else fp32)
    tokens = max(work.micro_batch_tokens, work.sequence_tokens)
    kv = shape.kv_heads * shape.head_dim
    per_layer_token = 7 * shape.hidden + 2 * kv + 4 * shape.intermediate
    if hw.gradient_checkpointing:
        activations = half * tokens * (shape.layers * shape.hidden + per_layer_token)
    else:
        activations = half * tokens * shape.layers * per_layer_token
    lines = [("weights (fp32)", 4 * p / share), ("gradients (fp32)", 4 * p / share),
             ("AdamW moments (fp32)", 8 * p / share)]
    if sharded:
        lines += [(f"fsdp gathered blocks ({'bf16' if hw.bf16 else 'fp32'})", 2 * half * block),
                  (f"fsdp root gathered ({'bf16' if hw.bf16 else 'fp32'})", half * root),
                  ("fsdp root gradients in flight", (half + 4) * root)]
    from tasks.training.linear_logprobs import LOGPROB_CHUNK

    chunk = min(LOGPROB_CHUNK, work.micro_batch_rollouts * work.max_tokens)
    head_copy = 0 if sharded and hw.bf16 else 2 * shape.vocab * shape.hidden
    lines += [(f"activations ({'bf16' if hw.bf16 else 'fp32'})", activations),
              ("log-prob chunk (fp32)", 8 * chunk * shape.vocab + head_copy)]
    copy = half * p if not hw.engine and (sharded or hw.bf16) else 0
    if copy:
        lines.append((f"rollout copy of the policy ({'bf16' if hw.bf16 else 'fp32'})", copy))
    lines = [(what, b / GIB) for what, b in lines]
    trainer = sum(g for _, g in lines)
    resident = 12 * p / share / GIB  # master weights + Adam moments: what stays through generation
    gpu = hw.gpu_memory_gib
    engine_weights = 2 * p / hw.tp / GIB if hw.engine else 0.0
    kv_cache = max(0.0, hw.gpu_memory_utilization * gpu - engine_weights) if hw.engine else 0.0
    engine = engine_weights + kv_cache
    generation = resident + engine if hw.engine else 0.0
    sync = resident + engine_weights + 4 * shape.vocab * shape.hidden / GIB if hw.engine else 0.0
    peak = max(trainer, generation, sync) if hw.engine_sleeps else trainer + engine
    seq_kv = shape.kv_bytes_per_token_per_gpu(hw.tp) * work.sequence_tokens  # one sequence, one GPU's share
    concurrent = int(kv_cache * GIB // seq_kv) if hw.engine else 0
    rank_rows = -(-work.generation_prompts // hw.nproc) * work.rollouts_per_prompt  # rows one rank generates
    decode_refusal = None
    if not hw.engine:  # the transformers engine: its decode batches within its share (decode_memory.py)
        per_row = decode_bytes_per_row(layers=shape.layers, heads=shape.heads, kv_heads=shape.kv_heads,
                                       head_dim=shape.head_dim, hidden=shape.hidden,
                                       intermediate=shape.intermediate, vocab=shape.vocab,
                                       prompt_width=work.prompt_tokens, max_tokens=work.max_tokens,
                                       n=work.rollouts_per_prompt, elem_bytes=half)
        budget = engine_memory_budget(int(gpu * GIB), copy, hw.gpu_memory_utilization)
        try:
            fit = prompts_that_fit(budget, per_row, work.rollouts_per_prompt, work.max_tokens)
        except ValueError as e:
            fit, decode_refusal = 1, str(e)
        concurrent = min(rank_rows, fit * work.rollouts_per_prompt)
        kv_cache = concurrent * per_row / GIB
        engine = copy / GIB + kv_cache
        generation = resident + engine
        peak = max(trainer, generation)
    refusal = None
    if decode_refusal:
        refusal = decode_refusal
    elif peak > gpu:
        awake = [("engine", engine)] if hw.engine and (not hw.engine_sleeps or generation >= trainer) else []
        biggest = max(lines + awake, key=lambda x: x[1])  # a sleeping engine is not part of the trainer peak
        refusal = (f"needs {peak:.1f} GiB per GPU, more than {gpu:g} GiB (largest: {biggest[0]} "
                   f"{biggest[1]:.1f} GiB); try {_remedies(work, hw)}")
    elif hw.engine and concurrent < 1:
        refusal = (f"the engine's KV cache ({kv_cache:.1f} GiB per GPU) cannot hold one "
                   f"{work.sequence_tokens}-token sequence ({seq_kv / GIB:.1f} GiB per GPU); raise "
                   f"gpu_memory_utilization or tp")
    return Plan(lines=lines, trainer_gib=trainer, engine_gib=engine, peak_gib=peak, kv_cache_gib=kv_cache,
                concurrent_sequences=concurrent, rank_rollouts=rank_rows,
                tokens_per_step=work.generation_prompts * work.rollouts_per_prompt * work.sequence_tokens,
                refusal=refusal, title=_title(shape, work, hw), engine=hw.engine, generation_gib=generation)


def _remedies(work: Workload, hw: Hardware) -> str:
    """The changes that lower the peak from here: sharding (ddp), more ranks (fsdp only: ddp replicas do not
    shrink), checkpointing when off, a sleeping engine when awake, fewer rollouts per micro-batch when above
    1, and always shorter responses."""
    ways = ["--strategy fsdp"] if hw.strategy != "fsdp" else ["more GPUs"]
    if not hw.gradient_checkpointing:
        ways.append("gradient checkpointing")
    if hw.engine and not hw.engine_sleeps:
        ways.append("an engine that sleeps during the update")
    if work.micro_batch_tokens > work.sequence_tokens:
        ways.append("fewer micro-batch tokens")
    ways.append("shorter responses")
    return ", ".join(ways[:-1]) + " or " + ways[-1]


def _title(shape: Shape, work: Workload, hw: Hardware) -> str:
    engine = (f"vLLM engine per {'GPU' if hw.tp == 1 else f'{hw.tp} GPUs (tp)'} at "
              f"{hw.gpu_memory_utilization:g} of the GPU, {'sleeping' if hw.engine_sleeps else 'awake'} during "
              f"the update" if hw.engine else "the policy generates")
    n = shape.params
    size = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.2f}M"
    return (f"{size} parameters on {hw.nproc} × {hw.gpu_memory_gib:g} GiB GPUs, {hw.strategy}, "
            f"gradient checkpointing {'on' if hw.gradient_checkpointing else 'off'}; {engine}; "
            f"micro-batch ≤ {max(work.micro_batch_tokens, work.sequence_tokens):,} tokens packed; rollouts of "
            f"≤ {work.sequence_tokens:,} tokens (prompt {work.prompt_tokens:,} + response {work.max_tokens:,})")
