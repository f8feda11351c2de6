"""prefect.yaml as a user runs it: a real Prefect server (own port, own PREFECT_HOME), `prefect deploy --all`
from the repo, the cron schedules in `prefect deployment ls`, a process worker on klear-cpu, and
`prefect deployment run 'pipeline/demo'` at the smallest size ending Completed with base/SFT/RL evaluations
in the store's catalog. Everything started here is stopped in `finally`, worker before server."""
from __future__ import annotations

import dataclasses
import json
import os
import re
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
RUN_TIMEOUT_S = 720  # the smallest pipeline: ≈ 5 minutes on 2 cores under load ≈ 10, less when idle


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


def test_deploy_all_and_run_pipeline_demo_on_a_worker(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_API_URL=api,
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
               COLUMNS="200")
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    server = worker = None
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
        assert pools["pipeline/demo"] == pools["curate/nightly"] == pools["verify/default"] == "klear-cpu"
        assert pools["sft/default"] == pools["rl/default"] == "klear-gpu"
        demo = by_name["pipeline/demo"]
        assert "store" in demo["parameter_openapi_schema"]["properties"]
        assert demo["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}]
        for name in ("pipeline/nightly", "curate/nightly"):  # no nightly run may start during the test
            _cli(["deployment", "schedule", "pause", name, str(by_name[name]["schedules"][0]["id"])], env)

        worker = _start([str(BIN / "prefect"), "worker", "start", "--pool", "klear-cpu"], env, worker_log)
        store = tmp_path / "store"
        params = {"store": str(store), "config": dataclasses.asdict(_config(store))}
        params["config"]["store"] = None  # the `store` parameter alone picks the store
        out = _cli(["deployment", "run", "pipeline/demo", "--params", json.dumps(params)], env)
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)

        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            run = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()
            if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            assert worker.poll() is None, f"worker exited\n{_tail(worker_log)}"
            assert time.monotonic() < deadline, f"run {run['state_type']} after {RUN_TIMEOUT_S} s\n{_tail(worker_log)}"
            time.sleep(3)
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}\n{_tail(worker_log, 80)}"

        con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
        stages = con.execute("select c.stage from evaluations e join checkpoints c on c.id = e.checkpoint "
                             "order by c.stage").fetchall()
        con.close()
        assert [s for (s,) in stages] == ["base", "rl", "sft"]
    finally:
        _stop(worker)
        _stop(server)
