"""bench/rl: RL step throughput, our GPPO trainer (`klear rl`) vs TRL's GRPOTrainer, same model and prompts.

    python bench/rl.py [--model DIR] [--steps 4] [--prompts 8] [--group 8] [--mini-batches 2]
                       [--max-tokens 160] [--repeats 1] [--threads 1] [--grade-timeout 60]
                       [--only ours|trl] [--filter] [--old-logprobs auto|rollout|recompute]

Needs TRL in the venv (`pip install "trl==1.16.0" torch==2.13.0 transformers==5.19.0`: the pins stop pip
from replacing the CPU torch). Without --model it builds the tiny preset (`klear model init --preset tiny`,
random weights: every completion runs to --max-tokens); an SFT checkpoint is the realistic case, e.g. the
`sft-*` model of a `klear demo` store, whose completions stop on their own.

Prompts: the first `steps × prompts` rewardable rows of the bundled demo math task (math_chain.jsonl, its
planted malformed/duplicate/contaminated rows skipped). Both trainers see the same prompt groups in the
same order: ours through its seeded PromptSampler, TRL through a dataset written in that order with
shuffle_dataset=False.

Each trainer runs in its own child process (`--threads` torch threads, fp32, CPU), the children
alternate ours, trl, ours, trl… (`--repeats`), and each does `--steps` RL steps. One thread by default:
the tiny model gains nothing from two, and on a shared 2-core machine two threads per process made
`generate` 15-20x slower (oversubscribed OpenMP threads wait on each other). Both trainers grade through
one MathGrader with a `--grade-timeout` of 60 s (the trainer's default is 5 s, which a loaded machine
exceeds, turning grades into infrastructure failures that drop rollouts; the table's run is flagged if
any occur). An RL step = generate
`prompts × group` completions (temperature 1.0, top-p 1, ≤ --max-tokens, no vLLM; ours with
tasks/generation/hf_backend.py's own decode loop, TRL with transformers `generate`) → grade them with
tasks/grading's math grader (math-verify in a worker process) and turn grades into rewards with
tasks/grading/rewards (format penalties included) → group-normalised advantages → the behaviour policy's
log-probs for the mini-batches after the first (TRL: one no-grad pass; ours: the rollout log-probs, the
policy itself having generated them, or the same no-grad pass with --old-logprobs recompute) →
`--mini-batches` optimizer steps over the rollouts (micro-batches of ≤ 32 rollouts). Step 1 is the
warm-up (first grader spawn, allocator warm-up) and is not measured; nor is model loading. Throughput = completion tokens (eos included) generated in the
measured steps / wall time of those steps; tokens per CPU second of the child (all its threads, not the
grader's worker process) is reported too, being less sensitive to other load on a shared machine.

Settings made equal (TRL's own defaults in brackets, where they differ):
  fp32 [bf16=True], no gradient checkpointing [gradient_checkpointing=True], beta=0: no reference model
  and no KL (as ours) [0.0 already], epsilon 0.2 / epsilon_high 0.28 (our clip-higher) [0.2 / None→0.2],
  loss_type "dapo" = token mean over the whole batch, as ours [dapo], scale_rewards "group" = (r−mean)/std
  per prompt group, as our "grpo" advantage [group], num_iterations 1, generation batch = prompts × group,
  steps_per_generation = mini-batches × gradient accumulation, so TRL too takes `--mini-batches`
  optimizer steps per rollout batch and, being off-policy after the first, computes old log-probs with
  one no-grad pass (ours with --old-logprobs recompute; by default it reuses the rollout log-probs,
  ≤ 6.4e-6 away); per_device_train_batch_size = min(32, rollouts / mini-batches) = our
  micro_batch_size; lr 1e-4 constant after warm-up, weight decay 0.1, grad clip 1.0, temperature 1.0,
  top_p 1.0, top_k 0; same eos ids, pad id, chat template and `use_cache=True` on the model.
Differences that stay: ours generates with its own decode loop (shared prefill, KV buffer, row eviction,
Gumbel-max sampling: the same distribution, other random draws) and by default skips the no-grad π_old
pass (above); ours uses its GPPO loss (TRL has none; its dapo loss is PPO-clip: the same
tensor work), adds the α·NLL term on correct rollouts (no extra forward) and logs TensorBoard metrics
each step; TRL's reward function decodes the completion ids itself with special tokens kept, as ours
does (TRL's `completions` strings drop `<think>`, a special token of our tokenizer, which would turn
every reward into the missing-<think> penalty). Our zero-variance group filter drops groups whose rewards
are all equal before the update, which TRL does not do: it is off here so both train on every
completion (`--filter` turns it on, our default, and then ours does less work per step).
Writes bench/out/rl.json.

Measured (2026-11-30, demo SFT model, defaults, --repeats 3, 1 thread, a shared 2-core machine at 1-min
load 0.4-2.2, this benchmark's own child included). CPU-s per RL step and ours/TRL tokens per CPU-s and
per wall-s, overall and per alternating pair:
  before (46c4e14: HF `generate` for both, π_old pass)  ours 2.41-2.56, TRL 2.26-2.74 CPU-s;
      ours ≈ 48% generation (1.15-1.29 s a step); x1.00 CPU, x1.04 wall (pairs x1.10, x0.99, x1.03)
  equal work (--old-logprobs recompute)  ours 1.51-1.64, TRL 2.27-2.97 CPU-s; ours ≈ 26% generation
      (0.39-0.44 s a step); x1.74 CPU, x1.82 wall (pairs x2.06, x1.44, x1.98)
  defaults (π_old = the rollout log-probs)  ours 1.32-1.55, TRL 2.35-2.88 CPU-s; ours ≈ 32%
      generation; x1.84 CPU, x1.94 wall (pairs x1.88, x1.94, x1.98)
  --filter (our zero-variance filter on: ours trains only the groups that carry signal)  ours
      1.21-1.37, TRL 2.15-3.08 CPU-s; x2.07 CPU, x2.13 wall (pairs x2.37, x1.80, x2.19)
The decode loop makes generation ≈ 2.3x cheaper per token (tasks/generation/hf_backend.py's docstring:
11.6 → 4.65 CPU-ms per decode step at 64 rows); skipping the π_old pass saves another ≈ 0.15 s a step
(ours' non-generation time 1.10-1.23 → 0.92-1.10 s a step). TRL's reward function (decode + grading) is
5-6% of its wall time; the rest of its step is `generate` and the update. On a busier machine (load 6-14, earlier figures for the old code: x1.01-1.28 CPU, x0.92-1.65 wall per pair)
wall ratios scatter, so read the CPU column and the per-pair ratios, not one wall figure.
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

LR = 1e-4
WARMUP_RL_STEPS = 2  # our default warm-up, in RL steps (TRL counts optimizer steps: × mini-batches)
MAX_MICRO = 32       # our default micro_batch_size


# ---------------------------------------------------------------- data and model


def demo_math_chain_rows(out: Path):
    """The demo task's math_chain rows as canonical problem rows, in file order, its planted hazard rows
    (malformed, duplicate, contaminated…; not the flawed ones, which are ordinary rows) skipped."""
    from tasks.curation.demo_data import write_demo_sources
    from tasks.curation.schema import Malformed, to_problem

    files = write_demo_sources(out / "demo")
    manifest = json.loads(files.manifest.read_text())
    hazards = {r["row"] for r in manifest["rows"] if r["source"] == "math_chain" and r["kind"] != "flawed"}
    for i, line in enumerate(files.math_chain.read_text().splitlines(), start=1):
        if i in hazards:
            continue
        try:
            yield to_problem(json.loads(line), "file").as_row()
        except (Malformed, ValueError):
            continue


def write_prompts(out: Path, n: int) -> Path:
    """The first n rewardable math rows of the demo task, planted hazard rows skipped, as canonical jsonl."""
    rows = []
    for p in demo_math_chain_rows(out):
        if p["domain"] == "math" and p.get("answer") is not None:
            rows.append({"problem": p["problem"], "domain": "math", "answer": p["answer"]})
        if len(rows) == n:
            break
    path = out / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tiny_model(out: Path) -> Path:
    """What `klear model init --preset tiny` builds: tokenizer trained on the demo sources, random weights."""
    from tasks.curation.demo_data import write_demo_sources
    from tasks.models.corpus import source_texts
    from tasks.models.factory import init_model

    files = write_demo_sources(out / "corpus")
    return init_model(out / "tiny", source_texts(files.sources().values()), "tiny", seed=0)


# ---------------------------------------------------------------- children


def _window(marks: list[float], tokens: list[int], warmup: int, cpu: list[float]) -> dict:
    """Measured window: from the end of step `warmup` to the end of the last step."""
    wall = marks[-1] - marks[warmup - 1]
    steps = len(marks) - warmup
    toks = sum(tokens[warmup:])
    return {"measured_steps": steps, "wall_s": wall, "cpu_s": cpu[-1] - cpu[warmup - 1], "tokens": toks,
            "tokens_per_s": toks / wall, "step_s": wall / steps, "tokens_per_step": tokens,
            "step_wall_s": [b - a for a, b in zip(marks, marks[1:])]}


def run_ours(a, prompts: Path, out: Path) -> dict:
    from tasks.grading.math_grader import MathGrader
    from tasks.training.rl import RLConfig, train_rl

    n = a.prompts * a.group
    cfg = RLConfig(steps=a.steps, prompts_per_step=a.prompts, rollouts_per_prompt=a.group,
                   mini_batches=a.mini_batches, micro_batch_size=MAX_MICRO, lr=LR, warmup_steps=WARMUP_RL_STEPS,
                   temperature=1.0, top_p=1.0, max_tokens=a.max_tokens, seed=a.seed, save_every=10**9,
                   domains=("math",), filter_zero_variance=a.filter, old_logprobs=a.old_logprobs)
    marks, cpu, tokens, gen_s, vals = [], [], [], [], []
    graders = {"math": MathGrader(timeout=a.grade_timeout)}

    def on_step(step, total, v):
        marks.append(time.perf_counter())
        cpu.append(time.process_time())
        tokens.append(round(v["response_len"] * n))
        gen_s.append(v["t_generate_s"])
        vals.append({k: v[k] for k in ("reward_mean", "accuracy", "trained_rollouts", "infra_failures") if k in v})

    t0 = time.perf_counter()
    try:
        train_rl(a.model, str(prompts), str(out), cfg, on_step=on_step, graders=graders)
    finally:
        graders["math"].close()
    res = _window(marks, tokens, a.warmup, cpu)
    res["infra_failures"] = sum(v.get("infra_failures", 0) for v in vals)
    res["generate_s"] = sum(gen_s[a.warmup:])
    res["total_s"] = time.perf_counter() - t0
    res["per_step"] = vals
    return res


def run_trl(a, prompts: Path, out: Path) -> dict:
    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from tasks.grading.batch import grade_samples
    from tasks.grading.math_grader import MathGrader
    from tasks.grading.rewards import RewardConfig, reward_from_grade
    from tasks.training.rl_data import PromptSampler, load_rl_rows

    rows, _ = load_rl_rows(str(prompts), ("math",))
    sampler = PromptSampler(rows, a.prompts, a.seed)  # our order, so both see the same groups per step
    ordered = [r for s in range(a.steps) for r in sampler.batch(s)]
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["problem"]}], "answer": str(r["answer"]),
                             "domain": "math"} for r in ordered])
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    model.config.use_cache = True  # as train_rl does
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    n = a.prompts * a.group
    per_opt = n // a.mini_batches
    micro = min(MAX_MICRO, per_opt)
    accum = per_opt // micro
    graders = {"math": MathGrader(timeout=a.grade_timeout)}
    tokens: list[int] = []
    infra: list[int] = []
    grade_s: list[float] = []
    reward_cfg = RewardConfig()

    def math_reward(prompts, completions, completion_ids, answer, domain, **_):
        t = time.perf_counter()
        texts = [tok.decode(ids[:-1] if ids and ids[-1] in eos else ids, skip_special_tokens=False)
                 for ids in completion_ids]  # as tasks/generation/hf_backend.py: special tokens kept, eos dropped
        batch = [{"domain": d, "answer": x} for d, x in zip(domain, answer)]
        grades = grade_samples(batch, [[s] for s in texts], graders)
        tokens.append(sum(len(ids) for ids in completion_ids))
        out = [reward_from_grade(r["domain"], s, g[0], reward_cfg) for r, s, g in zip(batch, texts, grades)]
        infra.append(sum(r is None for r in out))  # TRL takes None as "no reward"; ours drops the rollout
        grade_s.append(time.perf_counter() - t)
        return out

    marks: list[float] = []
    cpu: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step % a.mini_batches == 0:  # end of one RL step (rollout batch)
                marks.append(time.perf_counter())
                cpu.append(time.process_time())

    args = GRPOConfig(
        output_dir=str(out), max_steps=a.steps * a.mini_batches, per_device_train_batch_size=micro,
        gradient_accumulation_steps=accum, steps_per_generation=a.mini_batches * accum, num_generations=a.group,
        max_completion_length=a.max_tokens, temperature=1.0, top_p=1.0, top_k=0, beta=0.0, num_iterations=1,
        epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group", learning_rate=LR,
        lr_scheduler_type="constant_with_warmup", warmup_steps=WARMUP_RL_STEPS * a.mini_batches,
        weight_decay=0.1, max_grad_norm=1.0, bf16=False, fp16=False, use_cpu=True, gradient_checkpointing=False,
        shuffle_dataset=False, seed=a.seed, logging_steps=10**6, save_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, log_completions=False)
    t0 = time.perf_counter()
    trainer = GRPOTrainer(model=model, reward_funcs=[math_reward], args=args, train_dataset=ds,
                          processing_class=tok, callbacks=[Clock()])
    try:
        trainer.train()
    finally:
        for g in graders.values():
            g.close()
    res = _window(marks, tokens, a.warmup, cpu)
    res["grade_s"] = sum(grade_s[a.warmup:])
    res["infra_failures"] = sum(infra)
    res["total_s"] = time.perf_counter() - t0
    res["trl_version"] = trl.__version__
    res["trl_settings"] = {k: getattr(args, k) for k in (
        "loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high", "num_iterations", "num_generations",
        "generation_batch_size", "steps_per_generation", "per_device_train_batch_size",
        "gradient_accumulation_steps", "max_completion_length", "temperature", "top_p", "top_k",
        "gradient_checkpointing", "bf16", "importance_sampling_level", "mask_truncated_completions",
        "optim", "max_steps")}
    res["trl_settings"]["optim"] = str(res["trl_settings"]["optim"])
    return res


def child(impl: str, a) -> dict:
    import torch

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory(prefix=f"bench-rl-{impl}-") as tmp:
        fn = run_ours if impl == "ours" else run_trl
        res = fn(a, Path(a.data), Path(tmp) / "out")
    import transformers

    return {"impl": impl, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "transformers": transformers.__version__, **res}


# ---------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="HF model dir (default: build the tiny preset)")
    ap.add_argument("--steps", type=int, default=4, help="RL steps per run, the first one unmeasured")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per RL step")
    ap.add_argument("--group", type=int, default=8, help="completions per prompt (TRL num_generations)")
    ap.add_argument("--mini-batches", type=int, default=2, help="optimizer steps per rollout batch")
    ap.add_argument("--max-tokens", type=int, default=160, help="max completion tokens (demo RL: 160)")
    ap.add_argument("--repeats", type=int, default=1, help="alternating runs per trainer")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per child (1: see the docstring)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grade-timeout", type=float, default=60.0,
                    help="math grader timeout, s (default 5 in the trainer; a loaded machine times out at 5)")
    ap.add_argument("--filter", action="store_true", help="our zero-variance group filter on (our default)")
    ap.add_argument("--only", choices=["ours", "trl"])
    ap.add_argument("--old-logprobs", choices=["auto", "rollout", "recompute"], default="auto",
                    help="ours: π_old of mini-batches after the first (auto = the rollout log-probs here)")
    ap.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.warmup = 1
    if a.child:
        print(json.dumps(child(a.child, a)))
        return 0
    if a.steps < 2:
        ap.error("--steps must be ≥ 2 (step 1 is the unmeasured warm-up)")
    n = a.prompts * a.group
    if n % a.mini_batches or (n // a.mini_batches) % min(MAX_MICRO, n // a.mini_batches):
        ap.error("prompts × group must split into --mini-batches equal parts of whole micro-batches (≤ 32)")
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory(prefix="bench-rl-") as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        model = a.model or str(tiny_model(tmp))
        prompts = write_prompts(tmp, a.steps * a.prompts)
        print(f"model {model}; {a.steps * a.prompts} prompts; ready in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        order = [a.only] if a.only else ["ours", "trl"]
        for rep in range(a.repeats):
            for impl in order:
                cmd = [sys.executable, __file__, "--child", impl, "--data", str(prompts), "--model", model,
                       "--steps", str(a.steps), "--prompts", str(a.prompts), "--group", str(a.group),
                       "--mini-batches", str(a.mini_batches), "--max-tokens", str(a.max_tokens),
                       "--threads", str(a.threads), "--seed", str(a.seed), "--grade-timeout", str(a.grade_timeout)]
                cmd += ["--filter"] if a.filter else []
                cmd += ["--old-logprobs", a.old_logprobs]
                env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(a.threads),
                       "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
                    return proc.returncode
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                runs[impl].append(r)
                print(f"run {rep + 1}/{a.repeats} {impl}: {r['tokens_per_s']:.0f} tok/s, "
                      f"{r['step_s']:.2f} s/step", file=sys.stderr)

    def summary(rs: list[dict]) -> dict:
        toks, wall, cpu = (sum(r[k] for r in rs) for k in ("tokens", "wall_s", "cpu_s"))
        steps = sum(r["measured_steps"] for r in rs)
        return {"tokens_per_s": toks / wall, "tokens_per_cpu_s": toks / cpu, "step_s": wall / steps,
                "tokens_per_step": toks / steps, "infra_failures": sum(r["infra_failures"] for r in rs),
                "median_run_tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs)}

    res = {impl: summary(rs) for impl, rs in runs.items() if rs}
    print(f"{a.prompts} prompts x {a.group} completions per RL step, {a.mini_batches} optimizer steps per "
          f"rollout batch, max {a.max_tokens} tokens, fp32, {a.threads} threads, {a.steps - 1} measured steps "
          f"x {a.repeats} run(s) each; zero-variance filter {'on' if a.filter else 'off'}")
    if runs["trl"]:
        print(f"TRL {runs['trl'][0]['trl_version']} GRPOTrainer (loss_type dapo, scale_rewards group, beta 0)")
    cols = ["tokens_per_s", "tokens_per_cpu_s", "step_s", "tokens_per_step"]
    print(f"{'':>6}" + "".join(f"{c:>18}" for c in cols))
    for impl, s in res.items():
        print(f"{impl:>6}" + "".join(f"{s[c]:>18.2f}" for c in cols))
    if "ours" in res:
        o = runs["ours"]
        gen = sum(r["generate_s"] for r in o) / sum(r["wall_s"] for r in o)
        print(f"  ours: generation {100 * gen:.0f}% of measured wall time")
    if "trl" in res:
        g = runs["trl"]
        share = sum(r["grade_s"] for r in g) / sum(r["wall_s"] for r in g)
        print(f"  trl: reward fn (decode + grading) {100 * share:.0f}% of measured wall time")
    if any(s["infra_failures"] for s in res.values()):
        print("WARNING: some grades timed out (infra failures, left out of the update): raise --grade-timeout")
    if len(res) == 2:
        ratio = res["ours"]["tokens_per_s"] / res["trl"]["tokens_per_s"]
        cpu_ratio = res["ours"]["tokens_per_cpu_s"] / res["trl"]["tokens_per_cpu_s"]
        res["ratio_tokens_per_s"], res["ratio_tokens_per_cpu_s"] = ratio, cpu_ratio
        pairs = [o["tokens_per_s"] / t["tokens_per_s"] for o, t in zip(runs["ours"], runs["trl"])]
        res["ratio_per_pair"] = pairs
        print(f"ours/TRL per alternating pair (wall): {', '.join(f'x{r:.2f}' for r in pairs)}; "
              f"median x{statistics.median(pairs):.2f}")
        print(f"ours/TRL: throughput x{ratio:.2f} (wall), x{cpu_ratio:.2f} (CPU time); step time "
              f"{res['ours']['step_s']:.2f} s vs {res['trl']['step_s']:.2f} s (target: throughput x1.5)")
    out_dir = Path(__file__).resolve().parent / "out"
    out_dir.mkdir(exist_ok=True)
    args = {k: v for k, v in vars(a).items() if k not in ("child", "data")}
    (out_dir / "rl.json").write_text(json.dumps({"args": args, "summary": res, "runs": runs}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
