"""Vectorised tokenisation and n-gram hashing, shared by near-dedup and decontamination.

Rule (both tokenisations):
    text -> NFKC -> lower case -> tokens = maximal runs of *token characters* -> 64-bit hashes.
    - kind="shingle" (near-dup, exact-dup keys): token characters are everything but whitespace (ASCII
      space and control characters, Unicode spaces), so numbers and punctuation stay inside tokens
      ("3x+5=11" is one token and differs from "7x+2=9").
    - kind="word" (decontamination): token characters are Unicode letters, marks, numbers and "_"
      (Python's ``\\w`` plus combining marks), so punctuation and LaTeX braces are dropped.

Token hash:   a = block_0; a = fmix64(a) ^ block_j for j = 1, 2, ...; h(tok) = fmix64(a + len*K_LEN)
              (block_j = j-th 8 little-endian bytes of the UTF-8 token, zero padded; fmix64 = murmur3's
              64-bit finaliser, a bijection).
N-gram hash:  g(i, n) = fmix64( sum_{t<n} h[i+t] * P^(n-1-t)  mod 2^64 )   (Horner's rule), taken
              only where tokens i..i+n-1 lie in one document (and, with ``breaks``, hold no break).

Everything is numpy/pyarrow over whole chunks: per chunk, pyarrow normalises and lower-cases (the NFKC
and regex work only touches non-ASCII rows: NFKC is the identity on ASCII), and numpy finds token runs
in the UTF-8 byte buffer, reads each token as unaligned 8-byte words and combines hashes with shifted
slices. No Python loop runs per row or per token. Callers chunk big inputs (``imap_chunks``) so memory
stays bounded; numpy and pyarrow release the GIL, so chunks run on threads. Chunks of ~1K rows (~400 KB
of text) keep the byte-wide temporaries in cache, faster than larger chunks (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

U64 = np.uint64
P = U64(0x9E3779B97F4A7C15)  # odd multiplier of the polynomial n-gram hash (golden ratio)
K_LEN = U64(0xD6E8FEB86659FD93)
K_POS = U64(0xA0761D6478BD642F)
_M1, _M2 = U64(0xFF51AFD7ED558CCD), U64(0xC4CEB9FE1A85EC53)  # murmur3 fmix64
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=U64)

# Token bytes. Bytes >= 0x80 (UTF-8 of non-ASCII characters) count as token bytes; non-ASCII rows first
# get their non-token characters replaced by " " (regexes below), so the byte rule is exact.
#   shingle: every byte > 0x20 (ASCII space and control characters separate tokens, like str.split())
#   word:    a-z, 0-9, "_" (text is lower-cased already) and bytes >= 0x80
_NON_TOKEN_RE = {
    # the only whitespace left after NFKC besides ASCII (checked over all code points): NEL, Ogham space
    # mark, line and paragraph separators. A literal class: RE2's \p{Z} was 7x slower (14 vs 2 us/row)
    "shingle": r"[\x{85}\x{1680}\x{2028}\x{2029}]",
    "word": r"[^\p{L}\p{N}\p{M}_\x{00}-\x{7f}]",  # non-ASCII characters that are not word characters
}
_U8 = np.uint8


def token_bytes(data: np.ndarray, kind: str) -> np.ndarray:
    """Boolean mask of token bytes (see above), by SIMD-friendly comparisons rather than a lookup table."""
    if kind == "shingle":
        return data > _U8(32)
    w = data >= _U8(128)
    w |= (data - _U8(97)) < _U8(26)
    w |= (data - _U8(48)) < _U8(10)
    w |= data == _U8(95)
    return w


T = TypeVar("T")


@dataclass(frozen=True)
class Tokens:
    """Flat token hashes of a batch of documents: doc d owns ``hashes[offsets[d]:offsets[d+1]]``.

    With ``spans``, ``starts``/``ends`` are byte positions of each token in ``data`` (the normalised
    UTF-8 text of the batch), for turning hashes back into readable text.
    """

    hashes: np.ndarray  # uint64 [T]
    offsets: np.ndarray  # int64 [D+1]
    starts: np.ndarray | None = None  # int64 [T]
    ends: np.ndarray | None = None  # int64 [T]
    data: bytes | None = None  # normalised UTF-8 text of the batch

    @property
    def num_docs(self) -> int:
        return len(self.offsets) - 1

    def text(self, first: int, last: int) -> str:
        """Tokens first..last-1 (flat indices) joined by single spaces."""
        assert self.data is not None, "tokenize(..., spans=True) keeps the text"
        spans = zip(self.starts[first:last].tolist(), self.ends[first:last].tolist())
        return " ".join(self.data[s:e].decode("utf-8", "replace") for s, e in spans)


def to_arrow(texts: Sequence[str] | pa.Array | pa.ChunkedArray | np.ndarray) -> pa.LargeStringArray:
    """One contiguous large_string array; None becomes ""."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not isinstance(texts, pa.Array):
        texts = pa.array(texts if isinstance(texts, (list, np.ndarray)) else list(texts), type=pa.large_string())
    if texts.type != pa.large_string():
        texts = texts.cast(pa.large_string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    return texts


def normalize(arr: pa.Array, kind: str | None = None) -> pa.LargeStringArray:
    """NFKC + lower case. With ``kind``, non-ASCII non-token characters also become " "."""
    arr = to_arrow(arr)
    non_ascii = pc.invert(pc.string_is_ascii(arr))
    lowered = pc.ascii_lower(arr)
    if not pc.any(non_ascii).as_py():
        return lowered
    sub = pc.utf8_lower(pc.utf8_normalize(arr.filter(non_ascii), "NFKC"))
    if kind is not None:
        sub = pc.replace_substring_regex(sub, _NON_TOKEN_RE[kind], " ")
    return pc.replace_with_mask(lowered, non_ascii, sub.cast(pa.large_string()))


def byte_buffers(arr: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    """(byte offsets int64 [D+1] starting at 0, data uint8) of a large_string array, zero copy."""
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    base = int(offsets[0]) if len(offsets) else 0
    return offsets - base, data[base : base + (int(offsets[-1]) - base if len(offsets) else 0)]


def fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3 finaliser, in place on a fresh uint64 array (a bijection of 64-bit words)."""
    tmp = np.empty_like(x)
    for mult in (_M1, _M2):
        np.right_shift(x, U64(33), out=tmp)
        x ^= tmp
        x *= mult
    np.right_shift(x, U64(33), out=tmp)
    x ^= tmp
    return x


def _token_runs(data: np.ndarray, offsets: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Byte [start, end) of every maximal run of token bytes, never crossing a document boundary.

    Byte-wide boolean passes plus two flatnonzero: cheaper here than one flatnonzero followed by int64
    bookkeeping on the edge list (docs/benchmarks.md).
    """
    if len(data) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = token_bytes(data, kind)
    prev, cur = w[:-1], w[1:]  # the bytes before / at positions 1..len-1
    new_doc = np.zeros(len(cur), bool)
    doc_start = offsets[1:-1]
    new_doc[doc_start[(doc_start > 0) & (doc_start < len(data))] - 1] = True
    st = ~prev
    st |= new_doc
    st &= cur
    en = ~cur
    en |= new_doc
    en &= prev
    starts, ends = np.flatnonzero(st) + 1, np.flatnonzero(en) + 1
    if w[0]:
        starts = np.concatenate([[0], starts])
    if w[-1]:
        ends = np.concatenate([ends, [len(data)]])
    return starts, ends


def _hash_tokens(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """h(tok) from the module docstring, reading tokens as unaligned little-endian 8-byte words."""
    padded = np.empty(len(data) + 8, np.uint8)
    padded[: len(data)] = data
    padded[len(data) :] = 0
    words = np.ndarray((len(data) + 1,), dtype="<u8", buffer=padded, offset=0, strides=(1,))
    lens = ends - starts
    acc = words[starts]
    acc &= _MASKS[np.minimum(lens, 8)]
    sel = np.flatnonzero(lens > 8)
    if len(sel):  # tokens over 8 bytes: h = fmix(h) ^ block_j for each further block
        nblk = (lens[sel] + 7) // 8 - 1
        for j in range(1, int(nblk.max()) + 1):
            if j > 1:
                sel, nblk = sel[nblk >= j], nblk[nblk >= j]
            pos = starts[sel] + 8 * j
            h = fmix64(acc[sel])
            h ^= words[pos] & _MASKS[np.minimum(ends[sel] - pos, 8)]
            acc[sel] = h
    acc += lens.astype(U64) * K_LEN
    return fmix64(acc)


def tokenize(texts, kind: str = "shingle", *, spans: bool = False) -> Tokens:
    """Normalise and tokenise one batch (see module docstring for the two kinds)."""
    arr = normalize(texts, kind)
    offsets, data = byte_buffers(arr)
    starts, ends = _token_runs(data, offsets, kind)
    hashes = _hash_tokens(data, starts, ends)
    tok_off = np.searchsorted(starts, offsets).astype(np.int64)
    if spans:
        return Tokens(hashes, tok_off, starts, ends, data.tobytes())
    return Tokens(hashes, tok_off)


def horner(h: np.ndarray, n: int) -> list[np.ndarray]:
    """Raw polynomial hashes of all windows: out[m-1][i] = sum_{t<m} h[i+t] P^(m-1-t), m = 1..n.

    Windows are taken over the flat array (they may cross documents; callers select valid starts).
    """
    out = [h]
    g = h
    for m in range(1, n):
        g = g[:-1] * P
        g += h[m:]
        out.append(g)
    return out


def window_starts(offsets: np.ndarray, n: int, breaks: np.ndarray | None = None) -> np.ndarray:
    """Flat positions i whose window [i, i+n) lies inside one document and contains no break token."""
    total = int(offsets[-1])
    if total < n:
        return np.zeros(0, np.int64)
    m = total - n + 1
    starts_in = np.zeros(total + 1, np.int32)
    starts_in[offsets[1:-1]] = 1  # a document starts here (duplicates from empty docs are harmless)
    c = np.cumsum(starts_in)
    ok = c[n - 1 : n - 1 + m] == c[:m]  # no document start in (i, i+n-1]
    if breaks is not None:
        cb = np.zeros(total + 1, np.int64)
        np.cumsum(breaks, out=cb[1:])
        ok &= cb[n : n + m] == cb[:m]
    return np.flatnonzero(ok)


def doc_of_position(offsets: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Document id of each flat token position."""
    return np.searchsorted(offsets, pos, side="right") - 1


def ngram_hashes(tokens: Tokens, n: int, *, whole_short_docs: bool, breaks: np.ndarray | None = None):
    """Hashes of every n-gram inside a document (and, with ``breaks``, inside one unbroken run).

    Returns (hashes uint64 [G], offsets int64 [D+1]). With ``whole_short_docs``, a non-empty document
    with fewer than n tokens gets one gram hashing all its tokens (length-salted, so it never equals a
    true n-gram); otherwise it gets none. Grams keep document order and token order.
    """
    h, off = tokens.hashes, tokens.offsets
    pos = window_starts(off, n, breaks)
    grams = fmix64(horner(h, n)[n - 1][pos]) if len(pos) else np.zeros(0, U64)
    counts = np.diff(np.searchsorted(pos, off))
    if not whole_short_docs:
        return grams, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lens = np.diff(off)
    short = np.flatnonzero((lens > 0) & (lens < n))
    if len(short) == 0:
        return grams, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    s, L = off[short], lens[short]
    g = h[s].copy()
    for t in range(1, int(L.max())):
        live = np.flatnonzero(t < L)
        g[live] = g[live] * P + h[s[live] + t]
    g += L.astype(U64) * K_LEN
    counts[short] += 1
    out_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    slot = np.zeros(int(out_off[-1]), bool)
    slot[out_off[short]] = True
    out = np.empty(len(slot), U64)
    out[~slot] = grams
    out[slot] = fmix64(g)
    return out, out_off


def sequence_hashes(tokens: Tokens) -> np.ndarray:
    """One uint64 per document: fmix64( sum_t fmix64(h[t] + t*K_POS) + len*K_LEN ), t = position in doc.

    Equal token sequences give equal keys, so with kind="shingle" this keys exact dedup on NFKC +
    lower case + whitespace-collapsed text (64-bit: ~3e-8 chance of any collision among 1M rows).
    """
    h, off = tokens.hashes, tokens.offsets
    lens = np.diff(off)
    pos = np.arange(len(h), dtype=np.int64) - np.repeat(off[:-1], lens)
    v = h + pos.astype(U64) * K_POS
    fmix64(v)
    sums = np.zeros(len(lens), U64)
    nonempty = np.flatnonzero(lens > 0)
    if len(nonempty):
        sums[nonempty] = np.add.reduceat(v, off[:-1][nonempty])
    sums += lens.astype(U64) * K_LEN
    return fmix64(sums)


def unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values, by sorting: np.unique in numpy 2.4 takes a hash-table path that is far
    slower on int64 hashes (docs/benchmarks.md), so every caller uses this instead."""
    s = np.sort(a)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if len(s) else s


def first_of_equal(keys: np.ndarray) -> np.ndarray:
    """int64 [N]: -1 where keys[i] is the first occurrence of its value, else the index of that first one."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    new = np.concatenate([[True], k[1:] != k[:-1]]) if len(k) else np.zeros(0, bool)
    head = order[np.flatnonzero(new)][np.cumsum(new) - 1]
    out = np.full(len(keys), -1, np.int64)
    dup = ~new
    out[order[dup]] = head[dup]
    return out


def chunks(num_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    return [(s, min(s + chunk_rows, num_rows)) for s in range(0, num_rows, chunk_rows)]


def imap_chunks(fn: Callable[[pa.Array, int], T], arr: pa.Array, chunk_rows: int, workers: int):
    """Yield ((start, end), fn(arr[start:end], start)) for every chunk, in order, computed on ``workers``
    threads (numpy and pyarrow release the GIL) with at most 2 * workers chunks in flight."""
    ranges = chunks(len(arr), chunk_rows)
    call = lambda r: fn(arr.slice(r[0], r[1] - r[0]), r[0])  # noqa: E731
    if workers <= 1 or len(ranges) <= 1:
        for r in ranges:
            yield r, call(r)
        return
    with ThreadPoolExecutor(max_workers=workers) as ex:
        todo = iter(ranges)
        pending = deque((r, ex.submit(call, r)) for r in itertools.islice(todo, 2 * workers))
        while pending:
            r, fut = pending.popleft()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, ex.submit(call, nxt)))
            yield r, fut.result()


def map_chunks(fn: Callable[[pa.Array, int], T], arr: pa.Array, chunk_rows: int, workers: int) -> list[T]:
    """[fn(arr[s:e], s) for every chunk], in order (see imap_chunks)."""
    return [res for _, res in imap_chunks(fn, arr, chunk_rows, workers)]


def ragged_take(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of the documents ``rows`` (in that order) of a ragged array."""
    lens = offsets[1:][rows] - offsets[:-1][rows]
    new_off = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lens, out=new_off[1:])
    idx = np.arange(int(new_off[-1]), dtype=np.int64) + np.repeat(offsets[:-1][rows] - new_off[:-1], lens)
    return values[idx], new_off
