"""Exact duplicate detection after normalisation (see textnorm): rows whose normalised text is equal
are duplicates; the earliest row of each group is kept.

Returns an int64 array `dup_of`: -1 for a kept row, else the index of the kept row it duplicates.
Vectorised: dictionary-encode the normalised strings, first index per code via np.unique.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.curation.textnorm import normalize_array


def exact_duplicate_of(texts: Sequence[str] | pa.Array, *, normalized: bool = False) -> np.ndarray:
    arr = texts if normalized else normalize_array(texts)
    if not isinstance(arr, (pa.Array, pa.ChunkedArray)):
        arr = pa.array(arr, type=pa.large_string())
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    codes = pc.dictionary_encode(arr).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    # dictionary codes are assigned in order of first appearance: first[c] is the first row with code c
    _, first = np.unique(codes, return_index=True)
    rep = first[codes]
    rows = np.arange(n, dtype=np.int64)
    return np.where(rep == rows, -1, rep)
