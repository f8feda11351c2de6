"""A key that is no setting is refused, in every config a flow takes (a deployment's parameters, the
pipeline's nested configs): one line naming the key, its place and the closest setting — never ignored,
which would, say, train 3 full epochs for a misspelt `max_step`."""
import dataclasses
import typing

import pytest

from flows.curate import curate
from flows.evaluate import evaluate
from flows.pipeline import pipeline
from flows.prefect_ui import validation_detail
from flows.rl import ablate, rl
from flows.sft import sft
from flows.tag_difficulty import tag_difficulty
from flows.verify import verify

FLOWS = [curate, evaluate, pipeline, rl, ablate, sft, tag_difficulty, verify]


def _configs(tp, seen: set) -> None:
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp not in seen:
        seen.add(tp)
        for hint in typing.get_type_hints(tp).values():
            _configs(hint, seen)
    for arg in typing.get_args(tp):
        _configs(arg, seen)


def _flow_configs() -> list[type]:
    seen: set = set()
    for f in FLOWS:
        for hint in typing.get_type_hints(f.fn, include_extras=True).values():
            _configs(hint, seen)
    return sorted(seen, key=lambda c: c.__name__)


def test_every_config_a_flow_takes_refuses_a_key_that_is_no_setting():
    from pydantic import TypeAdapter, ValidationError

    configs = _flow_configs()
    assert {"PipelineConfig", "SFTConfig", "RLConfig", "CurateConfig", "EvalConfig"} <= {c.__name__ for c in configs}
    for cls in configs:
        with pytest.raises(ValidationError) as e:
            TypeAdapter(cls).validate_python({"surely_not_a_setting": 1})
        assert any(err["type"] == "unexpected_keyword_argument" for err in e.value.errors()), cls.__name__


@pytest.mark.parametrize("value, line", [
    ({"sft": {"max_step": 4}}, "sft.max_step: unknown setting (did you mean max_steps?)"),
    ({"sft": {"max_steps": 4}, "colour": "blue"}, "colour: unknown setting"),
    ({"rl": {"selection": {"math_minimum": 0.2}}}, "rl.selection.math_minimum: unknown setting (did you mean math_min?)"),
    # a source's own block: its NAME kept, the union branch pydantic tried (PipelineSource) not shown
    ({"demo": False, "sources": {"mymath": {"path": "m.jsonl", "layuot": "numina"}}},
     "sources.mymath.layuot: unknown setting (did you mean layout?)"),
    ({"demo": False, "sources": {"str": {"pth": "m.jsonl"}}}, "sources.str.pth: unknown setting (did you mean path?)"),
    # of the branches (a PATH string, a mapping), the error of the one the value was written for
    ({"demo": False, "sources": {"mymath": {"path": "m.jsonl", "field_map": {"final": 3}}}},
     "sources.mymath.field_map.final: Input should be a valid string (got 3)"),
])
def test_a_misspelt_key_is_one_line_naming_it_and_the_closest_setting(value, line):
    from pydantic import TypeAdapter, ValidationError

    from tasks.pipeline.config import PipelineConfig

    with pytest.raises(ValidationError) as e:
        TypeAdapter(PipelineConfig).validate_python(value)
    assert validation_detail(e.value, PipelineConfig) == line


@pytest.mark.parametrize("value, line", [
    ({"demo": False}, "sources must name at least one NAME: PATH when demo is off"),  # no `--sources` flag exists
    ({"sft": {"epochs": 0}}, "sft.epochs must be at least 1 (got 0)"),               # nor `--sft-epochs`
    ({"demo_scale": 0.01}, "demo_scale (--scale) must be at least"),                 # `klear pipeline --scale`
])
def test_a_pipeline_setting_names_a_flag_only_where_klear_pipeline_has_one(value, line):
    from pydantic import TypeAdapter, ValidationError

    from tasks.pipeline.config import PipelineConfig

    with pytest.raises(ValidationError) as e:
        TypeAdapter(PipelineConfig).validate_python(value)
    assert validation_detail(e.value, PipelineConfig).startswith(line)
