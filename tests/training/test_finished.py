"""A finished run in a trainer's --out (tasks/training/finished.py): the same run is recognised, a moved
dataset version or another setting is named, an unfinished or old-format run is not a finished one, nor is
a run whose final save was cut short."""
import json
import os

from storage.checkpoints import LINEAGE_FILE, describe_checkpoint
from tasks.training.finished import finished_run


def _run(out, steps=4, requested=None, dataset="ds-a"):
    out.mkdir()
    (out / "config.json").write_text("{}")
    (out / "model.safetensors").write_bytes(b"x")
    (out / "checkpoints" / f"step-{steps}").mkdir(parents=True)
    record = {"model": "m", "data": "store", "dataset": dataset, "config": {"steps": steps}, "total_steps": steps}
    if requested is not None:
        record["requested"] = requested
    (out / "sft_config.json").write_text(json.dumps(record))
    describe_checkpoint(out, "sft", None, dataset, {})  # what the run registers once its model is saved
    return out


def test_the_same_run_has_no_difference(tmp_path):
    out = _run(tmp_path / "o", requested={"lr": 0.001, "domains": ["math"]})
    done = finished_run(out, "sft", "m", "store", "ds-a", {"lr": 0.001, "domains": ("math",)})
    assert done.steps == 4 and done.differences == []


def test_a_moved_dataset_version_and_a_setting_are_named(tmp_path):
    out = _run(tmp_path / "o", requested={"lr": 0.001})
    done = finished_run(out, "sft", "m", "store", "ds-b", {"lr": 0.002})
    assert done.differences == ["dataset version ds-a → ds-b", "lr 0.001 → 0.002"]


def test_an_unfinished_or_old_run_is_not_the_same(tmp_path):
    out = _run(tmp_path / "o", requested={"lr": 0.001})
    (out / "checkpoints" / "step-4").rename(out / "checkpoints" / "step-3")   # stopped before its last step
    assert finished_run(out, "sft", "m", "store", "ds-a", {"lr": 0.001}) is None
    old = _run(tmp_path / "old")                                            # no requested settings recorded
    assert finished_run(old, "sft", "m", "store", "ds-a", {}).differences == [
        "its settings were not recorded as requested"]
    assert finished_run(tmp_path / "none", "sft", "m", "store", "ds-a", {}) is None


def test_a_final_save_cut_short_is_no_finished_run(tmp_path):
    """Ctrl-C while the final model is written: the run never registered it (no lineage file), or a file of
    the model is newer than the lineage (a later save cut short): a rerun must not take it for finished."""
    out = _run(tmp_path / "o", requested={"lr": 0.001})
    assert finished_run(out, "sft", "m", "store", "ds-a", {"lr": 0.001}) is not None
    lineage = out / LINEAGE_FILE
    t = lineage.stat().st_mtime_ns
    (out / "config.json").write_text("")                         # half-written after the registration
    os.utime(out / "config.json", ns=(t + 10**9, t + 10**9))
    assert finished_run(out, "sft", "m", "store", "ds-a", {"lr": 0.001}) is None
    lineage.unlink()                                             # never registered
    os.utime(out / "config.json", ns=(t, t))
    assert finished_run(out, "sft", "m", "store", "ds-a", {"lr": 0.001}) is None
