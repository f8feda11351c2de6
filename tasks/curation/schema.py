"""The canonical problem row and the rules that decide whether an input row is well-formed.

Canonical columns (the product's record schema): id, source, domain, problem, response, answer, tests,
then the optional solutions, date, meta (stages append their own columns after these; curation's is `row`,
STORED_PROBLEM_SCHEMA).
- `problem`: a non-empty string.
- `domain`: "math" or "code" (case-insensitive); when a row has none, the source's default domain, else
  "code" if the row has tests, else "math".
- `response`, `answer`: optional; `answer` may be a number, stored as its text (`_optional_text`: a
  Decimal keeps its digits, `1.50`; a float32 its shortest decimal, `0.1`). A math row without
  an answer is kept: SFT trains on its response (the recipe keeps unverified chains of thought of hard
  problems), RL leaves it out as `not_rewardable` (selection.jsonl, by id); `klear curate` warns per source
  of math rows without one, and a pipeline of a source with none at all (tasks/pipeline/data_alarms.py).
- `tests`: optional; a dict or its JSON text in one of three forms (stored as canonical JSON text):
  stdin/stdout `{"inputs": [str], "outputs": [str]}`, call-based `{"fn_name": str, "inputs": [list],
  "outputs": [any]}`, assert-style `{"assert_code": str | [str]}` (each observed assert one test), as
  the sandbox's parser (sandbox/testcases.py) reads them; a key holding null is absent (left out of the
  stored text).
- `solutions`: optional; every reference solution of the problem, in the source's order (a list of
  strings, or its JSON text; blank ones left out); `response` is the first of them when the row has none.
- `date`: optional; when the problem appeared (a contest date), ISO `YYYY-MM-DD` (an ISO date-time or a
  date value is cut to its date), so a cutoff date can compare it as text.
- `meta`: optional; a JSON object of what the source's layout says about the problem beyond the columns
  (difficulty label, URL, contest, the origin dataset...), stored as canonical JSON text (sorted keys).
A row that breaks a rule raises `Malformed` (or `InvalidTestsRow` for tests that cannot be judged) with a
one-line reason and the `dropped` reason in `.reason`; callers record it, never stop.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import pyarrow as pa

from sandbox.testcases import InvalidTests, UnjudgeableTests, parse_test_suite, without_nulls
from tasks.curation.malformed import InvalidTestsRow, Malformed, MissingField, iso_date, shown as _shown  # noqa: F401
from tasks.curation.textnorm import problem_id
from tasks.records.sources import check_json, check_value

DOMAINS = ("math", "code")

PROBLEM_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("domain", pa.string()),
    ("problem", pa.string()),
    ("response", pa.string()),
    ("answer", pa.string()),
    ("tests", pa.string()),
    ("solutions", pa.list_(pa.string())),
    ("date", pa.string()),
    ("meta", pa.string()),
])
# What a curated version's `problems` holds: the canonical columns, then `row`, the kept row's 1-based line
# (JSONL) or row (Parquet, HF) in its source, as `dropped.row`: every input row's (source, row) is in exactly
# one of `problems` and `dropped`, and a row any later stage drops (verify) is traced to its source line.
STORED_PROBLEM_SCHEMA = PROBLEM_SCHEMA.append(pa.field("row", pa.int64()))


@dataclass
class Problem:
    id: str
    source: str
    domain: str
    problem: str
    response: str | None = None
    answer: str | None = None
    tests: str | None = None  # canonical JSON text
    solutions: list[str] | None = None  # every reference solution; response is the first
    date: str | None = None  # ISO YYYY-MM-DD
    meta: str | None = None  # canonical JSON text of an object

    def as_row(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in PROBLEM_SCHEMA.names}


def decode_tests(value: Any) -> dict | None:
    """Validate a tests field with the one tests parser (sandbox.testcases, shared with validation, the
    sandbox client and the graders) and return it as a dict (None when absent).

    Raises Malformed for tests that are not one of the three forms, InvalidTestsRow (reason
    `invalid_tests`) for assert-style tests that cannot be judged outside the program's process."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        tests_text = value
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise Malformed(f"tests is not valid JSON ({e.msg} at char {e.pos})") from None
        except (ValueError, RecursionError) as e:  # a number too long to convert, nesting too deep
            raise Malformed(f"tests is not valid JSON ({type(e).__name__})") from None
        why = check_json(tests_text, value)  # a lone surrogate escape, nesting deeper than readers allow
        if why:
            raise Malformed(f"tests: {why}")
    if not isinstance(value, Mapping):
        raise Malformed(f"tests must be an object, got {type(value).__name__}")
    tests = without_nulls(dict(value))  # stored as the parser reads it: a null key is an absent one
    try:
        parse_test_suite(tests)
    except UnjudgeableTests as e:
        raise InvalidTestsRow(f"tests: {e}") from None
    except InvalidTests as e:
        raise Malformed(f"tests: {e}") from None
    return tests


def _optional_text(row: Mapping[str, Any], field: str, numbers_ok: bool = False) -> str | None:
    """A text field; with numbers_ok a number is kept as its text: an int or float as Python writes it
    (`1.5`, `0.1`; a Parquet float32 arrives as the shortest decimal of its precision, records.sources),
    a Decimal (a Parquet DECIMAL column) exactly as its digits stand (`1.50`, never an exponent). NaN and
    infinities are no answer (Malformed)."""
    v = row.get(field)
    if v is None:
        return None
    if numbers_ok and isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
        if not (v.is_finite() if isinstance(v, Decimal) else math.isfinite(v)):  # NaN / Infinity (or 1e400)
            raise Malformed(f"{field} must be a finite number, got {v}")
        return format(v, "f") if isinstance(v, Decimal) else str(v)
    if not isinstance(v, str):
        raise Malformed(f"{field} must be a string{' or a number' if numbers_ok else ''}, got {type(v).__name__}")
    return v


def _json_text(v: Any, bad: str) -> Any:
    """A field given as JSON text is decoded (blank: None); any other value is returned as it is."""
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v) if v.strip() else None
    except (ValueError, RecursionError):
        raise Malformed(bad) from None


def _solutions(row: Mapping[str, Any]) -> list[str] | None:
    v = _json_text(row.get("solutions"), "solutions is not a JSON list")
    if v is None:
        return None
    if not isinstance(v, (list, tuple)):
        raise Malformed(f"solutions must be a list of strings, got {type(v).__name__}")
    for i, s in enumerate(v):
        if not isinstance(s, str):
            raise Malformed(f"solutions[{i}] must be a string, got {type(s).__name__}")
    kept = [s for s in v if s.strip()]
    return kept or None


def _meta(row: Mapping[str, Any]) -> str | None:
    v = _json_text(row.get("meta"), "meta is not valid JSON")
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise Malformed(f"meta must be an object, got {type(v).__name__}")
    try:
        return json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=False) if v else None
    except (TypeError, ValueError) as e:  # a value JSON cannot hold (an object, NaN)
        raise Malformed(f"meta: {e}") from None
    except RecursionError:
        raise Malformed("meta is nested too deep") from None


def to_problem(row: Any, source: str, default_domain: str | None = None) -> Problem:
    """Map one (already layout-mapped) input row to a canonical Problem, or raise Malformed."""
    if not isinstance(row, Mapping):
        raise Malformed(f"row is not a JSON object (got {type(row).__name__})")
    problem = row.get("problem")
    if problem is None:
        raise MissingField("missing 'problem'", "problem")
    if not isinstance(problem, str):
        raise Malformed(f"problem must be a string, got {type(problem).__name__}")
    if not problem.strip():
        raise Malformed("empty 'problem'")
    tests = decode_tests(row.get("tests"))
    domain = row.get("domain") or default_domain or ("code" if tests else "math")
    if not isinstance(domain, str) or domain.strip().lower() not in DOMAINS:
        raise Malformed(f"unknown domain {domain!r} (expected one of {', '.join(DOMAINS)})")
    domain = domain.strip().lower()
    solutions = _solutions(row)
    response = _optional_text(row, "response")
    if response is None and solutions:
        response = solutions[0]
    answer = _optional_text(row, "answer", numbers_ok=True)
    meta = _meta(row)
    why = check_value([solutions, meta])  # text a layout decoded (a lone surrogate escape, deep nesting)
    if why:
        raise Malformed(f"solutions/meta: {why}")
    return Problem(
        id=problem_id(domain, problem),
        source=source,
        domain=domain,
        problem=problem,
        response=response,
        answer=answer,
        tests=json.dumps(tests, sort_keys=True, ensure_ascii=False) if tests is not None else None,
        solutions=solutions,
        date=iso_date(row.get("date")),
        meta=meta,
    )
