"""docker-compose.yml as `make compose` brings it up: images from Debian packages, the API's basic-auth
secret written once into its env file, every service healthy, the deployments registered by the stack itself
(`pipeline/nightly` on klear-cpu with gpu_pool on), the API refusing a request without the password (401)
and answering one with it, and `pipeline/demo` at the smallest size with gpu_pool on run to Completed: the
pipeline on the klear-cpu worker (verification on the Dask workers), its SFT, difficulty, RL and evaluation
stages as child runs on the klear-gpu worker, through the store both mount at /data. The stack runs under
its own compose project name, ports and env file and is taken down with its volumes in `finally`.

Opt-in with KLEAR_TEST_COMPOSE=1: on 2 cores at load ≈ 8–10 it takes 9–13 minutes with the images built
(measured 9 min 33 s: stack healthy 166 s, the routed run 336 s), and building the images first adds 7–16
minutes (the dependency venv is most of it; afterwards a source edit rebuilds only klear-app, seconds)."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.flows.test_deployments import GPU_STAGE_FLOWS

from tests.flows.test_pipeline_flow import _config

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(2700)]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 1200  # the pipeline plus six child runs, each a new process in the klear-gpu container


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _compose(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["docker-compose", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_compose_stack_runs_pipeline_demo(tmp_path):
    if os.environ.get("KLEAR_TEST_COMPOSE") != "1":
        pytest.skip("opt-in (KLEAR_TEST_COMPOSE=1): 9–13 min under load with the images built, "
                    "≈ 30 min when it has to build them; see docs/compose.md")
    if shutil.which("docker-compose") is None and os.geteuid() != 0:
        pytest.skip("docker-compose is not installed (Debian: apt-get install docker-compose)")
    port = _free_port()
    project = f"klear-test-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    secrets_file = tmp_path / "compose-auth.env"  # written by up.sh, as .klear-compose.env by `make compose`
    env.update(COMPOSE_PROJECT_NAME=project, KLEAR_PREFECT_PORT=str(port),
               KLEAR_DASK_DASHBOARD_PORT=str(_free_port()), KLEAR_COMPOSE_ENV_FILE=str(secrets_file),
               PY=sys.executable, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    api = f"http://127.0.0.1:{port}/api"
    try:
        started = time.monotonic()
        up = subprocess.run(["bash", "scripts/compose/up.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=1800, stdin=subprocess.DEVNULL)
        assert up.returncode == 0, f"make compose failed\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        print(f"stack up (images + healthy) in {time.monotonic() - started:.0f}s")

        auth = _auth_string(secrets_file)
        client_env = {**env, "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-home"),
                      "PREFECT_API_AUTH_STRING": auth}
        user, password = auth.split(":", 1)
        assert httpx.post(f"{api}/flows/filter", json={}, timeout=10).status_code == 401
        assert httpx.post(f"{api}/flows/filter", json={}, timeout=10, auth=(user, "wrong")).status_code == 401
        assert httpx.post(f"{api}/flows/filter", json={}, timeout=10, auth=(user, password)).status_code == 200
        assert httpx.get(f"{api}/health", timeout=10).status_code == 200  # health probes need no password

        listed = subprocess.run([str(BIN / "prefect"), "deployment", "ls", "-o", "json"], env=client_env,
                                capture_output=True, text=True, timeout=120, check=True).stdout
        flows = {f["id"]: f["name"] for f in
                 httpx.post(f"{api}/flows/filter", json={}, timeout=10, auth=(user, password)).json()}
        by_name = {f"{flows[d['flow_id']]}/{d['name']}": d for d in json.loads(listed)}
        assert by_name["pipeline/demo"]["pull_steps"] == [
            {"prefect.deployments.steps.set_working_directory": {"directory": "/opt/klear"}}]
        nightly = by_name["pipeline/nightly"]
        assert nightly["work_pool_name"] == "klear-cpu" and nightly["parameters"] == {"config": {"gpu_pool": True}}
        assert by_name["sft/default"]["work_pool_name"] == by_name["rl/default"]["work_pool_name"] == "klear-gpu"

        store = "/data/store-test"  # on the stack's klear-data volume, mounted by both Prefect workers
        params = {"store": store, "config": {**dataclasses.asdict(_config(store)), "store": None, "gpu_pool": True}}
        run = subprocess.run([str(BIN / "prefect"), "deployment", "run", "pipeline/demo", "--params",
                              json.dumps(params)], env=client_env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout).group(1)

        t0, deadline = time.monotonic(), time.monotonic() + RUN_TIMEOUT_S
        while True:
            state = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10, auth=(user, password)).json()
            if state["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            assert time.monotonic() < deadline, f"{state['state_type']} after {RUN_TIMEOUT_S}s\n" + \
                _compose(env, "logs", "--tail", "60", "prefect-worker").stdout
            time.sleep(5)
        logs = _compose(env, "logs", "--tail", "80", "prefect-worker", "prefect-gpu-worker", "dask-worker-1").stdout
        assert state["state_type"] == "COMPLETED", f"{state['state_name']}: {state['state']['message']}\n{logs}"
        assert state["work_pool_name"] == "klear-cpu"
        print(f"pipeline/demo (smallest, gpu_pool on) through the stack in {time.monotonic() - t0:.0f}s")

        children = httpx.post(f"{api}/flow_runs/filter", timeout=10, auth=(user, password), json={
            "flow_runs": {"parent_flow_run_id": {"any_": [run_id]}}}).json()
        routed = [c for c in children if c["deployment_id"]]
        assert sorted(flows[c["flow_id"]] for c in routed) == GPU_STAGE_FLOWS, routed
        assert {(c["work_pool_name"], c["state_type"]) for c in routed} == {("klear-gpu", "COMPLETED")}

        # the evaluations landed in the store on the worker's volume; verification went through Dask
        query = ("import duckdb; c = duckdb.connect('/data/store-test/catalog.duckdb', read_only=True); "
                 "print(sorted(r[0] for r in c.execute('select c.stage from evaluations e join checkpoints c "
                 "on c.id = e.checkpoint').fetchall()))")
        out = _compose(env, "exec", "-T", "prefect-worker", "python", "-c", query, timeout=120)
        assert out.stdout.strip() == "['base', 'rl', 'sft']", out.stdout + out.stderr
        ran = ("from distributed import Client; c = Client('tcp://127.0.0.1:8786', timeout=30); "
               "print(c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)), "
               "len(c.scheduler_info()['workers']))")
        out = _compose(env, "exec", "-T", "dask-scheduler", "python", "-c", ran, timeout=120)
        assert "verify_chunk" in out.stdout and out.stdout.strip().endswith(" 2"), out.stdout + out.stderr

        again = subprocess.run(["bash", "scripts/compose/up.sh"], cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=900, stdin=subprocess.DEVNULL)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert _auth_string(secrets_file) == auth  # the secret is written once, not per `make compose`
    finally:
        if not secrets_file.exists():  # compose reads env_file even to take the stack down
            secrets_file.touch()
        down = _compose(env, "down", "-v", "--remove-orphans", "-t", "30", timeout=300)
        assert down.returncode == 0, down.stderr


def _auth_string(path: Path) -> str:
    """The PREFECT_API_AUTH_STRING that up.sh wrote (once, owner-only) into the stack's env file."""
    assert path.stat().st_mode & 0o077 == 0, oct(path.stat().st_mode)
    values = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line
                  and not line.startswith("#"))
    assert values["PREFECT_API_AUTH_STRING"] == values["PREFECT_SERVER_API_AUTH_STRING"]
    user, _, password = values["PREFECT_API_AUTH_STRING"].partition(":")
    assert user and len(password) >= 24, "a random password"
    return values["PREFECT_API_AUTH_STRING"]
