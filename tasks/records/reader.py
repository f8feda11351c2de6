"""The one reader of rows a stage takes as they are given (a benchmark, a training or corpus file, a store's
dataset version), with the one bad-row rule.

    for row in read_records(path, check, on_bad):  # row.row (1-based), row.value (what `check` returned)

What it reads: a path `read_source` opens (.jsonl, .parquet, hf:; sources.py), or a `DatasetRef` (a
store, pinned to a version or not: storage/refs.py; the caller that accepts stores turns `--data` into
one with `data_ref`). A store's `problems` rows are yielded as stored, numbered by position: they were
checked when the version was made.

The rule. A blank line is not a row (it holds nothing). Every other row the source cannot parse
(sources.py), or that `check` refuses by raising ValueError (its message is the reason), is a bad row:
a `BadRow(source, row, reason)`. The caller decides what a bad row does:
- stop (`on_bad` None): `BadRowError`, one line `FILE row N: why`, at the first bad row;
- skip and report: `on_bad` gets each BadRow as it is met and the row is left out (`bad.append`
  collects them; `warn_skipped(log, what)` logs one line per row). It is called in source order, before
  the rows after it are yielded, so a caller can also keep the bad row in its place (`klear verify` gives
  it a result of its own: tasks/verification/io.py).
So nothing is lost silently: each row of the source is yielded, or stops the read, or goes to `on_bad`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from storage.refs import DatasetRef
from tasks.records.sources import read_source

BLANK = "blank line"  # sources.py's reason for a line with nothing on it: not a row


@dataclass(frozen=True)
class BadRow:
    """A source row that is not a row of what the caller reads: where it is and why."""

    source: str  # the path as the caller gave it
    row: int     # 1-based line (JSONL) or row (Parquet, HF) number
    reason: str  # one line

    def __str__(self) -> str:
        return f"{self.source} row {self.row}: {self.reason}"


class BadRowError(ValueError):
    """A read stopped at a bad row (`.bad`); the message is the row's one line."""

    def __init__(self, bad: BadRow):
        super().__init__(str(bad))
        self.bad = bad


class Row(NamedTuple):
    row: int    # 1-based number in the source
    value: Any  # the row as `check` returned it (as parsed without one; as stored for a store)


Check = Callable[[Any], Any]       # parsed value → the row to keep; ValueError(reason) for a bad row
OnBad = Callable[[BadRow], None]   # what a skipped bad row becomes (collected, logged)


def store_version(ref: DatasetRef) -> str:
    """The dataset version `ref` names: its pinned one, else the store's current one. ValueError naming the
    store when there is none."""
    from storage.store import Store  # here, not at import: the catalog's DuckDB is paid only by store reads

    store = Store(ref.store)
    version = ref.version or store.current_version()
    if version is None:
        raise ValueError(f"{ref.store}: store has no curated dataset (run klear curate first)")
    if not store.has_version(version):
        raise ValueError(f"{ref.store}: no dataset version {version}")
    return version


def read_records(source: str | DatasetRef, check: Check | None = None,
                 on_bad: OnBad | None = None) -> Iterator[Row]:
    """The rows of `source` that `check` accepts, in source order, under the module's bad-row rule."""
    if isinstance(source, DatasetRef):
        from storage.store import Store  # as in store_version

        table = Store(source.store).read_table(store_version(source), "problems")
        for i, value in enumerate(table.to_pylist(), start=1):
            yield Row(i, value)
        return
    for raw in read_source(source):
        if raw.error == BLANK:
            continue
        why = raw.error
        if why is None:
            try:
                value = raw.value if check is None else check(raw.value)
            except (RecursionError, UnicodeError) as e:  # a value no check foresaw: still one row
                why = f"unusable row ({type(e).__name__})"
            except ValueError as e:
                why = " ".join(str(e).split()) or type(e).__name__
        if why is None:
            yield Row(raw.row, value)
            continue
        bad = BadRow(source, raw.row, why)
        if on_bad is None:
            raise BadRowError(bad)
        on_bad(bad)


def warn_skipped(log: logging.Logger, what: str) -> OnBad:
    """An `on_bad` that logs one warning per skipped row: `WHAT: skipped FILE row N: why`."""
    def warn(bad: BadRow) -> None:
        log.warning("%s: skipped %s", what, bad)

    return warn
