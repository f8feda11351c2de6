"""No room on the disk while a trainer saves a checkpoint: one line naming the checkpoint (DiskFull, which
the CLI prints as its one line), no half-written temp directory, and the checkpoints before it intact, so
`--resume` with room continues from the newest. The full disk is a real file size limit (RLIMIT_FSIZE)
in a child process, set after the first checkpoint; the CLI's handling of the error is checked on its
own (`run_flow` with a flow that meets a full disk)."""
import errno
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flows.cli_common import UserError, fault_line, run_flow
from storage.errors import DiskFull

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, resource, sys
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from tasks.models.factory import init_model
    from tasks.training.checkpoint import save_checkpoint

    work = sys.argv[1]
    path = init_model(work + "/base", ["What is 1 plus 1? <think>1 + 1 = 2</think> 2"] * 8, seed=0)
    model, tok = AutoModelForCausalLM.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    opt.step()
    save_checkpoint(model, tok, opt, sched, 2, work + "/out", keep=2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
    try:
        save_checkpoint(model, tok, opt, sched, 4, work + "/out", keep=2)
    except OSError as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    else:
        print(json.dumps({"error": None}))
""")


@pytest.mark.slow  # makes and saves a (tiny) model in a child process
@pytest.mark.parametrize("limit", [4096, 2_500_000])  # the shard file fails at once, or past the weights (optimizer)
def test_no_room_for_a_checkpoint_is_one_line_and_the_previous_one_stays(tmp_path, limit):
    from tasks.training.checkpoint import check_checkpoint, latest_checkpoint

    res = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(limit)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["error"] == "DiskFull", report
    assert f"checkpoint {tmp_path}/out/checkpoints/step-4: no room left on the device" in report["message"]
    assert len(report["message"].splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").iterdir()) == ["step-2"]
    assert latest_checkpoint(tmp_path / "out").name == "step-2"
    check_checkpoint(tmp_path / "out" / "checkpoints" / "step-2")  # readable: a resume continues from it


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device", "/store/datasets/x.parquet"),
    OSError(errno.EFBIG, "File too large"),
    DiskFull.writing("checkpoint /out/checkpoints/step-4", OSError(errno.ENOSPC, "No space left on device")),
    RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"),  # safetensors
])
def test_a_flow_that_meets_a_full_disk_ends_the_command_in_one_line(error):
    def flow():
        raise error

    with pytest.raises(UserError) as e:
        run_flow(flow)
    assert "no room left on the device" in str(e.value) and len(str(e.value).splitlines()) == 1


def test_other_errors_keep_their_traceback():
    assert fault_line(OSError(errno.EACCES, "Permission denied")) is None
    with pytest.raises(KeyError):
        run_flow(lambda: {}["bug"])
