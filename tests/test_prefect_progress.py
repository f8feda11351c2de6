"""Progress in the Prefect UI (tasks/prefect_tasks.py progress_feed, flows/cli_common.py logging levels),
against a real temporary Prefect server: with the CLI's logging settings a task's progress lines reach the
flow run's log at INFO and a progress artifact, and not the terminal."""
import asyncio
import time

import pytest

pytestmark = pytest.mark.slow  # a real Prefect server (session fixture)


def _read(flow_run_id, key):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterKey, LogFilter,
                                                LogFilterFlowRunId)

    async def read():
        async with get_client() as client:
            logs = await client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            arts = await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
            return logs, arts

    return asyncio.run(read())


def test_progress_lines_reach_the_run_log_and_an_artifact_but_not_the_terminal(prefect_server, monkeypatch,
                                                                                 capfd):
    from prefect import flow, task
    from prefect.logging.configuration import setup_logging
    from prefect.runtime import flow_run

    from flows.cli_common import quiet_terminal_logging
    from tasks.prefect_tasks import progress_feed
    from tasks.progress import StepProgress

    @task
    def loop() -> None:
        report = StepProgress("probe", mode="off", feed=progress_feed("probe-progress", "a probe loop"),
                              feed_interval=0.0)
        for step in range(1, 4):
            report.update(step, 3, tokens=10, loss=1.0 / step)

    @flow
    def probe() -> str:
        loop()
        return flow_run.id

    for name, value in quiet_terminal_logging().items():  # the settings `klear` runs flows with
        monkeypatch.setenv(name, value)
    setup_logging(incremental=False)
    try:
        run_id = probe()
        terminal = capfd.readouterr().err
        deadline = time.monotonic() + 60  # logs are shipped in the background: a bounded poll
        while True:
            logs, artifacts = _read(run_id, "probe-progress")
            lines = [l.message for l in logs if l.message.startswith("probe step ")]
            if len(lines) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        monkeypatch.undo()
        setup_logging(incremental=False)
    assert [l.split(" loss")[0] for l in lines] == ["probe step 1/3", "probe step 2/3", "probe step 3/3"]
    assert {l.level for l in logs if l.message.startswith("probe step ")} == {20}  # INFO
    assert "probe step" not in terminal, terminal
    latest = max(artifacts, key=lambda a: a.updated)
    assert latest.type == "progress" and float(latest.data) == 100.0
    assert latest.description.startswith("a probe loop: probe step 3/3 loss 0.333")
