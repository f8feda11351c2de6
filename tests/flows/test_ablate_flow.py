"""`ablate` runs every (arm, seed) once: a rerun trains nothing and adds no catalog rows; an added seed
trains only that seed's runs. Training on a file records its rows in the default store ($KLEAR_STORE)."""
import json
from pathlib import Path

import duckdb
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = [{"problem": f"What is {a} plus {b}?", "answer": str(a + b), "domain": "math"} for a in range(4) for b in range(4)]


def _metrics_stamp(out):
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/metrics.jsonl")}


def test_ablation_runs_are_cached_and_an_added_seed_trains_only_itself(tmp_path, prefect_server, monkeypatch):
    from flows.rl import ablate
    from tasks.models.factory import init_model
    from tasks.training.config import RLConfig

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]))
    model = init_model(tmp_path / "base", [r["problem"] for r in ROWS], seed=0)
    cfg = RLConfig(steps=2, prompts_per_step=2, rollouts_per_prompt=2, mini_batches=1, max_tokens=12, eval_k=1,
                   save_every=2, domains=("math",))
    out, store = tmp_path / "runs", str(tmp_path / "store")
    monkeypatch.setenv("KLEAR_STORE", store)  # data is a file: rows go to the default store
    monkeypatch.chdir(tmp_path)  # the benchmark named relative to it: the catalog records it absolute
    kw = dict(model=str(model), data=str(data), out=str(out), benchmark=bench.name,
              vary={"loss": ["gppo", "grpo"]}, config=cfg)

    first = ablate(seeds=[1], **kw)
    assert [r["arm"] for r in first["table"]] == ["loss=gppo", "loss=grpo"]
    assert first["pairs"] == []          # one seed per arm: no test between arms
    assert all(r["initial_avg_at_k"] is not None and r["auc"] is not None for r in first["table"])  # step 0 evaluated
    assert Path(first["chart"]).is_file() and Path(first["chart"]).with_suffix(".json").is_file()
    stamps = _metrics_stamp(out)
    assert len(stamps) == 2
    rows = lambda: duckdb.connect(f"{store}/catalog.duckdb", read_only=True).execute(  # noqa: E731
        "SELECT ablation, arm, seed FROM ablations ORDER BY ablation, arm, seed").fetchall()
    before = rows()
    assert len(before) == 2
    recorded = duckdb.connect(f"{store}/catalog.duckdb", read_only=True).execute(
        "SELECT DISTINCT benchmark FROM ablations").fetchall()
    assert recorded == [(str(bench.resolve()),)]

    again = ablate(seeds=[1], **kw)
    assert again == first and _metrics_stamp(out) == stamps and rows() == before

    more = ablate(seeds=[1, 2], **kw)
    grown = _metrics_stamp(out)
    assert len(grown) == 4 and {k: grown[k] for k in stamps} == stamps   # only the seed-2 runs trained
    assert [r["seeds"] for r in more["table"]] == [2, 2]
    (pair,) = more["pairs"]
    assert (pair["a"], pair["b"]) == ("loss=gppo", "loss=grpo") and 0.0 <= pair["p"] <= 1.0
    assert len(rows()) == 2 + 4   # a new ablation id (its seeds changed): one row per (arm, seed)
