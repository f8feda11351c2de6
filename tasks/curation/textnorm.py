"""Problem-text normalisation for exact dedup and problem ids.

Rule: Unicode NFKC, then case-fold, then every run of whitespace collapsed to one space, ends trimmed.
So "Compute  2+2." and "compute 2+2. " are the same problem; "２+2" (full-width) equals "2+2".
`normalize_array` is the vectorised form (pyarrow) with the same result, used at scale.
"""
from __future__ import annotations

import hashlib
import unicodedata
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def problem_id(domain: str, problem: str) -> str:
    """Stable id of a problem: first 16 hex digits of SHA-256 over `domain` + NUL + normalised problem."""
    return hashlib.sha256(f"{domain}\0{normalize_text(problem)}".encode()).hexdigest()[:16]


def normalize_array(texts: Sequence[str] | pa.Array) -> pa.Array:
    """Vectorised `normalize_text`. ASCII rows go through pyarrow kernels (lower == casefold for ASCII);
    the few non-ASCII rows use Python's full case-fold, so results match `normalize_text` exactly."""
    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(texts, type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    ascii_mask = pc.fill_null(pc.string_is_ascii(arr), True)
    arr = arr.cast(pa.large_string())
    out = pc.binary_join(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(pc.utf8_lower(arr))), pa.scalar(" ", pa.large_string()))
    if not pc.all(ascii_mask).as_py():
        idx = np.flatnonzero(~ascii_mask.to_numpy(zero_copy_only=False))
        py = out.to_pylist()
        for i in idx:
            py[i] = normalize_text(arr[int(i)].as_py())
        out = pa.array(py, type=out.type)
    return out
