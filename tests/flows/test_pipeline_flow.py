"""The end-to-end pipeline at the smallest size under a real Prefect server: every stage runs, the
catalog holds the lineage, a second run recomputes nothing, a changed setting reruns only the stages
after it; and the paper's two RL stages (math, then code from its checkpoint). The first run is also read
back as the Prefect UI reads it (task inputs it can render, names by stage, artifacts), and failed runs
beside it (bad rows, bad parameters) end in one line."""
import json

import duckdb
import pytest

UI_INPUT_KINDS = {"task_run", "parameter", "constant"}  # what the UI's TaskInputResponse mapper takes (3.9)

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
    state = pipeline(_config(store), return_state=True)
    s1 = state.result()
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
    _assert_readable_in_the_ui(state.state_details.flow_run_id)
    _assert_failures_are_one_line(store, s1["sft"])

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
    # the base model's tokenizer is trained on the dataset's text (tasks/models/corpus.dataset_texts): it reruns too
    assert {n for n, how in third.items() if how == "cached"} == {"curate"}
    assert {n for n, how in third.items() if how == "computed"} == {"verify", "base-model", "eval-base", "sft",
                                                                     "tag-difficulty", "rl", "eval-sft", "eval-rl"}


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


def _ui_view(run_id):
    """The pipeline run with its subflow runs, their task runs, and the run's artifacts, read from the API."""
    from prefect import get_client
    from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter,
                                                FlowRunFilterId, FlowRunFilterParentFlowRunId)

    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_id])))
        runs = [client.read_flow_run(run_id), *children]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[r.id for r in runs])),
                                      limit=200)
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])), limit=200)
    return runs, tasks, artifacts


def _assert_readable_in_the_ui(run_id):
    """Every task run of the pipeline run and of its subflows carries only input kinds the UI renders (a
    subflow's result passed on is recorded as a `flow_run` input, which blanks its task-run page and the
    run's Task Runs tab); runs, task runs and artifacts are named by what they are; every artifact says
    what it shows; no chart prints its data URL; count tables in `klear curate`'s column order, 0 not blank."""
    runs, tasks, artifacts = _ui_view(run_id)
    kinds = {(t.name, k): {i.input_type for i in inputs} for t in tasks for k, inputs in t.task_inputs.items()}
    assert {(where, kind) for where, got in kinds.items() for kind in got if kind not in UI_INPUT_KINDS} == set()
    verify = [t for t in tasks if t.name.startswith("verify-") and "parent" in t.task_inputs]  # the subflow's task
    assert verify and verify[0].task_inputs["parent"] == []  # curate's result, passed on as a plain value

    names = {r.name for r in runs}
    assert "pipeline-demo-0.05" in names and any(n.startswith("curate-") for n in names)
    assert any(n.startswith("verify-") and n != "verify-current" for n in names)
    assert {"eval-base", "eval-sft", "eval-rl", "rl", "sft", "tag-difficulty"} <= {t.name for t in tasks}

    by_key = {a.key: a for a in artifacts}
    assert {"eval-base", "eval-sft", "eval-rl", "sft-loss-curve", "rl-reward-curve", "dataset-counts",
            "dataset-report", "difficulty-histogram", "pipeline-comparison", "pipeline-report"} <= set(by_key)
    assert [a.key for a in artifacts if not (a.description or "").strip()] == []
    assert [a.key for a in artifacts if a.type == "image"] == []  # the UI prints an image artifact's URL
    assert "](data:image/png;base64," in by_key["sft-loss-curve"].data and "![SFT loss" in by_key["sft-loss-curve"].data
    counts = json.loads(by_key["dataset-counts"].data)
    assert list(counts[0])[:4] == ["source", "score", "rows_in", "kept"]
    assert all(v is not None for row in counts for k, v in row.items() if k != "score")
    assert {json.loads(by_key[f"eval-{s}"].data)[0]["model"].split("-")[0] for s in ("base", "sft", "rl")} == \
        {"base", "sft", "rl"}


def _assert_failures_are_one_line(store, model):
    """Failed runs as a person reads them in the UI: bad rows given to `rl`, a bad RL parameter (JSON, as a
    deployment passes it) and a bad pipeline parameter each end Failed with one line as the state message,
    and the run's log holds that line once (at ERROR) and no traceback."""
    from flows.pipeline import pipeline
    from flows.rl import rl

    bad = store.parent / "bad-rows.jsonl"
    bad.write_text('{"problem": "What is 1 plus 1?"}\n')
    states = {
        "rows": rl(model=model, data=str(bad), out=str(store.parent / "rl-bad-rows"), return_state=True),
        "lr": rl(model=model, data=str(bad), out=str(store.parent / "rl-bad-lr"), config={"lr": -1},
                 return_state=True),
        "pipeline": pipeline(config={"demo": False, "sources": {"s": str(store.parent / "missing.jsonl")}},
                             store=str(store), return_state=True)}
    for what, state in states.items():
        assert state.is_failed(), (what, state)
        line = state.message
        assert "\n" not in line and len(line) < 400, (what, line)
        logs = _logs_once_shipped(state.state_details.flow_run_id, line)
        assert [(lv, m) for lv, m in logs if line in m] == [(40, line)], (what, line, logs)
        assert not any("Traceback" in m for _, m in logs), (what, logs)
    assert states["rows"].message.startswith(f"rl: {bad}: no rewardable problems")
    assert states["lr"].message == "rl: parameter config: lr (--lr) must be above 0.0 (got -1.0)"
    assert states["pipeline"].message.startswith("pipeline: parameter config: sources s=")


def _logs_once_shipped(run_id, line: str, seconds: float = 30) -> list[tuple[int, str]]:
    """The flow run's log (its task runs' too), as the UI lists it: (level, message). Logs are shipped in
    the background: flushed first, then read until `line` is there (a bounded poll)."""
    import time

    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    deadline = time.monotonic() + seconds
    while True:
        with get_client(sync_client=True) as client:
            logs = [(r.level, r.message) for r in client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]
        if any(line in m for _, m in logs) or time.monotonic() > deadline:
            return logs
        time.sleep(0.5)


def _stage_ends(err: str, total: int = 10) -> list[tuple[str, str, str]]:
    """(stage, cached|computed|done, figure) from the pipeline's "stage i/n NAME: HOW in S.Ss, FIGURE" lines."""
    import re

    return [(m[1], m[2], m[3]) for m in re.finditer(rf"^stage \d+/{total} (\S+): (cached|computed|done) in [\d.]+s(?:, (.*))?$",
                                                    err, re.M)]
