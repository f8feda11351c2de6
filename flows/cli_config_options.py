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

from tasks.config_checks import ConfigError

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


def config_parameters(cls: type, prefix: str = "", skip: tuple[str, ...] = (),
                      nested: dict[str, type] | None = None) -> list[inspect.Parameter]:
    """One keyword-only parameter (a typer Option) per field of `cls`, recursing into `nested` configs."""
    hints = typing.get_type_hints(cls)
    help_of = field_comments(cls)
    params = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if nested and f.name in nested:
            params += config_parameters(nested[f.name], prefix=f"{prefix}{f.name}_")
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
        option = typer.Option(default, flag, help=help_of.get(f.name, ""), show_default=default is not None)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind))
    return params


def with_config_options(cls: type, skip: tuple[str, ...] = (), nested: dict[str, type] | None = None
                        ) -> Callable[[Callable], Callable]:
    """Add `config_parameters(cls)` to a command whose own parameters come first (those win: a field the
    command declares itself, for a custom help or flag, is not generated again)."""
    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in own} | set(skip)
        extra = config_parameters(cls, skip=tuple(taken), nested=nested)
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
