"""`klear rl` (with its --dry-run memory plan) and `klear ablate`: their settings are RLConfig's fields
(and its nested configs') as flags."""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from flows.cli_checks import (already_trained, check_backend, check_benchmark, check_data, check_model, check_nproc,
                              check_record_store, check_training_rows, claim_out, prepare_out, resolve_model_flag,
                              recording_store_root)
from flows.cli_common import (StoreOpt, UserError, check_prefect_api, checked, console,
                              quiet_children_after_interrupt, quiet_prefect_defaults, run_flow, starting)
from flows.cli_config_options import build_config, given_on_command_line, under_preset, with_config_options
from flows.cli_nodes import NNodesOpt, NodeRankOpt, RdzvEndpointOpt, check_nodes, other_node_done
from tasks.training.config import RL_NESTED, RLConfig
from tasks.training.plan import SHAPES
from tasks.training.rl_presets import RL_PRESETS


@with_config_options(RLConfig, nested=RL_NESTED)
def rl(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", help="HF model directory (usually the SFT checkpoint), pretrained "
                              "name or Hub id; with --dry-run also a model shape (" + ", ".join(SHAPES) + ")"),
    data: Optional[str] = typer.Option(None, "--data", help="A store (its current problems), STORE#VERSION (a dataset version it holds) or a "
                                       "canonical .jsonl/.parquet (required unless --dry-run)"),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (HF checkpoint + checkpoints/ + "
                                      "metrics; required unless --dry-run)"),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Processes (GPUs) for torchrun (--strategy "
                                        "ddp|fsdp); default 1 (in this process), or the preset's"),
    nnodes: Optional[int] = NNodesOpt,
    node_rank: Optional[int] = NodeRankOpt,
    rdzv_endpoint: Optional[str] = RdzvEndpointOpt,
    preset: Optional[str] = typer.Option(None, "--preset", help="Start from a named run: " + "; ".join(
        f"{k}: {p.description}" for k, p in RL_PRESETS.items()) + ". Flags left at their defaults take the "
        "preset's values"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the per-GPU memory plan (parameters, gradients, "
                                 "optimizer, activations, the engine's KV cache, tokens per step) without "
                                 "loading weights, and exit; exit 1 when it cannot fit"),
    gpu_memory: Optional[float] = typer.Option(None, "--gpu-memory", help="GiB per GPU for --dry-run (default: "
                                               "this machine's GPU, else the preset's, else 80)"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in --out"),
    force: bool = typer.Option(False, "--force", help="Start over in an --out holding another run's checkpoints"),
    store: Optional[str] = typer.Option(None, "--store", help="Store whose catalog records the checkpoint "
                                        "(default: the store --data names, else $KLEAR_STORE or ./klear-store)"),
    **settings,
) -> None:
    """GPPO reinforcement learning with group rollouts (math-verify and sandbox rewards)."""
    if preset is not None and preset not in RL_PRESETS:
        raise UserError(f"--preset {preset!r}: unknown (known: {', '.join(RL_PRESETS)})")
    chosen = RL_PRESETS[preset] if preset else None
    if chosen:
        settings = under_preset(settings, chosen.config, given_on_command_line(ctx))
    nproc = nproc if nproc is not None else (chosen.hardware.nproc if chosen else 1)
    check_nproc(nproc)
    nodes = check_nodes(nnodes, node_rank, rdzv_endpoint)
    cfg = checked(lambda: build_config(RLConfig, settings, nested=RL_NESTED))
    from tasks.training.launch import rl_layout_problem

    if problem := rl_layout_problem(nproc, cfg, nodes):
        raise UserError(problem)
    if dry_run:
        _print_rl_plan(model, data, cfg, nodes.world(nproc), gpu_memory, chosen)  # ranks of every node
        return
    for flag, value in (("--data", data), ("--out", out)):
        if value is None:
            raise UserError(f"{flag} is required (only --dry-run runs without it)")
    check_backend(cfg.backend)
    model = resolve_model_flag("--model", model)
    check_data(data)
    dataset = check_training_rows(data, "rl", cfg)
    check_model(model, max_tokens=cfg.max_tokens)
    if cfg.eval_benchmark:
        check_benchmark(f"--eval-benchmark {cfg.eval_benchmark}", cfg.eval_benchmark, model, cfg.max_tokens)
    if store is not None:
        store = recording_store_root(store, "the checkpoint")
    else:  # the checkpoint is recorded in the store --data names, else the default one: checked, not passed on
        check_record_store(data)
    if already_trained(out, "rl", model, data, dataset, cfg, resume, force):
        return
    check_prefect_api()
    prepare_out(out, resume, force, main_node=nodes.is_main)
    quiet_prefect_defaults()
    starting(f"rl ({cfg.loss})", f"training into {out}" + (f" as {nodes.describe()}" if nodes.multi else ""))
    from flows.rl import rl as rl_flow
    from tasks.training.launch import RanksFailed

    torchrun = nproc > 1 or nodes.multi
    with quiet_children_after_interrupt() if torchrun else nullcontext():  # torchrun's ranks: one line on Ctrl-C
        res = run_flow(rl_flow, model=model, data=data, out=out, config=cfg, resume=resume, store=store,
                       nproc=nproc, nnodes=nodes.nnodes, node_rank=nodes.node_rank,
                       rdzv_endpoint=nodes.rdzv_endpoint, user_errors=(ValueError, RanksFailed))
    if not nodes.is_main:
        return other_node_done(nodes, out)
    console.print(f"checkpoint {res['checkpoint']}: {out}  ({res['steps']} steps, final reward {res['final_reward']:.3f}; "
                  f"metrics: {out}/metrics.jsonl, TensorBoard: {out}/tb)")


@with_config_options(RLConfig, skip=("seed", "eval_benchmark"), nested=RL_NESTED)
def ablate(
    model: str = typer.Option(..., "--model", help="HF model directory (or pretrained name, Hub id) every run "
                              "starts from"),
    data: str = typer.Option(..., "--data", help="A store (its current problems), STORE#VERSION (one of its dataset versions) or a canonical .jsonl/.parquet"),
    out: str = typer.Option(..., "--out", help="Directory of the runs (one content-addressed directory each)"),
    benchmark: str = typer.Option(..., "--benchmark", help="Held-out canonical file (NAME=PATH or PATH)"),
    vary: Optional[list[str]] = typer.Option(None, "--vary", help="FIELD=V1,V2: an RL setting and its values "
                                             "(nested: reward.code_mode=soft,hard; a tuple's items joined by |); "
                                             "repeat: every combination is an arm"),
    losses: Optional[str] = typer.Option(None, "--losses", help="Shorthand for --vary loss=...; with neither, "
                                         "the arms are gppo,grpo,cispo"),
    arm: Optional[list[str]] = typer.Option(None, "--arm", help="FIELD=V[,FIELD=V…]: one arm's settings "
                                            "(repeat: the arms, in order; instead of --vary/--losses)"),
    seeds: str = typer.Option("1,2", "--seeds", help="Comma-separated seeds; each arm runs once per seed"),
    nproc: int = typer.Option(1, "--nproc", help="Processes (GPUs) for each run's torchrun; 1: in this process"),
    nnodes: Optional[int] = NNodesOpt,
    node_rank: Optional[int] = NodeRankOpt,
    rdzv_endpoint: Optional[str] = typer.Option(None, "--rdzv-endpoint", help="HOST:PORT of node 0's rendezvous "
                                                "for the first run, the same on every node; run i uses PORT + i "
                                                "(default: $MASTER_ADDR:$MASTER_PORT)"),
    store: Optional[str] = StoreOpt,
    **settings,
) -> None:
    """Compare RL settings on equal data and seeds: per arm, mean final held-out avg@k with its 95% interval
    and mean best avg@k. Runs are cached: a rerun trains nothing, an added seed trains only that seed."""
    from tasks.training.ablation import arm_config, arms, parse_value
    from tasks.training.launch import rl_layout_problem

    model = resolve_model_flag("--model", model)
    check_data(data)
    check_nproc(nproc)
    nodes = check_nodes(nnodes, node_rank, rdzv_endpoint)
    bench = benchmark.split("=", 1)[-1]
    check_benchmark(f"--benchmark {benchmark}", bench)
    try:
        seed_list = [int(x) for x in seeds.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--seeds {seeds!r}: expected comma-separated integers") from None
    if not seed_list:
        raise UserError("--seeds: expected at least one seed")
    if (i := _first_repeat(seed_list)) is not None:  # a seed run twice would count twice in the mean and interval
        raise UserError(f"--seeds {seeds!r}: seed {seed_list[i]} given twice")
    if arm and (vary or losses):
        raise UserError("--arm and --vary/--losses both given: use one way to name the arms")
    texts = _vary_axes(vary or [], losses)
    base = checked(lambda: build_config(RLConfig, settings, nested=RL_NESTED))
    check_backend(base.backend)
    axes = checked(lambda: {name: [parse_value(RLConfig, name, v) for v in values] for name, values in texts.items()})
    for name, values in axes.items():  # the same value written two ways (0.1 and 1e-1): the same arm twice
        if (i := _first_repeat(values)) is not None:
            flag = "--losses" if name == "loss" and losses is not None else f"--vary {name}"
            first = texts[name][values.index(values[i])]
            raise UserError(f"{flag}: {texts[name][i]} is the same value as {first}")
    arm_list = checked(lambda: [_parse_arm(a) for a in arm]) if arm else None
    if arm_list and (i := _first_repeat(arm_list)) is not None:
        first = arm[arm_list.index(arm_list[i])]
        raise UserError(f"--arm {arm[i]!r}: given twice" if arm[i].strip() == first.strip() else
                        f"--arm {arm[i]!r}: the same arm as --arm {first!r}")
    runs = checked(lambda: [arm_config(base, a, s) for a in (arm_list or arms(axes)) for s in seed_list])
    for problem in dict.fromkeys(rl_layout_problem(nproc, c, nodes) for c in runs):  # each distinct one once
        if problem:
            raise UserError(problem)
    if problem := nodes.runs_problem(len(runs)):
        raise UserError(f"--rdzv-endpoint {nodes.rdzv_endpoint}: {problem}")
    check_model(model, max_tokens=base.max_tokens)
    check_benchmark(f"--benchmark {benchmark}", bench, model, base.max_tokens)
    if store is not None:
        store = recording_store_root(store, "the arms' checkpoints and evaluations")
    check_prefect_api()
    if nodes.is_main:  # the other nodes' launchers only run their ranks: node 0 holds --out
        claim_out(out)
    quiet_prefect_defaults()
    where = f" as {nodes.describe()}" if nodes.multi else ""
    starting("ablate", f"{len(arm_list or arms(axes))} arms × {len(seed_list)} seeds into {out}{where}")
    from flows.rl import ablate as ablate_flow
    from tasks.training.launch import RanksFailed

    torchrun = nproc > 1 or nodes.multi
    with quiet_children_after_interrupt() if torchrun else nullcontext():  # torchrun's ranks: one line on Ctrl-C
        result = run_flow(ablate_flow, model=model, data=data, out=out, benchmark=bench, vary=axes, seeds=seed_list,
                          config=base, store=store, nproc=nproc, arm_list=arm_list, nnodes=nodes.nnodes,
                          node_rank=nodes.node_rank, rdzv_endpoint=nodes.rdzv_endpoint,
                          user_errors=(ValueError, RanksFailed))
    if not nodes.is_main:
        return other_node_done(nodes, out, "the ablation and records its checkpoints")
    print_ablation(result, base.eval_k, seed_list)


def print_ablation(result: dict, k: int, seeds: list[int]) -> None:
    """The per-arm table (held-out avg@k at step 0, final, best, gain and area under the curve, each a mean
    over seeds ± its 95% interval; the training figures behind them), then one line per pair of arms."""
    from tasks.training.ablation import pair_line

    t = Table(title=f"held-out avg@{k}: mean over seeds {seeds} (± 95% interval)")
    cols = ("arm", "step 0", "final", "best", "gain", "AUC", "grad low-clip", "grad high-clip", "entropy",
            "stale |log δ|", "grad norm max")
    width = max((len(r["arm"]) for r in result["table"]), default=3)
    for col in cols:  # the arm whole (a cut label hides which setting differs); figures wrap instead
        t.add_column(col, justify="left", no_wrap=True, min_width=width) if col == "arm" else t.add_column(col, justify="right")

    def fig(value, ci=None, fmt=".3f"):
        return "—" if value is None else f"{value:{fmt}}" + (f" ± {ci:.3f}" if ci is not None else "")

    for r in result["table"]:
        t.add_row(r["arm"], fig(r["initial_avg_at_k"], r["initial_ci95"]), fig(r["final_avg_at_k"], r["final_ci95"]),
                  fig(r["best_avg_at_k"], r["best_ci95"]), fig(r["gain"], r["gain_ci95"], "+.3f"),
                  fig(r["auc"], r["auc_ci95"]), fig(r["grad_share_low"]), fig(r["grad_share_high"]),
                  fig(r["entropy"]), fig(r["stale_logratio"], fmt=".4f"), fig(r["grad_norm_max"], fmt=".2f"))
    console.print(t)
    for pair in result["pairs"]:
        print(pair_line(pair), flush=True)
    print(f"chart: {result['chart']}", flush=True)


def _parse_arm(spec: str) -> dict:
    """`--arm loss=gppo,mini_batches=8` as {field: typed value}, in the order written."""
    from tasks.training.ablation import parse_value

    out = {}
    for item in spec.split(","):
        name, eq, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not (eq and name and value.strip()):
            raise UserError(f"--arm {spec!r}: expected FIELD=VALUE[,FIELD=VALUE…]")
        if name in out:
            raise UserError(f"--arm {spec!r}: {name} given twice")
        out[name] = parse_value(RLConfig, name, value.strip())
    return out


def _vary_axes(vary: list[str], losses: str | None) -> dict[str, list[str]]:
    """`--vary FIELD=V1,V2` (repeatable) and `--losses` as {field: [value text]}; default: the three losses.
    A value given twice is refused: its arms would run twice and count twice in the summary."""
    axes: dict[str, list[str]] = {}
    for item in vary:
        name, eq, values = item.partition("=")
        name = name.strip().replace("-", "_")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not (eq and name and items):
            raise UserError(f"--vary {item!r}: expected FIELD=VALUE1,VALUE2")
        if name in axes:
            raise UserError(f"--vary {name}: given twice")
        if (i := _first_repeat(items)) is not None:
            raise UserError(f"--vary {item!r}: {items[i]} given twice")
        axes[name] = items
    if losses is not None:
        if "loss" in axes:
            raise UserError("--losses and --vary loss=... both given: use one")
        axes = {"loss": [v.strip() for v in losses.split(",") if v.strip()], **axes}
        if not axes["loss"]:
            raise UserError("--losses: expected a comma-separated list of policy losses")
        if (i := _first_repeat(axes["loss"])) is not None:
            raise UserError(f"--losses {losses!r}: {axes['loss'][i]} given twice")
    return axes or {"loss": ["gppo", "grpo", "cispo"]}


def _first_repeat(values: list) -> int | None:
    """The index of the first value equal to one before it (settings compare by value: an arm's dict in any
    order), else None."""
    return next((i for i, v in enumerate(values) if v in values[:i]), None)


def _print_rl_plan(model: str, data: str | None, cfg: RLConfig, nproc: int, gpu_memory: float | None,
                   preset) -> None:
    """`klear rl --dry-run`: the plan of tasks/training/dry_run.py on this run's GPUs; a plan that cannot
    fit ends the command with exit 1 and its one-line reason."""
    from dataclasses import replace

    import torch

    from tasks.training.dry_run import dry_run
    from tasks.training.plan import Hardware

    hw = replace(preset.hardware if preset else Hardware(), nproc=nproc)
    if gpu_memory is None and torch.cuda.is_available():
        gpu_memory = torch.cuda.get_device_properties(0).total_memory / (1 << 30)
    if gpu_memory is not None:
        if gpu_memory <= 0:
            raise UserError(f"--gpu-memory must be positive (got {gpu_memory})")
        hw = replace(hw, gpu_memory_gib=gpu_memory)
    prompt_tokens = _longest_prompt(model, data, cfg) if data else None
    try:
        plan = dry_run(model, cfg, hw, prompt_tokens)
    except ValueError as e:
        raise UserError(f"--dry-run: {e}") from None
    print(plan.render(), flush=True)
    if plan.refusal:
        raise typer.Exit(1)


def _longest_prompt(model: str, data: str, cfg: RLConfig) -> int | None:
    """The data's longest chat prompt in tokens, when --model is a directory with a tokenizer; else None."""
    from tasks.training.rl_data import load_rl_rows

    if not (Path(model) / "config.json").is_file():
        return None
    check_data(data)
    from transformers import AutoTokenizer

    from tasks.generation.base import chat_prompt

    tok = AutoTokenizer.from_pretrained(model)
    rows, _, _ = load_rl_rows(data, tuple(cfg.domains), cfg.selection)
    return max((len(tok(chat_prompt(tok, r["problem"]), add_special_tokens=False)["input_ids"]) for r in rows),
               default=None)
