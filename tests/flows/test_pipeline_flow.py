"""The end-to-end pipeline at the smallest size under a real Prefect server: every stage runs, the
catalog holds the lineage, a second run recomputes nothing, a changed setting reruns only the stages
after it; and the paper's two RL stages (math, then code from its checkpoint)."""
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


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """One store for the module: the two-stage test finds the first test's stages cached (when it runs
    after it) and trains only its code stage."""
    return tmp_path_factory.mktemp("pipeline") / "store"


def test_pipeline_smallest_size(prefect_server, small_store, capsys):
    from flows.pipeline import pipeline

    store = small_store
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

    import dataclasses  # a verify (curation) setting: the dataset changes, so every stage after it reruns

    pipeline(dataclasses.replace(_config(store), min_tests=17))
    third = {name: how for name, how, _ in _stage_ends(capsys.readouterr().err)}
    assert {n for n, how in third.items() if how == "cached"} == {"curate", "base-model", "eval-base"}
    assert {n for n, how in third.items() if how == "computed"} == {"verify", "sft", "tag-difficulty", "rl",
                                                                     "eval-sft", "eval-rl"}


def test_pipeline_two_rl_stages(prefect_server, small_store, capsys):
    """The paper's two RL stages: math RL from SFT, then code RL from the math checkpoint with its own
    settings (domain, lr, window), each content-addressed and evaluated; changing only the code stage's
    settings reruns that stage and its evaluation, nothing before it."""
    import dataclasses

    from flows.pipeline import pipeline
    from tasks.training.config import SelectionConfig

    store = small_store
    code = dataclasses.replace(_config(store).rl, domains=("code",), lr=5e-5,
                               selection=SelectionConfig(code_min=None, code_max=0.5))
    two = dataclasses.replace(_config(store), rl_code=code)
    s1 = pipeline(two)
    ends = _stage_ends(capsys.readouterr().err, total=12)
    assert [n for n, *_ in ends][-6:] == ["rl", "rl-code", "eval-base", "eval-sft", "eval-rl", "eval-rl-code"]
    assert 0.0 <= s1["rl_code_avg_at_k"] <= 1.0 and s1["rl_code"] != s1["rl"]
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    from storage.checkpoints import checkpoint_id

    (parent,) = con.execute("select parent from checkpoints where id = ?", [checkpoint_id(s1["rl_code"])]).fetchone()
    con.close()
    assert parent == checkpoint_id(s1["rl"])  # the code stage's parent is the math stage

    s2 = pipeline(dataclasses.replace(two, rl_code=dataclasses.replace(code, lr=4e-5)))
    again = {n: how for n, how, _ in _stage_ends(capsys.readouterr().err, total=12)}
    assert {n for n, how in again.items() if how == "computed"} == {"rl-code", "eval-rl-code"}
    assert s2["rl"] == s1["rl"] and s2["rl_code"] != s1["rl_code"]


def _stage_ends(err: str, total: int = 10) -> list[tuple[str, str, str]]:
    """(stage, cached|computed|done, figure) from the pipeline's "stage i/n NAME: HOW in S.Ss, FIGURE" lines."""
    import re

    return [(m[1], m[2], m[3]) for m in re.finditer(rf"^stage \d+/{total} (\S+): (cached|computed|done) in [\d.]+s(?:, (.*))?$",
                                                    err, re.M)]
