"""Near-duplicate detection: MinHash LSH over word shingles, earliest row of each cluster kept.

Rule: rows a, b are near duplicates when the Jaccard similarity of their sets of ``shingle_size``-word
shingles (ngrams.py, kind="shingle": NFKC + lower case, whitespace words, numbers and punctuation kept)
is >= ``threshold``. Clusters are the connected components of verified pairs; the earliest row of a
cluster is kept and every other member points at it (result[i] = kept row, -1 when row i is kept).

Pipeline (all vectorised):
1. shingle hashes per row (ngrams.py; a row shorter than the shingle size is one whole-row shingle;
   a row with no token at all is never a near duplicate);
2. R-MinHash signatures of b*r permutations for every row with rensa
   (``RMinHash.digest_matrix_from_flat_token_hashes``, one flat buffer, no per-row Python objects);
3. rensa's one-shot band index flags the rows that share any band with another row; only those rows'
   signatures are copied out to numpy (rensa has no buffer export: ``to_rows`` costs ~13 us/row);
4. LSH banding in numpy on the flagged rows: band key = fmix64(sum_c sig[c] * R_c), rows grouped by
   sorting the keys; each bucket yields edges head->member and previous->member (2(m-1) edges for
   m members, so a bucket of thousands of identical rows costs linear, not quadratic, work);
5. verification: Jaccard estimated as the fraction of equal signature values; estimates within
   ``exact_margin`` standard errors of the threshold are settled by the exact Jaccard of the two
   shingle sets, so pairs near the threshold do not depend on the seed;
6. the numbers rule: a verified pair whose texts do not hold the same numbers in the same order is split
   again (`same_numbers_rule`): for math a different number is a different problem, and at 400 words a
   one-number change still leaves J ≈ 0.97, so no threshold can tell them apart. A changed lead-in, tail,
   whitespace or wording around the same numbers still merges, also when the lead-in or tail carries a
   number of its own ("Problem 7:", "(5 points)"). `numbers_must_match=False` turns the rule off;
7. union-find over verified edges (min-label propagation with pointer jumping).

Bands and rows: for b*r <= num_perm the candidate probability at similarity s is
    P(s) = 1 - (1 - s^r)^b,
and (b, r) minimise  w_fp * integral_0^t P(s) ds  +  (1 - w_fp) * integral_t^1 (1 - P(s)) ds.
A false positive only costs one signature comparison while a false negative loses a duplicate for
good, so w_fp = 0.1 by default: t = 0.8, num_perm = 128 -> b = 14, r = 9 (P(0.85) = 0.975,
P(0.9) = 0.999; the symmetric weighting would pick 9 x 13 with P(0.9) = 0.93).

Why rensa + a flag prefilter (1M rows of 30-80 words, ~53M shingles, one core of a busy 2-core VM):
rensa digests them in 1.7-4.6 s (single-thread mode) and flags shared bands in 0.9-3 s; a numpy
MinHash (uint16 multiply-add over padded rows, the fastest of three layouts tried) needs ~9 s and
datasketch 150-490 s. rensa has no buffer export (``to_rows`` costs 10-17 us/row, ~13 s for every row),
so only flagged rows are exported: ~10% of rows when 5% are near duplicates. rensa's persistent index
(insert_matrix, then query) took 15.7 s and +750 MB for 1M rows, so the one-shot flags are used.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import re
import time
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

# rensa's multi-threaded batch mode copies the whole token buffer and, on a busy 2-core machine, was 2.3x
# slower than its single-thread mode (measured: 10.7 s vs 4.6 s for 1M rows, +385 MB peak). Parallelism
# here comes from tokenising chunks on threads instead. An explicit RAYON_NUM_THREADS wins.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
import rensa  # noqa: E402

from tasks.curation import ngrams as ng

log = logging.getLogger(__name__)


@dataclass
class NearDedupConfig:
    threshold: float = 0.8  # issue 2 default: a 1-3 word lead-in on a 30-word problem is J >= 0.89
    num_perm: int = 128  # signature budget; LSH and estimates use b*r <= num_perm of them (126 by default)
    shingle_size: int = 5  # 5-word shingles: long enough that unrelated problems share almost none
    seed: int = 0  # MinHash permutation seed (results are deterministic for a seed)
    fp_weight: float = 0.1  # weight of false-positive vs false-negative mass when choosing (b, r), see above
    exact_margin: float = 2.5  # estimates within 2.5 standard errors of the threshold get the exact Jaccard
    chunk_rows: int = 1024  # rows per tokenisation chunk: ~400 KB of text stays in cache (2x faster than 16K)
    workers: int = 2  # tokenisation threads (numpy/pyarrow release the GIL); the machine has 2 cores
    export_rows: int = 8192  # flagged rows copied out of rensa per call (bounds the Python lists)
    numbers_must_match: bool = True  # near duplicates hold the same numbers (step 6 above)


@lru_cache(maxsize=64)
def lsh_params(threshold: float, num_perm: int, fp_weight: float = 0.1) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + false negative probability mass."""
    b, r = np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]).T
    s_lo = np.linspace(0.0, threshold, 201)[:, None]
    s_hi = np.linspace(threshold, 1.0, 201)[:, None]
    fp = np.trapezoid(1 - (1 - s_lo**r) ** b, s_lo, axis=0)
    fn = np.trapezoid((1 - s_hi**r) ** b, s_hi, axis=0)
    best = int(np.argmin(fp_weight * fp + (1 - fp_weight) * fn))  # first minimum: fewest bands
    return int(b[best]), int(r[best])


def shingle_hashes(arr, config: NearDedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """Flat uint64 shingle hashes and row offsets [D+1] for all rows (chunked, threaded)."""

    def one(chunk, _start):
        return ng.ngram_hashes(ng.tokenize(chunk, "shingle"), config.shingle_size, whole_short_docs=True)

    # A row of b bytes has at most ceil(b/2) tokens, hence shingles: allocate that bound (only the pages
    # written become resident) and copy chunks in as they finish, instead of concatenating at the end
    # (which would hold every shingle twice).
    byte_off, _ = ng.byte_buffers(arr)
    flat = np.empty((int(byte_off[-1]) + len(arr)) // 2 + 1, np.uint64)
    offsets = np.zeros(len(arr) + 1, np.int64)
    pos = 0
    for (s, e), (grams, off) in ng.imap_chunks(one, arr, config.chunk_rows, config.workers):
        flat[pos : pos + len(grams)] = grams
        offsets[s + 1 : e + 1] = off[1:] + pos
        pos += len(grams)
    return flat[:pos], offsets


def digest(flat: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int):
    return rensa.RMinHash.digest_matrix_from_flat_token_hashes(flat, offsets.astype(np.uint64), num_perm, seed)


def export_signatures(flat, offsets, rows, num_perm, seed, step) -> np.ndarray:
    """Signatures (uint32 [len(rows), num_perm]) of the given rows, copied out of rensa in slices."""
    out = np.empty((len(rows), num_perm), np.uint32)
    was_enabled = gc.isenabled()
    gc.disable()  # to_rows builds a list per row: the cyclic GC would rescan them (measured 2x slower)
    try:
        for s in range(0, len(rows), step):
            vals, off = ng.ragged_take(flat, offsets, rows[s : s + step])
            out[s : s + step] = np.array(digest(vals, off, num_perm, seed).to_rows(), dtype=np.uint32)
    finally:
        if was_enabled:
            gc.enable()
    return out


def band_keys(sig: np.ndarray, bands: int, rows: int, seed: int) -> np.ndarray:
    """uint64 [len(sig), bands]: band b's key = fmix64(sum_c sig[:, b*rows + c] * R_c), R_c odd, from the seed.
    A row's keys depend on its signature only, so they can be computed batch by batch (out_of_core.py)."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0xBA4D])
    mult = rng.integers(1, 2**63, size=rows, dtype=np.uint64) | np.uint64(1)
    out = np.zeros((len(sig), bands), np.uint64)
    for b in range(bands):
        key = out[:, b].copy()
        for c in range(rows):
            key += sig[:, b * rows + c].astype(np.uint64) * mult[c]
        out[:, b] = ng.fmix64(key)
    return out


def band_edges(sig: np.ndarray, bands: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate edges (i < j, local row indices) from LSH banding of the signature matrix: in each bucket
    (rows with equal band key), in row order, head -> member and previous -> member. The same rule as a
    query over band keys (out_of_core.py), so both paths verify the same pairs."""
    keys = band_keys(sig, bands, rows, seed)
    heads, members = [], []
    for b in range(bands):
        key = keys[:, b]
        order = np.argsort(key, kind="stable")  # within a bucket by row: the head is its earliest row
        k = key[order]
        same = k[1:] == k[:-1]  # member order[x+1] is in the bucket of order[x]
        if not same.any():
            continue
        new_bucket = np.concatenate([[True], ~same])
        head = order[np.flatnonzero(new_bucket)[np.cumsum(new_bucket) - 1]]  # bucket head of each slot
        idx = np.flatnonzero(same) + 1
        heads += [head[idx], order[idx - 1]]  # head -> member and previous -> member
        members += [order[idx], order[idx]]
    if not heads:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    i, j = np.concatenate(heads), np.concatenate(members)
    keep = i != j
    packed = ng.unique(np.minimum(i, j)[keep].astype(np.int64) << 32 | np.maximum(i, j)[keep])
    return packed >> 32, packed & 0xFFFFFFFF


def exact_jaccard(flat: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, step: int = 50_000):
    """Exact Jaccard of the shingle sets of rows a[p] and b[p] (ragged flat/offsets), vectorised."""
    out = np.empty(len(a), np.float64)
    for s in range(0, len(a), step):
        aa, bb = a[s : s + step], b[s : s + step]
        p = len(aa)
        rows = np.concatenate([aa, bb])
        vals, off = ng.ragged_take(flat, offsets, rows)
        owner = np.repeat(np.arange(2 * p, dtype=np.int64), np.diff(off))
        # unique shingles per side: sort (side-row, 40 hash bits)
        key = ng.unique((owner << 40) | (vals >> np.uint64(24)).astype(np.int64))
        side = key >> 40
        sizes = np.bincount(side, minlength=2 * p)
        pair = np.where(side < p, side, side - p)
        both = np.sort((pair << 40) | (key & ((1 << 40) - 1)))
        dup = both[1:] == both[:-1]
        inter = np.bincount(both[1:][dup] >> 40, minlength=p)
        union = sizes[:p] + sizes[p:] - inter
        out[s : s + step] = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    return out


def by_estimate(est: np.ndarray, config: NearDedupConfig, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(verified, unsure) bool masks of pairs by their estimated Jaccard over k signature values: verified
    when est >= t + margin, unsure (settled by the exact Jaccard) when within the margin below that, where
    margin = exact_margin * sqrt(t (1 - t) / k), the estimate's standard error at the threshold t."""
    margin = config.exact_margin * math.sqrt(config.threshold * (1 - config.threshold) / k)
    ok = est >= config.threshold + margin
    return ok, (est >= config.threshold - margin) & ~ok


_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
EDGE_WORDS = 4      # a lead-in or tail's own numbers ("Problem 7:", "(5 points)") sit within this many words
EDGE_NUMBERS = 2    # ... and are at most this many


def normal_number(text: str) -> str:
    """A written number as a normalised decimal: thousands separators dropped, leading zeros and
    trailing fractional zeros removed ("1,000" = "1000", "3.50" = "3.5", "007" = "7")."""
    whole, _, frac = text.replace(",", "").partition(".")
    frac = frac.rstrip("0")
    return (whole.lstrip("0") or "0") + ("." + frac if frac else "")


def numbers_of(text: str) -> tuple[int, list[tuple[int, str]]]:
    """(number of whitespace words, [(word index, normalised number)] in reading order), after NFKC (so
    full-width "１１" is 11). Digits inside words count too ("x2", "3x+5=11"): in math they are numbers."""
    words = unicodedata.normalize("NFKC", text).split()
    return len(words), [(w, normal_number(m)) for w, word in enumerate(words) for m in _NUMBER.findall(word)]


def same_numbers_rule(a: str, b: str) -> bool:
    """Whether two texts hold the same numbers in the same order, up to a lead-in's or tail's own numbers:
    the longer sequence may have at most EDGE_NUMBERS more, all within EDGE_WORDS of its start or end.
    So "Problem 7: ... 17 ... 23" = "... 17 ... 23", but "... 17 ... 23" ≠ "... 19 ... 23" anywhere."""
    (na, sa), (nb, sb) = numbers_of(a), numbers_of(b)
    if [x for _, x in sa] == [x for _, x in sb]:
        return True
    (n_long, long), short = ((na, sa), sb) if len(sa) > len(sb) else ((nb, sb), sa)
    extra = len(long) - len(short)
    if not 0 < extra <= EDGE_NUMBERS:
        return False
    want = [x for _, x in short]
    for k in range(extra + 1):
        if [x for _, x in long[k:k + len(short)]] != want:
            continue
        lead, tail = long[:k], long[k + len(short):]
        if all(w < EDGE_WORDS for w, _ in lead) and all(w >= n_long - EDGE_WORDS for w, _ in tail):
            return True
    return False


def same_numbers(text_of: Callable[[int], str], i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """bool [len(i)]: `same_numbers_rule` for the rows i[p] and j[p] (texts by `text_of`)."""
    return np.fromiter((same_numbers_rule(text_of(a), text_of(b)) for a, b in zip(i.tolist(), j.tolist())),
                       bool, len(i))


def components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Smallest member index of each node's connected component (min-label propagation)."""
    label = np.arange(n, dtype=np.int64)
    while True:
        lo = np.minimum(label[i], label[j])
        before = label.copy()
        np.minimum.at(label, i, lo)
        np.minimum.at(label, j, lo)
        while True:  # pointer jumping
            nxt = label[label]
            if np.array_equal(nxt, label):
                break
            label = nxt
        if np.array_equal(label, before):
            return label


def near_duplicate_of(texts, config: NearDedupConfig | None = None) -> np.ndarray:
    """int64 [len(texts)]: -1 for a kept row, else the index of the (earlier) kept row it duplicates."""
    config = config or NearDedupConfig()
    arr = ng.to_arrow(texts)
    n = len(arr)
    result = np.full(n, -1, np.int64)
    if n < 2:
        return result
    bands, rows = lsh_params(config.threshold, config.num_perm, config.fp_weight)
    k = bands * rows
    seed = config.seed & 0xFFFFFFFFFFFFFFFF
    clock = _Clock()
    flat, offsets = shingle_hashes(arr, config)
    clock("shingles")
    nonempty = np.diff(offsets) > 0
    matrix = digest(flat, offsets, k, seed)
    clock("rensa digest")
    flagged = np.asarray(rensa.RMinHashLSH(config.threshold, k, bands).query_duplicate_flags_matrix_one_shot(matrix))
    del matrix
    clock("rensa band flags")
    sub = np.flatnonzero(flagged & nonempty)
    log.info("near-dup: %d rows, %d shingles, %d in a shared LSH band (b=%d r=%d)", n, len(flat), len(sub), bands, rows)
    if len(sub) < 2:
        return result
    sub_flat, sub_off = ng.ragged_take(flat, offsets, sub)
    del flat, offsets
    sig = export_signatures(sub_flat, sub_off, np.arange(len(sub)), k, seed, config.export_rows)
    clock("signature export")
    i, j = band_edges(sig, bands, rows, config.seed)
    clock("banding")
    est = np.empty(len(i), np.float64)
    for s in range(0, len(i), 100_000):
        est[s : s + 100_000] = (sig[i[s : s + 100_000]] == sig[j[s : s + 100_000]]).mean(axis=1)
    ok, unsure = by_estimate(est, config, k)
    unsure = np.flatnonzero(unsure)
    if len(unsure):
        ok[unsure] = exact_jaccard(sub_flat, sub_off, i[unsure], j[unsure]) >= config.threshold
    clock("verification")
    log.info("near-dup: %d candidate pairs, %d settled exactly, %d verified", len(i), len(unsure), int(ok.sum()))
    if config.numbers_must_match and ok.any():
        verified = np.flatnonzero(ok)
        ok[verified] = same_numbers(lambda k: arr[k].as_py(), sub[i[verified]], sub[j[verified]])
        clock("numbers rule")
        log.info("near-dup: %d pairs split by the numbers rule", len(verified) - int(ok.sum()))
    label = components(len(sub), i[ok], j[ok])
    dup = label != np.arange(len(sub))
    result[sub[dup]] = sub[label[dup]]
    clock("union-find")
    log.debug("near-dup timings: %s", clock)
    return result


class _Clock:
    """Wall time per stage, for the debug log."""

    def __init__(self):
        self.t, self.laps = time.perf_counter(), {}

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage], self.t = round(now - self.t, 3), now

    def __repr__(self) -> str:
        return ", ".join(f"{k} {v}s" for k, v in self.laps.items())
