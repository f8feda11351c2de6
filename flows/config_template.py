"""A settings dataclass as a commented YAML document (`klear pipeline --print-config`), and such a document read
back into the dataclass (`klear pipeline --config FILE`): every field with its value and, above it, the comment
its source line carries (the same text `--help` and the deployment form show); nested configs as nested
mappings. What the template says is exactly what the file may hold: reading it back gives the defaults, and a
key that is no setting is refused in one line naming the file and the key."""
from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

WIDTH = 100  # comment lines are wrapped to this many characters


def template(cls: type, header: str = "", examples: dict[str, str] | None = None) -> str:
    """The commented YAML of `cls`'s defaults. `examples`: field → commented lines shown after that field
    (e.g. how a source with a layout is written)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += _fields(cls, cls(), 0, examples or {})
    return "\n".join(lines) + "\n"


def _fields(cls: type, value: Any, depth: int, examples: dict[str, str]) -> list[str]:
    from flows.cli_config_options import field_comments

    pad = "  " * depth
    comments = field_comments(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        v = getattr(value, f.name)
        if f.name in comments:
            out += textwrap.wrap(comments[f.name], WIDTH - len(pad), initial_indent=f"{pad}# ",
                                 subsequent_indent=f"{pad}# ")
        inner = v if dataclasses.is_dataclass(v) else None
        if inner is not None:
            out.append(f"{pad}{f.name}:")
            out += _fields(type(inner), inner, depth + 1, {})
        else:
            out.append(f"{pad}{f.name}: {_scalar(v)}")
        if depth == 0 and f.name in examples:
            out += [f"{pad}# {line}" for line in examples[f.name].splitlines()]
    return out


def _scalar(value: Any) -> str:
    """A value in YAML flow style (JSON is YAML): tuples as lists, nested dataclasses never reach here."""
    return json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)


class TemplateError(ValueError):
    """A settings file that cannot be read or does not hold settings; the message names the file."""


def read_settings(path: str) -> dict:
    """A YAML or JSON settings file as a mapping (an empty file: no settings); TemplateError naming it."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise TemplateError(f"{path}: no such file")
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))  # JSON is YAML
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TemplateError(f"{path}: not readable YAML or JSON ({str(e).splitlines()[0][:160]})") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise TemplateError(f"{path}: must hold a mapping of settings, not a {type(doc).__name__}")
    return doc
