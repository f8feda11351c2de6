"""Cutoff date: rows that appeared on or after a date are dropped `after_cutoff`.

Rule: with a cutoff date C (ISO `YYYY-MM-DD`), a row whose `date` (schema.py: ISO `YYYY-MM-DD`, a
contest date from layouts such as `livecodebench` and `taco`) is >= C is dropped; one dated before C is
kept. "On or after": a benchmark collected from contests since C includes C's own contests. ISO dates
compare as text, so no parsing happens per row.

Undated rows (no `date`: None or blank text, see `is_undated`): `undated="keep"` (the default) keeps them
and the count is reported, since most sources (math sets, synthetic code) carry no date and dropping them
would drop whole sources; their copies of benchmark problems are the n-gram and test-overlap checks' to
catch. `undated="drop"` drops them as `after_cutoff` too, for a strict time split where only dated rows
can be trusted. The pipeline counts the undated rows kept with `is_undated`, the test `after_cutoff`
applies, so the count and the cut agree.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Sequence

UNDATED = ("keep", "drop")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def check_cutoff_date(value: str) -> str:
    """`value` if it is a real calendar date written `YYYY-MM-DD`, else ValueError saying so."""
    ok = isinstance(value, str) and _ISO_DATE.fullmatch(value) is not None
    try:
        ok = ok and datetime.date.fromisoformat(value).isoformat() == value
    except ValueError:
        ok = False
    if not ok:
        raise ValueError("not a calendar date written YYYY-MM-DD (e.g. 2024-08-01)")
    return value


def is_undated(value: str | None) -> bool:
    """Whether a row's `date` value means no date: None, or text that is empty or blank. Both arrive for one
    thing: a canonical row carries None (ingest's iso_date turns absent and blank dates into None), while a
    date column read back from Parquet or another tool may hold "" for a missing value; treating them alike
    keeps the cutoff, `undated`, and the undated-kept count the same whichever way a row arrives."""
    return value is None or (isinstance(value, str) and not value.strip())


def after_cutoff(dates: Sequence[str | None], cutoff: str, undated: str = "keep") -> list[str | None]:
    """Per row (its ISO date or None): None when kept, else the `after_cutoff` detail (the module rule)."""
    check_cutoff_date(cutoff)
    if undated not in UNDATED:
        raise ValueError(f"undated must be one of {', '.join(UNDATED)}, got {undated!r}")
    no_date = f"no date (cutoff {cutoff}, undated rows dropped)" if undated == "drop" else None
    return [no_date if is_undated(d) else (f"dated {d}, on or after cutoff {cutoff}" if d >= cutoff else None)
            for d in dates]
