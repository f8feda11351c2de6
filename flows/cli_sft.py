"""`klear sft`: long-CoT supervised fine-tuning; its settings are SFTConfig's fields as flags."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Optional

import typer

from flows.cli_checks import (already_trained, check_data, check_model, resolve_model_flag, check_nproc,
                              check_record_store, check_training_rows, prepare_out, recording_store_root)
from flows.cli_common import (check_prefect_api, checked, console, quiet_children_after_interrupt,
                              quiet_prefect_defaults, run_flow, starting)
from flows.cli_config_options import build_config, with_config_options
from flows.cli_nodes import NNodesOpt, NodeRankOpt, RdzvEndpointOpt, check_nodes, other_node_done
from tasks.training.config import SFTConfig


@with_config_options(SFTConfig)
def sft(
    model: str = typer.Option(..., "--model", help="HF model directory, pretrained model name (klear model "
                              "list) or Hub id to start from"),
    data: str = typer.Option(..., "--data", help="A store (its curated problems), STORE#VERSION (one of its dataset versions) or a canonical .jsonl/.parquet"),
    out: str = typer.Option(..., "--out", help="Output directory (HF checkpoint + checkpoints/ + metrics)"),
    nproc: int = typer.Option(1, "--nproc", help="Processes (GPUs) for torchrun; 1 trains in this process"),
    nnodes: Optional[int] = NNodesOpt,
    node_rank: Optional[int] = NodeRankOpt,
    rdzv_endpoint: Optional[str] = RdzvEndpointOpt,
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in --out"),
    force: bool = typer.Option(False, "--force", help="Start over in an --out holding another run's checkpoints"),
    store: Optional[str] = typer.Option(None, "--store", help="Store whose catalog records the checkpoint "
                                        "(default: the store --data names, else $KLEAR_STORE or ./klear-store)"),
    **settings,
) -> None:
    """Long-CoT supervised fine-tuning (loss on response tokens, packing, cosine schedule)."""
    model = resolve_model_flag("--model", model)
    check_data(data)
    check_nproc(nproc)
    nodes = check_nodes(nnodes, node_rank, rdzv_endpoint)
    cfg = checked(lambda: build_config(SFTConfig, settings))
    dataset = check_training_rows(data, "sft")
    check_model(model)
    if store is not None:
        store = recording_store_root(store, "the checkpoint")
    else:  # the checkpoint is recorded in the store --data names, else the default one: checked, not passed on
        check_record_store(data)
    if already_trained(out, "sft", model, data, dataset, cfg, resume, force):
        return
    check_prefect_api()
    prepare_out(out, resume, force, main_node=nodes.is_main)
    quiet_prefect_defaults()
    starting("sft", f"training into {out}" + (f" as {nodes.describe()}" if nodes.multi else ""))
    from flows.sft import sft as sft_flow
    from tasks.training.launch import RanksFailed

    torchrun = nproc > 1 or nodes.multi
    with quiet_children_after_interrupt() if torchrun else nullcontext():  # torchrun's ranks: one line on Ctrl-C
        res = run_flow(sft_flow, model=model, data=data, out=out, config=cfg, resume=resume, nproc=nproc,
                       store=store, nnodes=nodes.nnodes, node_rank=nodes.node_rank,
                       rdzv_endpoint=nodes.rdzv_endpoint, user_errors=(ValueError, RanksFailed))
    if not nodes.is_main:
        return other_node_done(nodes, out)
    console.print(f"checkpoint {res['checkpoint']}: {out}  ({res['steps']} steps, loss "
                  f"{res['first_loss']:.4f} → {res['last_loss']:.4f}; metrics: {out}/metrics.jsonl, TensorBoard: {out}/tb)")
