"""Text for training a tokenizer: every string field of every row of the given sources."""
from __future__ import annotations

from typing import Iterable


def source_texts(paths: Iterable[str]) -> list[str]:
    from tasks.curation.sources import read_source

    return [v for p in paths for raw in read_source(str(p)) if isinstance(raw.value, dict)
            for v in raw.value.values() if isinstance(v, str)]
