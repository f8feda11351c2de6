"""The `sft` flow: long-CoT supervised fine-tuning of a model on curated data → HF checkpoint."""
from __future__ import annotations

from typing import Annotated

from prefect import flow

from flows.prefect_ui import ConfigForm, flow_run_namer, one_line_failures, short_name
from storage.store import resolve_store, store_of
from tasks.training.launch import run_sft
from tasks.training.nodes import node_layout
from tasks.training.prefect_tasks import sft_train_task
from tasks.training.sft import SFTConfig


@flow(name="sft", log_prints=True, validate_parameters=False,
      flow_run_name=flow_run_namer("sft", lambda param: short_name(param("out"))))
@one_line_failures
def sft(model: str, data: str, out: str, config: Annotated[SFTConfig, ConfigForm(SFTConfig)] = SFTConfig(),
        resume: bool = False, nproc: int = 1, store: str | None = None, nnodes: int = 1, node_rank: int = 0,
        rdzv_endpoint: str | None = None) -> dict:
    """Fine-tune `model` on `data` (a store, or a canonical .jsonl/.parquet) into `out`.
    `nproc` > 1 launches torchrun over that many local processes. The checkpoint is registered with its
    lineage in the catalog of `store`, else of the store `data` names, else of the default store
    ($KLEAR_STORE or ./klear-store). Several nodes: one run of this flow per node, the same parameters
    but `node_rank` (tasks/training/nodes.py); node 0's run reports progress and registers the checkpoint,
    the others only run their ranks. `out`, `model` and `data` must be the same paths on every node and
    `out` on storage they share.

    Args:
        model: HF model directory to start from (a base model)
        data: a store (its current dataset), STORE#VERSION, or a canonical .jsonl/.parquet file
        out: output directory: the HF checkpoint, checkpoints/, metrics.jsonl, loss.png
        config: SFT settings (`klear sft`'s flags)
        resume: continue from the latest checkpoint in `out`
        nproc: processes (GPUs) for torchrun; 1 trains in the flow's own process
        store: store whose catalog records the checkpoint (default: the one `data` names)
        nnodes: machines the run spans (`nproc` processes on each); 1 trains on this one
        node_rank: this machine's place, 0 to nnodes - 1 (node 0 hosts the rendezvous and writes `out`)
        rdzv_endpoint: HOST:PORT of node 0's rendezvous, the same on every node (with nnodes > 1)
    """
    nodes = node_layout(nnodes, node_rank, rdzv_endpoint, environ={})  # parameters only: one line if wrong
    store = store or store_of(data) or resolve_store(None)
    if not nodes.is_main:
        run_sft(model, data, out, config, resume, nproc, nodes=nodes)
        return {"out": out, "nnodes": nodes.nnodes, "node_rank": nodes.node_rank}
    return sft_train_task(model, data, out, config, resume, store, nproc, nodes)
