"""The canonical problem row and the rules that decide whether an input row is well-formed.

Canonical columns (../shared/DESIGN.md "Records"): id, source, domain, problem, response, answer, tests.
- `problem`: a non-empty string.
- `domain`: "math" or "code" (case-insensitive); when a row has none, the source's default domain, else
  "code" if the row has tests, else "math".
- `response`, `answer`: optional; `answer` may be a number (stored as its string form).
- `tests`: optional; a dict or its JSON text in one of three forms (stored as canonical JSON text):
  stdin/stdout `{"inputs": [str], "outputs": [str]}`, call-based `{"fn_name": str, "inputs": [list],
  "outputs": [any]}`, assert-style `{"assert_code": str | [str]}` (a list: one test per snippet).
A row that breaks a rule raises `Malformed` with a one-line reason; callers record it, never stop.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from tasks.curation.textnorm import problem_id

DOMAINS = ("math", "code")

PROBLEM_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("domain", pa.string()),
    ("problem", pa.string()),
    ("response", pa.string()),
    ("answer", pa.string()),
    ("tests", pa.string()),
])

DROPPED_SCHEMA = pa.schema([
    ("source", pa.string()),
    ("row", pa.int64()),      # 1-based line (JSONL) or row (Parquet, HF) number in the source
    ("id", pa.string()),      # the row's problem id when it could be computed
    ("reason", pa.string()),
    ("detail", pa.string()),
    ("problem", pa.string()), # the problem text, or the raw line when the row could not be parsed
])


class Malformed(ValueError):
    """An input row that cannot be mapped to the canonical schema; the message says why."""


@dataclass
class Problem:
    id: str
    source: str
    domain: str
    problem: str
    response: str | None = None
    answer: str | None = None
    tests: str | None = None  # canonical JSON text

    def as_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in PROBLEM_SCHEMA.names}


def parse_tests(value: Any) -> dict | None:
    """Validate a tests field and return it as a dict (None when absent). Raises Malformed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise Malformed(f"tests is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(value, Mapping):
        raise Malformed(f"tests must be an object, got {type(value).__name__}")
    tests = dict(value)
    if "assert_code" in tests:
        code = tests["assert_code"]
        snippets = code if isinstance(code, list) else [code]
        if not snippets or not all(isinstance(c, str) and c.strip() for c in snippets):
            raise Malformed("tests.assert_code must be a non-empty string or a list of them (one test each)")
        return tests
    ins, outs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(ins, list) or not isinstance(outs, list):
        raise Malformed("tests needs 'inputs' and 'outputs' lists (or 'assert_code')")
    if len(ins) != len(outs):
        raise Malformed(f"tests has {len(ins)} inputs but {len(outs)} outputs")
    if "fn_name" in tests:
        if not isinstance(tests["fn_name"], str) or not tests["fn_name"].isidentifier():
            raise Malformed("tests.fn_name must be a Python identifier")
        for i, args in enumerate(ins):
            if not isinstance(args, list):
                raise Malformed(f"tests.inputs[{i}] must be the argument list of a call")
    else:
        for kind, items in (("inputs", ins), ("outputs", outs)):
            for i, x in enumerate(items):
                if not isinstance(x, str):
                    raise Malformed(f"tests.{kind}[{i}] must be a string for stdin/stdout tests")
    return tests


def _optional_text(row: Mapping[str, Any], field: str, numbers_ok: bool = False) -> str | None:
    v = row.get(field)
    if v is None:
        return None
    if numbers_ok and isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        raise Malformed(f"{field} must be a string, got {type(v).__name__}")
    return v


def to_problem(row: Any, source: str, default_domain: str | None = None) -> Problem:
    """Map one (already layout-mapped) input row to a canonical Problem, or raise Malformed."""
    if not isinstance(row, Mapping):
        raise Malformed(f"row is not a JSON object (got {type(row).__name__})")
    problem = row.get("problem")
    if problem is None:
        raise Malformed("missing 'problem'")
    if not isinstance(problem, str):
        raise Malformed(f"problem must be a string, got {type(problem).__name__}")
    if not problem.strip():
        raise Malformed("empty 'problem'")
    tests = parse_tests(row.get("tests"))
    domain = row.get("domain") or default_domain or ("code" if tests else "math")
    if not isinstance(domain, str) or domain.strip().lower() not in DOMAINS:
        raise Malformed(f"unknown domain {domain!r} (expected one of {', '.join(DOMAINS)})")
    domain = domain.strip().lower()
    return Problem(
        id=problem_id(domain, problem),
        source=source,
        domain=domain,
        problem=problem,
        response=_optional_text(row, "response"),
        answer=_optional_text(row, "answer", numbers_ok=True),
        tests=json.dumps(tests, sort_keys=True, ensure_ascii=False) if tests is not None else None,
    )
