"""Exact duplicate detection after normalisation (textnorm: NFKC, case-fold, whitespace collapsed): rows
whose normalised text is equal are duplicates; the earliest row of each group is kept.

Returns an int64 array `dup_of`: -1 for a kept row, else the index of the kept row it duplicates.
Vectorised: one 64-bit key per row from the hashes of its whitespace tokens (ngrams.sequence_hashes, in
chunks on threads), first occurrence per key by a stable sort. Non-ASCII rows are case-folded in Python
first (pyarrow only lower-cases), and every flagged pair is confirmed on the normalised text, so a hash
collision can never drop a row.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.curation import ngrams as ng
from tasks.curation.textnorm import normalize_text

CHUNK_ROWS = 16384


def exact_duplicate_of(texts: Sequence[str] | pa.Array, *, normalized: bool = False, workers: int = 2) -> np.ndarray:
    arr = ng.to_arrow(texts)
    if len(arr) == 0:
        return np.empty(0, dtype=np.int64)
    dup = ng.first_of_equal(exact_keys(arr, normalized=normalized, workers=workers))
    # confirm: equal keys must mean equal normalised text
    flagged = np.flatnonzero(dup >= 0)
    dup[flagged[~same_normalized(arr.take(pa.array(flagged)), arr.take(pa.array(dup[flagged])))]] = -1
    return dup


def exact_keys(texts: Sequence[str] | pa.Array, *, normalized: bool = False, workers: int = 2) -> np.ndarray:
    """uint64 [N]: one key per row, equal for rows whose normalised texts are equal (a row's key depends
    on that row only, so keys can be computed batch by batch: out_of_core.py)."""
    arr = ng.to_arrow(texts)
    if len(arr) == 0:
        return np.empty(0, dtype=np.uint64)
    if not normalized:
        arr = _casefold_non_ascii(arr)
    return np.concatenate(ng.map_chunks(lambda chunk, _: ng.sequence_hashes(ng.tokenize(chunk, "shingle")),
                                        arr, CHUNK_ROWS, workers))


def same_normalized(a: pa.Array, b: pa.Array) -> np.ndarray:
    """bool [N]: whether a[i] and b[i] are equal after normalisation (byte-equal pairs need no Python)."""
    same = pc.equal(a, b).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(~same):
        same[i] = normalize_text(a[int(i)].as_py()) == normalize_text(b[int(i)].as_py())
    return same


def _casefold_non_ascii(arr: pa.Array) -> pa.Array:
    ascii_mask = pc.fill_null(pc.string_is_ascii(arr), True).to_numpy(zero_copy_only=False)
    if ascii_mask.all():
        return arr
    py = arr.to_pylist()
    for i in np.flatnonzero(~ascii_mask):
        py[i] = normalize_text(py[i])
    return pa.array(py, type=arr.type)
