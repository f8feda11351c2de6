"""Text for training a tokenizer: every string field of every row of the given sources, or the problems
and responses of a canonical file / store (`klear model init --corpus`). A row that cannot be read is
skipped and reported (a logged line naming file and row), never the end of the run."""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from tasks.curation.problems import read_problems
from tasks.records.sources import read_source

log = logging.getLogger(__name__)


def source_texts(paths: Iterable[str]) -> list[str]:
    texts, bad = [], []
    for p in paths:
        for raw in read_source(str(p)):
            if raw.error:
                if raw.error != "blank line":
                    bad.append(f"{p} row {raw.row}: {raw.error}")
            elif isinstance(raw.value, dict):
                texts.extend(v for v in raw.value.values() if isinstance(v, str))
    for line in bad:
        log.warning("tokenizer corpus: skipped %s", line)
    return texts


def corpus_texts(data: str, on_bad: Callable[[str], None] | None = None) -> list[str]:
    """Problem + response of each canonical row with a response (the SFT rows) of a .jsonl/.parquet file,
    store or `STORE#VERSION`; bad file rows go to `on_bad` (default: a logged warning) and are skipped."""
    report = on_bad or (lambda line: log.warning("tokenizer corpus: skipped %s", line))
    rows, _ = read_problems(data, report)
    return [r["problem"] + "\n" + (r.get("response") or "") for r in rows if r.get("response")]
