"""The `sft` flow: long-CoT supervised fine-tuning of a model on curated data → HF checkpoint."""
from __future__ import annotations

from prefect import flow

from storage.store import resolve_store, store_of
from tasks.training.prefect_tasks import sft_train_task
from tasks.training.sft import SFTConfig


@flow(name="sft", log_prints=True)
def sft(model: str, data: str, out: str, config: SFTConfig = SFTConfig(), resume: bool = False,
        nproc: int = 1, store: str | None = None) -> dict:
    """Fine-tune `model` on `data` (a store, or a canonical .jsonl/.parquet) into `out`.
    `nproc` > 1 launches torchrun over that many local processes. The checkpoint is registered with its
    lineage in the catalog of `store`, else of the store `data` names, else of the default store
    ($KLEAR_STORE or ./klear-store)."""
    store = store or store_of(data) or resolve_store(None)
    return sft_train_task(model, data, out, config, resume, store, nproc)
