"""Headless-Chromium screenshots of the Prefect UI: the deployments page and a finished pipeline run.

    .venv/bin/python scripts/screenshots.py OUT_DIR [--api URL] [--run FLOW_RUN_ID] [--chromium PATH]

--api defaults to $PREFECT_API_URL (else http://127.0.0.1:4200/api); the UI is the same address without
/api. --run defaults to the newest Completed run of the `pipeline` flow. Writes OUT_DIR/deployments.png
(schedules, pools), pipeline-run.png (the run's graph with its artifacts on the task nodes, and logs) and
one artifact-<key>.png per artifact of the run and its subflows (count tables, markdown reports,
loss/reward/difficulty/comparison charts). Needs Debian's `chromium`
(apt-get install chromium); prints the PNG paths. (The run page's Artifacts tab cannot be opened by URL:
the UI resets `?tab=` while the run loads, so each artifact is shot on its own page.)
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

WINDOW = "1600,1100"
BUDGET_MS = 20000  # virtual time for the single-page app to fetch and render before the shot


def chromium_binary(explicit: str | None) -> str:
    for name in ([explicit] if explicit else []) + ["chromium", "chromium-browser", "google-chrome"]:
        path = shutil.which(name) if name else None
        if path:
            return path
    raise SystemExit("screenshots: no chromium found (apt-get install chromium) or pass --chromium PATH")


def shoot(chromium: str, url: str, out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="klear-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--window-size={WINDOW}", f"--virtual-time-budget={BUDGET_MS}", f"--screenshot={out}", url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"screenshots: chromium failed on {url} (exit {proc.returncode}): {proc.stderr[-500:]}")
    return out


def latest_pipeline_run(api: str) -> str:
    body = {"flows": {"name": {"any_": ["pipeline"]}},
            "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}},
            "sort": "END_TIME_DESC", "limit": 1}
    runs = httpx.post(f"{api}/flow_runs/filter", json=body, timeout=30).json()
    if not runs:
        raise SystemExit(f"screenshots: no Completed `pipeline` run on {api}; pass --run ID")
    return runs[0]["id"]


def run_artifacts(api: str, run_id: str) -> list[dict]:
    body = {"artifacts": {"flow_run_id": {"any_": [run_id]}}, "sort": "CREATED_DESC", "limit": 50}
    return httpx.post(f"{api}/artifacts/filter", json=body, timeout=30).json()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Screenshots of the Prefect UI (deployments, a pipeline run).")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--api", default=os.environ.get("PREFECT_API_URL", "http://127.0.0.1:4200/api"))
    ap.add_argument("--run", help="flow run id (default: newest Completed `pipeline` run)")
    ap.add_argument("--chromium", help="browser binary (default: chromium on PATH)")
    args = ap.parse_args(argv)

    api = args.api.rstrip("/")
    ui = api.removesuffix("/api")
    try:
        httpx.get(f"{api}/health", timeout=10).raise_for_status()
    except httpx.HTTPError as exc:
        raise SystemExit(f"screenshots: no Prefect server at {api} ({exc})") from None
    ui_api = httpx.get(f"{ui}/ui-settings", timeout=10).json().get("api_url", "").rstrip("/")
    if ui_api and ui_api != api:  # the UI would show "Can't connect to Server API" and empty pages
        raise SystemExit(f"screenshots: the UI at {ui} talks to {ui_api}, not {api}: start the server with "
                         f"PREFECT_API_URL={api} (or PREFECT_UI_API_URL) in its environment")
    chromium = chromium_binary(args.chromium)
    run_id = args.run or latest_pipeline_run(api)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    shots = [(f"{ui}/deployments", "deployments.png"),
             (f"{ui}/runs/flow-run/{run_id}", "pipeline-run.png")]
    # the flow's own artifacts and its subflows' and tasks' (the run page links them all)
    child_runs = httpx.post(f"{api}/flow_runs/filter", timeout=30, json={
        "flow_runs": {"parent_flow_run_id": {"any_": [run_id]}}}).json()
    for rid in [run_id] + [r["id"] for r in child_runs]:
        for art in run_artifacts(api, rid):
            if art.get("key") and art.get("type") in ("table", "markdown", "image"):
                shots.append((f"{ui}/artifacts/artifact/{art['id']}", f"artifact-{art['key']}.png"))
    for url, name in dict((name, (url, name)) for url, name in shots).values():
        print(shoot(chromium, url, args.out_dir / name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
