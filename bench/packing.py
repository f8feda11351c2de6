"""bench/packing: packed SFT attention without an L×L mask — peak memory and throughput of one training
forward+backward over one packed sequence of L tokens, per attention path (tasks/training/sft.py `attention`).

    python bench/packing.py [--model DIR] [--lengths 4096,8192,16384] [--paths dense,varlen,flex] [--repeats 3]
                            [--threads 1]

Paths:
  dense   the reference: the [1, 1, L, L] boolean block-diagonal causal mask (sft_data.dense_attention_mask,
          made by packed_attention.attention_inputs) through transformers' SDPA;
  varlen  causal SDPA per document span (no mask at all): the CPU default (`auto`);
  flex    FlexAttention with the tile-level document BlockMask: the GPU default. CUDA only — torch 2.13's
          FlexAttention has no backward on CPU — so it is skipped on a CPU machine.
Without --model it builds the tiny preset (`klear model init --preset tiny`).

Data: the bundled demo's math_chain rows with a response (its planted hazard rows skipped), tokenised as
SFT examples (chat prompt + response, ~130 tokens each), packed into sequences of L tokens
(sft_data.pack_examples); the fullest pack is the measured sequence (≥ 99% real tokens, ~L/130 documents).

Each (path, L) runs in its own child process with `--threads` torch threads: load the model, pack, then one
training micro-batch through sft.train_step (collate, the path's attention inputs, forward, token-sum NLL,
backward) once as warm-up and `--repeats` times measured, gradients cleared between. Peak RSS = the child's
ru_maxrss (the whole process: interpreter, torch, model, data); `base` is its RSS before the first step, so
peak − base is what the step added (the mask, activations, attention workspace). tokens/s = the sequence's
real tokens / the median measured step. Ratios are against dense at the same L, measured in the same run;
children run dense, varlen, … per L in turn. Writes bench/out/packing.json.

Measured (2026-12-01, tiny preset: 2 layers, 4 heads, hidden 128, vocab 512; fp32; 1 thread per child on a
2-core machine at load 1-5 from other jobs, so steps vary ±20%; torch 2.13 CPU, transformers 5.19; one
packed sequence of demo math_chain examples, ~130 tokens each, 0-1 padding tokens; `base` RSS 479 MB):
      L   path     tok/s   step s   peak RSS   added    varlen/dense: tok/s  peak RSS  added
   4096   dense    1,760     2.33     757 MB   277 MB
   4096   varlen   6,837     0.60     617 MB   138 MB                 x3.89     x0.82  x0.50
   8192   dense      639    12.81   1,356 MB   876 MB
   8192   varlen   6,260     1.31     807 MB   328 MB                 x9.79     x0.60  x0.37
  16384   dense      372    43.98   3,454 MB  2,974 MB
  16384   varlen   6,439     2.54   1,186 MB   707 MB                 x17.3     x0.34  x0.24
  (an earlier run, under heavier load: dense 979 / 817 / 303 tok/s, +279 / +852 / +2,942 MB; varlen,
  before its spans were split instead of sliced, 7,562 / 3,303 / 3,773 tok/s, +137 / +336 / +723 MB.)
Dense: the step's added memory grows ~3.3x per doubling of L (the [L, L] mask and SDPA's masked L² work
tensors) and tokens/s falls 3-5x per doubling. Varlen: added memory ~2.2-2.4x per doubling (linear: activations
only) and tokens/s flat, its attention work being Σ document² ≈ 130·L; both paths give the same loss.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the repository first, and not bench/ itself (run as a script), whose sandbox.py would shadow the package
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(a) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.training.distributed import DistContext
    from tasks.training.packed_attention import attn_implementation
    from tasks.training.sft import SFTConfig, train_step
    from tasks.training.sft_data import load_sft_rows, pack_examples, tokenize_examples

    torch.set_num_threads(a.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                                 attn_implementation=attn_implementation(a.path)).to(device)
    model.config.use_cache = False
    model.train()
    examples = tokenize_examples(load_sft_rows(a.data).rows, tok)
    packs, _ = pack_examples(examples, a.length, tok.pad_token_id, seed=0, epoch=0)
    pack = max(packs, key=lambda p: sum(s >= 0 for s in p.segments))
    real = sum(s >= 0 for s in pack.segments)
    cfg = SFTConfig(batch_size=1, micro_batch_size=1, seq_len=a.length, attention=a.path)
    ctx = DistContext(0, 1, device)
    base = _rss_mb()
    times, losses = [], []
    for _ in range(a.repeats + 1):
        t0 = time.perf_counter()
        loss, _ = train_step(model, [pack], cfg, ctx, bf16=False)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        model.zero_grad(set_to_none=True)
    step = statistics.median(times[1:])
    res = {"path": a.path, "length": a.length, "device": device.type, "threads": torch.get_num_threads(),
           "real_tokens": real, "documents": len({s for s in pack.segments if s >= 0}), "loss": losses[0],
           "warmup_s": times[0], "step_s": step, "steps_s": times[1:], "tokens_per_s": real / step,
           "base_rss_mb": base, "peak_rss_mb": _rss_mb(), "torch": torch.__version__}
    if device.type == "cuda":
        res["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="HF model dir (default: build the tiny preset)")
    ap.add_argument("--lengths", default="4096,8192,16384", help="packed sequence lengths L")
    ap.add_argument("--paths", default="dense,varlen,flex", help="attention paths; dense is the baseline")
    ap.add_argument("--repeats", type=int, default=3, help="measured steps per child (after one warm-up)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per child")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a)))
        return 0
    import torch

    lengths = [int(x) for x in a.lengths.split(",")]
    paths = [p for p in a.paths.split(",") if p]
    if "flex" in paths and not torch.cuda.is_available():
        print("flex skipped: FlexAttention has no backward on CPU (torch 2.13)", file=sys.stderr)
        paths.remove("flex")
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-packing-") as tmp:
        tmp = Path(tmp)
        if not a.model:
            from bench.rl import tiny_model

            a.model = str(tiny_model(tmp))
        from bench.sft import write_examples

        data = write_examples(tmp, 10**9)  # every demo math_chain row with a response
        for length in lengths:
            for path in paths:
                cmd = [sys.executable, __file__, "--child", "--path", path, "--length", str(length), "--data",
                       str(data), "--model", a.model, "--repeats", str(a.repeats), "--threads", str(a.threads)]
                env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(a.threads),
                       "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    why = f"rc {proc.returncode}" + (" (killed: out of memory?)" if proc.returncode < 0 else "")
                    print(f"L={length} {path}: failed, {why}\n{proc.stderr[-2000:]}", file=sys.stderr)
                    runs.append({"path": path, "length": length, "failed": why})
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                runs.append(r)
                print(f"L={length} {path}: {r['tokens_per_s']:,.0f} tok/s, step {r['step_s']:.2f} s, peak RSS "
                      f"{r['peak_rss_mb']:,.0f} MB (+{r['peak_rss_mb'] - r['base_rss_mb']:,.0f}), "
                      f"{r['documents']} documents, loss {r['loss']:.4f}", file=sys.stderr)

    print(f"one forward+backward of one packed sequence; {runs[0].get('device', '?')}, {a.threads} thread(s), "
          f"median of {a.repeats}")
    print(f"{'L':>7} {'path':>7} {'tok/s':>10} {'step s':>8} {'peak MB':>9} {'added MB':>9} "
          f"{'x tok/s':>8} {'x peak':>7} {'x added':>8}")
    summary = []
    for length in lengths:
        at = {r["path"]: r for r in runs if r["length"] == length and "failed" not in r}
        base = at.get("dense")
        for path in paths:
            r = at.get(path)
            if r is None:
                print(f"{length:>7} {path:>7}  failed")
                continue
            added = r["peak_rss_mb"] - r["base_rss_mb"]
            row = {"length": length, "path": path, "tokens_per_s": r["tokens_per_s"], "step_s": r["step_s"],
                   "peak_rss_mb": r["peak_rss_mb"], "added_rss_mb": added}
            if base is not None:
                base_added = base["peak_rss_mb"] - base["base_rss_mb"]
                row.update(ratio_tokens_per_s=r["tokens_per_s"] / base["tokens_per_s"],
                           ratio_peak_rss=r["peak_rss_mb"] / base["peak_rss_mb"],
                           ratio_added_rss=added / base_added if base_added > 0 else None)
            summary.append(row)
            ratios = (f"{row['ratio_tokens_per_s']:>8.2f} {row['ratio_peak_rss']:>7.2f} "
                      f"{row['ratio_added_rss'] or 0:>8.2f}") if base is not None else ""
            print(f"{length:>7} {path:>7} {r['tokens_per_s']:>10,.0f} {r['step_s']:>8.2f} {r['peak_rss_mb']:>9,.0f} "
                  f"{added:>9,.0f} {ratios}")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    args = {k: v for k, v in vars(a).items() if k not in ("child", "path", "length", "data")}
    (out_dir / "packing.json").write_text(json.dumps({"args": args, "summary": summary, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
