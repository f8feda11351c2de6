"""Rows in and results out: `.jsonl` or `.parquet` (local paths or fsspec URLs; `hf:` for input).

Input is read by the one reader of rows (tasks/records/reader.py) and must be submissions
(tasks/verification/input_rules.py): a line that is not a JSON object (not UTF-8 or JSON, a lone surrogate,
nested too deep, a bad `tests` string), a row with no usable id, code, language or time_limit, or a second
row with an id already seen refuses the whole file with ONE line `FILE row N: why` (VerifyIOError), before
any container starts; blank lines are not rows. Missing or malformed tests are not refused: they are the
row's `invalid_tests` verdict. In Parquet output `details` is a JSON string column (its keys differ from row
to row); in JSONL it is an object. A result that cannot be written as is (a lone surrogate in a string,
which no UTF-8 file can hold) is written with that string escaped: one odd row never loses the batch.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from sandbox.config import JudgeConfig
from storage import paths
from tasks.records.reader import BadRow, BadRowError, read_records
from tasks.records.sources import SourceError, check_embedded_json, source_kind
from tasks.verification.input_rules import id_key, shown, submission_problem

OUTPUT_KINDS = ("jsonl", "parquet")


class VerifyIOError(ValueError):
    """A file that cannot be read or written; the message names it."""


def output_kind(path: str) -> str:
    try:
        kind = source_kind(path)
    except SourceError:
        kind = None
    if kind not in OUTPUT_KINDS or path.lower().endswith(".gz"):
        raise VerifyIOError(f"{path}: output must end in .jsonl or .parquet")
    return kind


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (local: after resolving links; else as written)."""
    if paths.is_local(a) and paths.is_local(b):
        a, b = a.removeprefix("file://"), b.removeprefix("file://")
        try:
            if os.path.exists(a) and os.path.exists(b):
                return os.path.samefile(a, b)
        except OSError:
            pass
        return os.path.realpath(a) == os.path.realpath(b)
    return a.rstrip("/") == b.rstrip("/")


SUBMISSION_FIELDS = ("id", "code", "tests")


def submissions_problem(rows: list[dict], path: str) -> str | None:
    """Why `rows` (read_rows) are not submissions to judge, or None: when no row carries code, the
    file is something else — most often a problem file (TACO, APPS, LiveCodeBench…) whose references need
    curating into (id, code, tests) first. Judging it would give one invalid_tests verdict per row with no
    id; the line names the fields the first row has and the command that reads such a file."""
    if not rows or any("code" in r for r in rows):
        return None
    missing = [f for f in SUBMISSION_FIELDS if f not in rows[0]]
    has = ", ".join(sorted(rows[0])[:8]) or "no fields"
    return (f"{path}: no row has a submission's fields ({', '.join(SUBMISSION_FIELDS)}; row 1 lacks "
            f"{', '.join(missing)} and has {has}); a problem file is curated first, its references kept as "
            f"code: klear curate --source NAME={path} --layout taco|apps|code-contests|…")


def _json_object(value: Any) -> dict:
    """An input row as read: an object whose `tests`, when it is JSON text, holds nothing the readers
    refuse (a lone surrogate escape, nesting too deep: sources.py); ValueError saying why not."""
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, got {type(value).__name__}")
    why = check_embedded_json(value["tests"]) if isinstance(value.get("tests"), str) else None
    if why:
        raise ValueError(f"tests: {why}")
    return value


def read_rows(path: str, judge: JudgeConfig = JudgeConfig()) -> list[dict]:
    """Every row of the input, in order, each a submission to judge (module docstring; `judge` bounds a
    row's time_limit); else VerifyIOError, one line naming the file and the first bad row. A file none of
    whose rows has code is refused with the line of `submissions_problem`."""
    try:
        numbered = list(read_records(path, _json_object))  # stops at the first line that is no object
    except BadRowError as exc:
        raise VerifyIOError(str(exc)) from None
    except SourceError as exc:
        raise VerifyIOError(str(exc)) from None
    except OSError as exc:
        raise VerifyIOError(f"{path}: {exc.strerror or exc}") from None
    rows = [r.value for r in numbered]
    if problem := submissions_problem(rows, path):
        raise VerifyIOError(problem)
    first: dict[str, int] = {}  # id as written -> the row that has it
    for r in numbered:
        why = submission_problem(r.value, judge)
        if why is None and (seen := first.setdefault(id_key(r.value["id"]), r.row)) != r.row:
            why = f"duplicate id {shown(r.value['id'])} (first on row {seen})"
        if why:
            raise VerifyIOError(str(BadRow(path, r.row, why)))
    return rows


def _text(value: str) -> str:
    """The string as valid UTF-8 text: a lone surrogate becomes its escape (the text `\\ud800`)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _json_safe(value: Any) -> Any:
    """Plain JSON data whose every string is valid text; anything else becomes its str()."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(k if isinstance(k, str) else json.dumps(_json_safe(k))): _json_safe(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    try:
        return _text(str(value))
    except Exception as exc:
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


def _dumps(value: Any) -> str:
    """JSON text of the value that is always valid UTF-8 (never raises): one result the writer cannot
    encode as is (a lone surrogate from a program's output, an odd key) must not lose the whole batch."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)  # (escaping would hide a surrogate)
        text.encode("utf-8")
        return text
    except Exception:
        pass
    try:
        return json.dumps(_json_safe(value), ensure_ascii=False)
    except Exception as exc:  # RecursionError: too deep to write at all
        return json.dumps(f"<unwritable: {type(exc).__name__}>")


def _jsonl_line(row: dict) -> bytes:
    try:
        text = json.dumps(row, ensure_ascii=False, default=str)
        return (text + "\n").encode("utf-8")
    except Exception:  # field by field, so that one bad field keeps the rest of the row
        fields = {_text(str(k)): json.loads(_dumps(v)) for k, v in row.items()}
        return (json.dumps(fields, ensure_ascii=False) + "\n").encode("utf-8")


_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _id_type(ids: list[Any]):
    present = [i for i in ids if i is not None]
    if present and all(isinstance(i, int) and not isinstance(i, bool) and _INT64[0] <= i <= _INT64[1]
                       for i in present):
        return pa.int64(), ids
    # mixed ids, or an int beyond 64 bits (a JSONL id, a Parquet uint64): every id as its JSON text
    return pa.string(), [None if i is None else (_text(i) if isinstance(i, str) else _dumps(i))
                         for i in ids]


def write_rows(rows: Iterable[dict], path: str) -> None:
    """Write results atomically (to a temporary name, then renamed) when the target is local."""
    kind = output_kind(path)
    rows = list(rows)
    local = paths.is_local(path)
    target = path.removeprefix("file://")
    tmp = f"{target}.tmp-{os.getpid()}" if local else target
    if local:
        os.makedirs(os.path.dirname(os.path.abspath(target)) or ".", exist_ok=True)
    try:
        if kind == "jsonl":
            with paths.open_binary(tmp, "wb") as fh:
                for row in rows:
                    fh.write(_jsonl_line(row))
        else:
            id_type, ids = _id_type([r.get("id") for r in rows])
            table = pa.table({
                "id": pa.array(ids, id_type),
                "verdict": pa.array([_text(str(r["verdict"])) for r in rows], pa.string()),
                "passed": pa.array([r["passed"] for r in rows], pa.int64()),
                "total": pa.array([r["total"] for r in rows], pa.int64()),
                "reward": pa.array([r["reward"] for r in rows], pa.float64()),
                "details": pa.array([_dumps(r["details"]) for r in rows], pa.string()),
            })
            with paths.open_binary(tmp, "wb") as fh:
                pq.write_table(table, fh)
        if local:
            os.replace(tmp, target)
    except OSError as exc:
        raise VerifyIOError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        if local and os.path.exists(tmp):
            os.unlink(tmp)
