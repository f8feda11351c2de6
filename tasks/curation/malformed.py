"""Why a source row is not kept as it is: light (no pyarrow), so layouts and the CLI import it cheaply.
The canonical schema (schema.py) re-exports these names."""
from __future__ import annotations

import datetime
from typing import Any


def shown(value: Any, limit: int = 60) -> str:
    """A value for a one-line message: its repr (newlines escaped), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Malformed(ValueError):
    """An input row that cannot be mapped to the canonical schema; the message says why."""

    reason = "malformed"  # the `dropped` reason it is recorded under


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
