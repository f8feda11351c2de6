"""Why a source row is not kept as it is: light (no pyarrow), so layouts and the CLI import it cheaply.
The canonical schema (schema.py) re-exports these names."""
from __future__ import annotations

import datetime
from typing import Any, Mapping

from tasks.records.messages import shown  # noqa: F401  (re-exported: schema.py, layouts)


def shown_text(text: str, limit: int = 60) -> str:
    """Text for a one-line message as the user wrote it, in single quotes: no repr escaping (one backslash
    stays one), only its line breaks become spaces; cut to `limit` characters."""
    text = " ".join(text.splitlines())
    return f"'{text}'" if len(text) <= limit - 2 else f"'{text[:limit - 5]}...'"


def field_names(row: Any) -> list[str]:
    """The fields a raw row has, for a message: its keys with a value (not null), and for an object value
    its own keys as dotted paths (`data.question`: how --map and the layouts name a nested field)."""
    if not isinstance(row, Mapping):
        return []
    names: list[str] = []
    for key, value in row.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and any(v is not None for v in value.values()):
            names += [f"{key}.{k}" for k, v in value.items() if v is not None]
        else:
            names.append(str(key))
    return names


def listed(names: list[str], limit: int = 8) -> str:
    """`a, b, c` — at most `limit` names, then how many more: a message stays one short line."""
    if not names:
        return "none"
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f", +{more} more" if more > 0 else "")


class Malformed(ValueError):
    """An input row that cannot be mapped to the canonical schema; the message says why."""

    reason = "malformed"  # the `dropped` reason it is recorded under


class MissingField(Malformed):
    """A row without a field it needs (absent or null); `.field` names it (a dotted path when nested; None
    when not known), so the reader can say which fields the row does have (source_fields.missing_field_hint)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # pickles whole (the default passes only the message back)
        return type(self), (str(self), self.field)


class InvalidTestsRow(Malformed):
    """A row whose tests are well-formed but cannot be judged safely (an assert that would run its check
    in the program's process): recorded as `invalid_tests`."""

    reason = "invalid_tests"


def iso_date(value: Any, field: str = "date") -> str | None:
    """`value` as an ISO date `YYYY-MM-DD` (None when absent or blank). Accepts a date, a date-time, or
    text holding an ISO date optionally followed by a time (`2023-08-21T00:00:00`); else Malformed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime.datetime):
        return value.date().isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value.strip()).date().isoformat()
        except ValueError:
            pass
    raise Malformed(f"{field} must be an ISO date (YYYY-MM-DD), got {shown(value)}")
