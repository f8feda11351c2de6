"""What a source's rows hold, checked before any curation work, and said when a row lacks a field.

Rules:
- a source with no rows (a 0-byte or blank-lines-only .jsonl, a Parquet file of 0 rows, an empty split) is
  refused: it would publish a dataset version of nothing (`klear eval` refuses an empty benchmark alike).
  `EmptySource` names the file.
- every field a source's `field_map` (`--map SOURCE.FIELD=CANONICAL`) renames must hold a value in at least
  one of its rows; a misspelt or nested-but-undotted field would otherwise leave every row as it was, in
  silence (no answers, or every row malformed). `UnmatchedMap` names the map and the fields the rows do have.
  An error, not a warning after ingest, because it is found before anything is written, at the cost of
  reading: a source is read only until every mapped field has been seen (a right map: its first row), to
  its end only when a map is wrong, and then the run stops before reading it again.
- a row dropped for a missing field (MissingField) says which fields it does have, and, when the field is
  one a `--map` can give, how to map one (`missing_field_hint`), in the same one-line detail.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.curation.config import MAPPABLE_FIELDS, SourceSpec
from tasks.curation.layouts import field_at
from tasks.curation.malformed import field_names, listed
from tasks.records.sources import SourceError, read_source

BLANK_LINE = "blank line"  # tasks.records.sources.parse_line's error for a line with nothing on it
FIELDS_SEEN = 24            # distinct fields remembered for a message (it shows fewer)


class EmptySource(SourceError):
    """A source with no rows: `PATH: source 'NAME' has no rows`; `.name`, `.path` name it."""

    def __init__(self, name: str, path: str):
        super().__init__(f"{path}: source {name!r} has no rows")
        self.name, self.path = name, path

    def __reduce__(self):
        return type(self), (self.name, self.path)


class UnmatchedMap(SourceError):
    """A field map whose raw field no row of the source has; `.map` is `NAME.FIELD=CANONICAL`, `.why` the rest."""

    def __init__(self, mapping: str, why: str):
        super().__init__(f"{mapping}: {why}")
        self.map, self.why = mapping, why

    def __reduce__(self):
        return type(self), (self.map, self.why)


@dataclass
class Survey:
    """What reading a source up to where the checks are settled found: its first row (None: no readable
    one), whether it has any row, the mapped fields no row read has, and the fields the rows read have."""

    first: Any = None
    has_rows: bool = False
    unmatched: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)


def survey_source(path: str, field_map: Mapping[str, str] | None = None) -> Survey:
    """Read `path` only as far as the module's rules need: its first non-blank row, and on until every
    field of `field_map` has held a value (to the end when one never does)."""
    out, pending, seen = Survey(), list(field_map or {}), {}
    for raw in read_source(path):
        if raw.error == BLANK_LINE:
            continue
        out.has_rows = True
        if raw.error is None:
            if out.first is None:
                out.first = raw.value
            pending = [p for p in pending if field_at(raw.value, p) is None]
            if pending and len(seen) < FIELDS_SEEN:
                seen.update(dict.fromkeys(field_names(raw.value)))
        if not pending:
            break
    out.unmatched, out.fields = pending, list(seen)[:FIELDS_SEEN]
    return out


def check_sources(sources: Iterable[SourceSpec]) -> dict[str, Any]:
    """Each source's first row (None: no readable one), by name, once every source passed the module's
    checks; EmptySource or UnmatchedMap (both SourceError, one line) for the first that does not."""
    first = {}
    for spec in sources:
        s = survey_source(spec.path, spec.field_map)
        if not s.has_rows:
            raise EmptySource(spec.name, spec.path)
        for raw in s.unmatched if s.first is not None else ():  # rows none of which parse: each malformed
            raise UnmatchedMap(f"{spec.name}.{raw}={spec.field_map[raw]}",
                               f"no row of source {spec.name!r} has field {raw!r} (its rows have: "
                               f"{listed(s.fields)})")
        first[spec.name] = s.first
    return first


def missing_field_hint(row: Any, source: str, missing: str) -> str:
    """` (row has: a, b; map one with --map SOURCE.FIELD=MISSING)`: the detail's tail for a row without
    `missing`; the map hint only when a --map can give that field (MAPPABLE_FIELDS)."""
    has = f"row has: {listed(field_names(row))}"
    if missing in MAPPABLE_FIELDS:
        return f" ({has}; map one with --map {source}.FIELD={missing})"
    return f" ({has})"
