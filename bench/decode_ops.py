"""bench/decode_ops: how many operators one decode step of the transformers engine runs — on a GPU each
compute operator is a kernel launch behind Python, which is what the static steps' CUDA graphs replace with
one launch (tasks/generation/static_decode.py). Counted on CPU with torch.profiler; widths do not change the
count, so the model is Qwen2.5-0.5B's layout (24 layers, 14 heads / 2 KV heads, Qwen2 biases) at tiny widths.

    python bench/decode_ops.py [--layers 24] [--rows 8]

A step's count = (operators of a call generating 9 tokens − those of a call generating 1) / 8: the prefill
and the per-call setup cancel. Both decode modes (`decode="static"`, the GPU default, and "dynamic") are
counted, with the sampling around each step. Reported: every aten operator called directly from Python
(`top_level`), and those of them that compute (not views, reshapes or no-op dtype casts: `compute`).
Writes bench/out/decode_ops.json.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

NOT_COMPUTE = {"aten::view", "aten::slice", "aten::transpose", "aten::reshape", "aten::unsqueeze", "aten::expand",
               "aten::select", "aten::as_strided", "aten::t", "aten::_unsafe_view", "aten::detach", "aten::alias",
               "aten::squeeze", "aten::lift_fresh", "aten::empty", "aten::empty_like", "aten::empty_strided",
               "aten::resolve_conj", "aten::resolve_neg", "aten::_reshape_alias", "aten::result_type",
               "aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::split", "aten::chunk",
               "aten::unbind", "aten::permute", "aten::narrow", "aten::contiguous"}


def count(gen, prompt: str, tokens: int, decode: str) -> tuple[int, int]:
    """(top-level aten operators, those that compute) of one generate call of `tokens` greedy tokens."""
    from torch.profiler import ProfilerActivity, profile

    from tasks.generation.base import SamplingParams

    gen.decode = decode
    params = SamplingParams(n=gen.batch_size, temperature=0.0, max_tokens=tokens)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        gen.generate([prompt], params)
    top = [e for e in prof.events() if e.name.startswith("aten::")
           and not (e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::"))]
    compute = []
    for e in top:
        if e.name in NOT_COMPUTE:
            continue
        if e.name == "aten::to" and not any(c.name.startswith("aten::") for c in e.cpu_children):
            continue  # a cast to the dtype it already has: returns itself, no kernel
        compute.append(e)
    return len(top), len(compute)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--rows", type=int, default=8)
    args = ap.parse_args()
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.generation.hf_backend import HFGenerator
    from tasks.models.qwen_tokenizer import QWEN3_VOCAB_ROWS, qwen_tokenizer

    torch.manual_seed(0)
    tok = qwen_tokenizer()
    cfg = Qwen2Config(hidden_size=112, intermediate_size=64, num_hidden_layers=args.layers, num_attention_heads=14,
                      num_key_value_heads=2, vocab_size=QWEN3_VOCAB_ROWS, max_position_embeddings=512,
                      attn_implementation="sdpa")
    model = Qwen2ForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = None  # every row runs to max_tokens
    gen = HFGenerator(model, tok, batch_size=args.rows, eos_check_every=1)
    prompt = "What is 12 plus 30? Think step by step."
    out = {"layers": args.layers, "rows": args.rows, "torch": torch.__version__}
    for decode in ("static", "dynamic"):
        count(gen, prompt, 2, decode)  # warm-up
        one, nine = count(gen, prompt, 1, decode), count(gen, prompt, 9, decode)
        out[decode] = {"top_level": (nine[0] - one[0]) / 8, "compute": (nine[1] - one[1]) / 8}
        out[decode]["compute_per_layer"] = round(out[decode]["compute"] / args.layers, 1)
    print(json.dumps(out))
    Path("bench/out").mkdir(parents=True, exist_ok=True)
    Path("bench/out/decode_ops.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
