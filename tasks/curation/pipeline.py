"""The curation pipeline as pure steps (no Prefect). Each input row ends in exactly one place:
`problems`, or `dropped` with one reason. Steps, in order:

1. ingest      every source row → canonical Problem, or dropped `malformed` (schema.py rules), or, a
               math row whose reference answer the grader cannot parse, `invalid_answer` (validate_math.py)
2. top sources with --top-sources K, rows of the other sources → dropped `excluded_source`
3. cutoff      with --cutoff-date, rows dated on/after it (undated ones with --undated drop) → `after_cutoff`
               (cutoff.py). Before dedup, so a duplicate's detail always names a row that is kept.
4. exact dedup same domain + normalised problem as an earlier row → `duplicate` (detail: kept row's id)
5. near dedup  MinHash-LSH Jaccard ≥ threshold with an earlier kept row → `near_duplicate`
6. decontam    shares an n-gram (default 9 words) with a benchmark problem, or (code) its tests overlap a
               benchmark problem's tests (code_overlap.py) → `contaminated`

Earlier sources (in the order given) and earlier rows win: they are the ones kept. Each step reports its
rows as it goes (tasks/progress.py: a bar on a terminal, else a plain line every few seconds, on stderr).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from tasks.curation.code_overlap import CaseOverlap, CaseOverlapConfig, find_case_overlap
from tasks.curation.config import CurateConfig
from tasks.curation.cutoff import after_cutoff, is_undated
from tasks.curation.decontaminate import DecontamConfig, find_contamination
from tasks.curation.exact_dedup import exact_duplicate_of
from tasks.curation.layouts import apply_layout
from tasks.curation.near_dedup import NearDedupConfig, near_duplicate_of
from tasks.curation.schema import DROPPED_SCHEMA, PROBLEM_SCHEMA, Malformed, Problem, to_problem
from tasks.curation.source_quality import score_sources, top_sources
from tasks.curation.sources import RawRow, SourceError, check_value, read_source
from tasks.curation.validate_math import drop_invalid_answers
from tasks.progress import ProgressLine, StepProgress

log = logging.getLogger(__name__)

REASONS = ("malformed", "excluded_source", "duplicate", "near_duplicate", "contaminated", "after_cutoff")
ALL_REASONS = REASONS + ("too_few_tests", "invalid_tests", "invalid_answer")  # from the verify stage
#   (invalid_tests also at ingest: assert-style tests that cannot be judged outside the program's process),
#   and invalid_answer, counted only where it happens: a math reference the grader cannot parse


@dataclass
class CurationResult:
    problems: pa.Table
    dropped: pa.Table
    rows_in: int
    counts: dict[str, int]                     # "kept" and one entry per drop reason
    by_source: dict[str, dict[str, int]]       # the same, per source
    source_scores: dict[str, float] = field(default_factory=dict)
    undated_kept: int | None = None            # with a cutoff date: rows kept without a date (else None)


@dataclass
class _Kept:
    problem: Problem
    row: int


def _raw_text(raw: RawRow) -> str:
    if raw.raw is not None:
        return raw.raw
    v = raw.value
    if isinstance(v, dict) and isinstance(v.get("problem"), str):
        return v["problem"]
    return json.dumps(v, ensure_ascii=False, default=str)


def _drop(source: str, row: int, reason: str, detail: str, problem: str, pid: str | None = None) -> dict:
    return {"source": source, "row": row, "id": pid, "reason": reason, "detail": detail, "problem": problem}


@dataclass
class Benchmark:
    """One benchmark's usable rows: problem text, tests (None when absent) and source row, aligned."""
    problems: list[str] = field(default_factory=list)
    tests: list[Any] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)


def load_benchmarks(benchmarks: dict[str, str]) -> dict[str, list[str]]:
    """Benchmark problems by name (see load_benchmark_rows)."""
    return {name: b.problems for name, b in load_benchmark_rows(benchmarks).items()}


def load_benchmark_rows(benchmarks: dict[str, str]) -> dict[str, Benchmark]:
    """Benchmark rows by name (canonical layout; a code benchmark's rows may carry `tests`, any form the
    tests parser reads). Unparsable benchmark rows are skipped with a warning; a benchmark with no usable
    problem is an error (decontaminating against nothing would be silent)."""
    out = {}
    for name, path in benchmarks.items():
        probs, bad = Benchmark(), []
        for raw in read_source(path):
            v = apply_layout(raw.value, "canonical") if raw.error is None else None
            if isinstance(v, dict) and isinstance(v.get("problem"), str) and v["problem"].strip():
                probs.problems.append(v["problem"])
                probs.tests.append(v.get("tests"))
                probs.rows.append(raw.row)
            else:
                bad.append(f"row {raw.row}: {raw.error or 'no problem'}")
        if bad:
            log.warning("benchmark %s (%s): skipped %d rows without a usable problem (%s%s)", name, path,
                        len(bad), "; ".join(bad[:3]), "; ..." if len(bad) > 3 else "")
        if not probs.problems:
            raise SourceError(f"{path}: benchmark {name!r} has no rows with a 'problem'")
        out[name] = probs
    return out


READ_REPORT_EVERY = 256  # rows read between progress updates (an update is a clock read; a row ~10 µs)


class _Steps:
    """Curation's progress: a StepProgress per step (reading each source, exact dedup, near dedup,
    decontamination) on stderr; each line also goes to `progress` as a ProgressLine whose fraction is of
    the whole run: (steps done + this step's fraction) / steps."""

    def __init__(self, count: int, progress: Callable[[str], None]):
        self.count, self.started, self.progress = count, 0, progress

    def start(self, what: str) -> StepProgress:
        index = self.started
        self.started += 1

        def feed(line: ProgressLine) -> None:
            self.progress(ProgressLine(line, min(1.0, (index + (line.fraction or 0.0)) / self.count)))

        return StepProgress(f"curate {what}", unit="rows", rate_unit="rows/s", feed=feed)


def curate(config: CurateConfig, progress: Callable[[str], None] = lambda msg: None) -> CurationResult:
    """`progress` gets the progress lines at most every few seconds per step (and each step's first and
    last), as stderr does; they are tasks.progress.ProgressLine, whose `.fraction` is of the whole run."""
    dropped: list[dict[str, Any]] = []
    valid: dict[str, list[_Kept]] = {}
    rows_in: dict[str, int] = {}
    steps = _Steps(len(config.sources) + 2 + bool(config.benchmarks) + bool(config.cutoff_date), progress)

    # 1. ingest
    for spec in config.sources:
        with steps.start(f"read {spec.name}") as report:
            kept, n = _ingest(spec, dropped, report)
        valid[spec.name], rows_in[spec.name] = kept, n

    # 2. top sources
    scores = score_sources({k: [x.problem for x in v] for k, v in valid.items()}, rows_in)
    if config.top_sources is not None and config.top_sources < len(config.sources):
        chosen = set(top_sources(scores, config.top_sources))
        for name in list(valid):
            if name not in chosen:
                detail = excluded_detail(scores, name, config.top_sources)
                dropped.extend(_drop(name, k.row, "excluded_source", detail, k.problem.problem, k.problem.id)
                               for k in valid.pop(name))
    rows = [k for spec in config.sources for k in valid.get(spec.name, [])]

    # 3. cutoff date
    undated_kept = None
    if config.cutoff_date:
        with steps.start("cutoff") as report:
            n = len(rows)
            report.update(0, n)
            late = after_cutoff([k.problem.date for k in rows], config.cutoff_date, config.undated)
            rows = _drop_flagged(rows, late, "after_cutoff", dropped)
            undated_kept = sum(is_undated(k.problem.date) for k in rows)
            report.update(n, n, tokens=n, after_cutoff=n - len(rows), undated_kept=undated_kept)
        log.info("cutoff %s: %d rows dropped after_cutoff, %d undated rows kept", config.cutoff_date,
                 n - len(rows), undated_kept)

    # 4. exact dedup: the problem id already is a hash of domain + normalised problem
    with steps.start("exact-dedup") as report:
        report.update(0, len(rows))
        dup = exact_duplicate_of([k.problem.id for k in rows], normalized=True)
        n = len(rows)
        rows = _split(rows, dup, "duplicate", dropped)
        report.update(n, n, tokens=n, duplicate=n - len(rows))

    # 5. near dedup
    with steps.start("near-dedup") as report:
        report.update(0, len(rows))
        near_cfg = NearDedupConfig(threshold=config.near_dup_threshold, num_perm=config.near_dup_num_perm,
                                   shingle_size=config.near_dup_shingle, seed=config.seed)
        near = near_duplicate_of([k.problem.problem for k in rows], near_cfg)
        n = len(rows)
        rows = _split(rows, near, "near_duplicate", dropped)
        report.update(n, n, tokens=n, near_duplicate=n - len(rows))

    # 6. decontamination
    if config.benchmarks:
        with steps.start("decontaminate") as report:
            report.update(0, len(rows))
            n = len(rows)
            rows = _decontaminate(config, rows, dropped)
            report.update(n, n, tokens=n, contaminated=n - len(rows))

    return _result(rows, dropped, rows_in, scores, undated_kept)


def _ingest(spec, dropped: list, report: StepProgress) -> tuple[list[_Kept], int]:
    """Every row of one source → a kept canonical Problem, or a dropped row with its reason."""
    kept, n = [], 0
    for n, (row, problem, drop) in enumerate(ingest_rows(spec, report), start=1):
        if drop is not None:
            dropped.append(drop)
        else:
            kept.append(_Kept(problem, row))
    return kept, n


def ingest_rows(spec, report: StepProgress | None = None) -> Iterator[tuple[int, Problem | None, dict | None]]:
    """Per source row, in order: (row, its canonical Problem, None), or (row, None, its dropped record);
    `report` gets the rows read every READ_REPORT_EVERY rows and, at the end, the total and rows kept."""
    n = kept = 0
    for n, item in enumerate(_ingest_rows(spec), start=1):
        if report is not None and n % READ_REPORT_EVERY == 0:
            report.update(n, None, tokens=READ_REPORT_EVERY)
        kept += item[1] is not None
        yield item
    if report is not None:
        report.update(n, n, tokens=n % READ_REPORT_EVERY, kept=kept)


def _ingest_rows(spec) -> Iterator[tuple[int, Problem | None, dict | None]]:
    return drop_invalid_answers(_canonical_rows(spec), lambda row, p, detail: _drop(
        spec.name, row, "invalid_answer", detail, p.problem, p.id))


def _canonical_rows(spec) -> Iterator[tuple[int, Problem | None, dict | None]]:
    for raw in read_source(spec.path):
        if raw.error:
            yield raw.row, None, _drop(spec.name, raw.row, "malformed", raw.error, _raw_text(raw))
            continue
        try:
            p = to_problem(apply_layout(raw.value, spec.layout, spec.field_map), spec.name, spec.domain)
            why = check_value([p.response, p.answer, p.tests])  # text a layout decoded from a field
            if why:
                raise Malformed(why)
        except Malformed as e:  # malformed, or invalid_tests for tests that cannot be judged safely
            yield raw.row, None, _drop(spec.name, raw.row, e.reason, str(e), _raw_text(raw))
            continue
        except (RecursionError, UnicodeError) as e:  # a value no check above foresaw: still one row
            yield raw.row, None, _drop(spec.name, raw.row, "malformed", f"unusable row ({type(e).__name__})",
                                       _raw_text(raw))
            continue
        yield raw.row, p, None


def _decontaminate(config: CurateConfig, rows: list[_Kept], dropped: list) -> list[_Kept]:
    """Rows sharing an n-gram with a benchmark problem, then rows whose tests overlap a benchmark problem's
    tests → dropped `contaminated`; the others, in order."""
    bench = load_benchmark_rows(config.benchmarks)
    hits = find_contamination([k.problem.problem for k in rows], {n: b.problems for n, b in bench.items()},
                              DecontamConfig(n=config.ngram))
    why = [None if h is None else contamination_detail(h[0], h[1], config.ngram) for h in hits]
    if any(t is not None for b in bench.values() for t in b.tests):
        overlap = find_case_overlap([k.problem.tests if w is None else None for k, w in zip(rows, why)],
                                    {n: b.tests for n, b in bench.items()}, CaseOverlapConfig(threshold=config.test_overlap))
        why = [w if o is None else overlap_detail(o, bench) for w, o in zip(why, overlap)]
    return _drop_flagged(rows, why, "contaminated", dropped)


def contamination_detail(benchmark: str, gram: str, n: int) -> str:
    """`contaminated` detail of a shared n-gram: the benchmark and the n-gram."""
    return f"benchmark {benchmark}: shares {n}-gram {gram!r}"


def overlap_detail(hit: CaseOverlap, bench: dict[str, Benchmark]) -> str:
    """`contaminated` detail of overlapping tests: the benchmark, its problem's row, the count, one case."""
    return (f"benchmark {hit.benchmark} row {bench[hit.benchmark].rows[hit.problem]}: "
            f"tests share {hit.shared} of {hit.of} cases, e.g. {hit.example}")


def _drop_flagged(rows: list[_Kept], details: list[str | None], reason: str, dropped: list) -> list[_Kept]:
    """Rows whose detail is not None → dropped with `reason` and that detail; the others, in order."""
    kept = []
    for k, detail in zip(rows, details):
        if detail is None:
            kept.append(k)
        else:
            dropped.append(_drop(k.problem.source, k.row, reason, detail, k.problem.problem, k.problem.id))
    return kept


def _split(rows: list[_Kept], dup_of: np.ndarray, reason: str, dropped: list) -> list[_Kept]:
    kept = []
    for k, d in zip(rows, dup_of.tolist()):
        if d < 0:
            kept.append(k)
        else:
            first = rows[d]
            dropped.append(_drop(k.problem.source, k.row, reason, DUPLICATE_DETAIL[reason].format(
                id=first.problem.id, source=first.problem.source, row=first.row), k.problem.problem, k.problem.id))
    return kept


DUPLICATE_DETAIL = {  # the detail of a (near) duplicate names the row kept in its place
    "duplicate": "duplicate of {id} ({source} row {row})",
    "near_duplicate": "near duplicate of {id} ({source} row {row})",
}


def excluded_detail(scores: dict[str, float], name: str, top: int) -> str:
    """`excluded_source` detail: the source's score and rank among all sources."""
    ranked = sorted(scores, key=lambda s: -scores[s])
    return f"source score {scores[name]:.3f} ranked {ranked.index(name) + 1} of {len(ranked)} (top {top} kept)"


def tally(rows_in: dict[str, int], outcomes) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """(counts, by_source) from (source, outcome, n) triples, outcome "kept" or a drop reason; asserts that
    every input row is kept or dropped exactly once."""
    counts = {"kept": 0, **{r: 0 for r in REASONS}}
    by_source = {s: {"rows_in": n, "kept": 0, **{r: 0 for r in REASONS}} for s, n in rows_in.items()}
    for source, outcome, n in outcomes:  # invalid_tests (unjudgeable tests) is counted only where it happens
        counts[outcome] = counts.get(outcome, 0) + n
        by_source[source][outcome] = by_source[source].get(outcome, 0) + n
    assert sum(counts.values()) == sum(rows_in.values()), "every input row is kept or dropped exactly once"
    return counts, by_source


def _result(rows: list[_Kept], dropped: list[dict], rows_in: dict[str, int], scores: dict[str, float],
            undated_kept: int | None = None) -> CurationResult:
    order = {name: i for i, name in enumerate(rows_in)}
    dropped.sort(key=lambda d: (order[d["source"]], d["row"]))
    counts, by_source = tally(rows_in, [(k.problem.source, "kept", 1) for k in rows]
                              + [(d["source"], d["reason"], 1) for d in dropped])
    total = sum(rows_in.values())
    return CurationResult(
        problems=pa.Table.from_pylist([k.problem.as_row() for k in rows], schema=PROBLEM_SCHEMA),
        dropped=pa.Table.from_pylist(dropped, schema=DROPPED_SCHEMA),
        rows_in=total, counts=counts, by_source=by_source, source_scores=scores, undated_kept=undated_kept,
    )
