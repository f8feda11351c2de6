"""bench/gpu_bench: the parts that bench/gpu.sh runs, one process each (see gpu.sh's header for the what,
the formula and the budgets). Every measurement is one JSON line on stdout, also appended to
WORK/results.jsonl, written as soon as it is measured (a part killed at its time limit keeps what it had).

    python bench/gpu_bench.py setup|sft|sft_loss|rollout|rl|rl_dist|report --work DIR [--smoke] [--precision fp32|bf16]

setup     random-init model with Qwen's real vocabulary (tasks/models/qwen_tokenizer: 151,669 ids, 151,936
          embedding rows, two eos ids), saved as an HF directory (fp32, as `klear model init` saves). GPU:
          Qwen2.5-0.5B's shape (Qwen2, hidden 896, 24 layers, 14/2 heads, ffn 4864, tied embeddings,
          ~0.49B parameters, a quarter of them the embedding); smoke: the `qwen3-tiny` preset's model
          (tasks/models/presets.py). Then synthetic long-CoT SFT rows (.jsonl).
sft       tasks.training.sft.train_sft on those rows; the timed window is the steps after the warm-up
          (--compile: SFTConfig.compile, each decoder block under torch.compile; the warm-up pays it;
          --kernel: SFTConfig.logprob_kernel, auto by default: Liger's where it can run).
sft_loss  SFT's loss on one micro-batch of the setup model (micro_batch_size × seq_len tokens, bf16 autocast
          on a GPU as train_sft): forward + backward of the model with the one-shot cross-entropy over an fp32
          copy of the full logits (train_sft's form until 2026-12-04) and with tasks.training.sft_loss.summed_nll
          (label positions only, from the hidden states) by each kernel of tasks.training.nll_kernels (chunked;
          liger where it can run: a CUDA device, or Triton's interpreter on CPU), alternated in one process:
          peak memory, seconds, their ratios.
rollout   tasks.generation.vllm_backend.VLLMGenerator: n samples per prompt, temperature 1.0, then
          sync_weights(policy) timed; without vLLM (or without a GPU) the rollout engine train_rl builds for
          backend "hf" (the policy itself, tasks.generation.hf_backend) is timed instead, labelled so.
rl        tasks.training.rl_update.update_policy (advantages → behaviour log-prob pass → mini-batch GPPO optimizer
          steps) on synthetic rollouts with mixed rewards, as train_rl calls it after generation + grading
          (--layout packed: train_rl's; padded: the reference layout, one right-padded row per rollout).
profile   torch.profiler over one SFT optimizer step (sft.train_step) and one RL update (update_policy, bf16
          on a GPU) of the setup model: where the time goes, the top operators by self device time (CPU time
          without a GPU), as one JSON line each.
rl_dist   `klear rl --nproc <GPUs> --strategy fsdp --backend vllm` on the setup model for a few steps (the
          whole distributed RL step: vLLM rollouts, grading, FSDP update, weight sync), measured from the
          run's metrics.jsonl; skipped, one line saying why, without a CUDA device, an importable vLLM, or a
          `klear rl` that takes --nproc/--strategy/--backend.
report    merges WORK/results.jsonl into bench/out/gpu.json (and $OUT/gpu.json when $OUT is set).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# `python bench/gpu_bench.py` puts bench/ first on sys.path, where bench/sandbox.py would shadow the repo's
# sandbox package (reading problems imports sandbox.testcases): the repo goes first, bench/ not at all
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() not in (REPO, REPO / "bench")]

PEAK_TFLOPS = 989.0  # H200 SXM dense bf16 (vendor datasheet, = H100 SXM); KINDS.md measured ~790 on an 8k GEMM
# dense bf16 peak per GPU (vendor datasheets, without sparsity), by a substring of the device name, first match
# wins (so "H100 PCIe" before "H100", "A100" before "A10", "L40S" before "L4"); rl_dist quotes its MFU
# against the entry of its GPU, PEAK_TFLOPS when none matches
PEAK_TFLOPS_BY_GPU = [("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0),
                      ("L40S", 362.0), ("L4", 121.0), ("A10", 125.0)]

GPU = {
    "model": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096, rope_theta=1e6),
    "architecture": "qwen2",
    "sft": dict(seq_len=4096, batch_size=16, micro_batch_size=4, warmup_steps=3, timed_steps=12),
    "rollout": dict(prompts=32, n=8, max_tokens=1024, prompt_words=60, warm_prompts=8, warm_tokens=64,
                    syncs=3, gpu_memory_utilization=0.5),
    "rollout_hf": dict(prompts=16, n=8, max_tokens=512, prompt_words=60),
    "rl": dict(prompts=16, n=8, prompt_len=128, resp_min=384, resp_max=1024, micro_batch_tokens=16384,
               mini_batches=2, warmup_updates=1, timed_updates=2),
    "rl_dist": dict(steps=4, warmup_steps=1, prompts=16, n=8, max_tokens=1024, prompt_words=60,
                    mini_batches=2, micro_batch_tokens=16384),
}
SMOKE = {
    "model": "qwen3-tiny",  # a preset of tasks/models/presets.py
    "sft": dict(seq_len=128, batch_size=4, micro_batch_size=2, warmup_steps=1, timed_steps=2),
    "rollout": dict(prompts=2, n=2, max_tokens=16, prompt_words=8, warm_prompts=1, warm_tokens=4,
                    syncs=2, gpu_memory_utilization=0.5),
    "rollout_hf": dict(prompts=2, n=2, max_tokens=16, prompt_words=8),
    "rl": dict(prompts=2, n=4, prompt_len=16, resp_min=8, resp_max=32, micro_batch_tokens=96,
               mini_batches=2, warmup_updates=1, timed_updates=1),
    "rl_dist": dict(steps=2, warmup_steps=1, prompts=2, n=2, max_tokens=16, prompt_words=8,
                    mini_batches=1, micro_batch_tokens=64),
}


# ---- shared ---------------------------------------------------------------------------------------------
def settings(smoke: bool) -> dict:
    return SMOKE if smoke else GPU


def emit(work: Path, part: str, status: str = "ok", **fields) -> dict:
    row = {"bench": "gpu", "part": part, "status": status, **fields}
    line = json.dumps(row, default=str)
    print(line, flush=True)
    with (work / "results.jsonl").open("a") as f:
        f.write(line + "\n")
    return row


def device_info() -> dict:
    import torch
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
    else:
        info["device"] = "cpu"
    return info


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def model_shape(model_dir: Path) -> dict:
    """What the FLOP formula needs, read from the saved model: N = weights of every matmul (each layer's
    q,k,v,o,gate,up,down projections, biases included, plus lm_head = the tied embedding counted once),
    L layers, d_attn = heads · head_dim."""
    return json.loads((model_dir / "bench_shape.json").read_text())


def train_flops(shape: dict, seq_lens, passes: int = 3) -> float:
    """Model FLOPs of running sequences of these real lengths: 2·N per token per matmul pass plus causal
    attention 2·L·d_attn·s² per sequence per pass (QKᵀ and AV, half of the s×s square); forward + backward
    = 3 passes, a no-grad forward = 1."""
    n, layers, d = shape["matmul_params"], shape["layers"], shape["d_attn"]
    return sum(passes * (2 * n * s + 2 * layers * d * s * s) for s in seq_lens)


def mfu(flops: float, seconds: float) -> tuple[float, float]:
    tflops = flops / max(seconds, 1e-12) / 1e12
    return tflops, tflops / PEAK_TFLOPS


def peak_mem_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


# ---- setup ----------------------------------------------------------------------------------------------
def _words(rng: random.Random, k: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8))) for _ in range(k)]


def _model_config(s: dict) -> tuple[str, dict]:
    """(architecture, HF config fields) of the bench model: GPU's own shape, or the smoke preset's."""
    if isinstance(s["model"], str):
        from tasks.models.presets import PRESETS

        p = PRESETS[s["model"]]
        return p.architecture, {k: v for k, v in p.to_dict().items() if k != "tie_word_embeddings"}
    return s["architecture"], dict(s["model"])


def part_setup(work: Path, smoke: bool) -> None:
    import torch
    from transformers import GenerationConfig
    from transformers.utils import logging as hf_logging

    from tasks.models.factory import ARCHITECTURES
    from tasks.models.qwen_tokenizer import qwen_tokenizer
    from tasks.models.tokenizer import EOS, IM_END

    hf_logging.disable_progress_bar()
    s = settings(smoke)
    t0 = time.perf_counter()
    rng = random.Random(0)
    vocab_words = _words(rng, 3000)
    tok = qwen_tokenizer()
    t_tok = time.perf_counter() - t0
    model_dir = work / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    eos_ids = [tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(EOS)]
    arch, m = _model_config(s)
    # the model's vocab exceeds the tokenizer's (Qwen's padded 151,936 rows): the embedding/lm_head
    # matmul is what costs; sampled ids the tokenizer lacks decode to nothing
    m["vocab_size"] = max(m["vocab_size"], len(tok))
    config_cls, model_cls = ARCHITECTURES[arch]
    extra = {"head_dim": m["hidden_size"] // m["num_attention_heads"]} if arch == "qwen3" else {}
    config = config_cls(**m, **extra, tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos_ids,
                        pad_token_id=tok.pad_token_id, use_cache=True, dtype="float32")
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = model_cls(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_ids, pad_token_id=tok.pad_token_id,
                                               do_sample=True, temperature=1.0, top_p=1.0)
    model.save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    matmul = sum(mod.weight.numel() + (mod.bias.numel() if mod.bias is not None else 0)
                 for mod in model.modules() if isinstance(mod, torch.nn.Linear))
    shape = {"matmul_params": matmul, "params": sum(p.numel() for p in model.parameters()),
             "layers": m["num_hidden_layers"], "d_attn": m["num_attention_heads"] * (m["hidden_size"] // m["num_attention_heads"]),
             "vocab_size": m["vocab_size"], "tokenizer_vocab": len(tok), "architecture": model_cls.__name__,
             "config": m}
    (model_dir / "bench_shape.json").write_text(json.dumps(shape, indent=2))
    del model
    t_model = time.perf_counter() - t0

    rows, packs, need, truncated, fill = make_sft_data(work / "sft.jsonl", tok, s["sft"], rng, vocab_words)
    emit(work, "setup", "ok" if packs >= need else "error", model_dir=str(model_dir),
         params=shape["params"], matmul_params=matmul, architecture=model_cls.__name__, config=m,
         tokenizer_vocab=len(tok), sft_rows=rows, sft_packs=packs, sft_packs_needed=need, pack_fill=round(fill, 3),
         truncated=truncated, seconds=round(time.perf_counter() - t0, 1), tokenizer_seconds=round(t_tok, 1),
         model_seconds=round(t_model, 1), **device_info())


def make_sft_data(data: Path, tok, sft: dict, rng: random.Random, vocab_words: list[str]):
    """Synthetic long-CoT SFT rows: a short problem, a response of seq_len/20 to seq_len/3 random words (each
    a few tokens of Qwen's BPE), until train_sft's packing yields the packs the run needs.
    Returns (rows, packs, packs needed, truncated examples, fraction of pack positions that are real)."""
    from tasks.training.sft_data import load_sft_rows, pack_examples, tokenize_examples

    need = sft["batch_size"] * (sft["warmup_steps"] + sft["timed_steps"])
    rows: list[dict] = []
    packs: list = []
    truncated, tries = 0, 0
    prompt_words = max(4, min(20, sft["seq_len"] // 64))
    while len(packs) < need and tries < 6:
        tries += 1
        for _ in range(max(8, need * 5 // 2)):  # ~2.2 rows per pack at seq_len 4096: one round
            resp_words = rng.randint(sft["seq_len"] // 20, sft["seq_len"] // 3)
            rows.append({"domain": "math", "problem": " ".join(rng.choice(vocab_words) for _ in range(prompt_words)),
                         "response": " ".join(rng.choice(vocab_words) for _ in range(resp_words))})
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        examples = tokenize_examples(load_sft_rows(str(data)).rows, tok)
        packs, truncated = pack_examples(examples, sft["seq_len"], tok.pad_token_id, 0, 0)
    fill = sum(sum(1 for g in p.segments if g >= 0) for p in packs) / max(1, len(packs) * sft["seq_len"])
    return len(rows), len(packs), need, truncated, fill


# ---- SFT ------------------------------------------------------------------------------------------------
class _Done(Exception):
    """Raised from on_step after the last timed step: skips train_sft's final checkpoint + save (GBs of
    writes that are not training)."""


def part_sft(work: Path, smoke: bool, compiled: bool = False, kernel: str = "auto", attention: str = "auto") -> None:
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from tasks.training.nll_kernels import resolve_logprob_kernel
    from tasks.training.packed_attention import resolve_attention
    from tasks.training.sft import SFTConfig, train_sft
    from tasks.training.sft_data import load_sft_rows, pack_examples, tokenize_examples

    s = settings(smoke)["sft"]
    model_dir, data = work / "model", work / "sft.jsonl"
    shape = model_shape(model_dir)
    total = s["warmup_steps"] + s["timed_steps"]
    cfg = SFTConfig(epochs=1, max_steps=total, warmup_ratio=0.0, batch_size=s["batch_size"],
                    micro_batch_size=s["micro_batch_size"], seq_len=s["seq_len"], save_every=10**9, seed=0,
                    compile=compiled, logprob_kernel=kernel, attention=attention)
    part = ("sft_compiled" if compiled else "sft" if kernel == "auto" else f"sft_{kernel}") + (
        "" if attention == "auto" else f"_{attention}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = resolve_logprob_kernel(kernel, device)
    ran_attention = resolve_attention(attention, device, AutoConfig.from_pretrained(str(model_dir)))  # as train_sft
    # the same packs train_sft will build (same tokenizer, rows, seq_len, seed, epoch 0): their real lengths
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    packs, _ = pack_examples(tokenize_examples(load_sft_rows(str(data)).rows, tok), cfg.seq_len,
                             tok.pad_token_id, cfg.seed, 0)

    def seg_lens(p) -> list[int]:
        counts: dict[int, int] = {}
        for g in p.segments:
            if g >= 0:
                counts[g] = counts.get(g, 0) + 1
        return list(counts.values())

    stamps: dict[int, float] = {}
    logged: dict[int, dict] = {}

    def on_step(step: int, tot: int, values: dict) -> None:
        sync()
        stamps[step] = time.perf_counter()
        logged[step] = values
        if step >= total:
            raise _Done

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    from torch._dynamo.utils import counters

    graphs_before = counters["stats"]["unique_graphs"]
    t0 = time.perf_counter()
    try:
        train_sft(str(model_dir), str(data), str(work / f"{part}_out"), cfg, on_step=on_step)  # one run each
        stopped = False
    except _Done:
        stopped = True
    w = s["warmup_steps"]
    if total not in stamps or w not in stamps:
        emit(work, part, "error", error=f"only steps {sorted(stamps)} reached (wanted {total})")
        return
    seconds = stamps[total] - stamps[w]
    timed = range(w, total)  # 0-based batch indices of steps w+1..total
    lens = [l for b in timed for p in packs[b * cfg.batch_size:(b + 1) * cfg.batch_size] for l in seg_lens(p)]
    flops = train_flops(shape, lens)
    tflops, frac = mfu(flops, seconds)
    step_s = [stamps[i + 1] - stamps[i] for i in range(w, total)]
    bf16 = cfg.bf16 if cfg.bf16 is not None else (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    emit(work, part, "ok", entry="tasks.training.sft.train_sft", strategy=cfg.strategy, compile=cfg.compile,
         logprob_kernel=resolved, attention=ran_attention,
         precision="bf16 autocast, fp32 weights + AdamW" if bf16 else "fp32",
         seq_len=cfg.seq_len, batch_size=cfg.batch_size, micro_batch_size=cfg.micro_batch_size,
         warmup_steps=w, timed_steps=len(step_s), seconds=round(seconds, 3),
         step_s_median=round(statistics.median(step_s), 4),
         tokens_per_s=round(sum(lens) / seconds, 1),
         # the packs' slots, batch × seq_len, padding included (none of it is computed since 2026-12-06)
         pack_slots_per_s=round(len(step_s) * cfg.batch_size * cfg.seq_len / seconds, 1),
         response_tokens_per_s=round(sum(logged[i]["tokens"] for i in range(w + 1, total + 1)) / seconds, 1),
         model_tflops=round(tflops, 2), mfu=round(frac, 4), peak_tflops=PEAK_TFLOPS,
         peak_mem_gib=peak_mem_gib(), loss_first=round(logged[1]["loss"], 4), loss_last=round(logged[total]["loss"], 4),
         stopped_before_final_save=stopped, wall_s=round(time.perf_counter() - t0, 1),
         # graphs TorchDynamo compiled in this part (FlexAttention's, and the blocks' when compiled): a count
         # near the step count would mean a recompile for each micro-batch's row length
         dynamo_graphs=counters["stats"]["unique_graphs"] - graphs_before, **device_info())


def part_sft_loss(work: Path, smoke: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from tasks.config_checks import error_line
    from tasks.training.nll_kernels import liger_problem
    from tasks.training.sft_loss import summed_nll

    s = settings(smoke)["sft"]
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    model = AutoModelForCausalLM.from_pretrained(str(work / "model"), dtype=torch.float32).to(dev)
    model.config.use_cache = False
    bf16 = cuda and torch.cuda.is_bf16_supported()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (s["micro_batch_size"], s["seq_len"]), generator=g).to(dev)
    labels = ids.clone()
    labels[:, :s["seq_len"] // 8] = -100  # a prompt: not scored
    batch = {"input_ids": ids, "labels": labels, "document_ids": torch.zeros_like(ids),
             "position_ids": torch.arange(s["seq_len"], device=dev).expand_as(ids)}

    def one_shot() -> torch.Tensor:  # train_sft's form until 2026-12-04: full logits, fp32 cross-entropy
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=ids).logits
        return torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                                 labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum")

    def hidden() -> torch.Tensor:  # label positions only, from the hidden states in chunks (torch)
        return summed_nll(model, model, batch, "varlen", bf16)  # one document per row: plain causal SDPA

    def liger() -> torch.Tensor:  # the same positions through Liger's fused linear cross-entropy
        return summed_nll(model, model, batch, "varlen", bf16, kernel="liger")

    def measure(loss_fn) -> tuple[float, float | None, float]:
        model.zero_grad(set_to_none=True)
        sync()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        loss = loss_fn()
        loss.backward()
        sync()
        return time.perf_counter() - t0, peak_mem_gib(), float(loss)

    forms = {"one_shot": one_shot, "hidden": hidden}
    liger_skipped = liger_problem(dev)
    if liger_skipped is None:
        forms["liger"] = liger
    for name, fn in list(forms.items()):  # warm-up: kernels, allocator
        try:
            measure(fn)
        except Exception as e:  # noqa: BLE001 - Liger's Triton kernels may not compile with this Triton
            if name != "liger":
                raise
            del forms[name]
            liger_skipped = f"failed: {error_line(e, 300)}"
    runs: dict[str, list] = {name: [] for name in forms}
    for _ in range(3):
        for name, fn in forms.items():
            runs[name].append(measure(fn))
    sec = {n: statistics.median(r[0] for r in rs) for n, rs in runs.items()}
    mem = {n: max(r[1] for r in rs) if cuda else None for n, rs in runs.items()}
    loss = {n: rs[-1][2] for n, rs in runs.items()}
    extra = ({"seconds_liger": round(sec["liger"], 4), "peak_mem_gib_liger": mem["liger"],
              "time_ratio_liger_over_hidden": round(sec["liger"] / sec["hidden"], 3),
              "mem_ratio_liger_over_hidden": round(mem["liger"] / mem["hidden"], 3) if cuda else None,
              "loss_liger": round(loss["liger"], 3)} if "liger" in forms else {"liger_skipped": liger_skipped})
    emit(work, "sft_loss", "ok", entry="tasks.training.sft_loss.summed_nll (chunked: hidden; liger) vs one-shot "
         "cross_entropy (forward + backward of the model included)", **extra,
         precision="bf16 autocast, fp32 weights" if bf16 else "fp32", micro_batch_size=s["micro_batch_size"],
         seq_len=s["seq_len"], vocab=model.config.vocab_size,
         seconds_one_shot=round(sec["one_shot"], 4), seconds_hidden=round(sec["hidden"], 4),
         time_ratio_hidden_over_one_shot=round(sec["hidden"] / sec["one_shot"], 3),
         peak_mem_gib_one_shot=mem["one_shot"], peak_mem_gib_hidden=mem["hidden"],
         mem_ratio_hidden_over_one_shot=round(mem["hidden"] / mem["one_shot"], 3) if cuda else None,
         loss_one_shot=round(loss["one_shot"], 3), loss_hidden=round(loss["hidden"], 3), **device_info())


# ---- rollout --------------------------------------------------------------------------------------------
def _prompts(tok, k: int, words: int, seed: int) -> list[str]:
    from tasks.generation.base import chat_prompt

    rng = random.Random(seed)
    vocab = _words(random.Random(0), 3000)  # the tokenizer's training words
    return [chat_prompt(tok, " ".join(rng.choice(vocab) for _ in range(words))) for _ in range(k)]


def _vllm_ok() -> tuple[bool, str]:
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not importable in this Python"
    if not torch.cuda.is_available() and os.environ.get("KLEAR_GPU_BENCH_VLLM_CPU") != "1":
        return False, "no CUDA device (set KLEAR_GPU_BENCH_VLLM_CPU=1 to run vLLM's CPU build anyway)"
    return True, ""


def part_rollout(work: Path, smoke: bool) -> None:
    ok, why = _vllm_ok()
    if ok:
        _rollout_vllm(work, smoke)
    else:
        emit(work, "vllm_rollout", "skipped", reason=why)
        emit(work, "vllm_weight_sync", "skipped", reason=why)
        _rollout_hf(work, smoke, why)


def _count(comps) -> tuple[int, int, int]:
    seqs = sum(len(cs) for cs in comps)
    toks = sum(len(c.token_ids) for cs in comps for c in cs)
    stopped = sum(c.finish_reason == "stop" for cs in comps for c in cs)
    return seqs, toks, stopped


def _rollout_vllm(work: Path, smoke: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from tasks.generation.base import SamplingParams
    from tasks.generation.vllm_backend import VLLMGenerator

    s = settings(smoke)["rollout"]
    model_dir = work / "model"
    t0 = time.perf_counter()
    kw = {"gpu_memory_utilization": s["gpu_memory_utilization"]} if torch.cuda.is_available() else {}
    gen = VLLMGenerator(str(model_dir), seed=0, **kw)
    t_start = time.perf_counter() - t0
    try:
        tok = gen.tok
        warm = _prompts(tok, s["warm_prompts"], s["prompt_words"], 1)
        gen.generate(warm, SamplingParams(n=s["n"], temperature=1.0, top_p=1.0, max_tokens=s["warm_tokens"], seed=1))
        prompts = _prompts(tok, s["prompts"], s["prompt_words"], 2)
        prompt_toks = sum(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
        t1 = time.perf_counter()
        comps = gen.generate(prompts, SamplingParams(n=s["n"], temperature=1.0, top_p=1.0,
                                                     max_tokens=s["max_tokens"], seed=2))
        dt = time.perf_counter() - t1
        seqs, toks, stopped = _count(comps)
        emit(work, "vllm_rollout", "ok", entry="tasks.generation.vllm_backend.VLLMGenerator.generate",
             prompts=len(prompts), n=s["n"], temperature=1.0, top_p=1.0, max_tokens=s["max_tokens"],
             sequences=seqs, generated_tokens=toks, stopped_on_eos=stopped, prompt_tokens=prompt_toks,
             seconds=round(dt, 3), tokens_per_s=round(toks / dt, 1), engine_start_s=round(t_start, 1),
             dtype=str(gen.dtype), in_process=gen.in_process, enforce_eager=not torch.cuda.is_available(),
             gpu_memory_utilization=kw.get("gpu_memory_utilization"), **device_info())

        # weight sync: the RL trainer's policy (fp32, on the trainer's device) pushed in place, as after
        # every optimizer step; the first push is a warm-up
        device = "cuda" if torch.cuda.is_available() else "cpu"
        policy = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(device)
        with torch.no_grad():
            for p in policy.parameters():
                p.mul_(1.0001)  # a moved policy, so the push really changes the engine's weights
        times = []
        for i in range(s["syncs"] + 1):
            sync()
            t = time.perf_counter()
            gen.sync_weights(policy)
            sync()
            if i:
                times.append(time.perf_counter() - t)
        # the engine still generates after the pushes
        after = gen.generate(prompts[:2], SamplingParams(n=2, temperature=1.0, top_p=1.0, max_tokens=8, seed=3))
        nbytes = sum(p.numel() for p in policy.state_dict().values()) * torch.empty((), dtype=gen.dtype).element_size()
        emit(work, "vllm_weight_sync", "ok", entry="tasks.generation.vllm_backend.VLLMGenerator.sync_weights",
             syncs=len(times), seconds_median=round(statistics.median(times), 4), seconds_max=round(max(times), 4),
             seconds_all=[round(t, 4) for t in times], bytes_pushed=nbytes,
             gb_per_s=round(nbytes / statistics.median(times) / 1e9, 2),
             path="in-process reload_weights" if gen.in_process else "safetensors blob to the engine process",
             generates_after_sync=_count(after)[0] > 0, **device_info())
    finally:
        gen.close()


def _rollout_hf(work: Path, smoke: bool, why: str) -> None:
    """The engine train_rl uses with backend "hf" (tasks.training.rl_engine.make_rollout_engine): on a GPU a
    bf16 copy of the policy, a whole step's rows in one batch, fixed-shape decode steps replayed as CUDA
    graphs (tasks/generation/static_decode.py). The same prompts and seed are then decoded with the dynamic
    steps (growing cache, eviction, no graphs; the engine before static steps) in the same process, for the
    ratio and the share of completions that came out the same (rounding of the longer masked attention sum
    can flip a bf16 sample)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.generation.base import SamplingParams

    s = settings(smoke)["rollout_hf"]
    model_dir = work / "model"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(device)
    model.config.use_cache = True
    model.eval()
    from tasks.training.rl_engine import make_rollout_engine, rollout_batch_rows

    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()  # train_rl's default update precision
    dtype = torch.bfloat16 if bf16 else torch.float32
    gen = make_rollout_engine(model, tok, str(model_dir), "hf", rollout_batch_rows(torch.device(device), s["prompts"],
                                                                                   s["n"]), sharded=False, dtype=dtype)
    entry = "tasks.training.rl_engine.make_rollout_engine (hf)"
    warm = _prompts(tok, 2, s["prompt_words"], 1)
    prompts = _prompts(tok, s["prompts"], s["prompt_words"], 2)
    params = SamplingParams(n=s["n"], temperature=1.0, top_p=1.0, max_tokens=s["max_tokens"], seed=2)
    runs, peaks = {}, {}
    for steps in ("static", "dynamic"):  # static: the engine's default on a GPU ("auto"); forced on CPU
        gen.decode = steps
        gen.generate(warm, SamplingParams(n=2, temperature=1.0, top_p=1.0, max_tokens=8, seed=1))
        sync()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        t1 = time.perf_counter()
        comps = gen.generate(prompts, params)
        sync()
        runs[steps] = (comps, time.perf_counter() - t1, gen.last_decode)
        if torch.cuda.is_available():
            peaks[steps] = round((torch.cuda.max_memory_allocated() - before) / 2**30, 3)
    # the decode memory the engine plans for this call (tasks/generation/decode_memory.py) beside the peak
    from tasks.generation.decode_memory import model_bytes_per_row

    longest = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
    elem = next(gen.model.parameters()).element_size()
    planned = round(len(prompts) * s["n"] * model_bytes_per_row(gen.model.config, longest, s["max_tokens"], s["n"],
                                                                 elem) / 2**30, 3)
    # graph replay against the same static steps run eagerly: a short call, the same tokens expected
    short = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=min(64, s["max_tokens"]), seed=4)
    gen.decode = "static"
    replayed = gen.generate(prompts[:4], short)
    graphs_on, gen.cuda_graphs = gen.cuda_graphs, False  # off for good after a failed capture (hf_backend)
    eager = gen.generate(prompts[:4], short)
    gen.cuda_graphs = graphs_on
    graphs_equal_eager = [c.token_ids for cs in replayed for c in cs] == [c.token_ids for cs in eager for c in cs]
    t2 = time.perf_counter()
    gen.sync_weights(model)
    sync()
    sync_s = time.perf_counter() - t2
    comps, dt, report = runs["static"]
    d_comps, d_dt, _ = runs["dynamic"]
    seqs, toks, stopped = _count(comps)
    same = sum(a.token_ids == b.token_ids for ca, cb in zip(comps, d_comps) for a, b in zip(ca, cb))
    d_toks = _count(d_comps)[1]
    emit(work, "hf_rollout", "ok", entry=entry, note=f"instead of vLLM: {why}",
         precision="bf16 inference copy (as train_rl with a bf16 update)" if bf16 else "fp32: the policy itself",
         decode_steps=report.steps, cuda_graphs=report.graphs_captured, graph_error=report.graph_error,
         row_counts=list(report.row_counts),
         prompts=len(prompts), n=s["n"], temperature=1.0, top_p=1.0, max_tokens=s["max_tokens"],
         sequences=seqs, generated_tokens=toks, stopped_on_eos=stopped, seconds=round(dt, 3),
         tokens_per_s=round(toks / dt, 1), weight_sync_s=round(sync_s, 4),
         dynamic_steps_tokens_per_s=round(d_toks / d_dt, 1), dynamic_steps_seconds=round(d_dt, 3),
         speedup_vs_dynamic=round((toks / dt) / (d_toks / d_dt), 2),
         same_completions_as_dynamic=f"{same}/{seqs}", graphs_equal_eager_steps=graphs_equal_eager,
         decode_planned_gib=planned, decode_peak_gib=peaks.get("static"), dynamic_decode_peak_gib=peaks.get("dynamic"),
         peak_over_planned=round(peaks["static"] / planned, 3) if peaks else None,
         memory_budget_gib=round(gen.memory_budget_bytes / 2**30, 2) if gen.memory_budget_bytes else None,
         **device_info())


# ---- RL update ------------------------------------------------------------------------------------------
def part_rl(work: Path, smoke: bool, precision: str, layout: str = "packed", attention: str = "auto") -> None:
    import inspect

    import torch
    from transformers import AutoModelForCausalLM

    from tasks.training import rl
    from tasks.training.optim import fused_adamw
    from tasks.training.rl_update import gradient_checkpointing, update_attention, update_policy
    from tasks.training.schedule import warmup_constant

    s = settings(smoke)["rl"]
    part = (f"rl_update_{precision}" + ("" if layout == "packed" else f"_{layout}")
            + ("" if attention == "auto" else f"_{attention}"))
    model_dir = work / "model"
    shape = model_shape(model_dir)
    params = list(inspect.signature(update_policy).parameters)
    if params[:7] != ["model", "opt", "sched", "rollouts", "cfg", "device", "step"]:
        emit(work, part, "error", error=f"tasks.training.rl_update.update_policy signature changed: {params}")
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(device)
    model.config.use_cache = True
    # backend "vllm": the GPU case, where π_old of the later mini-batches is recomputed by a no-grad pass
    cfg = rl.RLConfig(prompts_per_step=s["prompts"], rollouts_per_prompt=s["n"], mini_batches=s["mini_batches"],
                      micro_batch_tokens=s["micro_batch_tokens"], backend="vllm", warmup_steps=1,
                      bf16=precision == "bf16", packing=layout == "packed", attention=attention)
    checkpointing = gradient_checkpointing(cfg, device)  # as train_rl: on with a GPU
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lr = cfg.lr or rl.default_rl_lr(model.config.hidden_size)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=cfg.weight_decay,
                            **fused_adamw(device))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: warmup_constant(k, cfg.warmup_steps))
    vocab = shape["tokenizer_vocab"]

    def rollouts(step: int) -> list:
        rng = random.Random(1000 + step)
        out = []
        for g in range(s["prompts"]):
            p_ids = [rng.randrange(10, vocab) for _ in range(s["prompt_len"])]
            rewards = [1.0, 0.0] * (s["n"] // 2) + [0.0] * (s["n"] % 2)  # mixed: no zero-variance group
            rng.shuffle(rewards)
            for r in rewards:
                resp = [rng.randrange(10, vocab) for _ in range(rng.randint(s["resp_min"], s["resp_max"]))]
                out.append(rl.Rollout(g, "math", p_ids, resp, r, r > 0, False))
        return out

    def update_flops(rs: list, step: int) -> float:
        # _update shuffles with Random(seed·31 + step) (a permutation that depends only on the length),
        # trains mini-batches of ⌈n/mini⌉; every mini-batch but the first gets a no-grad π_old pass first
        order = list(range(len(rs)))
        random.Random(cfg.seed * 31 + step).shuffle(order)
        size = -(-len(rs) // cfg.mini_batches)
        lens = [len(rs[i].prompt_ids) + len(rs[i].response_ids) for i in order]
        return train_flops(shape, lens) + train_flops(shape, lens[size:], passes=1)

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    times, flops, toks, metrics = [], 0.0, 0, {}
    total = s["warmup_updates"] + s["timed_updates"]
    for step in range(total):
        rs = rollouts(step)
        sync()
        t = time.perf_counter()
        metrics = update_policy(model, opt, sched, rs, cfg, device, step)
        sync()
        if step >= s["warmup_updates"]:
            times.append(time.perf_counter() - t)
            flops += update_flops(rs, step)
            toks += sum(len(r.prompt_ids) + len(r.response_ids) for r in rs)
    seconds = sum(times)
    tflops, frac = mfu(flops, seconds)
    emit(work, part, "ok", entry="tasks.training.rl_update.update_policy", loss=cfg.loss,
         precision=("fp32 (RLConfig.bf16=False)" if precision == "fp32"
                    else "bf16 autocast, fp32 weights + AdamW (RLConfig.bf16=True, train_rl's GPU default)"),
         layout=("packed rows, " + update_attention(cfg, device) + " attention" if layout == "packed"
                 else "padded rows (reference)"),
         gradient_checkpointing=checkpointing,
         rollouts=s["prompts"] * s["n"], mini_batches=cfg.mini_batches, micro_batch_tokens=cfg.micro_batch_tokens,
         prompt_len=s["prompt_len"], response_len=[s["resp_min"], s["resp_max"]],
         warmup_updates=s["warmup_updates"], timed_updates=len(times),
         update_s_median=round(statistics.median(times), 4), tokens_per_s=round(toks / seconds, 1),
         model_tflops=round(tflops, 2), mfu=round(frac, 4), peak_tflops=PEAK_TFLOPS,
         tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32), peak_mem_gib=peak_mem_gib(),
         **planned_peak(model_dir, cfg, s, peak_mem_gib()),
         trained_rollouts=metrics.get("trained_rollouts"), grad_norm=metrics.get("grad_norm"),
         **device_info())


def planned_peak(model_dir: Path, cfg, s: dict, measured: float | None) -> dict:
    """What `klear rl --dry-run` plans for this update's trainer (one GPU, no engine: the bench loads none;
    responses up to resp_max, prompts of prompt_len), and measured / planned (the target: within 15 %)."""
    from dataclasses import replace

    from tasks.training.dry_run import dry_run
    from tasks.training.plan import Hardware

    plan = dry_run(str(model_dir), replace(cfg, backend="hf", max_tokens=s["resp_max"]), Hardware(nproc=1),
                   prompt_tokens=s["prompt_len"])
    return {"planned_peak_gib": round(plan.trainer_gib, 2),
            "peak_over_plan": round(measured / plan.trainer_gib, 3) if measured else None}


# ---- profile --------------------------------------------------------------------------------------------
PROFILE_TOP = 15  # operators listed per profile


def _top_ops(prof, cuda: bool) -> list[dict]:
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, key, 0) > 0]
    total = sum(getattr(e, key) for e in events) or 1.0
    events.sort(key=lambda e: -getattr(e, key))
    return [{"op": e.key[:80], "ms": round(getattr(e, key) / 1e3, 2), "share": round(getattr(e, key) / total, 4),
             "calls": e.count} for e in events[:PROFILE_TOP]]


def part_profile(work: Path, smoke: bool) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoModelForCausalLM

    from tasks.training import rl
    from tasks.training.config import SFTConfig
    from tasks.training.distributed import DistContext
    from tasks.training.packed_attention import attn_implementation, resolve_attention
    from tasks.training.rl_update import gradient_checkpointing, update_policy
    from tasks.training.sft import train_step
    from tasks.training.sft_data import Pack

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    bf16 = cuda and torch.cuda.is_bf16_supported()
    shape = model_shape(work / "model")
    rng = random.Random(0)
    vocab = shape["tokenizer_vocab"]

    # one SFT step: batch_size packs of seq_len tokens, documents of ~1/8 the length
    s = settings(smoke)["sft"]
    cfg = SFTConfig(batch_size=s["batch_size"], micro_batch_size=s["micro_batch_size"], seq_len=s["seq_len"],
                    attention=resolve_attention("auto", dev))
    model = AutoModelForCausalLM.from_pretrained(str(work / "model"), dtype=torch.float32,
                                                 attn_implementation=attn_implementation(cfg.attention)).to(dev)
    model.config.use_cache = False
    packs = []
    for _ in range(cfg.batch_size):
        doc = s["seq_len"] // 8
        ids = [rng.randrange(10, vocab) for _ in range(s["seq_len"])]
        segs = [i // doc for i in range(s["seq_len"])]
        labels = [t if i % doc >= doc // 4 else -100 for i, t in enumerate(ids)]
        packs.append(Pack(ids, labels, [i % doc for i in range(s["seq_len"])], segs))
    ctx = DistContext(0, 1, dev)
    for _ in range(2):  # warm-up
        train_step(model, packs, cfg, ctx, bf16)
        model.zero_grad(set_to_none=True)
    sync()
    with profile(activities=activities) as prof:
        train_step(model, packs, cfg, ctx, bf16)
        sync()
    emit(work, "profile_sft", "ok", entry="tasks.training.sft.train_step (forward + backward of one optimizer step)",
         attention=cfg.attention, precision="bf16 autocast" if bf16 else "fp32",
         top_ops=_top_ops(prof, cuda), **device_info())
    del model

    # one RL update: the rl part's rollouts and settings, train_rl's layout and checkpointing
    r = settings(smoke)["rl"]
    model = AutoModelForCausalLM.from_pretrained(str(work / "model"), dtype=torch.float32).to(dev)
    rcfg = rl.RLConfig(prompts_per_step=r["prompts"], rollouts_per_prompt=r["n"], mini_batches=r["mini_batches"],
                       micro_batch_tokens=r["micro_batch_tokens"], backend="vllm", warmup_steps=1, bf16=bf16)
    if gradient_checkpointing(rcfg, dev):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0)
    rollouts = []
    for g in range(r["prompts"]):
        p_ids = [rng.randrange(10, vocab) for _ in range(r["prompt_len"])]
        for k in range(r["n"]):
            resp = [rng.randrange(10, vocab) for _ in range(rng.randint(r["resp_min"], r["resp_max"]))]
            rollouts.append(rl.Rollout(g, "math", p_ids, resp, float(k % 2), k % 2 == 1, False))
    update_policy(model, opt, sched, rollouts, rcfg, dev, 0)  # warm-up
    sync()
    with profile(activities=activities) as prof:
        update_policy(model, opt, sched, rollouts, rcfg, dev, 1)
        sync()
    emit(work, "profile_rl", "ok", entry="tasks.training.rl_update.update_policy (π_old pass, mini-batches, "
         "optimizer steps)", precision="bf16 autocast" if bf16 else "fp32", top_ops=_top_ops(prof, cuda),
         **device_info())


# ---- distributed RL step --------------------------------------------------------------------------------
def gpu_peak_tflops(name: str) -> float:
    return next((peak for key, peak in PEAK_TFLOPS_BY_GPU if key in name), PEAK_TFLOPS)


def _rl_dist_ok() -> tuple[bool, str]:
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA device (the distributed RL step needs GPUs for FSDP and vLLM)"
    if importlib.util.find_spec("vllm") is None:
        return False, "vllm is not importable in this Python"
    try:
        import typer

        from flows.cli import app
        params = {p.name for p in typer.main.get_command(app).commands["rl"].params}
    except Exception as e:  # noqa: BLE001 - any reason the CLI cannot load here is a skip, said in one line
        return False, f"klear's CLI does not load here ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    missing = [f"--{n}" for n in ("nproc", "strategy", "backend", "tensor_parallel") if n not in params]
    return (False, f"klear rl has no {', '.join(missing)} in this checkout") if missing else (True, "")


def rl_dist_summary(rows: list[dict], rollouts: int, prompt_tokens: float, params: int, nproc: int,
                    peak_tflops: float, warmup_steps: int) -> dict:
    """What one distributed RL step costs, from metrics.jsonl rows (the first `warmup_steps` steps left
    out: engine start, CUDA graphs, allocator growth):
        generated tokens  = response_len (the mean over the step's rollouts) × rollouts per step
        generation tok/s  = Σ generated tokens / Σ t_generate_s
        weight sync       = t_sync_s (median, max)
        update seconds    = t_update_s when logged, else t_step_s − t_generate_s − t_sync_s (grading and
                            rollout assembly included: an upper bound, so MFU is then a lower bound)
        update MFU        = 6·P·(prompt_tokens + response_len)·rollouts / (update seconds · nproc · peak)
    P = matmul weights (bench_shape.json); 6·P per token is forward + backward; the π_old pass, attention
    and the engine's generation are not counted."""
    timed = rows[warmup_steps:]
    gen_tokens = sum(r["response_len"] * rollouts for r in timed)
    t_gen = sum(r["t_generate_s"] for r in timed)
    syncs = [r["t_sync_s"] for r in timed if "t_sync_s" in r]
    if all("t_update_s" in r for r in timed):
        updates, how = [r["t_update_s"] for r in timed], "t_update_s"
    else:
        updates = [r["t_step_s"] - r["t_generate_s"] - r.get("t_sync_s", 0.0) for r in timed]
        how = "t_step_s - t_generate_s - t_sync_s (includes grading; MFU is a lower bound)"
    flops = sum(6 * params * (prompt_tokens + r["response_len"]) * rollouts for r in timed)
    t_update = sum(updates)
    tflops = flops / max(t_update, 1e-12) / 1e12
    return dict(timed_steps=len(timed), generated_tokens=round(gen_tokens),
                generation_s=round(t_gen, 3), generation_tokens_per_s=round(gen_tokens / max(t_gen, 1e-12), 1),
                weight_sync_s_median=round(statistics.median(syncs), 4) if syncs else None,
                weight_sync_s_max=round(max(syncs), 4) if syncs else None,
                weight_sync_note=None if syncs else "t_sync_s is not in this checkout's metrics",
                update_s_median=round(statistics.median(updates), 3), update_seconds_from=how,
                update_model_tflops=round(tflops, 2), update_mfu=round(tflops / (nproc * peak_tflops), 4),
                peak_tflops_per_gpu=peak_tflops,
                step_s_median=round(statistics.median(r["t_step_s"] for r in timed), 3),
                response_len_mean=round(statistics.mean(r["response_len"] for r in timed), 1))


def part_rl_dist(work: Path, smoke: bool) -> None:
    import subprocess

    import torch
    from transformers import AutoTokenizer

    from tasks.generation.base import chat_prompt

    ok, why = _rl_dist_ok()
    if not ok:
        emit(work, "rl_dist", "skipped", reason=why)
        return
    s = settings(smoke)["rl_dist"]
    model_dir, data, out, log = work / "model", work / "rl_dist.jsonl", work / "rl_dist_out", work / "rl_dist.log"
    nproc = torch.cuda.device_count()
    tp = int(os.environ.get("KLEAR_BENCH_TP", "1"))  # GPUs per vLLM engine (klear rl --tensor-parallel)
    if tp < 1 or nproc % tp:
        emit(work, "rl_dist", "skipped", reason=f"KLEAR_BENCH_TP={tp} does not divide the {nproc} GPUs")
        return
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rng, vocab = random.Random(7), _words(random.Random(0), 3000)  # the tokenizer's training words
    rows = [{"domain": "math", "problem": " ".join(rng.choice(vocab) for _ in range(s["prompt_words"])),
             "answer": str(rng.randint(0, 99))} for _ in range(s["prompts"] * s["steps"])]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompt_tokens = statistics.mean(len(tok(chat_prompt(tok, r["problem"]), add_special_tokens=False)["input_ids"])
                                    for r in rows)
    # a random model rarely answers right: without the zero-variance filter every rollout is trained, so
    # the update does the work of a real step whatever the rewards
    cmd = [sys.executable, "-m", "flows.cli", "rl", "--model", str(model_dir), "--data", str(data), "--out", str(out),
           "--nproc", str(nproc), "--strategy", "fsdp", "--backend", "vllm", "--tensor-parallel", str(tp),
           "--steps", str(s["steps"]),
           "--prompts-per-step", str(s["prompts"]), "--rollouts-per-prompt", str(s["n"]),
           "--mini-batches", str(s["mini_batches"]), "--micro-batch-tokens", str(s["micro_batch_tokens"]),
           "--max-tokens", str(s["max_tokens"]), "--temperature", "1.0", "--no-filter-zero-variance",
           "--save-every", str(s["steps"]), "--force"]
    env = {**os.environ, "KLEAR_STORE": str(work / "store"), "PREFECT_HOME": str(work / "prefect")}
    t0 = time.perf_counter()
    with log.open("w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO).returncode
    wall = time.perf_counter() - t0
    metrics = out / "metrics.jsonl"
    steps = [json.loads(l) for l in metrics.read_text().splitlines() if l.strip()] if metrics.exists() else []
    if rc != 0 or len(steps) <= s["warmup_steps"]:
        tail = " ".join(log.read_text().splitlines()[-3:])[:400] if log.exists() else ""
        emit(work, "rl_dist", "error", error=f"klear rl exit {rc}, {len(steps)} steps logged: {tail}",
             command=" ".join(cmd), wall_s=round(wall, 1))
        return
    name = torch.cuda.get_device_name(0)
    shape = model_shape(model_dir)
    emit(work, "rl_dist", "ok", entry="klear rl --strategy fsdp --backend vllm", nproc=nproc, tensor_parallel=tp,
         steps=len(steps), prompts_per_step=s["prompts"], n=s["n"], max_tokens=s["max_tokens"],
         mini_batches=s["mini_batches"], micro_batch_tokens=s["micro_batch_tokens"],
         prompt_tokens_mean=round(prompt_tokens, 1),
         **rl_dist_summary(steps, s["prompts"] * s["n"], prompt_tokens, shape["matmul_params"], nproc,
                           gpu_peak_tflops(name), s["warmup_steps"]),
         wall_s=round(wall, 1), **device_info())


# ---- report ---------------------------------------------------------------------------------------------
def part_report(work: Path, smoke: bool, out_json: Path, started: float | None) -> None:
    path = work / "results.jsonl"
    results = [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []
    meta = {"smoke": smoke, "host": platform.node(), "python": platform.python_version(),
            "peak_tflops": PEAK_TFLOPS, "settings": settings(smoke),
            "mfu_formula": "MFU = sum_seq(6*N*s + 6*L*d_attn*s^2) / seconds / 989e12 (forward+backward; "
                           "a no-grad forward counts a third of that)",
            "total_s": round(time.time() - started, 1) if started else None}
    try:
        meta.update(device_info())
    except Exception as e:  # noqa: BLE001 - the report must still be written
        meta["device_error"] = repr(e)
    doc = {"meta": meta, "results": results}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "gpu.json").write_text(out_json.read_text())
    bad = [r["part"] for r in results if r.get("status") not in ("ok", "skipped")]
    print(f"wrote {out_json}: {len(results)} measurements" + (f"; not ok: {', '.join(bad)}" if bad else ""),
          file=sys.stderr)


def main() -> None:
    from tasks.training.config import ATTENTIONS, LOGPROB_KERNELS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["setup", "sft", "sft_loss", "rollout", "rl", "profile", "rl_dist", "report"])
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--layout", choices=["packed", "padded"], default="packed")
    ap.add_argument("--compile", action="store_true", help="sft: torch.compile each decoder block")
    ap.add_argument("--kernel", choices=LOGPROB_KERNELS, default="auto",
                    help="sft: SFTConfig.logprob_kernel")
    ap.add_argument("--out-json", type=Path, default=REPO / "bench" / "out" / "gpu.json")
    ap.add_argument("--started", type=float, default=None)
    ap.add_argument("--attention", choices=ATTENTIONS, default="auto",
                    help="sft, rl: the packed attention kernel (auto: flex on a GPU)")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.part == "setup":
        part_setup(a.work, a.smoke)
    elif a.part == "sft":
        part_sft(a.work, a.smoke, a.compile, a.kernel, a.attention)
    elif a.part == "sft_loss":
        part_sft_loss(a.work, a.smoke)
    elif a.part == "rollout":
        part_rollout(a.work, a.smoke)
    elif a.part == "rl":
        part_rl(a.work, a.smoke, a.precision, a.layout, a.attention)
    elif a.part == "profile":
        part_profile(a.work, a.smoke)
    elif a.part == "rl_dist":
        part_rl_dist(a.work, a.smoke)
    else:
        part_report(a.work, a.smoke, a.out_json, a.started)


if __name__ == "__main__":
    main()
