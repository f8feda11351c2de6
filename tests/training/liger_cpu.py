"""Liger's fused linear cross-entropy against the chunked torch kernel and the full-logits cross-entropy, on CPU
under Triton's interpreter (test_nll_kernels.py runs it in a process of its own, TRITON_INTERPRET=1 set before
Triton loads, with a folder holding liger-kernel and Triton on PYTHONPATH):

    TRITON_INTERPRET=1 PYTHONPATH=DIR python tests/training/liger_cpu.py WORK

Prints one JSON object: {"skipped": why} when liger-kernel does not import, else the largest differences of
each comparison (relative to the reference's largest value) and the loss curves of two short SFT runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks.training import nll_kernels  # noqa: E402
from tasks.training.nll_kernels import liger_import_problem, summed_logprob  # noqa: E402


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| / max |b|"""
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))


def raw(n: int, bf16: bool) -> dict:
    """Σ log π(y) and its gradients (h, W) for random h [n, 48], W [1000, 48]: liger and chunked against the
    full logits' cross-entropy (under autocast: bf16 logits, as the lm_head would give)."""
    g = torch.Generator().manual_seed(n)
    h0, w0 = torch.randn(n, 48, generator=g), torch.randn(1000, 48, generator=g) * 0.3
    y = torch.randint(0, 1000, (n,), generator=g)
    out = {}
    for name in ("full", "chunked", "liger"):
        h, w = h0.clone().requires_grad_(), w0.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if name == "full":
                value = -torch.nn.functional.cross_entropy((h @ w.t()).float(), y, reduction="sum")
            else:
                value = summed_logprob(h, w, y, name)
        (value * 0.37).backward()  # a scale ≠ 1: the kernel's backward multiplies its saved gradients by it
        out[name] = (value.detach(), h.grad, w.grad)
    ref = out["full"]
    return {name: {"value": rel(v[0], ref[0]), "grad_h": rel(v[1], ref[1]), "grad_w": rel(v[2], ref[2]),
                   "grad_w_dtype": str(v[2].dtype)}
            for name, v in out.items() if name != "full"}


def filler() -> dict:
    """No position at all: 0, and a zero gradient for W still."""
    w = torch.randn(1000, 48, requires_grad=True)
    h = torch.randn(5, 48, requires_grad=True)[:0]
    value = summed_logprob(h, w, torch.zeros(0, dtype=torch.long), "liger")
    value.backward()
    return {"value": float(value), "grad_w_zero": bool(w.grad is not None and not w.grad.any())}


def through_the_model(bf16: bool) -> dict:
    """sft_loss.summed_nll of the tiny model on packed rows, liger against chunked: value and every gradient."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tasks.models.presets import PRESETS
    from tasks.training.sft_data import IGNORE, Example, collate, pack_examples
    from tasks.training.sft_loss import summed_nll

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**PRESETS["tiny"].to_dict()))
    g = torch.Generator().manual_seed(0)
    examples = []
    for n in (9, 14, 5, 20, 11):
        ids = torch.randint(1, model.config.vocab_size, (n,), generator=g).tolist()
        examples.append(Example(ids, [IGNORE] * 3 + ids[3:]))
    t = collate(pack_examples(examples, 32, 0, seed=0, epoch=0)[0])
    runs = {}
    for kernel in ("chunked", "liger"):
        model.zero_grad()
        nll = summed_nll(model, model, t, "varlen", bf16, IGNORE, kernel)
        nll.backward()
        runs[kernel] = (nll.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    (v_c, g_c), (v_l, g_l) = runs["chunked"], runs["liger"]
    scale = max(x.abs().max() for x in g_c.values())
    return {"value": rel(v_l, v_c), "grads": float(max((g_l[n] - g_c[n]).abs().max() for n in g_c) / scale)}


def training(work: Path) -> dict:
    """Four SFT steps of the tiny model with each kernel: the loss curves, and the kernel each run records."""
    from tasks.models.factory import init_model
    from tasks.training.sft import SFTConfig, train_sft

    rows = [{"problem": f"What is {a} plus {b}?",
             "response": f"<think>\n{a} + {b} = {a + b}\n</think>\n\\boxed{{{a + b}}}"} for a in range(6) for b in range(6)]
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = init_model(work / "base", [r["problem"] + r["response"] for r in rows], seed=0)
    out = {}
    liger, calls = nll_kernels.NLL_KERNELS["liger"], []

    def counted(*args):
        calls.append(1)
        return liger(*args)

    nll_kernels.NLL_KERNELS["liger"] = counted
    for kernel in ("chunked", "liger"):
        calls.clear()
        res = train_sft(str(model), str(data), str(work / kernel), SFTConfig(
            max_steps=4, batch_size=4, micro_batch_size=2, seq_len=128, lr=3e-3, logprob_kernel=kernel))
        recorded = json.loads((work / kernel / "sft_config.json").read_text())["config"]["logprob_kernel"]
        out[kernel] = {"losses": res.losses, "recorded": recorded, "liger_calls": len(calls)}
    nll_kernels.NLL_KERNELS["liger"] = liger
    return out


def main() -> None:
    work = Path(sys.argv[1])
    why = liger_import_problem()
    if why:
        print(json.dumps({"skipped": why}))
        return
    probe = nll_kernels.liger_problem(torch.device("cpu"))  # the probe, under the interpreter
    nll_kernels.LOGPROB_CHUNK = 16  # several chunks at these sizes (liger_chunk_budget reads it)
    print(json.dumps({"probe": probe, "raw_fp32": raw(70, False), "raw_bf16": raw(70, True), "filler": filler(),
                      "model_fp32": through_the_model(False), "model_bf16": through_the_model(True),
                      "training": training(work)}))


if __name__ == "__main__":
    main()
