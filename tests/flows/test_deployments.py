"""prefect.yaml as a user runs it: a real Prefect server (own port, own PREFECT_HOME), `prefect deploy --all`
from the repo, the cron schedules in `prefect deployment ls`, and one process worker per pool (klear-cpu,
klear-gpu) on this machine, sharing the store by path. In that one server session (its start and
`deploy --all` are most of the fixed cost):

- a deployment run of `rl/default` with a bad config (`lr` -1) ends Failed before any training, the
  config's one-line error in the run's state message and once in its log, no traceback; a choice off its
  list (`loss` "nope") is refused before a run exists (the deployment's form has the list);
- `pipeline/demo` at the smallest size with `gpu_pool` on ends Completed with base/SFT/RL evaluations in
  the catalog; its SFT, difficulty, RL and evaluation stages ran as flow runs of their deployments on
  klear-gpu, each a child of the pipeline run (parent task run in the pipeline's flow run);
- the same run again starts no child run of a deployment (every stage found in the store);
- a changed SFT parameter whose SFT child run gets cancelled fails the pipeline with one line naming the
  stage and that child run.

The in-process pipeline (gpu_pool off, the demo's mode) is tests/flows/test_pipeline_flow.py. With
KLEAR_TEST_SCREENSHOTS=DIR the routed run's page and the runs list are shot with headless chromium before
the server stops. Everything started here is stopped in `finally`, workers before server."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from tests.flows.test_pipeline_flow import _config

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 900  # the smallest routed pipeline: ≈ 6 minutes on 2 cores under load ≈ 10, less when idle
BAD_RUN_TIMEOUT_S = 240  # a run refused at parameter validation: a worker pick-up and one process start
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
GPU_STAGE_FLOWS = ["evaluate", "evaluate", "evaluate", "rl", "sft", "tag-difficulty"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(proc: subprocess.Popen | None, grace_s: float = 30) -> None:
    """SIGINT the process group (the worker's flow-run children too; a worker may sit out SIGTERM), then
    SIGTERM, then SIGKILL what is left."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _cli(args: list[str], env: dict, timeout: float = 180) -> str:
    proc = subprocess.run([str(BIN / "prefect"), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"prefect {' '.join(args)} → {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


def test_deploy_all_and_route_pipeline_demo_to_the_gpu_pool(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_API_URL=api,
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
               COLUMNS="200", PREFECT_WORKER_QUERY_SECONDS="1")  # pick-up in ≈ 1 s instead of ≈ 10 per child
    server_log = tmp_path / "server.log"
    server, workers = None, {}
    try:
        server = _start([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                        env, server_log)
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"server exited\n{_tail(server_log)}"
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"server not healthy in 120 s\n{_tail(server_log)}"
            time.sleep(1)

        for pool in ("klear-cpu", "klear-gpu"):
            _cli(["work-pool", "create", pool, "--type", "process"], env)
        _cli(["--no-prompt", "deploy", "--all"], env, timeout=300)
        _check_deployments(api, env)

        for pool in ("klear-cpu", "klear-gpu"):
            workers[pool] = _start([str(BIN / "prefect"), "worker", "start", "--pool", pool], env,
                                   tmp_path / f"worker-{pool}.log")
        store = tmp_path / "store"
        routed = {"store": str(store), "config": {**dataclasses.asdict(_config(store)), "store": None,
                                                  "gpu_pool": True}}
        first = _run_deployment("pipeline/demo", routed, env)
        bad_run = {"model": str(tmp_path / "no-model"), "data": str(store), "out": str(tmp_path / "rl-bad-lr"),
                   "config": {"lr": -1}}
        bad = {"lr": _run_deployment("rl/default", bad_run, env)}
        # a choice off its list (the form's enum) is refused before a run exists, one line naming field and list
        refused = subprocess.run([str(BIN / "prefect"), "deployment", "run", "rl/default", "--params",
                                  json.dumps({**bad_run, "config": {"loss": "nope"}})], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert refused.returncode != 0 and "'config.loss'" in refused.stdout, refused.stdout
        assert "'nope' is not one of [" in refused.stdout and "'gppo'" in refused.stdout, refused.stdout
        # so is a key that is no setting (the schema has additionalProperties: false), never dropped in silence
        misspelt = subprocess.run([str(BIN / "prefect"), "deployment", "run", "rl/default", "--params",
                                   json.dumps({**bad_run, "config": {"max_step": 4}})], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert misspelt.returncode != 0 and "max_step" in misspelt.stdout, misspelt.stdout

        for field, run_id in bad.items():  # refused by RLConfig's own checks, before any training
            run = _wait_final(api, run_id, BAD_RUN_TIMEOUT_S, workers)
            message = run["state"]["message"] or ""
            assert run["state_type"] == "FAILED" and run["work_pool_name"] == "klear-gpu", (run["state_name"], message)
            assert message.startswith("rl: parameter config: ") and "\n" not in message, message
            assert re.search(rf"\b{field} \(--{field}\) must be ", message), message
            assert not (tmp_path / f"rl-bad-{field}").exists()
            logs = _run_logs(api, run_id, message)  # the run's log says it once, at ERROR, without a traceback
            assert [(lv, m) for lv, m in logs if message in m] == [(40, message)], logs
            assert not any("Traceback" in m for _, m in logs), logs

        run = _wait_final(api, first, RUN_TIMEOUT_S, workers)
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}: {run['state']['message']}\n{_logs(tmp_path)}"
        assert run["work_pool_name"] == "klear-cpu"
        children = _deployment_children(api, first)
        assert sorted(c["flow"] for c in children) == GPU_STAGE_FLOWS, children
        for child in children:
            assert child["work_pool_name"] == "klear-gpu" and child["state_type"] == "COMPLETED", child
            parent_task = httpx.get(f"{api}/task_runs/{child['parent_task_run_id']}", timeout=10).json()
            assert parent_task["flow_run_id"] == first, (child, parent_task)
        con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
        stages = con.execute("select c.stage from evaluations e join checkpoints c on c.id = e.checkpoint "
                             "order by c.stage").fetchall()
        con.close()
        assert [s for (s,) in stages] == ["base", "rl", "sft"]
        if os.environ.get("KLEAR_TEST_SCREENSHOTS"):
            _screenshots(api, first, Path(os.environ["KLEAR_TEST_SCREENSHOTS"]))

        gpu_runs = len(_flow_runs(api, {"work_pools": {"name": {"any_": ["klear-gpu"]}}}))
        again = _run_deployment("pipeline/demo", routed, env)
        run = _wait_final(api, again, RUN_TIMEOUT_S, workers)
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}: {run['state']['message']}\n{_logs(tmp_path)}"
        assert _deployment_children(api, again) == []
        assert len(_flow_runs(api, {"work_pools": {"name": {"any_": ["klear-gpu"]}}})) == gpu_runs

        changed = json.loads(json.dumps(routed))
        changed["config"]["sft"]["lr"] = 0.002  # a new SFT key: curate, verify and the base model are found
        third = _run_deployment("pipeline/demo", changed, env)
        sft_child = _wait_child_running(api, third, "sft", workers)
        _cli(["flow-run", "cancel", sft_child], env)
        run = _wait_final(api, third, RUN_TIMEOUT_S, workers)
        message = run["state"]["message"] or ""
        assert run["state_type"] == "FAILED", (run["state_name"], message)
        assert "pipeline: stage sft failed: child flow run " in message and sft_child in message, message
        assert "ended Cancelled" in message and "\n" not in message, message
    finally:
        for worker in workers.values():
            _stop(worker)
        _stop(server)


def _check_deployments(api: str, env: dict) -> dict[str, dict]:
    """Every flow deployed, the cron schedules, the pools, the pull step; nightly schedules paused."""
    listed = _cli(["deployment", "ls"], env)
    flows = {r["id"]: r["name"] for r in httpx.post(f"{api}/flows/filter", json={}, timeout=10).json()}
    by_name = {f"{flows[d['flow_id']]}/{d['name']}": d
               for d in json.loads(_cli(["deployment", "ls", "-o", "json"], env))}
    for flow in ("curate", "verify", "sft", "evaluate", "tag-difficulty", "rl", "ablate", "pipeline"):
        assert any(n.startswith(flow + "/") for n in by_name), (flow, sorted(by_name))
        assert re.search(rf"\b{re.escape(flow)}/", listed)
    crons = {n: [s["schedule"].get("cron") for s in d["schedules"]] for n, d in by_name.items()}
    assert crons["pipeline/nightly"] == ["0 2 * * *"] and crons["curate/nightly"] == ["0 1 * * *"]
    assert crons["pipeline/demo"] == []
    pools = {n: d["work_pool_name"] for n, d in by_name.items()}
    assert pools["pipeline/demo"] == pools["pipeline/nightly"] == pools["curate/nightly"] == "klear-cpu"
    assert pools["verify/default"] == "klear-cpu"
    for name in ("sft/default", "tag-difficulty/default", "rl/default", "evaluate/default"):
        assert pools[name] == "klear-gpu", name
    assert by_name["pipeline/nightly"]["parameters"] == {"config": {"gpu_pool": True}}
    demo = by_name["pipeline/demo"]
    assert "store" in demo["parameter_openapi_schema"]["properties"]
    form = demo["parameter_openapi_schema"]["definitions"]  # the run form `deploy` built (tests/flows/test_ui_forms.py)
    assert set(form) == {"PipelineConfig"} and "enum" in form["PipelineConfig"]["properties"]["model_preset"]
    assert all(p.get("description") for p in form["PipelineConfig"]["properties"].values())
    rl_form = by_name["rl/default"]["parameter_openapi_schema"]["definitions"]["RLConfig"]["properties"]
    assert {"gppo", "grpo", "cispo"} <= set(rl_form["loss"]["enum"])
    assert demo["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}]
    for name in ("pipeline/nightly", "curate/nightly"):  # no nightly run may start during the test
        _cli(["deployment", "schedule", "pause", name, str(by_name[name]["schedules"][0]["id"])], env)
    return by_name


def _run_deployment(name: str, params: dict, env: dict) -> str:
    out = _cli(["deployment", "run", name, "--params", json.dumps(params)], env)
    return re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)


def _wait_final(api: str, run_id: str, seconds: float, workers: dict) -> dict:
    """Poll the flow run until its state is final (or fail after `seconds`, or when a worker dies)."""
    deadline = time.monotonic() + seconds
    while True:
        run = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()
        if run["state_type"] in FINAL:
            return run
        for pool, worker in workers.items():
            assert worker.poll() is None, f"{pool} worker exited"
        assert time.monotonic() < deadline, f"run {run['name']} {run['state_type']} after {seconds} s"
        time.sleep(1)


def _run_logs(api: str, run_id: str, line: str, seconds: float = 30) -> list[tuple[int, str]]:
    """The run's log as (level, message), once `line` is in it (a worker's process ships its log as it
    exits; a bounded poll)."""
    deadline = time.monotonic() + seconds
    while True:
        logs = httpx.post(f"{api}/logs/filter", json={"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200},
                          timeout=10).json()
        if any(line in r["message"] for r in logs) or time.monotonic() > deadline:
            return [(r["level"], r["message"]) for r in logs]
        time.sleep(1)


def _flow_runs(api: str, body: dict) -> list[dict]:
    return httpx.post(f"{api}/flow_runs/filter", json={**body, "limit": 200}, timeout=10).json()


def _deployment_children(api: str, run_id: str) -> list[dict]:
    """The pipeline run's child flow runs that are deployment runs (curate/verify run inline, no deployment),
    each with its flow's name under "flow"."""
    flows = {r["id"]: r["name"] for r in httpx.post(f"{api}/flows/filter", json={}, timeout=10).json()}
    children = _flow_runs(api, {"flow_runs": {"parent_flow_run_id": {"any_": [run_id]}}})
    return [{**c, "flow": flows[c["flow_id"]]} for c in children if c["deployment_id"]]


def _wait_child_running(api: str, run_id: str, flow: str, workers: dict, seconds: float = RUN_TIMEOUT_S) -> str:
    """The id of the run's child of `flow` once it is Running."""
    deadline = time.monotonic() + seconds
    while True:
        running = [c for c in _deployment_children(api, run_id) if c["flow"] == flow and c["state_type"] == "RUNNING"]
        if running:
            return running[0]["id"]
        parent = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()
        assert parent["state_type"] not in FINAL, f"pipeline ended {parent['state_name']} before {flow} ran"
        for pool, worker in workers.items():
            assert worker.poll() is None, f"{pool} worker exited"
        assert time.monotonic() < deadline, f"no running {flow} child of {run_id} after {seconds} s"
        time.sleep(1)


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{_tail(p, 60)}" for p in sorted(tmp_path.glob("worker-*.log")))


def _screenshots(api: str, run_id: str, out: Path) -> Path:
    """One PNG of the routed run in the UI (headless chromium): the pipeline run's page (its graph with
    the sft/tag-difficulty/rl/evaluate child runs), the SFT and RL child runs' headers (Parent Run, Work
    Pool klear-gpu), and the flow runs list (each child's deployment and work pool)."""
    ui = api.removesuffix("/api")
    children = {c["flow"]: c["id"] for c in _deployment_children(api, run_id) if c["flow"] in ("sft", "rl")}
    out.mkdir(parents=True, exist_ok=True)
    pipeline = _shoot(f"{ui}/runs/flow-run/{run_id}", out / "pipeline-run.png")
    sft, rl = (_shoot(f"{ui}/runs/flow-run/{children[f]}", out / f"{f}-run.png") for f in ("sft", "rl"))
    runs = _shoot(f"{ui}/runs", out / "runs.png", height=2000, budget_ms=40000)
    header, sidebar = 100, 260  # a run page's title lines; the UI's left menu (left out below the first shot)
    return _stack([(pipeline, (0, 0, 1600, 470)), (sft, (sidebar, 0, 1600, header)),
                   (rl, (sidebar, 0, 1600, header)), (runs, (sidebar, 720, 1600, 2000))], out / "routed-pipeline.png")


def _stack(crops: list[tuple[Path, tuple[int, int, int, int]]], out: Path) -> Path:
    """The crop boxes (left, top, right, bottom) of the PNGs one under the other, each at its own left."""
    from PIL import Image

    parts = [(Image.open(path).crop(box), box[0]) for path, box in crops]
    sheet = Image.new("RGB", (1600, sum(p.height for p, _ in parts)), (26, 28, 32))
    y = 0
    for part, left in parts:
        sheet.paste(part, (left, y))
        y += part.height
    sheet.save(out)
    return out


def _shoot(url: str, out: Path, height: int = 1100, budget_ms: int = 20000) -> Path:
    import tempfile

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "KLEAR_TEST_SCREENSHOTS needs Debian's chromium (apt-get install chromium)"
    with tempfile.TemporaryDirectory(prefix="klear-chromium-") as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--disable-background-networking", "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size=1600,{height}", f"--virtual-time-budget={budget_ms}", f"--screenshot={out}",
                        url], capture_output=True, timeout=180, check=True)
    return out
