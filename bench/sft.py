"""bench/sft: SFT training throughput, `klear sft` (tasks/training/sft.py) vs TRL's SFTTrainer, same model,
same examples, one run.

    python bench/sft.py [--model DIR] [--examples 512] [--epochs 1] [--batch 8] [--seq-len 256]
                        [--repeats 2] [--threads 1] [--trl-packing bfd|none] [--only ours|trl]

Needs TRL in the venv (`pip install "trl==1.16.0" torch==2.13.0 transformers==5.19.0`: the pins stop pip
from replacing the CPU torch). Without --model it builds the tiny preset (`klear model init --preset tiny`).

Data: the first `--examples` rows of the bundled demo's math_chain source that carry a response (its
planted malformed/duplicate/contaminated rows skipped), the long-CoT SFT rows of `make demo`.

Both trainers train `--epochs` over those examples with the loss on response tokens only, fp32 on CPU, no
gradient checkpointing, AdamW, `--batch` sequences of ≤ `--seq-len` tokens per optimizer step, one
micro-batch per step:
  ours: packing (windowed first-fit, block-diagonal attention so packed examples never see each other),
        batch_size = micro_batch_size = --batch packs of --seq-len;
  TRL:  prompt/completion rows (completion-only loss, its default for that format), packing=True with its
        best-fit-decreasing strategy and padding-free batches (position_ids mark the examples; transformers
        builds the block-causal mask from them), per_device_train_batch_size = --batch, max_length =
        --seq-len. `--trl-packing none` trains TRL on padded, unpacked batches instead.
Each trainer runs in its own child process with `--threads` torch threads; children alternate ours, trl,
ours, trl… (`--repeats`); the machine's load drifts, so read the per-pair ratios and the CPU-time column.

Throughput = dataset tokens per second: the examples' tokens (prompt + response under our chat template,
the same for both) × epochs, times the fraction of optimizer steps measured, over the wall time from the
end of step 1 (warm-up: allocator, first backward) to the end of the last step. Model loading, tokenizing
and packing are not measured. Tokens per CPU second of the child are reported too.
Writes bench/out/sft.json.

Measured (2026-11-30, tiny preset, defaults: 512 examples = 66,866 tokens, 1 epoch, 8 × 256, 1 thread, a
2-core machine at load 1.5-3 from other jobs; TRL 1.16.0, transformers 5.19, torch 2.13 CPU):
  TRL packing bfd (its packing default; padding-free, 38 steps as ours): ours 9,329 tok/s vs 3,446 —
      x2.71 wall, x2.56 CPU time (pairs x3.10, x2.37). One packed row of 8 × 256 tokens gets one
      2048 × 2048 block-causal mask in sdpa, 8x the attention work of 8 rows of 256.
  TRL packing none (padded batches of 8 examples, 64 steps): x1.50 wall, x1.42 CPU time (pairs x1.25, x1.72).
  TRL packing wrapped (examples concatenated and cut into 256-token windows, 33 steps): x0.83 wall, x0.95
      CPU time — the same work per token, but it is not the same training: examples attend across their
      boundaries and are split between windows; ours keeps them apart (block-diagonal masks).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LR = 1e-3


def write_examples(out: Path, n: int) -> Path:
    """The first n demo math_chain rows with a response (hazard rows skipped), canonical jsonl."""
    from bench.rl import demo_math_chain_rows

    rows = []
    for p in demo_math_chain_rows(out):
        if p.get("response"):
            rows.append({"problem": p["problem"], "response": p["response"]})
        if len(rows) == n:
            break
    path = out / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def dataset_tokens(model: str, data: Path) -> int:
    from transformers import AutoTokenizer

    from tasks.training.sft_data import load_sft_rows, tokenize_examples

    tok = AutoTokenizer.from_pretrained(model)
    return sum(len(e.input_ids) for e in tokenize_examples(load_sft_rows(str(data)).rows, tok))


def _window(marks: list[float], cpu: list[float], tokens_total: int) -> dict:
    steps = len(marks)
    if steps < 2:
        raise RuntimeError("fewer than 2 optimizer steps: raise --examples or --epochs")
    wall, cpu_s = marks[-1] - marks[0], cpu[-1] - cpu[0]
    toks = tokens_total * (steps - 1) / steps
    return {"steps": steps, "measured_steps": steps - 1, "wall_s": wall, "cpu_s": cpu_s, "tokens": toks,
            "tokens_per_s": toks / wall, "step_s": wall / (steps - 1)}


def run_ours(a, data: Path, out: Path, tokens_total: int) -> dict:
    from tasks.training.sft import SFTConfig, train_sft

    cfg = SFTConfig(epochs=a.epochs, batch_size=a.batch, micro_batch_size=a.batch, seq_len=a.seq_len, lr=LR,
                    warmup_ratio=0.0, min_lr_ratio=1.0, save_every=10**9, seed=a.seed, bf16=False)
    marks: list[float] = []
    cpu: list[float] = []

    def on_step(step, total, values):
        marks.append(time.perf_counter())
        cpu.append(time.process_time())

    res = train_sft(a.model, str(data), str(out), cfg, on_step=on_step)
    return {**_window(marks, cpu, tokens_total), "first_loss": res.losses[0], "last_loss": res.losses[-1]}


def run_trl(a, data: Path, out: Path, tokens_total: int) -> dict:
    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    rows = [json.loads(line) for line in data.read_text().splitlines()]
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["problem"]}],
                             "completion": [{"role": "assistant", "content": r["response"]}]} for r in rows])
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    marks: list[float] = []
    cpu: list[float] = []
    losses: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            marks.append(time.perf_counter())
            cpu.append(time.process_time())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(logs["loss"])

    packing = a.trl_packing != "none"
    args = SFTConfig(
        output_dir=str(out), num_train_epochs=a.epochs, per_device_train_batch_size=a.batch,
        gradient_accumulation_steps=1, max_length=a.seq_len, packing=packing,
        **({"packing_strategy": a.trl_packing} if packing else {}), learning_rate=LR,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, bf16=False, fp16=False,
        use_cpu=True, gradient_checkpointing=False, seed=a.seed, logging_steps=1, save_strategy="no",
        report_to="none", disable_tqdm=True, dataloader_num_workers=0)
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, callbacks=[Clock()])
    trainer.train()
    res = _window(marks, cpu, tokens_total)
    res.update({"first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
                "trl_version": trl.__version__, "trl_settings": {k: str(getattr(args, k)) for k in (
                    "packing", "packing_strategy", "padding_free", "completion_only_loss", "max_length",
                    "per_device_train_batch_size", "gradient_checkpointing", "bf16", "optim")}})
    return res


def child(impl: str, a) -> dict:
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory(prefix=f"bench-sft-{impl}-") as tmp:
        fn = run_ours if impl == "ours" else run_trl
        res = fn(a, Path(a.data), Path(tmp) / "out", a.tokens_total)
    return {"impl": impl, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "transformers": transformers.__version__, **res}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="HF model dir (default: build the tiny preset)")
    ap.add_argument("--examples", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8, help="sequences per optimizer step")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2, help="alternating runs per trainer")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per child")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trl-packing", choices=["bfd", "wrapped", "none"], default="bfd")
    ap.add_argument("--only", choices=["ours", "trl"])
    ap.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--tokens-total", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a)))
        return 0
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory(prefix="bench-sft-") as tmp:
        tmp = Path(tmp)
        if not a.model:
            from bench.rl import tiny_model

            a.model = str(tiny_model(tmp))
        data = write_examples(tmp, a.examples)
        tokens_total = dataset_tokens(a.model, data) * a.epochs
        print(f"model {a.model}; {a.examples} examples, {tokens_total} tokens over {a.epochs} epoch(s)", file=sys.stderr)
        for rep in range(a.repeats):
            for impl in [a.only] if a.only else ["ours", "trl"]:
                cmd = [sys.executable, __file__, "--child", impl, "--data", str(data), "--model", a.model,
                       "--epochs", str(a.epochs), "--batch", str(a.batch), "--seq-len", str(a.seq_len),
                       "--threads", str(a.threads), "--seed", str(a.seed), "--trl-packing", a.trl_packing,
                       "--tokens-total", str(tokens_total)]
                env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(a.threads),
                       "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
                    return proc.returncode
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                runs[impl].append(r)
                print(f"run {rep + 1}/{a.repeats} {impl}: {r['tokens_per_s']:.0f} tok/s, {r['steps']} steps, "
                      f"{r['step_s'] * 1000:.0f} ms/step, loss {r['first_loss']:.3f} → {r['last_loss']:.3f}",
                      file=sys.stderr)

    def summary(rs: list[dict]) -> dict:
        toks, wall, cpu = (sum(r[k] for r in rs) for k in ("tokens", "wall_s", "cpu_s"))
        return {"tokens_per_s": toks / wall, "tokens_per_cpu_s": toks / cpu, "steps": rs[0]["steps"],
                "step_s": wall / sum(r["measured_steps"] for r in rs)}

    res = {impl: summary(rs) for impl, rs in runs.items() if rs}
    print(f"{a.examples} examples x {a.epochs} epoch(s), {a.batch} x {a.seq_len}-token sequences per step, fp32, "
          f"{a.threads} thread(s), {a.repeats} run(s) each; TRL packing: {a.trl_packing}")
    cols = ["tokens_per_s", "tokens_per_cpu_s", "steps", "step_s"]
    print(f"{'':>6}" + "".join(f"{c:>18}" for c in cols))
    for impl, s in res.items():
        print(f"{impl:>6}" + "".join(f"{s[c]:>18.3f}" for c in cols))
    if len(res) == 2:
        pairs = [o["tokens_per_s"] / t["tokens_per_s"] for o, t in zip(runs["ours"], runs["trl"])]
        res["ratio_tokens_per_s"] = res["ours"]["tokens_per_s"] / res["trl"]["tokens_per_s"]
        res["ratio_tokens_per_cpu_s"] = res["ours"]["tokens_per_cpu_s"] / res["trl"]["tokens_per_cpu_s"]
        res["ratio_per_pair"] = pairs
        print(f"ours/TRL per alternating pair (wall): {', '.join(f'x{r:.2f}' for r in pairs)}; "
              f"median x{statistics.median(pairs):.2f}")
        print(f"ours/TRL: throughput x{res['ratio_tokens_per_s']:.2f} (wall), "
              f"x{res['ratio_tokens_per_cpu_s']:.2f} (CPU time)")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    args = {k: v for k, v in vars(a).items() if k not in ("child", "data", "tokens_total")}
    (out_dir / "sft.json").write_text(json.dumps({"args": args, "summary": res, "runs": runs}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
