"""How klear's flows read in the Prefect UI, for a person who did not write them:

- **run names** from the run's inputs (`flow_run_namer`): `rl-3f2a…` (its output directory),
  `verify-ds-91c0…` (the dataset version it checks), `pipeline-demo-0.05`, not `brave-fox`;
- **a failed run in one line** (`one_line_failures`): its state message, and once in its log at ERROR,
  `rl: parameter config: lr (--lr) must be above 0.0 (got -1.0)` or `pipeline: stage rl failed: …`; no
  repeats, none of Prefect's frames (the traceback is at DEBUG). Bad parameters too: they are validated
  inside the run, where Prefect's own check would fail it before it has a log;
- **a deployment form a person can fill in** (`ConfigForm`): each config field with its comment as
  description, a list for each choice, the nested configs a run rarely changes folded to one JSON box.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import logging
import re
import types
import typing
from collections import deque
from contextvars import ContextVar
from typing import Any, Callable, Mapping

from prefect import get_run_logger

# -- run names ----------------------------------------------------------------------------------------------


def flow_run_namer(flow_name: str, name_of: Callable[[Callable[..., Any]], Any]) -> Callable[[], str]:
    """A `flow_run_name` for @flow: `FLOW-` + what `name_of(param)` makes of the run's parameters (`param`
    reads one by a dotted path, an attribute of a config or a key of its JSON form alike), without a
    second `FLOW-` (an output directory `sft-3f2a…` names the run `sft-3f2a…`). Prefect calls it before
    the run's body and would fail the run on an error, so an error falls back to the flow's name."""
    from prefect import runtime

    def name() -> str:
        params = runtime.flow_run.parameters or {}

        def param(path: str, default: Any = None) -> Any:
            value: Any = params
            for part in path.split("."):
                value = value.get(part, default) if isinstance(value, dict) else getattr(value, part, default)
            return value

        try:
            made = re.sub(r"\s+", "-", str(name_of(param) or "").strip())
        except Exception:  # a name is never worth a failed run
            return flow_name
        if not made:
            return flow_name
        return (made if made.startswith(f"{flow_name}-") else f"{flow_name}-{made}")[:120]

    return name


def short_name(path: Any) -> str:
    """A path's last part (a checkpoint or output directory: `sft-3f2a…`), for run names."""
    return str(path).rstrip("/").rsplit("/", 1)[-1] if path else ""


# -- a failed run: one line in its log and as its state message ---------------------------------------------

_IN_FLOW_BODY: ContextVar[bool] = ContextVar("klear_in_flow_body", default=False)
REPORTED = "_klear_reported"  # set on an exception once its run reported it in one line
_REPORTED_LINES: deque[str] = deque(maxlen=64)
MAX_LINE = 1000  # characters of a failure line (a library's message can be a page)
WHERE_NOTE = "klear stage: "  # an exception note naming where in a flow it failed (the pipeline's stage)


def failure_line(flow_name: str, exc: BaseException) -> str:
    """`FLOW: [WHERE: ]MESSAGE` on one line. WHERE is a note the flow added (`stage rl failed`); a message
    that already names its flow (`pipeline: stage sft failed: child flow run …`) stays as it is; an error
    other than bad input (ValueError) keeps its type name, the one clue to a bug in a one-line report."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if not message.startswith(f"{flow_name}:"):
        kind = "" if isinstance(exc, ValueError) else f"{type(exc).__name__}: "
        where = [n.removeprefix(WHERE_NOTE) for n in getattr(exc, "__notes__", []) if n.startswith(WHERE_NOTE)]
        message = ": ".join([flow_name, *where[:1], kind + message])
    return message if len(message) <= MAX_LINE else message[:MAX_LINE - 1] + "…"


def one_line_failures(fn: Callable) -> Callable:
    """Put under @flow(validate_parameters=False): the run's parameters are validated inside its body (a
    bad one is reported like any failure; Prefect's own check would fail the run before it has a log, the
    reason only in a truncated state message), and an exception ends the run as Failed with one line,
    `failure_line`, as its state message and once in its log at ERROR; the traceback goes to DEBUG.
    Prefect's own reports of the same failure — the task run's traceback and "Finished in state
    Failed(…)", the flow run's, a worker's "Engine execution exited with unexpected exception" — go to
    DEBUG too (`_PrefectFailureReports`). A call still raises the exception (the Failed state holds it),
    so the CLI prints it as its own one line."""
    adapters = _type_adapters(fn)

    @functools.wraps(fn)
    def body(*args, **kwargs):
        _install_failure_filter()
        token = _IN_FLOW_BODY.set(True)
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
            for name, value in bound.arguments.items():
                bound.arguments[name] = _typed(name, value, adapters())
            return fn(*bound.args, **bound.kwargs)
        except Exception as exc:
            return _failed(exc)
        finally:
            _IN_FLOW_BODY.reset(token)

    return body


def _type_adapters(fn: Callable) -> Callable[[], dict]:
    """The parameters' pydantic TypeAdapters, made at the first run (annotations resolve after import)."""
    cache: dict = {}

    def adapters() -> dict:
        if not cache:
            from pydantic import TypeAdapter

            hints = typing.get_type_hints(fn, include_extras=True)
            cache.update({n: (TypeAdapter(t), t) for n, t in hints.items() if n != "return"})
        return cache

    return adapters


def _typed(name: str, value: Any, adapters: dict) -> Any:
    """`value` as parameter `name`'s type (a config from its JSON form; an instance stays as it is), or a
    ValueError of one line naming the parameter, and the field and flag when a config refused it."""
    from pydantic import ValidationError

    if name not in adapters:
        return value
    adapter, hint = adapters[name]
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        raise ValueError(f"parameter {name}: {validation_detail(e, hint)}") from None


UNKNOWN_KEY = ("unexpected_keyword_argument", "extra_forbidden")  # pydantic's error types for a key that is no field


def validation_detail(error, root: Any = None) -> str:
    """One error of a pydantic ValidationError, as one line: a key that is no setting (config_checks.STRICT_KEYS),
    named with its path (`setting_path`) and, when `root` (the validated type) has one close to it, the setting meant; a
    config's own ConfigError (raised as the config was made, naming its field and flag) under the path of the
    config it sits in; else pydantic's message."""
    from tasks.config_checks import ConfigError

    errors = error.errors()
    # an unknown key first; else the error that got deepest: of a union's branches (`sources.NAME` as a PATH
    # string or a {path, layout, …} mapping), the one the value was written for
    first = next((e for e in errors if e["type"] in UNKNOWN_KEY), None) or max(errors, key=lambda e: len(e["loc"]))
    keys, parent = setting_path(root, first.get("loc", ()))
    path = ".".join(keys)
    if first["type"] in UNKNOWN_KEY:
        near = difflib.get_close_matches(keys[-1], _fields(parent), n=1) if keys else []
        return f"{path}: unknown setting" + (f" (did you mean {near[0]}?)" if near else "")
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        if not path:
            return cause.message
        flags = getattr(_root_config(root), "FLAGS", None)  # a config whose command has few flags names its own
        flag = None if flags is None else flags.get(f"{path}.{cause.field}", "")
        return cause.within(path, flag).message
    got = f" (got {first['input']!r})" if not isinstance(first.get("input"), (dict, type(None))) else ""
    return f"{path + ': ' if path else ''}{first['msg']}{got}"


def _root_config(root: Any) -> type | None:
    """The config dataclass a parameter's type names (through Annotated and `X | None`), or None."""
    found = _dataclasses_in(typing.get_args(root)[0] if typing.get_origin(root) is typing.Annotated else root)
    return found[0] if found else None


def setting_path(root: Any, loc: tuple) -> tuple[list[str], type | None]:
    """A pydantic error location as the user wrote the setting, and the config holding its last key.

    The location is walked along the types from `root`: a config's field names its field; a mapping's
    key (a source's NAME in `sources`) stays, as the user's own word; the member name pydantic inserts
    for a union's branch (`PipelineSource` in `sources.mymath.PipelineSource.layuot`) is no word of the
    user's and is dropped; list indices are dropped. Where the types end (an unknown key's own value), the
    rest is kept as given."""
    keys: list[str] = []
    tp, parent = root, None
    for part in loc:
        if isinstance(part, int):
            continue
        tp = _unannotated(tp)
        if tp is not None and typing.get_origin(tp) in (list, tuple, set):
            tp = (typing.get_args(tp) or (None,))[0]
            tp = _unannotated(tp)
        branches = _branches(tp)
        if branches and part in branches:  # the union member pydantic tried
            tp = branches[part]
            continue
        if branches:  # `X | None`: pydantic names no member
            tp = (_dataclasses_in(tp) or [None])[0]
        keys.append(str(part))
        if tp is not None and dataclasses.is_dataclass(tp):
            parent, tp = tp, typing.get_type_hints(tp).get(str(part))
        elif tp is not None and typing.get_origin(tp) is dict:
            parent, tp = None, typing.get_args(tp)[1]
        else:
            parent, tp = None, None
    return keys, parent


def _unannotated(tp: Any) -> Any:
    return typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp


def _branches(tp: Any) -> dict[str, Any]:
    """A union's members by the name pydantic gives each in an error location ({} for no union)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return {}
    return {getattr(a, "__name__", str(a)): a for a in typing.get_args(tp) if a is not type(None)}


def _fields(cls: type | None) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)] if cls is not None and dataclasses.is_dataclass(cls) else []


def _failed(exc: BaseException):
    """Log the failure's line (run log, ERROR) and traceback (DEBUG); the Failed state that ends the run."""
    from prefect import runtime
    from prefect.states import Failed

    line = failure_line(runtime.flow_run.flow_name or "flow", exc)
    setattr(exc, REPORTED, True)
    _REPORTED_LINES.append(line)
    _to_run_log(logging.ERROR, line)
    get_run_logger().debug("%s", line, exc_info=exc)
    return Failed(message=line, data=exc)


def _to_run_log(level: int, text: str) -> None:
    """One record into the current flow run's log (the Prefect API, which the UI shows) and not the
    terminal: there the caller reports the failure itself — the CLI prints it as its one line, a plain call
    raises it — and a second copy would make it two."""
    from prefect.logging.handlers import APILogHandler

    adapter = get_run_logger()
    record = adapter.logger.makeRecord(adapter.logger.name, level, __file__, 0, text, (), None,
                                       extra=dict(adapter.extra or {}))
    APILogHandler().handle(record)


class _PrefectFailureReports(logging.Filter):
    """On Prefect's run loggers: its own reports of a failure that `one_line_failures` reports in one line
    become DEBUG records (dropped unless the run logs at DEBUG, where they keep the full traceback):
    - a task run's failure inside such a flow (its traceback, its "Finished in state Failed(…)"), which
      the flow's line reports when it ends the run (the task run's state keeps its message);
    - a record carrying an exception the flow reported (a worker's "Engine execution exited with
      unexpected exception");
    - a "Finished in state …" line that repeats a reported line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._repeats_a_report(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    @staticmethod
    def _repeats_a_report(record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return False
        exc = record.exc_info[1] if record.exc_info else None
        if getattr(exc, REPORTED, False):
            return True
        text = record.getMessage()
        finished = text.startswith("Finished in state ") and not text.startswith("Finished in state Completed")
        if finished and any(line in text for line in _REPORTED_LINES):
            return True
        in_task = record.name == "prefect.task_runs"
        return in_task and _IN_FLOW_BODY.get() and record.levelno >= logging.ERROR and (exc is not None or finished)


_FAILURE_FILTER = _PrefectFailureReports()


def _install_failure_filter() -> None:
    """Once per process, on the loggers that Prefect's run loggers (and its engine's reports) write to."""
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if _FAILURE_FILTER not in logger.filters:
            logger.addFilter(_FAILURE_FILTER)


# -- deployment forms ---------------------------------------------------------------------------------------

Choices = tuple | Callable[[], typing.Iterable]


def _choices() -> dict[tuple[type, str], Choices]:
    """(config type, field) → the values its own check accepts (a registry, read when the form is made:
    the losses and advantages import torch). A field listed here is a list in the form, not a text box;
    tests/flows/test_ui_forms.py checks each list against the config's check."""
    from tasks.curation.config import DOMAINS, UNDATED_RULES, CurateConfig, SourceSpec
    from tasks.curation.layouts import LAYOUTS
    from tasks.evaluation.config import BACKENDS, DifficultyConfig, EvalConfig
    from tasks.grading.registry import GRADERS
    from tasks.grading.rewards import RewardConfig
    from tasks.models.presets import PRESETS
    from tasks.pipeline.config import PipelineConfig
    from tasks.training.config import (ATTENTIONS, OLD_LOGPROBS, ROLLOUT_BACKENDS, STRATEGIES, UNTAGGED_RULES,
                                       RLConfig, SelectionConfig, SFTConfig)
    from tasks.training.sft_responses import RESPONSE_RULES
    from tasks.verification.strength import WEAK_TESTS_ACTIONS, StrengthConfig

    def losses():
        from tasks.training.losses import POLICY_LOSSES
        return POLICY_LOSSES

    def advantages():
        from tasks.training.advantages import ADVANTAGES
        return ADVANTAGES

    return {(PipelineConfig, "model_preset"): lambda: PRESETS,
            (SFTConfig, "strategy"): STRATEGIES, (SFTConfig, "attention"): ATTENTIONS,
            (SFTConfig, "responses"): RESPONSE_RULES,
            (RLConfig, "loss"): losses, (RLConfig, "advantage"): advantages, (RLConfig, "backend"): ROLLOUT_BACKENDS,
            (RLConfig, "strategy"): STRATEGIES, (RLConfig, "old_logprobs"): OLD_LOGPROBS,
            (RLConfig, "attention"): ATTENTIONS,
            (RLConfig, "domains"): lambda: GRADERS, (SelectionConfig, "untagged"): UNTAGGED_RULES,
            (RewardConfig, "code_mode"): ("soft", "hard"),
            (EvalConfig, "backend"): BACKENDS, (DifficultyConfig, "backend"): BACKENDS,
            (StrengthConfig, "weak_tests"): WEAK_TESTS_ACTIONS,
            (CurateConfig, "undated"): UNDATED_RULES, (SourceSpec, "layout"): lambda: LAYOUTS,
            (SourceSpec, "domain"): DOMAINS}


def field_choices() -> dict[tuple[type, str], tuple]:
    """`_choices` with each registry read: (config type, field) → its values, in the registry's order."""
    return {k: _values(v) for k, v in _choices().items()}


def _values(choices: Choices) -> tuple:
    """A choice's values, its registry read now: a form reads only the registries of its own fields (the
    curate flow's form does not import torch for RL's losses)."""
    return tuple(choices() if callable(choices) else choices)


@dataclasses.dataclass(frozen=True)
class ConfigForm:
    """Annotated metadata for a flow parameter whose type is a config dataclass,
    `config: Annotated[PipelineConfig, ConfigForm(PipelineConfig, folded=("sft", …))]`, which shapes the JSON
    schema Prefect builds the deployment's run form from (and nothing else: values are checked by the
    config itself):
    - every field of the config, and of the configs in it, gets its comment as its description (the
      comments `klear`'s --help shows too: flows/cli_config_options.py);
    - a choice field (`_choices`) gets its values as an enum, so the form shows a list;
    - `folded` fields (nested configs a run rarely changes) become one JSON box, `hidden` ones are left out
      of the form (both still accepted, from the form's JSON tab or `--param`)."""
    cls: type
    folded: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()

    def __get_pydantic_json_schema__(self, core_schema, handler):
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        _describe(self.cls, target, handler, _choices(), set())
        props = target.get("properties", {})
        for name in self.hidden:  # off the form, still accepted (unknown keys are refused: STRICT_KEYS)
            if props.pop(name, None) is not None:
                target.setdefault("patternProperties", {})[f"^{re.escape(name)}$"] = {}
        if "required" in target:
            target["required"] = [r for r in target["required"] if r in props]
        hints = typing.get_type_hints(self.cls)
        for name in self.folded:
            if name in props:
                props[name] = _folded(name, props[name], _dataclasses_in(hints.get(name)),
                                      name in getattr(self.cls, "NESTED_DEFAULTS", ()))
        return schema


def _describe(cls: type, schema: dict, handler, choices: Mapping[tuple[type, str], Choices], seen: set) -> None:
    """Descriptions and enums on `schema` (the JSON schema of dataclass `cls`), then on its nested configs."""
    from flows.cli_config_options import field_comments

    if cls in seen or "properties" not in schema:
        return
    seen.add(cls)
    comments, hints = field_comments(cls), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        prop = schema["properties"].get(f.name)
        if prop is None:
            continue
        inners, listed = _dataclasses_in(hints.get(f.name)), choices.get((cls, f.name))
        values = None if listed is None else _values(listed)
        if f.name in comments:
            prop.setdefault("description", comments[f.name])
        elif inners or values:  # no comment: what the type or the choices say
            prop.setdefault("description", f"{inners[0].__name__} settings" if inners else
                            f"one of {', '.join(map(str, values))}")
        if values:
            _enum(prop, values)
        for inner in inners:
            for ref in _refs(prop):
                _describe(inner, handler.resolve_ref_schema({"$ref": ref}), handler, choices, seen)


def _enum(prop: dict, values: tuple) -> None:
    """A choice as an enum: on a string, on each item of an array (`domains`), or on the string branch
    of `str | None`."""
    if prop.get("type") == "array":
        prop.setdefault("items", {})["enum"] = list(values)
    elif "anyOf" in prop:
        for branch in prop["anyOf"]:
            if branch.get("type") == "string":
                branch["enum"] = list(values)
    else:
        prop["enum"] = list(values)


def _dataclasses_in(tp: Any) -> list[type]:
    """The dataclasses a field's type names (itself, or inside `X | None` or `list[X]`)."""
    if dataclasses.is_dataclass(tp):
        return [tp]
    return [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]


def _refs(prop: dict) -> list[str]:
    """The definitions a property points to: itself, a branch of `X | None`, or a list's items."""
    found = [prop["$ref"]] if "$ref" in prop else []
    found += [r for b in prop.get("anyOf", []) + prop.get("allOf", []) for r in _refs(b)]
    return found + (_refs(prop["items"]) if isinstance(prop.get("items"), dict) else [])


def _folded(name: str, prop: dict, configs: list[type], own_defaults: bool = False) -> dict:
    """One JSON box for a nested config: an object (or null, when optional) with the field's description.
    `own_defaults`: the outer config completes a partial box from the defaults the box shows (its
    NESTED_DEFAULTS, e.g. PipelineConfig's `sft` and `rl`), not from the nested class's own."""
    nullable = any(b.get("type") == "null" for b in prop.get("anyOf", []))
    kind = {"anyOf": [{"type": "object"}, {"type": "null"}]} if nullable else {"type": "object"}
    keep = {k: prop[k] for k in ("description", "default") if k in prop}
    if configs:
        config = configs[0].__name__
        left_out = "the value shown here" if own_defaults else f"{config}'s default"
        note = f"JSON of {config}'s fields; a field left out takes {left_out}"
    else:  # a mapping of names to values (the pipeline's sources): its description says their shape
        note = "JSON"
    return {**kind, **keep, "title": name.replace("_", " ").title(),
            "description": f"{keep.get('description', '')} ({note})".strip()}
