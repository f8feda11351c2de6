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


class _RepeatedKey(Exception):
    def __init__(self, key: Any, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


def _unique_key_loader() -> type:
    """yaml.SafeLoader refusing a mapping that names a key twice (`_RepeatedKey`): YAML keeps the last one
    silently, so `sources: {a: x.parquet, a: y.jsonl}` or a second `sft:` block would drop the first. A merge
    (`<<: *base`) may still be overridden by the mapping's own keys."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict = {}  # key → the line it was first given on
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                    try:
                        if key in seen:
                            raise _RepeatedKey(key, line, seen[key])
                        seen[key] = line
                    except TypeError:  # an unhashable key: SafeLoader's own error names it
                        continue
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_settings(path: str) -> dict:
    """A YAML or JSON settings file as a mapping (an empty file: no settings); TemplateError naming it, and
    the key and its line when a mapping names a key twice."""
    import yaml

    p = Path(path)
    if p.is_dir():
        raise TemplateError(f"{path}: is a directory, not a settings file")
    if not p.is_file():
        raise TemplateError(f"{path}: no such file")
    try:
        doc = yaml.load(p.read_text(encoding="utf-8"), Loader=_unique_key_loader())  # JSON is YAML
    except _RepeatedKey as e:
        raise TemplateError(f"{path}: line {e.line}: key {e.key!r} given twice (first on line {e.first}); "
                            "a YAML mapping would keep only the last") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TemplateError(f"{path}: not readable YAML or JSON ({str(e).splitlines()[0][:160]})") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise TemplateError(f"{path}: must hold a mapping of settings, not a {type(doc).__name__}")
    return doc
