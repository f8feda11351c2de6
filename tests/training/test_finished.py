"""A finished run in a trainer's --out (tasks/training/finished.py): the same run is recognised, a moved
dataset version or another setting is named, an unfinished or old-format run is not a finished one."""
import json

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
