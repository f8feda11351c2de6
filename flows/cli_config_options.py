"""Every field of a config type as a CLI flag, with the config's default and the field's comment as help:
the config stays the one place where a setting, its default and its reason are written.

    @with_config_options(RLConfig, nested={"reward": RewardConfig})
    def rl(model: str = typer.Option(...), **settings): ...
    #  → klear rl --eps-high 0.28 --reward-code-mode hard --no-filter-zero-variance --domains math,code ...

Flags follow the field names (`eps_high` → `--eps-high`; a nested config's fields get its name as a prefix:
`reward.code_mode` → `--reward-code-mode`), unless a field names its own in `metadata["flag"]`
(CurateConfig's `dask_workers` is `--workers`); a bool is `--x/--no-x`; a tuple of names is comma-separated.
The command receives the values as keyword arguments; `build_config` turns them back into the config,
whose own checks then refuse a bad value with their one-line message.

Every float option of such a command (the generated ones and the command's own, `--gpu-memory` too) refuses
NaN and ±infinity as it is parsed (`finite_float_flag`: tasks/config_checks.finite_problem, the rule the
configs apply to their fields): typer reads `nan`, `inf` and `-inf` as floats, and a flag no config field
backs would otherwise reach the work unchecked. `refuse_non_finite_flags(app)` applies it to every command.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import re
import tokenize
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from typer.models import OptionInfo

from tasks.config_checks import ConfigError, finite_problem

_FIELD_LINE = re.compile(r"^\s+(\w+)\s*:")


def field_comments(cls: type) -> dict[str, str]:
    """The trailing `# comment` of each field line of a dataclass and its bases (a subclass's comment
    wins), with the comment-only lines that follow it (continuations), as one sentence."""
    comments: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base) and base is not cls:
            comments.update(_own_field_comments(base))
    return {**comments, **_own_field_comments(cls)}


def _own_field_comments(cls: type) -> dict[str, str]:
    lines, comments_at, classes = _source_comments(inspect.getsourcefile(cls))
    first, last = classes[cls.__name__]
    out: dict[str, str] = {}
    current = None
    for n in range(first, last + 1):
        if n not in comments_at:
            continue
        line, comment = lines[n - 1], comments_at[n]
        text = comment.lstrip("#").strip()
        m = _FIELD_LINE.match(line)
        if m and line.strip() != comment:            # a field line with a trailing comment
            current = m.group(1)
            out[current] = text
        elif line.strip() == comment and current:    # a continuation of the last field's comment
            out[current] += " " + text
        else:
            current = None
    return out


@functools.lru_cache(maxsize=None)
def _source_comments(path: str) -> tuple[list[str], dict[int, str], dict[str, tuple[int, int]]]:
    """A source file's lines, its comments by line number and its classes' line ranges: read and tokenized
    once per file (several configs share one, and `klear --help` builds every command's flags)."""
    text = Path(path).read_text()
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT}
    classes = {node.name: (node.lineno, node.end_lineno) for node in ast.walk(ast.parse(text))
               if isinstance(node, ast.ClassDef)}
    return text.splitlines(), comments, classes


def _option_type(annotation: Any) -> tuple[Any, bool]:
    """(the type typer parses, whether it is a comma-separated tuple of names)."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return str, True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return Optional[inner[0]], False
    return annotation, False


def _is_float(annotation: Any) -> bool:
    """`float`, `float | None` or `Optional[float]`: what typer parses as a float option."""
    args = set(typing.get_args(annotation))
    return annotation is float or (float in args and args <= {float, type(None)})


def finite_float_flag(flag: str, field: str | None = None) -> Callable[[Any], Any]:
    """The callback of a float option `flag`: a value the rule refuses (config_checks.finite_problem: NaN,
    ±inf) is a UserError line naming the flag — with the config `field` it sets, as the config's own check
    words it (`eps_low (--eps-low) must be a finite number (got nan)`), else the flag alone (`--gpu-memory
    must be a finite number (got nan)`); any other value passes on unchanged. Click runs it while parsing, in
    the order the flags were given, so it comes before the command's other checks (a missing --model)."""
    from flows.cli_common import UserError

    def refuse_non_finite(value: Any) -> Any:
        if why := finite_problem(value):
            raise UserError(ConfigError(field, why, flag).message if field else f"{flag} {why}")
        return value

    refuse_non_finite.finite_guard = True
    return refuse_non_finite


def refuse_non_finite_floats(fn: Callable) -> Callable:
    """Give each float option of command `fn` (a parameter annotated float or `float | None` whose default is
    a typer.Option) the `finite_float_flag` callback, unless it has a callback already. Idempotent; returns fn."""
    try:  # a module with `from __future__ import annotations` keeps them as text
        hints = typing.get_type_hints(fn)
    except Exception:  # a name only a type checker sees: that parameter is taken as it is written
        hints = {}
    for p in inspect.signature(fn).parameters.values():
        option = p.default
        if not isinstance(option, OptionInfo) or option.callback is not None:
            continue
        if _is_float(hints.get(p.name, p.annotation)):
            flags = [d for d in option.param_decls if d.startswith("--")] or ["--" + p.name.replace("_", "-")]
            option.callback = finite_float_flag(flags[0])
    return fn


def refuse_non_finite_flags(app: typer.Typer) -> None:
    """`refuse_non_finite_floats` on every command of `app` and of its sub-apps (`klear model ...`)."""
    for command in app.registered_commands:
        refuse_non_finite_floats(command.callback)
    for group in app.registered_groups:
        refuse_non_finite_flags(group.typer_instance)


def config_parameters(cls: type, prefix: str = "", skip: tuple[str, ...] = (),
                      nested: dict[str, type] | None = None, path: str = "") -> list[inspect.Parameter]:
    """One keyword-only parameter (a typer Option) per field of `cls`, recursing into `nested` configs (`path`:
    the dotted field of the config `cls` is nested in, for messages: `reward.`). A float field's option
    refuses NaN and ±inf (`finite_float_flag`)."""
    hints = typing.get_type_hints(cls)
    help_of = field_comments(cls)
    params = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if nested and f.name in nested:
            params += config_parameters(nested[f.name], prefix=f"{prefix}{f.name}_", path=f"{path}{f.name}.")
            continue
        name = prefix + f.name
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kind, listed = _option_type(hints[f.name])
        own = f.metadata.get("flag")  # a field spelled otherwise on the command line (curate's --workers)
        flag = "--" + (prefix.replace("_", "-") + own.removeprefix("--") if own else name.replace("_", "-"))
        if kind is bool or kind == Optional[bool]:
            flag = f"{flag}/--no-{flag[2:]}"
        if listed:
            default = ",".join(default)
        guard = finite_float_flag(flag, path + f.name) if _is_float(kind) else None
        option = typer.Option(default, flag, help=help_of.get(f.name, ""), show_default=default is not None,
                              callback=guard)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind))
    return params


def with_config_options(cls: type, skip: tuple[str, ...] = (), nested: dict[str, type] | None = None
                        ) -> Callable[[Callable], Callable]:
    """Add `config_parameters(cls)` to a command whose own parameters come first (those win: a field the
    command declares itself, for a custom help or flag, is not generated again); its own float options refuse
    NaN and ±inf as the generated ones do (`refuse_non_finite_floats`)."""
    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in own} | set(skip)
        extra = config_parameters(cls, skip=tuple(taken), nested=nested)
        refuse_non_finite_floats(fn)
        fn.__signature__ = sig.replace(parameters=[*own, *extra])
        return fn
    return decorate


def given_on_command_line(ctx: typer.Context) -> set[str]:
    """Names of the command's parameters that the user gave (a flag or its environment variable), as
    opposed to those left at their defaults."""
    return {name for name in ctx.params
            if getattr(ctx.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")}


def under_preset(values: dict[str, Any], preset: dict[str, Any], given: set[str]) -> dict[str, Any]:
    """Flag values with a preset's settings beneath them: a flag the user gave wins, every other field
    takes the preset's value. A preset's tuple is joined with commas, as its flag would be."""
    out = dict(values)
    for name, value in preset.items():
        if name in out and name not in given:
            out[name] = ",".join(value) if isinstance(value, tuple) else value
    return out


def build_config(cls: type, values: dict[str, Any], nested: dict[str, type] | None = None) -> Any:
    """The config from flag values (as `with_config_options` named them): nested configs rebuilt from their
    prefixed flags, comma-separated names split into a tuple."""
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if nested and f.name in nested:
            prefix = f.name + "_"
            inner = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
            if inner:
                try:
                    kw[f.name] = build_config(nested[f.name], inner)
                except ConfigError as e:
                    raise e.within(f.name) from None
            continue
        if f.name not in values:
            continue
        value = values[f.name]
        if _option_type(hints[f.name])[1] and isinstance(value, str):
            value = tuple(x.strip() for x in value.split(",") if x.strip())
        kw[f.name] = value
    return cls(**kw)
