"""Canonical problems as stages read them as given: a training or tokenizer-corpus `--data` (a store's dataset
version or a canonical .jsonl/.parquet file) and a benchmark. Each file row is checked as curation checks
it (schema.py), through the one reader and its bad-row rule (tasks/records/reader.py): the caller stops at
a bad row or skips and reports it."""
from __future__ import annotations

import logging
from typing import Any

from storage.keys import hash_file
from storage.refs import DatasetRef, data_ref
from tasks.curation.layouts import apply_layout, layout_hint
from tasks.curation.malformed import Malformed
from tasks.curation.schema import to_problem
from tasks.records.reader import OnBad, read_records, store_version

log = logging.getLogger(__name__)


def file_problem(value: Any) -> dict:
    """A training file row as a canonical row: the canonical layout's names or their aliases (layouts.py: the
    one alias table curation, benchmarks and training share), plus the difficulty tags a tagged file may carry
    (`pass_rate` in [0, 1], `difficulty` one of DIFFICULTIES, as a store's tagged version has them; RL
    selects on the first, SFT's response rule reads the second). Malformed for a row the schema refuses
    (naming the layout to curate a raw dataset's row with) or a tag of another value."""
    return {**_canonical(value, "file"), **_pass_rate(value)}


def benchmark_problem(value: Any) -> dict:
    """A benchmark row as a canonical row: the canonical layout's names or their aliases (layouts.py), the
    schema's checks (a benchmark row must be gradable). Malformed otherwise."""
    return _canonical(value, "benchmark")


def _canonical(value: Any, kind: str) -> dict:
    try:
        return to_problem(apply_layout(value, "canonical"), kind).as_row()
    except Malformed as e:
        if hint := layout_hint(value):
            raise type(e)(f"{e} (a raw dataset's row: it carries `{hint[0]}`; curate it with its layout, "
                          f"klear curate --source NAME=FILE --layout NAME={hint[1].split()[0]})") from None
        raise


def read_problems(data: str, on_bad: OnBad | None = None) -> tuple[list[dict], str]:
    """Canonical rows and their dataset id: a store directory's current version or `STORE#VERSION` (its
    version id), else a .jsonl/.parquet file (`file_problem` rows, id "file:<hash>"). A bad file row stops
    the read with one line "FILE row N: why" (tasks.records.reader.BadRowError, a ValueError); with
    `on_bad`, it goes there as a BadRow and is skipped."""
    ref = data_ref(data)
    if ref is not None:
        pinned = DatasetRef(ref.store, store_version(ref))  # read the version named now, whatever is published next
        return [r.value for r in read_records(pinned)], pinned.version
    hints: list = []

    def check(value: Any) -> dict:
        if not hints and (hint := layout_hint(value)):
            hints.append(hint)
        return file_problem(value)

    rows = [r.value for r in read_records(data, check, on_bad)]
    if hints:  # read anyway (the canonical fields are there), but what the raw layout holds is not
        field, layouts, lost = hints[0]
        log.warning("%s: its rows carry `%s`, which the canonical fields leave out (%s); a raw dataset is curated "
                    "with its layout first: klear curate --source NAME=%s --layout NAME=%s", data, field, lost,
                    data, layouts.split()[0])
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
