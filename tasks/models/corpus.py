"""Text for training a tokenizer: the problems, responses and answers of a curated dataset version (the
pipeline's base model), every string field of every row of the given sources (`klear model init` without a
corpus), or the problems and responses of a canonical file / store (`klear model init --corpus`). Rows are read by the one reader
(tasks/records/reader.py) under its bad-row rule, skipping: a row that cannot be used is left out and
reported (a line naming file and row), never the end of the run."""
from __future__ import annotations

import logging
from typing import Any, Iterable

from storage.refs import data_ref
from tasks.curation.problems import file_problem
from tasks.records.reader import OnBad, read_records, warn_skipped

log = logging.getLogger(__name__)


def string_fields(value: Any) -> list[str]:
    """The string values of a row object, in field order; ValueError for a row that is not an object."""
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object (got {type(value).__name__})")
    return [v for v in value.values() if isinstance(v, str)]


def source_texts(paths: Iterable[str]) -> list[str]:
    """Every string field of every row of the sources; a bad row is skipped with a logged warning."""
    skip = warn_skipped(log, "tokenizer corpus")
    return [text for p in paths for r in read_records(str(p), string_fields, skip) for text in r.value]


DATASET_TEXT_FIELDS = ("problem", "response", "answer")  # the text a model reads or writes of a curated row


def dataset_texts(store: str, version: str) -> list[str]:
    """The problem, response and answer of every row of a store's dataset version: what curation kept, so
    nothing it dropped (a copy of a benchmark problem, a malformed or duplicate row) and no field a raw layout
    carries beside the text (ids, sources, URLs) reaches a tokenizer trained on them."""
    from storage.store import Store

    table = Store(store).read_table(version, "problems", columns=list(DATASET_TEXT_FIELDS))
    return [v for row in table.to_pylist() for f in DATASET_TEXT_FIELDS if isinstance(v := row.get(f), str)]


def corpus_texts(data: str, on_bad: OnBad | None = None) -> list[str]:
    """Problem + response of each canonical row with a response (the SFT rows) of a .jsonl/.parquet file,
    store or `STORE#VERSION`; bad file rows go to `on_bad` (default: a logged warning) and are skipped."""
    rows = read_records(data_ref(data) or data, file_problem, on_bad or warn_skipped(log, "tokenizer corpus"))
    return [r.value["problem"] + "\n" + r.value["response"] for r in rows if r.value.get("response")]
