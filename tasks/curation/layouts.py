"""Source layouts: how the fields of a common dataset layout map onto the canonical schema.

One registry (`LAYOUTS`); each entry maps a raw row to a row with canonical field names. A source may add
its own `field_map` ({raw field: canonical field}) on top, applied first.

- `canonical`: the DESIGN.md field names; also accepts the common aliases question/prompt → problem,
  solution → response (when a string), final_answer/ground_truth → answer, input_output → tests.
- `apps`: APPS/TACO rows: question → problem, solutions (JSON list of programs) → the first one as the
  response (a ```python block), input_output → tests, domain code.
- `numina`: NuminaMath-style rows: problem, solution → response, answer; domain math.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

Layout = Callable[[Mapping[str, Any]], dict[str, Any]]
LAYOUTS: dict[str, Layout] = {}

_ALIASES = {
    "problem": ("question", "prompt"),
    "response": ("solution",),
    "answer": ("final_answer", "ground_truth"),
    "tests": ("input_output",),
}


def register_layout(name: str) -> Callable[[Layout], Layout]:
    def deco(fn: Layout) -> Layout:
        LAYOUTS[name] = fn
        return fn
    return deco


@register_layout("canonical")
def canonical(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for field, aliases in _ALIASES.items():
        if out.get(field) is None:
            for alias in aliases:
                v = row.get(alias)
                if v is not None and (field != "response" or isinstance(v, str)):
                    out[field] = v
                    break
    return out


@register_layout("apps")
def apps(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {"problem": row.get("question"), "tests": row.get("input_output"), "domain": "code"}
    sols = row.get("solutions")
    if isinstance(sols, str):
        try:
            sols = json.loads(sols)
        except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
            sols = None
    if isinstance(sols, list) and sols and isinstance(sols[0], str):
        out["response"] = f"```python\n{sols[0].rstrip()}\n```"
    return out


@register_layout("numina")
def numina(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"problem": row.get("problem"), "response": row.get("solution"), "answer": row.get("answer"),
            "domain": "math"}


def apply_layout(row: Any, layout: str, field_map: Mapping[str, str] | None = None) -> Any:
    """Rename fields by `field_map`, then map through the layout. Non-object rows pass through unchanged
    (the schema check reports them)."""
    if not isinstance(row, Mapping):
        return row
    if field_map:
        row = {field_map.get(k, k): v for k, v in row.items()}
    return LAYOUTS[layout](row)
