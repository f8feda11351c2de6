"""Record an evaluation: per-problem results as Parquet in the store, one `evaluations` row in the catalog.
The row id hashes checkpoint, benchmark content, k, seed, sampling settings and the code of evaluation,
grading and generation (a changed seeding or grading rule is a new evaluation, not a cached one), so
re-running the same evaluation does not add a row; it does not depend on `nproc` (same numbers). The row's
`benchmark_path` is the file's absolute path (storage/paths.recorded), whatever directory it was named from."""
from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from storage import paths
from storage.checkpoints import read_lineage, recorded_checkpoint_id
from storage.keys import code_version, hash_file, hash_json, short_id
from storage.store import Store
from tasks.evaluation.evaluate import EvalConfig, EvalResult


def evaluation_id(model: str, benchmark_path: str, config: EvalConfig) -> str:
    """Content address of an evaluation: checkpoint weights, benchmark content, sampling settings, code."""
    return short_id("ev", hash_json({"checkpoint": recorded_checkpoint_id(model),
                                     "benchmark": hash_file(benchmark_path),
                                     "config": asdict(config),
                                     "code": code_version(("tasks.evaluation", "tasks.grading", "tasks.generation"))}))


def find_evaluation(store_root: str, eval_id: str) -> dict | None:
    cat = Store(store_root).catalog
    with cat.connect() as con:
        cur = con.execute("SELECT * FROM evaluations WHERE id = ?", [eval_id])
        row = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], row)) if row else None


def record_evaluation(model: str, result: EvalResult, config: EvalConfig, store_root: str | None) -> dict:
    ck = recorded_checkpoint_id(model)
    eval_id = evaluation_id(model, result.benchmark_path, config)
    row = {"id": eval_id, "checkpoint": ck, **result.summary(),
           "benchmark_path": paths.recorded(result.benchmark_path),  # as read, from any directory
           "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if store_root:
        store = Store(store_root)
        results_path = store.path("evaluations", f"{eval_id}.parquet")
        paths.makedirs(store.path("evaluations"))
        table = pa.Table.from_pylist([{**p, "scores": json.dumps(p["scores"])} for p in result.per_problem])
        with paths.open_binary(results_path, "wb") as f:
            pq.write_table(table, f, compression="zstd")
        lineage = read_lineage(model)
        if lineage and lineage.get("id") == ck:
            store.catalog.insert_once("checkpoints", lineage)
        store.catalog.insert_once("evaluations", {**row, "results_path": results_path})
    return row
