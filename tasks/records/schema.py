"""The `dropped` table's row (catalog: every input row that was not kept, with its reason). Curation and
the verify stage both add to it, so it lives below them."""
from __future__ import annotations

import pyarrow as pa

DROPPED_SCHEMA = pa.schema([
    ("source", pa.string()),
    ("row", pa.int64()),      # 1-based line (JSONL) or row (Parquet, HF) number in the source
    ("id", pa.string()),      # the row's problem id when it could be computed
    ("reason", pa.string()),
    ("detail", pa.string()),
    ("problem", pa.string()), # the problem text, or the raw line when the row could not be parsed
])
