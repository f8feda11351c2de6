"""How a value appears in a one-line message about a row (curation's drop details, verification's
refusals): light, no imports, so any layer that reads rows can use it."""
from __future__ import annotations

from typing import Any


def shown(value: Any, limit: int = 60) -> str:
    """A value for a one-line message: its repr (newlines escaped), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
