"""Screenshots of a pipeline run in the Prefect UI, for docs/ui.md: a temporary Prefect server, prefect.yaml
deployed to it, a small pipeline run, two failed runs, then headless Chromium on the pages a person reads.

    python scripts/ui_screenshots.py docs/screenshots [--scale 0.05] [--keep DIR]

Run it with a Python that has playwright, httpx and pillow (a throwaway venv: `python3 -m venv /tmp/pw &&
/tmp/pw/bin/pip install playwright httpx pillow`; not project dependencies) from the repo root; klear
itself runs with `--klear-python` (default .venv/bin/python). Chromium is Debian's (`apt-get install
chromium`; `playwright install` is not needed). Writes, each a PNG of at most WIDTH pixels:

- task-runs.png: the pipeline run's Task Runs tab (every task run listed, named by its stage);
- task-run.png: the `tag-difficulty` task run's inputs (the page that was blank when it took the verify
  subflow's result as an input);
- artifacts.png: the pipeline run's Artifacts tab as a list (each artifact named by its stage, described);
- failed-run.png: a `rl/default` deployment run given `config={"lr": -1}`: its log, one line, and state;
- run-form.png: the custom-run form of `pipeline/demo` (descriptions, lists for choices, folded configs).

Everything it starts (server, browser) is stopped before it exits, and its temporary directory (server
home, store) removed unless `--keep DIR` names where to leave the store.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
WIDTH = 1600  # the window the finding measured the UI at
HEIGHT = 1000
SHOT_WIDTH = 1200  # the saved PNG, downscaled and palette-quantized so docs stay small
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
SETTLE_MS = 4000  # after a page's network goes idle, for the single-page app to draw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Screenshots of a klear pipeline run in the Prefect UI.")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--scale", type=float, default=0.05, help="demo data size of the pipeline run")
    ap.add_argument("--klear-python", default=str(REPO / ".venv" / "bin" / "python"))
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--keep", type=Path, help="leave the run's store here (default: removed)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="klear-ui-shots-"))
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = _env(args.klear_python, work, api)
    server = None
    try:
        server = _start_server(args.klear_python, port, env, work / "server.log")
        _deploy(args.klear_python, env)
        store = args.keep or work / "store"
        run_id = _pipeline(args.klear_python, env, store, args.scale)
        sft = _summary(run_id, api)["sft"]
        failed = _failed_deployment_run(args.klear_python, env, api, sft, store, work)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for path in _shoot(args.chromium, api, run_id, failed, args.out_dir):
            print(path)
    finally:
        _stop(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


# -- a temporary server and klear runs on it ---------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(python: str, work: Path, api: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(work / "prefect-home"), PREFECT_API_URL=api, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PATH=f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def _start_server(python: str, port: int, env: dict, log: Path) -> subprocess.Popen:
    server = subprocess.Popen([python, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    while True:
        if server.poll() is not None:
            raise SystemExit(f"ui_screenshots: the server exited:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{env['PREFECT_API_URL']}/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("ui_screenshots: the server was not healthy in 180 s")
        time.sleep(1)


def _stop(proc: subprocess.Popen | None) -> None:
    """SIGINT the server's process group, then SIGTERM, then SIGKILL what is left."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _run(cmd: list[str], env: dict, timeout: float = 300) -> str:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"ui_screenshots: {' '.join(cmd[:4])} … failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def _deploy(python: str, env: dict) -> None:
    """prefect.yaml's deployments, as docs/deployments.md deploys them (their pools must exist first)."""
    for pool in ("klear-cpu", "klear-gpu"):
        _run([python, "-m", "prefect", "work-pool", "create", pool, "--type", "process"], env)
    _run([python, "-m", "prefect", "--no-prompt", "deploy", "--all"], env)


def _pipeline(python: str, env: dict, store: Path, scale: float) -> str:
    """`klear pipeline --scale SCALE` against the server; the id of its flow run."""
    out = _run([python, "-m", "flows.cli", "pipeline", "--scale", str(scale), "--store", str(store)], env,
               timeout=3600)
    found = re.search(r"/runs/flow-run/([0-9a-f-]{36})", out)
    if not found:
        raise SystemExit(f"ui_screenshots: no run id in klear pipeline's output:\n{out[-2000:]}")
    return found.group(1)


def _summary(run_id: str, api: str) -> dict:
    """The pipeline run's `pipeline-report` artifact as {key: value} (its checkpoints)."""
    arts = httpx.post(f"{api}/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [run_id]},
                                                                      "key": {"any_": ["pipeline-report"]}}},
                      timeout=30).json()
    return dict(re.findall(r"^- (\w+): `([^`]*)`$", arts[0]["data"], re.M))


def _failed_deployment_run(python: str, env: dict, api: str, model: str, store: Path, work: Path) -> str:
    """A `rl/default` run given a bad parameter, run as a worker runs it (`python -m prefect.engine ID`)."""
    params = {"model": model, "data": str(store), "out": str(work / "rl-bad-lr"), "config": {"lr": -1}}
    out = _run([python, "-m", "prefect", "deployment", "run", "rl/default", "--params", json.dumps(params)], env)
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
    subprocess.run([python, "-m", "prefect.engine", run_id], cwd=REPO, env=env, capture_output=True, timeout=600)
    deadline = time.monotonic() + 60
    while httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()["state_type"] != "FAILED":
        if time.monotonic() > deadline:
            raise SystemExit(f"ui_screenshots: the bad rl/default run {run_id} did not end Failed")
        time.sleep(1)
    return run_id


# -- the shots ---------------------------------------------------------------------------------------------

def _shoot(chromium: str, api: str, run_id: str, failed: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    ui = api.removesuffix("/api")
    tasks = httpx.post(f"{api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [run_id]}}, "limit": 200},
                       timeout=30).json()
    tagged = next(t["id"] for t in tasks if t["name"] == "tag-difficulty")
    pipeline_demo = httpx.get(f"{api}/deployments/name/pipeline/demo", timeout=30).json()["id"]
    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            shots.append(_tab(page, f"{ui}/runs/flow-run/{run_id}", "Task Runs", out / "task-runs.png"))
            shots.append(_tab(page, f"{ui}/runs/task-run/{tagged}", "Task inputs", out / "task-run.png"))
            shots.append(_artifacts(browser, f"{ui}/runs/flow-run/{run_id}", out / "artifacts.png"))
            shots.append(_tab(page, f"{ui}/runs/flow-run/{failed}", "Logs", out / "failed-run.png"))
            shots.append(_form(browser, f"{ui}/deployments/deployment/{pipeline_demo}/run", out / "run-form.png"))
        finally:
            browser.close()
    return [_small(path) for path in shots]


def _form(browser, url: str, path: Path) -> Path:
    """The top of a deployment's custom-run form, in a window twice the usual height; prints the form's
    whole height in pixels (the page scrolls inside, so a full-page shot would not show it)."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 2 * HEIGHT})
    try:
        page.goto(url, wait_until="networkidle")
        page.wait_for_timeout(SETTLE_MS)
        height = page.evaluate("() => Math.max(...[...document.querySelectorAll('*')].map(e => e.scrollHeight))")
        print(f"{url}: the form is {height} px high at {WIDTH} px wide", file=sys.stderr)
        page.screenshot(path=str(path))
    finally:
        page.close()
    return path


def _tab(page, url: str, tab: str, path: Path) -> Path:
    """A run page with one of its tabs open (the UI resets a `?tab=` in the URL while the run loads)."""
    page.goto(url, wait_until="networkidle")
    page.wait_for_timeout(SETTLE_MS)
    page.get_by_text(tab, exact=True).first.click()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(SETTLE_MS)
    page.screenshot(path=str(path))
    return path


def _artifacts(browser, url: str, path: Path) -> Path:
    """The run's Artifacts tab in its list view (each artifact's key and whole description), in a window
    tall enough for the run's own artifacts and the first of its task runs'."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 2 * HEIGHT})
    try:
        _tab(page, url, "Artifacts", path)
        page.locator(".p-button-group button").nth(1).click()  # grid | list
        page.wait_for_timeout(SETTLE_MS)
        page.screenshot(path=str(path))
    finally:
        page.close()
    return path


def _small(path: Path) -> Path:
    """Downscaled to SHOT_WIDTH and palette-quantized: a UI screenshot in tens of kilobytes."""
    from PIL import Image

    image = Image.open(path).convert("RGB")
    if image.width > SHOT_WIDTH:
        image = image.resize((SHOT_WIDTH, round(image.height * SHOT_WIDTH / image.width)), Image.LANCZOS)
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
