"""The `rl` flow (GPPO by default) and the `ablate` flow (losses × seeds on the same data)."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow
from prefect.artifacts import create_table_artifact

from storage.keys import hash_json, short_id
from storage.store import Store, store_of
from tasks.training.prefect_tasks import rl_train_task
from tasks.training.rl import RLConfig


@flow(name="rl", log_prints=True)
def rl(model: str, data: str, out: str, config: RLConfig = RLConfig(), resume: bool = False,
       store: str | None = None) -> dict:
    """Policy-gradient RL from `model` on the rewardable problems of `data` (a store or canonical file)."""
    store = store or store_of(data)
    return rl_train_task(model, data, out, config, resume, store)


@flow(name="ablate", log_prints=True)
def ablate(model: str, data: str, out: str, benchmark: str, losses: list[str] = ["gppo", "grpo", "cispo"],
           seeds: list[int] = [1, 2], config: RLConfig = RLConfig(), store: str | None = None) -> list[dict]:
    """Train one RL run per (loss, seed) from the same model and data, evaluating held-out avg@k every
    `config.eval_every` steps; report final and best avg@k per loss (mean over seeds)."""
    store = store or store_of(data)
    cfg = replace(config, eval_benchmark=benchmark, eval_every=config.eval_every or max(1, config.steps // 4))
    ablation = short_id("ab", hash_json({"model": model, "data": data, "benchmark": benchmark, "losses": losses,
                                         "seeds": seeds, "config": cfg.__dict__}))
    runs = []
    for loss in losses:
        for seed in seeds:
            res = rl_train_task(model, data, str(Path(out) / f"{loss}-seed{seed}"), replace(cfg, loss=loss, seed=seed),
                                False, store)
            runs.append({"ablation": ablation, "loss": loss, "seed": seed, **res})
    table = []
    for loss in losses:
        mine = [r for r in runs if r["loss"] == loss]
        table.append({"loss": loss, "seeds": len(mine),
                      "final_avg_at_k": sum(r["final_avg_at_k"] for r in mine) / len(mine),
                      "best_avg_at_k": sum(r["best_avg_at_k"] for r in mine) / len(mine)})
    create_table_artifact(key="ablation-table", table=table,
                          description=f"Ablation {ablation}: held-out avg@{cfg.eval_k}, mean over seeds {seeds}")
    if store:
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        cat = Store(store).catalog
        for r in runs:
            cat.insert_once("ablations", {"id": f"{ablation}-{r['loss']}-{r['seed']}", "ablation": ablation,
                                          "loss": r["loss"], "seed": r["seed"], "checkpoint": r["checkpoint"],
                                          "final_avg_at_k": r["final_avg_at_k"], "best_avg_at_k": r["best_avg_at_k"],
                                          "steps": r["steps"], "benchmark": benchmark, "created": created})
    return table
