"""Canonical problems as stages read them as given: a training or tokenizer-corpus `--data` (a store's dataset
version or a canonical .jsonl/.parquet file) and a benchmark. Each file row is checked as curation checks
it (schema.py), through the one reader and its bad-row rule (tasks/records/reader.py): the caller stops at
a bad row or skips and reports it."""
from __future__ import annotations

from typing import Any

from storage.keys import hash_file
from storage.refs import DatasetRef, data_ref
from tasks.curation.layouts import apply_layout
from tasks.curation.malformed import Malformed
from tasks.curation.schema import to_problem
from tasks.records.reader import OnBad, read_records, store_version


def file_problem(value: Any) -> dict:
    """A training file row as a canonical row: the schema's own field names (no layout), plus the difficulty
    tags a tagged file may carry (`pass_rate` in [0, 1], `difficulty` one of DIFFICULTIES, as a store's
    tagged version has them; RL selects on the first, SFT's response rule reads the second). Malformed
    for a row the schema refuses or a tag of another value."""
    return {**to_problem(value, "file").as_row(), **_pass_rate(value)}


def benchmark_problem(value: Any) -> dict:
    """A benchmark row as a canonical row: the canonical layout's names or their aliases (layouts.py), the
    schema's checks (a benchmark row must be gradable). Malformed otherwise."""
    return to_problem(apply_layout(value, "canonical"), "benchmark").as_row()


def read_problems(data: str, on_bad: OnBad | None = None) -> tuple[list[dict], str]:
    """Canonical rows and their dataset id: a store directory's current version or `STORE#VERSION` (its
    version id), else a .jsonl/.parquet file (`file_problem` rows, id "file:<hash>"). A bad file row stops
    the read with one line "FILE row N: why" (tasks.records.reader.BadRowError, a ValueError); with
    `on_bad`, it goes there as a BadRow and is skipped."""
    ref = data_ref(data)
    if ref is not None:
        pinned = DatasetRef(ref.store, store_version(ref))  # read the version named now, whatever is published next
        return [r.value for r in read_records(pinned)], pinned.version
    rows = [r.value for r in read_records(data, file_problem, on_bad)]
    return rows, "file:" + hash_file(data)[:16]


DIFFICULTIES = ("easy", "medium", "hard", "unsolved", "unknown")  # tasks/evaluation/difficulty.py's tags


def _pass_rate(value) -> dict:
    """A file row's difficulty tag fields that training reads (pass_rate for RL selection, difficulty for
    SFT's response rule), checked."""
    out = {}
    pr = value.get("pass_rate") if isinstance(value, dict) else None
    if pr is not None:
        if isinstance(pr, bool) or not isinstance(pr, (int, float)) or not 0.0 <= pr <= 1.0:
            raise Malformed(f"pass_rate must be a number in [0, 1] or null, got {pr!r}"[:160])
        out["pass_rate"] = float(pr)
    tag = value.get("difficulty") if isinstance(value, dict) else None
    if tag is not None:
        if tag not in DIFFICULTIES:
            raise Malformed(f"difficulty must be one of {', '.join(DIFFICULTIES)} or null, got {tag!r}"[:160])
        out["difficulty"] = tag
    return out
