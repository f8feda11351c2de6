"""`--nproc` of `klear eval` and `klear tag-difficulty`: below 1 is one line naming the flag, exit 2, before
anything else is looked at (the model need not exist); a valid one reaches the flow as its `nproc`."""
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def klear(*args):
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [["eval", "--benchmark", "b=nowhere.jsonl"], ["tag-difficulty"]])
@pytest.mark.parametrize("nproc", ["0", "-2"])
def test_nproc_below_one_is_one_line(tmp_path, command, nproc):
    r = klear(*command, "--model", tmp_path / "no-model", "--nproc", nproc)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines == [f"klear: error: --nproc must be at least 1 (got {nproc})"]


def test_flows_and_tasks_take_nproc():
    from flows.evaluate import evaluate
    from flows.tag_difficulty import tag_difficulty
    from tasks.evaluation.prefect_tasks import evaluate_task, tag_difficulty_task

    for fn in (evaluate.fn, tag_difficulty.fn, evaluate_task.fn, tag_difficulty_task.fn):
        assert inspect.signature(fn).parameters["nproc"].default == 1
