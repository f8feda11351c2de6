"""What a model flag or a pipeline's `base_model` names (tasks/models/pretrained.resolve_model): a directory, a
pretrained model's name or a Hub id, each read one way; a Hub id of a registered model is that model (its
carrier when the Hub is away); a cached fetch asks nothing; one line naming the flag otherwise. The Hub is kept
offline (HF_HUB_OFFLINE=1), so nothing here reaches a network."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tasks.models.pretrained as pre
from tasks.models.pretrained import CONVERSION, MANIFEST, FetchError, fetched_path, model_ref_kind, resolve_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("KLEAR_MODEL_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return root


def _cached(folder: Path, name: str) -> Path:
    """A folder as a finished fetch leaves it: config and manifest of this conversion."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / MANIFEST).write_text(json.dumps({"name": name, "conversion": CONVERSION}))
    return folder


def test_each_reference_is_read_one_way(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "sft").mkdir(parents=True)
    (tmp_path / "runs" / "sft" / "config.json").write_text("{}")
    assert model_ref_kind("runs/sft") == "dir"  # looks like owner/name, but it is a folder here
    assert model_ref_kind("smollm2-135m-instruct") == "name"
    assert model_ref_kind("Qwen/Qwen2.5-0.5B-Instruct") == "hub"
    assert model_ref_kind("runs") == "none"  # a folder without config.json
    assert model_ref_kind("runs/sfft") == "none"  # a mistyped path in a local folder, not a Hub id to wait on
    with pytest.raises(FetchError, match=r"^runs/sfft: no such model directory in runs/ \(a local folder"):
        resolve_model("runs/sfft")
    assert model_ref_kind("a/b/c") == "none" and model_ref_kind("../x") == "none"
    (tmp_path / "smollm2-135m-instruct").mkdir()
    (tmp_path / "smollm2-135m-instruct" / "config.json").write_text("{}")
    assert model_ref_kind("smollm2-135m-instruct") == "dir"  # a path wins over a name


def test_a_hub_id_the_hub_does_not_give_is_one_line(cache):
    with pytest.raises(FetchError) as e:
        resolve_model("someone/no-such-model")
    assert str(e.value).startswith("someone/no-such-model: no such model directory, and the Hugging Face Hub did "
                                   "not give a model of that id") and "\n" not in str(e.value)
    assert not (cache / "hub" / "someone--no-such-model").exists()  # nothing half-made left in the cache


def test_a_registered_models_hub_id_is_that_model_and_a_cached_one_asks_nothing(cache, monkeypatch):
    made = _cached(cache / "smollm2-135m-instruct", "smollm2-135m-instruct")
    monkeypatch.setattr(pre, "hub_snapshot", lambda *a: pytest.fail("the cache must answer"))
    monkeypatch.setattr(pre, "carrier_gguf", lambda *a: pytest.fail("the cache must answer"))
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == made
    assert resolve_model("smollm2-135m-instruct") == made
    assert fetched_path("huggingfacetb/smollm2-135m-instruct") == made
    hub = _cached(cache / "hub" / "Qwen--Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B")
    assert resolve_model("Qwen/Qwen2.5-0.5B") == hub and fetched_path("Qwen/Qwen2.5-0.5B") == hub


def test_a_cached_fetch_of_another_conversion_is_made_again(cache, monkeypatch):
    old = _cached(cache / "hub" / "Qwen--Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B")
    (old / MANIFEST).write_text(json.dumps({"name": "Qwen/Qwen2.5-0.5B", "conversion": CONVERSION - 1}))
    assert fetched_path("Qwen/Qwen2.5-0.5B") is None
    with pytest.raises(FetchError, match="did not give"):  # so it goes to the Hub, which is offline here
        resolve_model("Qwen/Qwen2.5-0.5B")


def test_nothing_to_be_had_names_every_reading(tmp_path):
    with pytest.raises(FetchError, match=r"^nothing: no such model directory, nor a pretrained model's name "
                                         r"\(gemma-3-270m, smollm2-135m-instruct\), nor a Hub id"):
        resolve_model("nothing")
    with pytest.raises(FetchError, match=r"not a Hugging Face model directory \(no config.json\)$"):
        resolve_model(str(tmp_path))


@pytest.mark.parametrize("command", [["sft", "--data", "d.jsonl", "--out", "o"], ["eval", "--benchmark", "b=b.jsonl"],
                                     ["rl", "--data", "d.jsonl", "--out", "o"]])
def test_every_model_flag_takes_the_same_references_in_one_line(tmp_path, command):
    r = subprocess.run([sys.executable, "-m", "flows.cli", *command, "--model", "someone/nothing"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "KLEAR_MODEL_CACHE": str(tmp_path / "c"),
                            "PYTHONPATH": str(ROOT)})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("klear: error: --model someone/nothing: no such model directory, and the Hugging "
                               "Face Hub did not give"), lines


def test_a_pipeline_on_a_pretrained_base_is_sized_for_it_unless_told(tmp_path):
    from pydantic import TypeAdapter

    from tasks.pipeline.config import PipelineConfig, demo_rl, pretrained_rl, pretrained_sft

    tiny = PipelineConfig()
    assert tiny.sft.lr == 3e-3 and tiny.rl == demo_rl()
    base = PipelineConfig(base_model="smollm2-135m-instruct")  # a name: fetched by the flow, not at config time
    assert base.sft == pretrained_sft() and base.rl == pretrained_rl() and base.sft.lr == 5e-5
    assert PipelineConfig(base_model="smollm2-135m-instruct", demo_scale=0.5, rl=demo_rl(0.5)).rl == pretrained_rl()
    given = TypeAdapter(PipelineConfig).validate_python({"base_model": "org/model", "sft": {"lr": 1e-5}})
    # an sft of its own is kept as given; what it leaves out is the pretrained sizing's
    assert given.sft == dataclasses.replace(pretrained_sft(), lr=1e-5)
    assert given.rl == pretrained_rl()


def test_the_pipeline_counts_a_fetch_as_its_base_model_stage(tmp_path):
    from flows.pipeline import planned_stages
    from tasks.pipeline.config import PipelineConfig

    (tmp_path / "config.json").write_text("{}")
    tiny, named, folder = (PipelineConfig(), PipelineConfig(base_model="smollm2-135m-instruct"),
                           PipelineConfig(base_model=str(tmp_path)))
    assert planned_stages(tiny) == planned_stages(named) == planned_stages(folder) + 1
