"""The end-to-end pipeline at the smallest size under a real Prefect server: every stage runs, the
catalog holds the lineage, and a second run recomputes nothing."""
import duckdb
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _config(store):
    from tasks.pipeline.config import PipelineConfig
    from tasks.training.config import SelectionConfig
    from tasks.training.rl import RLConfig
    from tasks.training.sft import SFTConfig

    return PipelineConfig(
        store=str(store), demo_scale=0.05, min_tests=16,
        sft=SFTConfig(max_steps=4, batch_size=4, micro_batch_size=4, seq_len=256, lr=3e-3),
        difficulty_k=1,
        rl=RLConfig(steps=2, prompts_per_step=2, rollouts_per_prompt=4, mini_batches=1, max_tokens=24,
                    lr=1e-4, domains=("math",),
                    # k=1 tags are 0 or 1 and a 4-step SFT model solves few: select the unsolved ones
                    selection=SelectionConfig(math_min=None, math_max=0.5)),
        eval_k=1, eval_max_tokens=24)


def test_pipeline_smallest_size(prefect_server, tmp_path, capsys):
    from flows.pipeline import pipeline

    store = tmp_path / "store"
    s1 = pipeline(_config(store))
    first = _stage_ends(capsys.readouterr().err)
    assert [(name, how) for name, how, _ in first] == [
        ("demo-data", "done"), ("curate", "computed"), ("verify", "computed"), ("base-model", "computed"),
        ("sft", "computed"), ("tag-difficulty", "computed"), ("rl", "computed"), ("eval-base", "computed"),
        ("eval-sft", "computed"), ("eval-rl", "computed")]
    figures = {name: fig for name, _, fig in first}
    assert "rows kept" in figures["curate"] and "final loss" in figures["sft"] and "final reward" in figures["rl"]
    assert f"avg@1 {s1['rl_avg_at_k']:.3f}" in figures["eval-rl"]
    for stage in ("base", "sft", "rl"):
        assert 0.0 <= s1[f"{stage}_avg_at_k"] <= 1.0
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    lineage = con.execute("""
        select c.stage, c.parent is not null, d.kind from evaluations e join checkpoints c on c.id = e.checkpoint
        left join datasets d on d.id = c.dataset order by c.stage""").fetchall()
    con.close()
    assert [r[0] for r in lineage] == ["base", "rl", "sft"]
    assert lineage[1][1] and lineage[2][1]  # rl and sft checkpoints have parents
    assert {r[2] for r in lineage[1:]} <= {"verify", "difficulty"}
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    (config,) = con.execute("select config from checkpoints where stage = 'rl'").fetchone()
    con.close()
    import json

    counts = json.loads(config)["selection"]["math"]  # RL data selected by the difficulty tags, counted
    assert counts.get("kept", 0) >= 1 and not counts.get("kept_untagged")
    assert set(counts) <= {"kept", "above_window", "not_rewardable"}

    mtimes = {p: p.stat().st_mtime_ns for p in (store / "models").rglob("*.safetensors")}
    s2 = pipeline(_config(store))
    assert s2 == s1
    again = _stage_ends(capsys.readouterr().err)
    assert {how for name, how, _ in again if name != "demo-data"} == {"cached"}
    assert [fig for *_, fig in again] == [fig for *_, fig in first]
    assert {p: p.stat().st_mtime_ns for p in (store / "models").rglob("*.safetensors")} == mtimes


def _stage_ends(err: str) -> list[tuple[str, str, str]]:
    """(stage, cached|computed|done, figure) from the pipeline's "stage i/n NAME: HOW in S.Ss, FIGURE" lines."""
    import re

    return [(m[1], m[2], m[3]) for m in re.finditer(r"^stage \d+/10 (\S+): (cached|computed|done) in [\d.]+s(?:, (.*))?$",
                                                    err, re.M)]
