"""The run forms Prefect builds for prefect.yaml's deployments, from each flow's parameter schema (what
`prefect deploy` computes, prefect.utilities.callables.parameter_schema): every field a person can fill in
has a description, a choice is a list of the values its config accepts, and the pipeline's form shows the
settings a run usually changes, its nested configs folded. No server: schemas only."""
import dataclasses

import pytest

from tasks.config_checks import ConfigError


def _schema(flow):
    from prefect.utilities.callables import parameter_schema

    return parameter_schema(flow).model_dump_for_openapi()


def _flows():
    from flows.curate import curate
    from flows.evaluate import evaluate
    from flows.pipeline import pipeline
    from flows.rl import ablate, rl
    from flows.sft import sft
    from flows.tag_difficulty import tag_difficulty
    from flows.verify import verify

    return [pipeline, curate, verify, sft, rl, ablate, evaluate, tag_difficulty]


def _fields(schema):
    """(where, property schema) of every field the form shows: the parameters and each config's fields."""
    yield from ((f"parameter {k}", v) for k, v in schema["properties"].items())
    for name, definition in schema.get("definitions", {}).items():
        yield from ((f"{name}.{k}", v) for k, v in definition.get("properties", {}).items())


def _enum(prop):
    return prop.get("enum") or prop.get("items", {}).get("enum") or next(
        (b["enum"] for b in prop.get("anyOf", []) if "enum" in b), None)


@pytest.mark.parametrize("index", range(8))
def test_every_field_of_every_deployed_flow_says_what_it_is(index):
    flow = _flows()[index]
    missing = [where for where, prop in _fields(_schema(flow)) if not prop.get("description", "").strip()]
    assert missing == [], f"{flow.name}: fields without a description: {missing}"


def test_choices_are_lists_in_the_forms():
    """The choice fields the finding named (strategy, loss, backend) and the others are enums, not text."""
    from flows.evaluate import evaluate
    from flows.rl import rl
    from flows.sft import sft

    rl_form = _schema(rl)["definitions"]["RLConfig"]["properties"]
    assert set(_enum(rl_form["loss"])) == {"gppo", "grpo", "cispo"}
    assert _enum(rl_form["backend"]) == ["auto", "hf", "vllm"] and _enum(rl_form["strategy"]) == ["ddp", "fsdp"]
    assert _enum(rl_form["domains"]) == ["math", "code"]  # a list of choices: each item one of them
    assert _enum(_schema(sft)["definitions"]["SFTConfig"]["properties"]["strategy"]) == ["ddp", "fsdp"]
    assert _enum(_schema(evaluate)["definitions"]["EvalConfig"]["properties"]["backend"]) == ["auto", "hf", "vllm"]


def _make(cls, field, value):
    """`cls` with `field` set to `value` (and what its other required fields need)."""
    from tasks.curation.config import CurateConfig, SourceSpec

    needs = {SourceSpec: {"name": "s", "path": "s.jsonl"},
             CurateConfig: {"sources": [{"name": "s", "path": "s.jsonl"}]}}.get(cls, {})
    hint = {f.name: f.type for f in dataclasses.fields(cls)}[field]
    return cls(**needs, **{field: (value,) if "tuple" in str(hint) else value})


def test_each_choice_list_is_what_its_config_accepts():
    """A list in the form that its config's own check disagreed with would offer a value the run refuses
    (or hide one it takes): every listed value is accepted, a value off the list is refused."""
    from flows.prefect_ui import field_choices

    for (cls, field), values in field_choices().items():
        assert values, (cls.__name__, field)
        for value in values:
            _make(cls, field, value)
        with pytest.raises(ConfigError):
            _make(cls, field, "no-such-choice")


def test_the_pipeline_form_shows_what_a_run_usually_changes():
    """pipeline/demo's form: the pipeline's own settings as fields (the model preset a list), the nested
    SFT / RL / test-strength configs each one JSON box, the config's store left to the `store` parameter;
    a fraction of the size of the schema with every nested field expanded."""
    from flows.pipeline import pipeline

    schema = _schema(pipeline)
    props = schema["definitions"]["PipelineConfig"]["properties"]
    assert set(schema["definitions"]) == {"PipelineConfig"}  # no nested config is expanded into fields
    for folded in ("sft", "rl", "test_strength"):
        assert props[folded]["type"] == "object" and "properties" not in props[folded], folded
    assert {"type": "null"} in props["rl_code"]["anyOf"]
    assert "store" not in props and "store" in schema["properties"]
    assert _enum(props["model_preset"]) and "tiny" in _enum(props["model_preset"])
    assert {"demo", "demo_scale", "seed", "difficulty_k", "eval_k", "gpu_pool"} <= set(props)
    assert len(props) <= 21


def test_a_form_value_is_checked_by_the_config_not_the_form():
    """Folding only changes the form: a run's `config` JSON still becomes the typed config, nested ones too."""
    from flows.pipeline import pipeline
    from flows.prefect_ui import _type_adapters, _typed
    from tasks.training.config import RLConfig, SFTConfig

    adapters = _type_adapters(pipeline.fn)()
    cfg = _typed("config", {"sft": {"lr": 0.001}, "rl": {"loss": "grpo", "domains": ["math"]}}, adapters)
    assert isinstance(cfg.sft, SFTConfig) and cfg.sft.lr == 0.001
    assert isinstance(cfg.rl, RLConfig) and cfg.rl.loss == "grpo" and cfg.rl.domains == ("math",)


def test_the_curate_and_verify_forms_do_not_load_torch():
    """A form reads only its own fields' registries: curating or verifying does not pay for importing torch
    (RL's losses are a torch registry)."""
    import subprocess
    import sys

    code = ("import sys; from prefect.utilities.callables import parameter_schema; "
            "from flows.curate import curate; from flows.verify import verify; "
            "[parameter_schema(f).model_dump_for_openapi() for f in (curate, verify)]; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
