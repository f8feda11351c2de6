"""Code-aware decontamination: a code row is `contaminated` when its tests overlap the tests of one
benchmark problem, whatever its statement says (a reworded statement defeats the n-gram check in
decontaminate.py; identical tests do not lie).

Cases. Each row's `tests` are read by the one tests parser (sandbox.testcases.parse_test_suite), so every
form counts the way it runs, and each test becomes one normalised case:
  - stdin/stdout: ("io", input, output) with every run of whitespace (newlines included) collapsed to one
    space and both ends stripped, so "1  2\\r\\n" and "1 2" are one case (the stdout comparison ignores
    such differences too).
  - call-based: ("call", arguments, expected) as canonical JSON (sorted keys, tuples as lists, sets sorted,
    an integral float as its int: 3.0 == 3 under the comparison), the expected value with every
    one-element list around it removed: APPS/TACO write each expected value wrapped ([3] for 3) and the
    judge accepts the bare value (sandbox.compare.values_equal with unwrap_outputs), so [[3], [12]] and
    [3, 12] are one set of cases, and so are a list return [[1, 2]] wrapped and [1, 2] bare ([[1]] and [1]
    and 1 all become 1: either side may be the wrapped one). The function name is left out: renaming
    `add` to `sum_two` does not make a copied problem new.
  - assert-style: the assert rebuilt from the parser's observation and host check. `f(ARGS) == VALUE`
    with literal ARGS and VALUE (either side) is the call-based case (ARGS, VALUE), so `assert add(1, 2)
    == 3` and {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]} are one case; any other assert is
    ("assert", its expression unparsed by `ast`). Benchmark asserts the parser refuses to judge are
    still compared: every `assert` statement in their snippets is a case.
Kinds never match each other: a copy moved to another test form (a stdin/stdout copy of a call-based or
assert-style benchmark problem, or the reverse) shares no case and is left to the statement check. No
sound rule maps one form to the other: how arguments and values are written to stdin (one per line, a
length first, brackets or not, how strings are quoted) is the copier's choice, and a loose token match
would make unrelated short cases ("3" -> "6") equal across forms.
A case is hashed to 64 bits (blake2b) and each row or benchmark problem is its set of distinct hashes.

Trivial cases (like boilerplate in the n-gram check, by document frequency) are left out of everything,
shared counts and sizes alike, so they never cause contamination on their own:
  - benchmark side: a case in >= bench_min_docs (3) distinct groups of benchmark problems (all benchmarks
    pooled) is generic ("1" -> "1", an empty input). A group is one problem and its versions, so that
    passing several versions of one benchmark (HumanEval, HumanEval+, a third: the same problems with
    different test sets) does not make every case of theirs generic:
      1. problems with the same set of cases are one;
      2. a case in >= 2 (distinct) problems of one benchmark is no evidence of versions: a benchmark lists
         each problem once, so one problem's versions hold a case at most once per benchmark;
      3. two problems of different benchmarks are versions of one another when, less the cases of 2., they
         meet the rule below (S >= min_shared and S / min(R, B) >= threshold): the evidence that makes a
         training row a copy. Versions are merged into groups, the pairs with the highest fraction (then
         the most shared cases, then the first) first, and a group never takes two problems of one
         benchmark (two problems of one benchmark are two problems), so a chain of look-alike problems
         through another benchmark stops there, and a case in >= bench_min_docs problems of one benchmark
         is in as many groups.
    Three groups, not two: a version whose tests share less than the rule with the others stays a group
    of its own. A case generic only across benchmarks (in one problem of each), whose problems share half
    their cases, looks like one problem's versions and is not trivial.
  - training side: a benchmark case in >= max(train_min_docs, train_fraction * N) training rows (N: the
    rows checked, rows with tests) is generic to the training data (the sample case every problem of a
    source shows), the same rule and numbers as the n-gram check's training-side boilerplate. Rows with
    the same set of cases count once in the frequency (as problems do on the benchmark side): otherwise
    5 copies of one benchmark problem among <= 25 rows would reach train_min_docs and make all its cases
    trivial, hiding each other. Copies whose test sets differ still count each (a near-dedup matter); N
    counts every row with tests, which only raises the bar (keeps more cases as evidence).

Rule: with S = distinct non-trivial cases shared by a row and one benchmark problem, and R, B their
numbers of distinct non-trivial cases, the row is contaminated when
    S >= min_shared (2)   and   S / min(R, B) >= threshold (0.5).
min(R, B): a copy may carry a subset of the benchmark's tests (only the public ones) or add tests of its
own (generated ones); either way the smaller set is mostly inside the larger. Half of it: two distinct
problems give different outputs on most inputs, so half their cases identical is far beyond chance, while
a copy whose tests were partly regenerated or reformatted is still caught. min_shared 2: one shared case
is no evidence (a short case such as "3" -> "6" fits 3!, 1+2+3 and 2*3 alike), so a row or problem with a
single non-trivial case is left to the statement check. The match reported is the problem with the
highest fraction (then more shared cases, then the earlier benchmark and problem).

Work: parsing and hashing are per test (Python); document frequencies, the row x problem join and the
counts are numpy over flat hash arrays. For data that does not fit in memory: `case_hashes` per row in
chunks, `BenchmarkTests.row_frequency(chunk, seen=seen)` summed over the chunks with one `seen` set for
all of them (training-side frequencies; the set makes a case set count once across chunks), `trivial` of
the total, then `BenchmarkTests.match` and `example_case` per chunk; `find_case_overlap` composes them for
in-memory rows.
"""
from __future__ import annotations

import ast
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox.testcases import ASSERT, CALL, InvalidTests, UnjudgeableTests, parse_test_suite
from tasks.curation import ngrams as ng

log = logging.getLogger(__name__)

Case = tuple[str, str, str]  # (kind, input or arguments or expression, expected output or value or "")


@dataclass
class CaseOverlapConfig:
    threshold: float = 0.5  # S / min(R, B): half of the smaller case set identical (see the module rule)
    min_shared: int = 2  # one shared case is no evidence: short cases coincide across unrelated problems
    bench_min_docs: int = 3  # a case in 3 groups of benchmark problems (a problem and its versions) is generic
    train_min_docs: int = 5  # a benchmark case in >= 5 training rows...
    train_fraction: float = 0.2  # ...and >= 20% of those checked is generic (as the n-gram check's boilerplate)


@dataclass(frozen=True)
class CaseOverlap:
    """A row's match: `problem` indexes the benchmark's sequence; `shared` of `of` (= min(R, B)) cases."""

    benchmark: str
    problem: int
    shared: int
    of: int
    example: str = ""  # one shared case, one line, shortened


# --------------------------------------------------------------------------------------- normalising
def _plain(v: Any) -> Any:
    """A value as canonical JSON data (see the module rule); anything else as its repr."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            return repr(v)
        return int(v) if v.is_integer() and abs(v) < 2**63 else v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x) for x in v), key=_json)
    if isinstance(v, Mapping):
        return {k if isinstance(k, str) else _json(_plain(k)): _plain(x) for k, x in v.items()}
    return repr(v)


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _value(v: Any) -> str:
    return _json(_plain(v))


def _expected(v: Any) -> str:
    """An expected return value as canonical JSON, every one-element list around it removed (the module
    rule: the judge's unwrap_outputs accepts [x] for x)."""
    plain = _plain(v)  # first: a value too deep to normalise raises here, unwrapped or not
    while isinstance(v, (list, tuple)) and len(v) == 1:  # a list or tuple (the judge's listify), not a set
        v, plain = v[0], plain[0]
    return _json(plain)


def _io_text(text: str) -> str:
    return " ".join(text.split())


def _call_shape(test: ast.expr) -> Case | None:
    """`f(ARGS) == VALUE` (or `VALUE == f(ARGS)`) with literal ARGS and VALUE → ("call", ARGS, VALUE)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    for call, expected in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        if isinstance(call, ast.Call) and not call.keywords and not isinstance(expected, ast.Call):
            try:
                args = [ast.literal_eval(a) for a in call.args]
                value = ast.literal_eval(expected)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            return ("call", _value(args), _expected(value))
    return None


def _assert_case(test: ast.expr) -> Case:
    return _call_shape(test) or ("assert", ast.unparse(test), "")


def _suite_asserts(suite) -> list[ast.expr]:
    """The assert expressions of an assert-style suite's test units, in order."""
    return _raw_asserts([source for snippet in suite.programs for kind, source in snippet.units if kind == "test"])


def _raw_asserts(snippets: Any) -> list[ast.expr]:
    """Every assert statement of snippets the parser will not judge (benchmarks only: a training row with
    such tests is dropped `invalid_tests` at ingest)."""
    snippets = [snippets] if isinstance(snippets, str) else snippets if isinstance(snippets, list) else []
    out = []
    for s in snippets:
        try:
            out += [n.test for n in ast.walk(ast.parse(s)) if isinstance(n, ast.Assert)]
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
    return out


def normalised_cases(tests: Any) -> list[Case]:
    """The normalised cases of a `tests` value (dict or JSON text), in test order; [] when absent or
    unusable (a row without usable tests has nothing to compare)."""
    if tests is None or (isinstance(tests, str) and not tests.strip()):
        return []
    try:
        try:
            suite = parse_test_suite(tests)
        except UnjudgeableTests:
            raw = json.loads(tests) if isinstance(tests, str) else tests
            return [_assert_case(t) for t in _raw_asserts(raw.get("assert_code"))] if isinstance(raw, Mapping) else []
        if suite.mode == ASSERT:
            return [_assert_case(t) for t in _suite_asserts(suite)]
        if suite.mode == CALL:
            return [("call", _value(list(x)), _expected(y)) for x, y in zip(suite.inputs, suite.outputs)]
        return [("io", _io_text(x), _io_text(y)) for x, y in zip(suite.inputs, suite.outputs)]
    except (InvalidTests, SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []  # InvalidTests is a ValueError; the others: a value too deep or odd to normalise


def case_hash(case: Case) -> int:
    text = "\x00".join(case).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def case_hashes(tests: Any) -> np.ndarray:
    """Sorted distinct uint64 hashes of a `tests` value's cases."""
    return ng.unique(np.array([case_hash(c) for c in normalised_cases(tests)], dtype=np.uint64))


def show_case(case: Case, limit: int = 100) -> str:
    """One line naming a case, cut to about `limit` characters."""
    def cut(s: str, n: int) -> str:
        s = repr(s) if case[0] == "io" else s
        return s if len(s) <= n else s[: n - 3] + "..."

    kind, a, b = case
    if kind == "io":
        return f"input {cut(a, limit // 2)} -> output {cut(b, limit // 2)}"
    if kind == "call":
        return f"args {cut(a, limit // 2)} -> {cut(b, limit // 2)}"
    return f"assert {cut(a, limit)}"


# ------------------------------------------------------------------------------------------ matching
def _flat(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(all hashes, the row of each) of a list of per-row hash arrays."""
    lens = np.array([len(r) for r in rows], np.int64)
    flat = np.concatenate(list(rows)).astype(np.uint64) if len(rows) else np.zeros(0, np.uint64)
    return flat, np.repeat(np.arange(len(rows), dtype=np.int64), lens)


def _member(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if len(sorted_set) == 0 or len(keys) == 0:
        return np.zeros(len(keys), bool)
    i = np.minimum(np.searchsorted(sorted_set, keys), len(sorted_set) - 1)
    return sorted_set[i] == keys


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of equal values in a sorted array."""
    if not len(sorted_keys):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]]))
    return starts, np.diff(np.append(starts, len(sorted_keys)))


def _shared(rh: np.ndarray, rr: np.ndarray, n_rows: int, bh: np.ndarray, bd: np.ndarray, n_docs: int,
            cfg: CaseOverlapConfig) -> tuple[np.ndarray, ...]:
    """The (row, doc) pairs meeting the module rule: rows' hashes `rh` of rows `rr`, problems' hashes `bh`
    (sorted) of problems `bd`, trivial cases already left out of both. (row, doc, shared, of, fraction)."""
    size_r = np.bincount(rr, minlength=n_rows)
    size_b = np.bincount(bd, minlength=n_docs)
    lo, hi = np.searchsorted(bh, rh, "left"), np.searchsorted(bh, rh, "right")
    cnt = hi - lo
    if n_rows == 0 or cnt.sum() == 0:
        return tuple(np.zeros(0, t) for t in (np.int64, np.int64, np.int64, np.int64, np.float64))
    first = np.repeat(np.cumsum(cnt) - cnt, cnt)
    pair_doc = bd[np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - first]
    keys = np.sort(np.repeat(rr, cnt) * n_docs + pair_doc)
    starts, shared = _runs(keys)
    row, doc = keys[starts] // n_docs, keys[starts] % n_docs
    of = np.minimum(size_r[row], size_b[doc])
    ok = (shared >= cfg.min_shared) & (shared >= cfg.threshold * of - 1e-9)
    return row[ok], doc[ok], shared[ok], of[ok], shared[ok] / of[ok]


def _benchmark_common(per_doc: Sequence[np.ndarray], doc_bench: Sequence[int], cfg: CaseOverlapConfig
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(sorted benchmark-side trivial cases, each problem's group of versions: -1 for none), the module
    rule. Groups hold at most one problem of each benchmark, so a case in >= bench_min_docs problems of one
    benchmark is in as many groups: trivial without a rule of its own."""
    node_of: dict[bytes, int] = {}
    sets: list[np.ndarray] = []
    benches: list[set[int]] = []
    doc_node = np.full(len(per_doc), -1, np.int64)
    for d, h in enumerate(per_doc):  # 1. problems with the same case set are one node
        if len(h):
            node = node_of.setdefault(h.tobytes(), len(sets))
            if node == len(sets):
                sets.append(h)
                benches.append(set())
            benches[node].add(doc_bench[d])
            doc_node[d] = node
    nh, nn = _flat(sets)
    repeated = []
    for b in sorted({b for bs in benches for b in bs}):  # 2. in >= 2 problems of one benchmark: no evidence
        sub = np.sort(nh[np.isin(nn, [i for i, bs in enumerate(benches) if b in bs])])
        starts, df = _runs(sub)
        repeated.append(sub[starts][df >= 2])
    repeated = ng.unique(np.concatenate(repeated)) if repeated else np.zeros(0, np.uint64)

    keep = ~_member(nh, repeated)  # 3. versions: the rule over the rest, strongest pairs first
    lh, ln = nh[keep], nn[keep]
    order = np.argsort(lh, kind="stable")
    a, b, shared, _, frac = _shared(lh, ln, len(sets), lh[order], ln[order], len(sets), cfg)
    pair = a < b
    a, b, shared, frac = a[pair], b[pair], shared[pair], frac[pair]
    parent = list(range(len(sets)))
    members = [set(bs) for bs in benches]  # a root's group: the benchmarks it holds

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for j in np.lexsort((b, a, -shared, -frac)).tolist():
        x, y = root(int(a[j])), root(int(b[j]))
        if x != y and not (members[x] & members[y]):  # never two problems of one benchmark in a group
            parent[y] = x
            members[x] |= members[y]
    group = np.array([root(i) for i in range(len(sets))], np.int64)

    g = group[nn] if len(nn) else np.zeros(0, np.int64)  # cases in >= min_docs distinct groups
    order = np.lexsort((g, nh))
    h, g = nh[order], g[order]
    first = np.concatenate([[True], (h[1:] != h[:-1]) | (g[1:] != g[:-1])]) if len(h) else np.zeros(0, bool)
    h = h[first]
    starts, df = _runs(h)
    common = h[starts][df >= cfg.bench_min_docs]
    doc_group = np.full(len(per_doc), -1, np.int64)
    doc_group[doc_node >= 0] = group[doc_node[doc_node >= 0]]
    return common, doc_group


class BenchmarkTests:
    """The benchmark problems' case hashes, their benchmark-side trivial cases (`common`), each problem's
    group of versions (`group`, by problem as `docs` numbers them; -1 for a problem without cases) and
    join structures."""

    def __init__(self, benchmarks: Mapping[str, Sequence[Any]], config: CaseOverlapConfig | None = None):
        self.config = config or CaseOverlapConfig()
        self.names = list(benchmarks)
        per_doc, self.doc_bench, self.doc_index, self.first_doc = [], [], [], {}
        for b, (name, tests) in enumerate(benchmarks.items()):
            self.first_doc[name] = len(per_doc)
            for i, t in enumerate(tests):
                per_doc.append(case_hashes(t))
                self.doc_bench.append(b)
                self.doc_index.append(i)
        self.num_docs = len(per_doc)
        self.hashes, self.docs = _flat(per_doc)
        self.keys = ng.unique(self.hashes)  # every benchmark case
        self.common, self.group = _benchmark_common(per_doc, self.doc_bench, self.config)

    def __bool__(self) -> bool:
        return len(self.keys) > 0

    def row_frequency(self, rows: Sequence[np.ndarray], seen: set[bytes] | None = None) -> np.ndarray:
        """Per benchmark case (aligned with `keys`), how many of `rows` (each a `case_hashes` array) hold it,
        rows with the same case set counted once (the module rule); 0 for the benchmark-side trivial cases
        (`common`: trivial whatever their count). Sums over chunks of rows. `seen`: the case sets counted so
        far (a 16-byte digest each, only of rows holding a benchmark case outside `common`), updated in
        place: pass one set to every chunk so that a case set counts once over all of them; without it a
        case set counts once per call."""
        seen = set() if seen is None else seen
        flat, owner = _flat(rows)
        hit = _member(flat, self.keys) & ~_member(flat, self.common)
        counted = np.zeros(len(rows), bool)
        for r in np.unique(owner[hit]).tolist():
            digest = hashlib.blake2b(np.asarray(rows[r], np.uint64).tobytes(), digest_size=16).digest()
            if digest not in seen:
                seen.add(digest)
                counted[r] = True
        hit &= counted[owner]
        return np.bincount(np.searchsorted(self.keys, flat[hit]), minlength=len(self.keys))

    def trivial(self, row_df: np.ndarray, num_rows: int) -> np.ndarray:
        """Sorted trivial cases: benchmark-side ones plus those in >= max(train_min_docs,
        train_fraction * num_rows) training rows (`row_df`: row_frequency summed; num_rows: rows with
        tests, copies included)."""
        cfg = self.config
        train = self.keys[row_df >= max(cfg.train_min_docs, cfg.train_fraction * num_rows)]
        return ng.unique(np.concatenate([self.common, train]))

    def problem_cases(self, doc: int, trivial: np.ndarray) -> np.ndarray:
        """The non-trivial case hashes of benchmark problem `doc` (first_doc[name] + its index)."""
        h = self.hashes[self.docs == doc]
        return h[~_member(h, trivial)]

    def match(self, rows: Sequence[np.ndarray], trivial: np.ndarray) -> list[CaseOverlap | None]:
        """Per row (its distinct case hashes): the best contaminating benchmark problem or None (the module
        rule; `example` left empty)."""
        n = len(rows)
        out: list[CaseOverlap | None] = [None] * n
        bh, bd = self.hashes, self.docs
        keep = ~_member(bh, trivial)
        bh, bd = bh[keep], bd[keep]
        order = np.argsort(bh, kind="stable")
        rh, rr = _flat(rows)
        keep = ~_member(rh, trivial)
        row, doc, shared, of, frac = _shared(rh[keep], rr[keep], n, bh[order], bd[order], self.num_docs, self.config)
        best = np.lexsort((doc, -shared, -frac, row))  # by row, then highest fraction, most shared, first
        take = best[np.concatenate([[True], row[best][1:] != row[best][:-1]])] if len(best) else best
        for j in take.tolist():
            d = int(doc[j])
            out[int(row[j])] = CaseOverlap(self.names[self.doc_bench[d]], self.doc_index[d], int(shared[j]), int(of[j]))
        return out


def example_case(hit: CaseOverlap, tests: Any, bench: BenchmarkTests, trivial: np.ndarray) -> CaseOverlap:
    """`hit` (from `match`) with `example`: the row's first case, in test order, that the matched benchmark
    problem shares (a non-trivial one). `tests`: the row's tests value."""
    theirs = bench.problem_cases(bench.first_doc[hit.benchmark] + hit.problem, trivial)
    case = next(c for c in normalised_cases(tests) if _member(np.array([case_hash(c)], np.uint64), theirs)[0])
    return CaseOverlap(hit.benchmark, hit.problem, hit.shared, hit.of, show_case(case))


def find_case_overlap(row_tests: Sequence[Any], benchmarks: Mapping[str, Sequence[Any]],
                      config: CaseOverlapConfig | None = None) -> list[CaseOverlap | None]:
    """Per row (its `tests` value, None for a row without): None if clean, else the benchmark problem its
    tests overlap (the module rule) with one shared case as `example`. `benchmarks`: {name: each
    problem's tests value (None when it has none)}."""
    bench = BenchmarkTests(benchmarks, config)
    if not bench or not len(row_tests):
        return [None] * len(row_tests)
    rows = [case_hashes(t) for t in row_tests]
    trivial = bench.trivial(bench.row_frequency(rows), sum(len(r) > 0 for r in rows))
    hits = [None if h is None else example_case(h, t, bench, trivial)
            for h, t in zip(bench.match(rows, trivial), row_tests)]
    log.info("test overlap: %d benchmark problems with tests in %d groups of versions, %d trivial cases, "
             "%d of %d rows contaminated", len(set(bench.docs.tolist())),
             len(set(bench.group[bench.group >= 0].tolist())), len(trivial), sum(h is not None for h in hits),
             len(row_tests))
    return hits
