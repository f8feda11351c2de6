"""The pipeline's GPU-pool option without workers: the config names its deployments, a child run that did
not complete becomes one line naming the stage and the run, and a missing deployment is one line too.
The routed pipeline itself, with real workers on both pools, is tests/flows/test_deployments.py."""
import uuid

import pytest

from tasks.config_checks import ConfigError
from tasks.pipeline.config import GPU_DEPLOYMENTS, PipelineConfig


def test_gpu_pool_is_off_by_default_and_names_prefect_yaml_deployments():
    cfg = PipelineConfig()
    assert cfg.gpu_pool is False
    assert {k: cfg.deployment_for(k) for k in GPU_DEPLOYMENTS} == {
        "sft": "sft/default", "tag-difficulty": "tag-difficulty/default", "rl": "rl/default",
        "evaluate": "evaluate/default"}


def test_a_deployment_override_keeps_the_other_defaults():
    cfg = PipelineConfig(gpu_pool=True, gpu_deployments={"sft": "sft/big-gpu"})
    assert cfg.deployment_for("sft") == "sft/big-gpu"
    assert cfg.deployment_for("rl") == "rl/default"


@pytest.mark.parametrize("deployments, words", [
    ({"sfft": "sft/default"}, ["gpu_deployments", "unknown stage 'sfft'"]),
    ({"rl": "default"}, ["gpu_deployments", "FLOW/DEPLOYMENT", "'default'"]),
    ({"rl": "rl/a/b"}, ["gpu_deployments", "FLOW/DEPLOYMENT"]),
])
def test_bad_deployment_names_are_one_line_naming_the_field(deployments, words):
    with pytest.raises(ConfigError) as err:
        PipelineConfig(gpu_deployments=deployments)
    assert "\n" not in str(err.value) and all(w in str(err.value) for w in words)


def test_child_failure_is_one_line_naming_stage_and_child_run():
    from prefect.client.schemas.objects import FlowRun
    from prefect.states import Crashed

    from flows.pipeline import child_failure

    run_id = uuid.uuid4()
    child = FlowRun(id=run_id, name="brave-fox-sft", flow_id=uuid.uuid4(),
                    state=Crashed(message="Flow run infrastructure exited\nwith non-zero status code 1."))
    line = child_failure("sft", "sft/default", child)
    assert "\n" not in line
    assert line.startswith("pipeline: stage sft failed: child flow run brave-fox-sft")
    assert str(run_id) in line and "sft/default" in line and "ended Crashed" in line
    assert line.endswith("exited with non-zero status code 1.")


def test_shared_paths_are_absolute_and_urls_stay(tmp_path, monkeypatch):
    from flows.pipeline import shared_path

    monkeypatch.chdir(tmp_path)
    assert shared_path("klear-store") == str(tmp_path / "klear-store")
    assert shared_path("s3://bucket/store") == "s3://bucket/store"


@pytest.mark.slow
def test_a_missing_deployment_fails_the_stage_in_one_line(prefect_server):
    """Against a real (temporary) server that has no deployments."""
    from prefect import flow

    from flows.pipeline import StageRunFailed, run_stage_deployment

    @flow
    def one_stage():
        run_stage_deployment(PipelineConfig(gpu_pool=True), "sft", "sft", {})

    with pytest.raises(StageRunFailed, match=r"^pipeline: stage sft: no deployment 'sft/default' on the Prefect "
                                             r"server \(gpu_pool needs prefect.yaml's deployments"):
        one_stage()
