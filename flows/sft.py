"""The `sft` flow: long-CoT supervised fine-tuning of a model on curated data → HF checkpoint."""
from __future__ import annotations

from prefect import flow

from storage.store import store_of
from tasks.training.prefect_tasks import sft_train_task
from tasks.training.sft import SFTConfig


@flow(name="sft", log_prints=True)
def sft(model: str, data: str, out: str, config: SFTConfig = SFTConfig(), resume: bool = False,
        nproc: int = 1, store: str | None = None) -> dict:
    """Fine-tune `model` on `data` (a store, or a canonical .jsonl/.parquet) into `out`.
    `nproc` > 1 launches torchrun over that many local processes. When `data` is a store (or `store` is
    given) the checkpoint is registered in its catalog with lineage."""
    store = store or store_of(data)
    return sft_train_task(model, data, out, config, resume, store, nproc)
