"""Curation's steps after reading, each a small object with its name (its progress line) and the reason it
gives the rows it drops. They run in order (pipeline.STEPS) over the rows the earlier steps kept, and each
writes its drops as Parquet (`_ord`, reason, detail), one row per row dropped. The rules live in the
modules named below; out_of_core.py does the work over parts (per part on the run's runner, across parts
in DuckDB).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.curation import out_of_core as oc
from tasks.curation.code_overlap import BenchmarkTests, CaseOverlap, CaseOverlapConfig, case_hashes, example_case
from tasks.curation.config import CurateConfig
from tasks.curation.cutoff import after_cutoff, is_undated
from tasks.curation.decontaminate import DecontamConfig
from tasks.curation.ingest import Sources
from tasks.curation.layouts import apply_layout
from tasks.curation.malformed import Malformed
from tasks.curation.near_dedup import NearDedupConfig
from tasks.curation.source_quality import top_sources
from tasks.records.reader import read_records, warn_skipped
from tasks.records.sources import SourceError
from tasks.progress import Progress

log = logging.getLogger(__name__)

ORD = oc.ORD
DROP_SCHEMA = pa.schema([(ORD, pa.int64()), ("reason", pa.string()), ("detail", pa.string())])
DROP_BATCH = 4096  # drops written per batch


@dataclass
class Run:
    """What the steps share: the config, the workspace and runner, the sources as read, the parts the
    steps look at (those of the sources not excluded), the drop files so far and the rows they leave."""

    config: CurateConfig
    ws: oc.Workspace
    runner: Any
    sources: Sources
    parts: oc.Parts
    live: int
    drops: list[Path] = field(default_factory=list)
    undated_kept: int | None = None  # with a cutoff date: rows kept without a date
    ticked: int = 0  # rows the current step has reported done

    def skip(self) -> list[np.ndarray]:
        """Per part, the sorted `_ord`s dropped so far."""
        return self.ws.skip(self.parts, self.drops)

    def live_sql(self) -> str:
        """SQL of the parts' rows not dropped so far."""
        if not self.drops:
            return self.parts.sql
        return f"(SELECT * FROM {self.parts.sql} WHERE {ORD} NOT IN (SELECT {ORD} FROM {oc.read(self.drops)}))"

    def out(self, name: str) -> Path:
        return self.ws.root / f"{name}.parquet"

    def ticker(self, report: Progress):
        """A callback that adds each part's rows to the step's `report` (rows done: `ticked`), short of the
        last row: the step's last line, with its figures, says it is done."""

        def tick(rows: int) -> None:
            rows = max(0, min(rows, self.live - 1 - self.ticked))
            self.ticked += rows
            report.update(self.ticked, self.live, tokens=rows)

        return tick


class Step:
    """`drops(run, report)` writes the rows the step drops and returns the files; `report` may get the
    rows done so far. `figures(run)` adds to the step's last progress line."""

    name = ""
    reason = ""

    def applies(self, config: CurateConfig) -> bool:
        return True

    def drops(self, run: Run, report: Progress) -> list[Path]:
        raise NotImplementedError

    def figures(self, run: Run) -> dict[str, float]:
        return {}


def drop_table(ords, reason: str, details: list[str]) -> pa.Table:
    return pa.table({ORD: pa.array(ords, pa.int64()) if isinstance(ords, (list, np.ndarray)) else ords,
                     "reason": pa.array([reason] * len(details), pa.string()),
                     "detail": pa.array(details, pa.string())}, schema=DROP_SCHEMA)


# ------------------------------------------------------------------------------------------ top sources


def excluded_detail(scores: dict[str, float], name: str, top: int) -> str:
    """`excluded_source` detail: the source's score and rank among all sources."""
    ranked = sorted(scores, key=lambda s: -scores[s])
    return f"source score {scores[name]:.3f} ranked {ranked.index(name) + 1} of {len(ranked)} (top {top} kept)"


class TopSources(Step):
    """With --top-sources K, every row of the sources outside the K best scores (source_quality.py)."""

    name, reason = "top-sources", "excluded_source"

    def applies(self, config: CurateConfig) -> bool:
        return config.top_sources is not None and config.top_sources < len(config.sources)

    def drops(self, run: Run, report: Progress) -> list[Path]:
        k, scores = run.config.top_sources, run.sources.scores()
        chosen = set(top_sources(scores, k))
        out = run.out(self.reason)
        with pq.ParquetWriter(out, DROP_SCHEMA) as w:
            for name in (s for s in scores if s not in chosen):
                for f in run.sources.files[name]:
                    o = pq.read_table(f, columns=[ORD]).column(ORD)
                    w.write_table(drop_table(o, self.reason, [excluded_detail(scores, name, k)] * len(o)))
        run.parts = run.sources.parts([s for s in scores if s in chosen])
        return [out]


# ------------------------------------------------------------------------------------------ cutoff


def cutoff_part(path: str, skip: np.ndarray, cutoff: str, undated: str, out: str) -> int:
    """`after_cutoff` drops of a part's rows not in `skip` (cutoff.py) → `out`; the undated rows it keeps."""
    t = pq.read_table(path, columns=[ORD, "date"])
    ords, dates = t.column(ORD).to_numpy(), t.column("date").to_pylist()
    live = ~np.isin(ords, skip)
    why = after_cutoff(dates, cutoff, undated)
    late = [i for i, (x, ok) in enumerate(zip(why, live)) if ok and x is not None]
    pq.write_table(drop_table(ords[late], "after_cutoff", [why[i] for i in late]), out)
    return sum(1 for d, x, ok in zip(dates, why, live) if ok and x is None and is_undated(d))


class Cutoff(Step):
    """With --cutoff-date, rows dated on or after it (and undated rows with --undated drop): cutoff.py.
    Before dedup, so a duplicate's detail always names a row that is kept."""

    name, reason = "cutoff", "after_cutoff"

    def applies(self, config: CurateConfig) -> bool:
        return bool(config.cutoff_date)

    def drops(self, run: Run, report: Progress) -> list[Path]:
        c, files = run.config, run.parts.files
        outs = [run.ws.dir(self.reason) / Path(f).name for f in files]
        args = [(f, s, c.cutoff_date, c.undated, str(o)) for f, s, o in zip(files, run.skip(), outs)]
        run.undated_kept = sum(run.runner.map(cutoff_part, args))
        log.info("cutoff %s: %d undated rows kept", c.cutoff_date, run.undated_kept)
        return outs

    def figures(self, run: Run) -> dict[str, float]:
        return {"undated_kept": run.undated_kept}


# ------------------------------------------------------------------------------------------ dedup

DUPLICATE_DETAIL = {  # the detail of a (near) duplicate names the row kept in its place
    "duplicate": "duplicate of {id} ({source} row {row})",
    "near_duplicate": "near duplicate of {id} ({source} row {row})",
}


def duplicate_drops(run: Run, pairs: Path, reason: str) -> Path:
    """Drops of (`_ord`, `dup_of`) pairs, each detail naming the kept row (DUPLICATE_DETAIL)."""
    detail = "'" + DUPLICATE_DETAIL[reason].replace("'", "''").format(
        id="' || k.id || '", source="' || k.source || '", row="' || k._row || '") + "'"
    out = run.out(reason)
    run.ws.con.execute(f"""COPY (SELECT d.{ORD}, {oc.lit(reason)} AS reason, {detail} AS detail
                               FROM {oc.read([pairs])} d JOIN {run.parts.sql} k ON k.{ORD} = d.dup_of)
                           TO {oc.lit(out)} (FORMAT parquet)""")
    return out


class ExactDedup(Step):
    """Same domain and normalised problem as an earlier row: equal ids, as the id hashes them (exact_dedup.py,
    textnorm.py)."""

    name, reason = "exact-dedup", "duplicate"

    def drops(self, run: Run, report: Progress) -> list[Path]:
        pairs = oc.exact_duplicates(run.ws, f"(SELECT {ORD}, id AS key FROM {run.live_sql()})")
        return [duplicate_drops(run, pairs, self.reason)]


class NearDedup(Step):
    """MinHash-LSH Jaccard ≥ threshold with an earlier kept row, same numbers (near_dedup.py)."""

    name, reason = "near-dedup", "near_duplicate"

    def drops(self, run: Run, report: Progress) -> list[Path]:
        c = run.config
        config = NearDedupConfig(threshold=c.near_dup_threshold, num_perm=c.near_dup_num_perm,
                                 shingle_size=c.near_dup_shingle, seed=c.seed, workers=run.ws.config.threads)
        pairs = oc.near_duplicates(run.ws, run.parts, run.drops, config, run.runner, run.ticker(report))
        return [duplicate_drops(run, pairs, self.reason)]


# ------------------------------------------------------------------------------------------ decontamination


@dataclass
class Benchmark:
    """One benchmark's usable rows: problem text, tests (None when absent) and source row, aligned."""
    problems: list[str] = field(default_factory=list)
    tests: list[Any] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)


def benchmark_text(value: Any) -> tuple[str, Any]:
    """A benchmark row's problem text and tests (canonical layout: the schema's names or their aliases; the
    tests in any form the tests parser reads). Only a problem is needed to decontaminate against, so a row
    with one is used whatever its other fields hold; Malformed when it has none."""
    v = apply_layout(value, "canonical")
    if not (isinstance(v, dict) and isinstance(v.get("problem"), str) and v["problem"].strip()):
        raise Malformed("no problem text")
    return v["problem"], v.get("tests")


def _no_problem(path: str, name: str) -> SourceError:
    return SourceError(f"{path}: benchmark {name!r} has no rows with a 'problem'")


def check_benchmarks(benchmarks: dict[str, str]) -> None:
    """SourceError for a benchmark with no usable problem, read only up to its first usable row: the
    check a command runs before any curation work (the rows it passes are reported when the step reads
    the benchmark)."""
    for name, path in benchmarks.items():
        if next(read_records(path, benchmark_text, on_bad=lambda bad: None), None) is None:
            raise _no_problem(path, name)


def load_benchmark_rows(benchmarks: dict[str, str]) -> dict[str, Benchmark]:
    """Benchmark rows by name (`benchmark_text`). A bad row is skipped with a warning naming its file and
    row (tasks/records/reader.py); a benchmark with no usable problem is an error (decontaminating against
    nothing would be silent)."""
    out = {}
    for name, path in benchmarks.items():
        probs = Benchmark()
        for r in read_records(path, benchmark_text, on_bad=warn_skipped(log, f"benchmark {name}")):
            probs.problems.append(r.value[0])
            probs.tests.append(r.value[1])
            probs.rows.append(r.row)
        if not probs.problems:
            raise _no_problem(path, name)
        out[name] = probs
    return out


def contamination_detail(benchmark: str, gram: str, n: int) -> str:
    """`contaminated` detail of a shared n-gram: the benchmark and the n-gram."""
    return f"benchmark {benchmark}: shares {n}-gram {gram!r}"


def overlap_detail(hit: CaseOverlap, bench: dict[str, Benchmark]) -> str:
    """`contaminated` detail of overlapping tests: the benchmark, its problem's row, the count, one case."""
    return (f"benchmark {hit.benchmark} row {bench[hit.benchmark].rows[hit.problem]}: "
            f"tests share {hit.shared} of {hit.of} cases, e.g. {hit.example}")


def _code_rows(path: str, skip: np.ndarray) -> list[tuple[int, object]]:
    """(`_ord`, tests value) of a part's rows with tests, not in `skip`."""
    t = pq.read_table(path, columns=[ORD, "tests"])
    ords = t.column(ORD).to_numpy()
    live = ~np.isin(ords, skip)
    return [(int(o), json.loads(x)) for o, x, ok in zip(ords, t.column("tests").to_pylist(), live) if ok and x]


class Decontaminate(Step):
    """Shares an n-gram with a benchmark problem (decontaminate.py); then, among the other rows, a row whose
    tests overlap one benchmark problem's tests (code_overlap.py)."""

    name, reason = "decontaminate", "contaminated"

    def applies(self, config: CurateConfig) -> bool:
        return bool(config.benchmarks)

    def drops(self, run: Run, report: Progress) -> list[Path]:
        c, ws = run.config, run.ws
        bench = load_benchmark_rows(c.benchmarks)
        text_hits = oc.contaminated(ws, run.parts, run.drops, {n: b.problems for n, b in bench.items()},
                                    DecontamConfig(n=c.ngram, workers=ws.config.threads), run.runner, run.ticker(report))
        out, hit_ords = run.out(self.reason), [np.zeros(0, np.int64)]
        with pq.ParquetWriter(out, DROP_SCHEMA) as w:
            for b in pq.ParquetFile(text_hits).iter_batches(DROP_BATCH):
                hit_ords.append(b.column(ORD).to_numpy())
                w.write_table(drop_table(b.column(ORD), self.reason, [
                    contamination_detail(x, g, c.ngram)
                    for x, g in zip(b.column("benchmark").to_pylist(), b.column("ngram").to_pylist())]))
            tests = BenchmarkTests({n: b.tests for n, b in bench.items()}, CaseOverlapConfig(threshold=c.test_overlap))
            if tests:
                gone = np.concatenate(hit_ords)
                skip = [np.concatenate([s, gone]) for s in run.skip()]
                df, with_tests, seen = np.zeros(len(tests.keys), np.int64), 0, set()
                for f, s in zip(run.parts.files, skip):  # pass 1: which cases are trivial among the rows
                    hashes = [case_hashes(t) for _, t in _code_rows(f, s)]
                    df += tests.row_frequency(hashes, seen=seen)  # copies count once across parts too
                    with_tests += sum(len(h) > 0 for h in hashes)
                trivial = tests.trivial(df, with_tests)
                for f, s in zip(run.parts.files, skip):  # pass 2: the overlapping rows
                    rows = _code_rows(f, s)
                    hits = [(o, overlap_detail(example_case(hit, t, tests, trivial), bench))
                            for (o, t), hit in zip(rows, tests.match([case_hashes(t) for _, t in rows], trivial)) if hit]
                    w.write_table(drop_table([o for o, _ in hits], self.reason, [d for _, d in hits]))
        return [out]
