"""Benchmark decontamination by word n-gram overlap (Klear-Reasoner §3.1: n = 9), boilerplate excluded.

Rule: a row is contaminated when it shares an n-gram of word tokens (ngrams.py, kind="word": NFKC,
lower case, runs of letters/marks/digits/"_"; punctuation dropped) with a benchmark problem, where
n-grams are formed only inside runs of tokens *not covered by boilerplate*. The result names the first
benchmark (in mapping order) holding the matched n-gram and the n-gram itself as readable text.

Boilerplate = k-grams (k = ``boilerplate_k`` words) that are common rather than specific:
  - benchmark side: within one benchmark, the k-gram occurs in >= max(bench_min_docs,
    bench_fraction * D_b) of its D_b distinct problems (an instruction such as "give the final answer
    in boxed" in every prompt; a phrase shared by two of twenty problems is a template, not content);
  - training side: among benchmark k-grams, one occurring in >= max(train_min_docs,
    train_fraction * N) of the N rows checked (the instruction appended to every training prompt).
Tokens covered by a boilerplate k-gram are masked in benchmark problems and training rows alike, so an
n-gram straddling an instruction (the last words of a problem + the first words of the instruction)
never exists. Both thresholds are relative with an absolute floor: a benchmark problem copied into a
handful of rows (3 of 30 is 10%, under train_fraction = 20%, and under train_min_docs = 5) stays
content and those rows stay contaminated.

Whole problems: a row whose word tokens are exactly a benchmark problem's (the same normalisation: a
verbatim copy up to case, punctuation and spacing) is contaminated whatever the mask and however short —
in a templated benchmark, whose problems differ only in their numbers, every shared phrase is boilerplate
and nothing but the numbers is left to match, yet a copy is still a copy. Its template-mates with other
numbers are not copies and stay clean.

Short text: a run of fewer than n unmasked tokens has no n-gram. So a benchmark problem of fewer than n
words (after removing boilerplate) cannot be matched, and a row sharing only a short phrase (< n words)
with a benchmark problem is kept: matching whole short problems would flag every row that happens to
contain a short common phrase.

Work: one vectorised pass over the rows (chunked, threaded) hashes their k-grams and looks them up in
the benchmark k-grams (a bitmap prefilter on the top hash bits, then a binary search). That yields the
training document frequencies and the candidate rows: a row sharing an n-gram with a benchmark shares
its first k-gram, which is not boilerplate (boilerplate tokens are masked), so rows without a shared
non-boilerplate k-gram are clean. Only the candidates (typically well under 1%) get masked n-grams,
checked against the benchmark n-grams built with the final boilerplate (benchmark + training side).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tasks.curation import ngrams as ng

log = logging.getLogger(__name__)


@dataclass
class DecontamConfig:
    n: int = 9  # n-gram length in words (paper: 9)
    boilerplate_k: int = 5  # boilerplate = shared k-grams: shorter than n, longer than "find the value of"
    bench_min_docs: int = 2  # a benchmark k-gram must be in at least 2 distinct problems to be boilerplate...
    bench_fraction: float = 0.1  # ...and in >= 10% of that benchmark's problems
    train_min_docs: int = 5  # a training k-gram must be in >= 5 rows (a handful of copies is content)...
    train_fraction: float = 0.2  # ...and in >= 20% of the rows checked (instructions are in most prompts of a source)
    chunk_rows: int = 1024  # rows per chunk: ~400 KB of text stays in cache (2x faster than 16K)
    workers: int = 2  # threads over chunks (numpy/pyarrow release the GIL); the machine has 2 cores


class HashSet:
    """Sorted uint64 set with a bitmap prefilter on the top hash bits (about 16 bitmap slots per key)."""

    def __init__(self, hashes: np.ndarray):
        self.keys = ng.unique(np.asarray(hashes, np.uint64))
        self.bits = int(min(28, max(12, np.ceil(np.log2(max(len(self.keys), 1) * 16)))))
        self.shift = np.uint64(64 - self.bits)
        self.bitmap = np.zeros(1 << self.bits, bool)
        self.bitmap[self.keys >> self.shift] = True

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in q that are members, their indices in self.keys)."""
        if len(self.keys) == 0 or len(q) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        cand = np.flatnonzero(self.bitmap[q >> self.shift])
        idx = np.searchsorted(self.keys, q[cand])
        idx[idx == len(self.keys)] = 0
        ok = self.keys[idx] == q[cand]
        return cand[ok], idx[ok]


def _poly(hs: list[np.ndarray], pos: np.ndarray, n: int) -> np.ndarray:
    """Raw polynomial hash of the n tokens starting at each pos, from Horner prefixes hs[m-1] (m <= M)."""
    M = len(hs)
    g = np.zeros(len(pos), np.uint64)
    at = pos.copy()
    left = n
    while left > 0:
        m = min(M, left)
        g *= np.uint64(pow(int(ng.P), m, 1 << 64))
        g += hs[m - 1][at]
        at += m
        left -= m
    return g


@dataclass
class _Doc:
    """Tokens of a batch with their k-gram hashes (kpos = flat start of each k-gram)."""

    tok: ng.Tokens
    hs: list[np.ndarray]
    kgrams: np.ndarray
    kpos: np.ndarray


def _prepare(texts, config: DecontamConfig, spans: bool = False) -> _Doc:
    tok = ng.tokenize(texts, "word", spans=spans)
    hs = ng.horner(tok.hashes, config.boilerplate_k)
    kpos = ng.window_starts(tok.offsets, config.boilerplate_k)
    kgrams = ng.fmix64(hs[-1][kpos]) if len(kpos) else np.zeros(0, np.uint64)
    return _Doc(tok, hs, kgrams, kpos)


def _masked_ngrams(d: _Doc, boiler: HashSet, config: DecontamConfig) -> tuple[np.ndarray, np.ndarray]:
    """(n-gram hashes, flat start positions) of n-grams inside unmasked runs."""
    k, total = config.boilerplate_k, len(d.tok.hashes)
    breaks = None
    hit, _ = boiler.find(d.kgrams)
    if len(hit):
        diff = np.zeros(total + 1, np.int32)
        np.add.at(diff, d.kpos[hit], 1)
        np.add.at(diff, d.kpos[hit] + k, -1)
        breaks = np.cumsum(diff[:total]) > 0
    pos = ng.window_starts(d.tok.offsets, config.n, breaks)
    return ng.fmix64(_poly(d.hs, pos, config.n)), pos


def _doc_frequency(grams: np.ndarray, doc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct grams, number of distinct documents holding each)."""
    if len(grams) == 0:
        return grams, np.zeros(0, np.int64)
    order = np.lexsort((doc, grams))
    g, dd = grams[order], doc[order]
    new_pair = np.concatenate([[True], (g[1:] != g[:-1]) | (dd[1:] != dd[:-1])])
    g = g[new_pair]
    starts = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    return g[starts], np.diff(np.append(starts, len(g)))


def _benchmark_side(benchmarks: Mapping[str, Sequence[str]], config: DecontamConfig):
    """Per benchmark prepared tokens, all benchmark k-grams, benchmark-side boilerplate k-grams."""
    prepared, all_k, boiler = [], [], []
    for name, problems in benchmarks.items():
        d = _prepare(list(problems), config)
        prepared.append((name, d))
        off = d.tok.offsets
        seen, distinct = set(), []
        for i in range(d.tok.num_docs):  # distinct problems (a benchmark may list one twice)
            key = d.tok.hashes[off[i] : off[i + 1]].tobytes()
            if key not in seen:
                seen.add(key)
                distinct.append(i)
        doc = ng.doc_of_position(off, d.kpos)
        keep = np.isin(doc, distinct)
        grams, df = _doc_frequency(d.kgrams[keep], doc[keep])
        need = max(config.bench_min_docs, config.bench_fraction * len(distinct))
        boiler.append(grams[df >= need])
        all_k.append(d.kgrams)
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.uint64)  # noqa: E731
    return prepared, HashSet(cat(all_k)), cat(boiler)


def _whole_problems(prepared) -> tuple[HashSet, np.ndarray]:
    """Whole-sequence keys of every non-empty benchmark problem (ngrams.sequence_hashes of its word tokens)
    and, per key, the index of the first benchmark holding it."""
    keys, owner = [], []
    for b, (_, d) in enumerate(prepared):
        nonempty = np.diff(d.tok.offsets) > 0
        k = ng.sequence_hashes(d.tok)[nonempty]
        keys.append(k)
        owner.append(np.full(len(k), b, np.int64))
    if not keys:
        return HashSet(np.zeros(0, np.uint64)), np.zeros(0, np.int64)
    k, o = np.concatenate(keys), np.concatenate(owner)
    order = np.lexsort((o, k))
    k, o = k[order], o[order]
    first = np.concatenate([[True], k[1:] != k[:-1]]) if len(k) else np.zeros(0, bool)
    return HashSet(k[first]), o[first]


def _bench_ngrams(prepared, boiler: HashSet, config: DecontamConfig) -> tuple[HashSet, np.ndarray]:
    """Masked benchmark n-grams and, per key, the index of the first benchmark holding it."""
    grams, owner = [], []
    for b, (_, d) in enumerate(prepared):
        g, _ = _masked_ngrams(d, boiler, config)
        grams.append(g)
        owner.append(np.full(len(g), b, np.int64))
    if not grams:
        return HashSet(np.zeros(0, np.uint64)), np.zeros(0, np.int64)
    g, o = np.concatenate(grams), np.concatenate(owner)
    order = np.lexsort((o, g))  # by hash, then benchmark order
    g, o = g[order], o[order]
    first = np.concatenate([[True], g[1:] != g[:-1]]) if len(g) else np.zeros(0, bool)
    return HashSet(g[first]), o[first]  # HashSet keys are exactly g[first] (sorted, unique)


class Decontaminator:
    """find_contamination in phases, so rows can come in batches (out_of_core.py):
    `scan(batch)` per batch -> (k-gram document-frequency counts, candidate rows of the batch);
    `finish(counts summed over batches, total rows)` fixes the training-side boilerplate;
    `check(candidate texts)` -> per candidate None or (benchmark name, the first shared n-gram)."""

    def __init__(self, benchmarks: Mapping[str, Sequence[str]], config: DecontamConfig | None = None):
        self.config = config or DecontamConfig()
        assert self.config.n >= 1 and self.config.boilerplate_k >= 1
        self.prepared, self.bench_k, self.bench_boiler = _benchmark_side(benchmarks, self.config)
        self.is_boiler = np.zeros(len(self.bench_k), bool)  # aligned with bench_k.keys
        self.is_boiler[self.bench_k.find(self.bench_boiler)[1]] = True
        self.names = [name for name, _ in self.prepared]
        self.boiler: HashSet | None = None
        self.whole, self.whole_owner = _whole_problems(self.prepared)

    def scan(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """(per benchmark k-gram, how many rows of `texts` hold it; indices of the candidate rows: those
        sharing a non-boilerplate k-gram with a benchmark, as any shared n-gram contains one, and the
        copies of a whole benchmark problem)."""
        config = self.config

        def one(chunk, start):
            d = _prepare(chunk, config)
            hit, kidx = self.bench_k.find(d.kgrams)
            doc = ng.doc_of_position(d.tok.offsets, d.kpos[hit])
            df_keys = ng.unique((doc.astype(np.int64) << 32) | kidx) & 0xFFFFFFFF  # one count per row
            copies, _ = self.whole.find(ng.sequence_hashes(d.tok))
            return df_keys, ng.unique(np.concatenate([doc[~self.is_boiler[kidx]], copies])) + start

        parts = ng.map_chunks(one, ng.to_arrow(texts), config.chunk_rows, config.workers)
        df = np.bincount(np.concatenate([p[0] for p in parts] or [np.zeros(0, np.int64)]).astype(np.int64),
                         minlength=len(self.bench_k))
        return df, np.concatenate([p[1] for p in parts] or [np.zeros(0, np.int64)])

    def finish(self, df: np.ndarray, rows: int) -> None:
        config = self.config
        train_boiler = self.bench_k.keys[df >= max(config.train_min_docs, config.train_fraction * rows)]
        self.boiler = HashSet(np.concatenate([self.bench_boiler, train_boiler]))
        self.bench_n, self.owner = _bench_ngrams(self.prepared, self.boiler, config)
        log.info("decontam: %d benchmark problems, %d n-grams, %d boilerplate k-grams (%d seen in benchmarks, "
                 "%d in training rows)", sum(p.tok.num_docs for _, p in self.prepared), len(self.bench_n),
                 len(self.boiler), len(self.bench_boiler), len(train_boiler))

    def check(self, texts) -> list[tuple[str, str] | None]:
        """The final check (with the final mask) and readable n-grams, for candidate rows."""
        assert self.boiler is not None, "finish() first"
        config, arr = self.config, ng.to_arrow(texts)
        out: list[tuple[str, str] | None] = [None] * len(arr)
        for s in range(0, len(arr), config.chunk_rows):
            d = _prepare(arr.slice(s, config.chunk_rows), config, spans=True)
            rows, owner = self.whole.find(ng.sequence_hashes(d.tok))
            for r, o in zip(rows.tolist(), owner.tolist()):
                first, last = int(d.tok.offsets[r]), int(d.tok.offsets[r + 1])
                words = d.tok.text(first, min(last, first + config.n))
                out[s + r] = (self.names[self.whole_owner[o]], words + (" …" if last - first > config.n else ""))
            g, pos = _masked_ngrams(d, self.boiler, config)
            found, idx = self.bench_n.find(g)
            doc = ng.doc_of_position(d.tok.offsets, pos[found])
            first = np.flatnonzero(np.concatenate([[True], doc[1:] != doc[:-1]])) if len(doc) else []
            for f in first:
                p = int(pos[found[f]])
                if out[s + int(doc[f])] is None:  # a whole copy keeps its own reason
                    out[s + int(doc[f])] = (self.names[self.owner[idx[f]]], d.tok.text(p, p + config.n))
        return out


def find_contamination(
    texts, benchmarks: Mapping[str, Sequence[str]], config: DecontamConfig | None = None
) -> list[tuple[str, str] | None]:
    """Per row: None if clean, else (benchmark name, the first shared n-gram as space-joined words)."""
    arr = ng.to_arrow(texts)
    N = len(arr)
    out: list[tuple[str, str] | None] = [None] * N
    if N == 0 or not benchmarks:
        return out
    dec = Decontaminator(benchmarks, config)
    df, candidates = dec.scan(arr)
    dec.finish(df, N)
    log.info("decontam: %d candidate rows", len(candidates))
    for row, hit in zip(candidates.tolist(), dec.check(arr.take(pa.array(candidates)))):
        out[row] = hit
    log.info("decontam: %d of %d rows contaminated", sum(o is not None for o in out), N)
    return out
