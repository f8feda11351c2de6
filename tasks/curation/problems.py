"""Canonical problems as training and the tokenizer corpus read them: from a store's dataset version or a
canonical .jsonl/.parquet file, each file row checked as curation checks it (schema.py), plus the
difficulty tags a tagged file may carry."""
from __future__ import annotations

from typing import Callable

from storage.keys import hash_file
from storage.refs import data_ref
from storage.store import Store
from tasks.curation.schema import Malformed, to_problem
from tasks.records.sources import read_source


def read_store_problems(store_dir: str, version: str | None = None) -> tuple[list[dict], str]:
    """`problems` of a store's dataset version (`STORE#VERSION`), else of its current version."""
    store = Store(store_dir)
    version = version or store.current_version()
    if version is None:
        raise ValueError(f"{store_dir}: store has no curated dataset (run klear curate first)")
    if not store.has_version(version):
        raise ValueError(f"{store_dir}: no dataset version {version}")
    return store.read_table(version, "problems").to_pylist(), version


def read_problems(data: str, on_bad: Callable[[str], None] | None = None) -> tuple[list[dict], str]:
    """Canonical rows and their dataset id from a .jsonl/.parquet file ("file:<hash>"), a store directory
    (its current version) or `STORE#VERSION`. A malformed file row (not JSON or UTF-8, a lone surrogate,
    nested too deep, a non-finite answer, ...: tasks.records.sources and tasks.curation.schema) is a ValueError
    "FILE row N: why"; with `on_bad`, that one line goes to on_bad and the row is skipped instead. A file
    row keeps its difficulty tags (`pass_rate` in [0, 1], `difficulty` one of DIFFICULTIES, as a store's
    tagged version has them; RL selects on the first, SFT's response rule reads the second) when it has
    them; any other value makes the row malformed."""
    ref = data_ref(data)
    if ref is not None:
        return read_store_problems(ref.store, ref.version)
    rows = []
    for raw in read_source(data):
        if raw.error == "blank line":  # not a row (as in `klear verify`)
            continue
        why = raw.error
        if why is None:
            try:
                rows.append({**to_problem(raw.value, "file").as_row(), **_pass_rate(raw.value)})
            except Malformed as e:
                why = str(e)
            except (RecursionError, UnicodeError) as e:  # a value no reader check foresaw
                why = f"unusable row ({type(e).__name__})"
        if why is not None:
            if on_bad is None:
                raise ValueError(f"{data} row {raw.row}: {why}")
            on_bad(f"{data} row {raw.row}: {why}")
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
