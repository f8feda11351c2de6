"""The curation pipeline (no Prefect). Each input row ends in exactly one place: `problems`, or `dropped`
with one reason. Sources are read into Parquet parts, then the steps run in order, each a small object with
its name and the reason it drops rows (steps.py), over the rows the earlier ones kept:

  read           every source row → a canonical row in a part, or `malformed` (schema.py rules),
                 `invalid_tests` or, a math row whose reference answer the grader cannot parse,
                 `invalid_answer` (ingest.py, validate_math.py)
  top-sources    with --top-sources K, rows of the other sources → `excluded_source`
  cutoff         with --cutoff-date, rows dated on/after it (undated ones with --undated drop) → `after_cutoff`
  exact-dedup    same domain + normalised problem as an earlier row → `duplicate` (detail: kept row's id)
  near-dedup     MinHash-LSH Jaccard ≥ threshold with an earlier kept row → `near_duplicate`
  decontaminate  shares an n-gram (default 9 words) with a benchmark problem, or (code) its tests overlap a
                 benchmark problem's tests → `contaminated`

Earlier sources (in the order given) and earlier rows win: they are the ones kept. Per-part work runs on
the run's runner (out_of_core.py: this process, or Dask workers with `--dask`), grouping across parts in
DuckDB, all within the run's memory limit: `--memory-limit`, or one chosen from the machine's memory
(memory.py), said in one line when the run starts. Small data is one part; big data many, with the same
result. Then the version's tables are written part by part. Each step reports its rows as it goes
(tasks/progress.py: a bar on a terminal, else a plain line every few seconds, on stderr, and to the
run's `feed`).
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.store import PARQUET_COMPRESSION
from tasks.curation import out_of_core as oc
from tasks.curation.config import CurateConfig
from tasks.curation.ingest import ROW_SCHEMA, ingest_rows, read_sources  # noqa: F401 (ingest_rows: API)
from tasks.curation.memory import choose_memory_limit
from tasks.curation.schema import PROBLEM_SCHEMA, STORED_PROBLEM_SCHEMA
from tasks.records.schema import DROPPED_SCHEMA
from tasks.curation.steps import (Benchmark, Cutoff, Decontaminate, ExactDedup, NearDedup, Run,  # noqa: F401
                                  Step, TopSources, load_benchmark_rows)
from tasks.progress import Feed, Progress, ProgressLine, StepProgress, progress_mode

ORD = oc.ORD
STEPS: tuple[Step, ...] = (TopSources(), Cutoff(), ExactDedup(), NearDedup(), Decontaminate())
REASONS = ("malformed", "excluded_source", "duplicate", "near_duplicate", "contaminated", "after_cutoff")
ALL_REASONS = REASONS + ("too_few_tests", "invalid_tests", "invalid_answer")  # from the verify stage
#   (invalid_tests also at ingest: assert-style tests that cannot be judged outside the program's process),
#   and invalid_answer, counted only where it happens: a math reference the grader cannot parse
WRITE_BATCH_ROWS = 4096  # rows per batch when the version's tables are written (a row may hold a long CoT)


@dataclass
class CurationResult:
    problems: pa.Table | Path  # STORED_PROBLEM_SCHEMA: in memory from `curate`, a file in the workspace from `run_pipeline`
    dropped: pa.Table | Path  # DROPPED_SCHEMA, likewise
    rows_in: int
    counts: dict[str, int]                     # "kept" and one entry per drop reason
    by_source: dict[str, dict[str, int]]       # the same, per source
    source_scores: dict[str, float] = field(default_factory=dict)
    undated_kept: int | None = None            # with a cutoff date: rows kept without a date (else None)


class _Steps:
    """Curation's progress: a StepProgress per step (reading each source, then each step, then writing)
    on stderr; each line also goes to `feed` as a ProgressLine whose fraction is of the whole run:
    (steps done + this step's fraction) / steps."""

    def __init__(self, count: int, feed: Feed | None):
        self.count, self.started, self.feed = count, 0, feed

    def start(self, what: str) -> StepProgress:
        index = self.started
        self.started += 1

        def of_run(line: ProgressLine) -> None:
            self.feed(ProgressLine(line, min(1.0, (index + (line.fraction or 0.0)) / self.count)))

        return StepProgress(f"curate {what}", unit="rows", rate_unit="rows/s",
                            feed=of_run if self.feed is not None else None)


class _Quiet:
    """A Progress that shows nothing: a step with no rows to go through would otherwise print `rows 0/0`
    at each update (every update of a total of 0 is its last), so only its closing line is shown."""

    def update(self, step: int, total: int | None, tokens: float = 0, **figures: float) -> None:
        pass


def say(line: str, feed: Feed | None) -> None:
    """One line on stderr (unless KLEAR_PROGRESS=off) and to `feed`, as the steps' lines go."""
    if progress_mode() != "off":
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    if feed is not None:
        feed(ProgressLine(line))


@contextmanager
def open_run(config: CurateConfig, feed: Feed | None = None) -> Iterator[tuple]:
    """(workspace, runner) of a run of `config`: its memory limit (`memory_limit`, or when None one chosen
    from the machine: memory.py, said in one line), its work directory and its runner (`dask`)."""
    choice = choose_memory_limit(config.memory_limit)
    say(choice.line(), feed)
    ooc = oc.OutOfCoreConfig(memory_limit=choice.limit, work_dir=config.work_dir)
    with oc.part_runner(config.dask, config.dask_workers) as runner, oc.Workspace(ooc) as ws:
        yield ws, runner


def curate(config: CurateConfig, feed: Feed | None = None) -> CurationResult:
    """The pipeline with the version's tables read into memory (small data, tests); dataset.py streams them
    into the store instead. `feed` gets the lines stderr shows (tasks.progress.ProgressLine, whose
    `.fraction` is of the whole run), at most every few seconds per step."""
    with open_run(config, feed) as (ws, runner):
        result = run_pipeline(config, ws, runner, feed)
        return replace(result, problems=pq.read_table(result.problems), dropped=pq.read_table(result.dropped))


def run_pipeline(config: CurateConfig, ws: oc.Workspace, runner=None, feed: Feed | None = None,
                 steps: tuple[Step, ...] = STEPS) -> CurationResult:
    """Read the sources into `ws`, run the steps that apply, write `problems` and `dropped` there."""
    todo = [s for s in steps if s.applies(config)]
    bar = _Steps(len(config.sources) + len(todo) + 1, feed)
    src = read_sources(config, ws, bar.start)
    run = Run(config, ws, runner or oc.LocalRunner(), src, src.parts(src.rows_in), sum(src.valid.values()))
    for step in todo:
        with bar.start(step.name) as report:
            n, run.ticked = run.live, 0
            shown = report if n else _Quiet()  # a step over no rows says so in its one last line
            shown.update(0, n)
            files = step.drops(run, shown)
            dropped = sum(pq.read_metadata(f).num_rows for f in files)
            run.drops += files
            run.live -= dropped
            report.update(n, n, tokens=n - run.ticked, **{step.reason: dropped}, **step.figures(run))
    with bar.start("write") as report:
        return _write_tables(run, report)


def _write_tables(run: Run, report: Progress) -> CurationResult:
    """The version's `problems` (kept rows, by `_ord`, with their source row) and `dropped` (by source order,
    then source row)."""
    ws, src = run.ws, run.sources
    everything = src.parts(src.rows_in)
    problems_out, dropped_out = ws.root / "problems.parquet", ws.root / "dropped.parquet"
    total, done = sum(src.valid.values()), 0
    report.update(0, total)
    with pq.ParquetWriter(problems_out, STORED_PROBLEM_SCHEMA, compression=PARQUET_COMPRESSION) as w:
        for f, skip in zip(everything.files, ws.skip(everything, run.drops)):
            for batch in pq.ParquetFile(f).iter_batches(WRITE_BATCH_ROWS, columns=ROW_SCHEMA.names):
                keep = ~np.isin(batch.column(ORD).to_numpy(), skip)
                kept = pa.Table.from_batches([batch]).filter(pa.array(keep))
                w.write_table(kept.select([*PROBLEM_SCHEMA.names, "_row"]).rename_columns(STORED_PROBLEM_SCHEMA.names)
                              .cast(STORED_PROBLEM_SCHEMA))
                done += batch.num_rows
                report.update(done, total, tokens=batch.num_rows)
    ws.con.register("source_rank", pa.table({"source": list(src.rows_in), "s": list(range(len(src.rows_in)))}))
    ws.con.execute("CREATE OR REPLACE TABLE source_order AS SELECT * FROM source_rank")
    ws.con.unregister("source_rank")
    drops = oc.read(run.drops) if run.drops else "(SELECT NULL::BIGINT AS _ord, '' AS reason, '' AS detail LIMIT 0)"
    _stream(ws, f"""
        SELECT source, "row", id, reason, detail, problem FROM (
            SELECT source, "row", id, reason, detail, problem, _src AS s FROM {oc.read(src.dropped)}
            UNION ALL
            SELECT r.source, r._row, r.id, d.reason, d.detail, r.problem, o.s
            FROM {drops} d JOIN {everything.sql} r ON r.{ORD} = d.{ORD} JOIN source_order o ON o.source = r.source)
        ORDER BY s, "row" """, DROPPED_SCHEMA, dropped_out)
    ws.con.execute("DROP TABLE source_order")
    outcomes = ws.con.execute(f"SELECT source, reason, count(*) FROM {oc.read([dropped_out])} GROUP BY ALL "
                              f"UNION ALL SELECT source, 'kept', count(*) FROM {oc.read([problems_out])} "
                              "GROUP BY ALL").fetchall()
    counts, by_source = tally(src.rows_in, outcomes)
    return CurationResult(problems_out, dropped_out, sum(src.rows_in.values()), counts, by_source, src.scores(),
                          run.undated_kept)


def _stream(ws: oc.Workspace, sql: str, schema: pa.Schema, out: Path) -> None:
    with pq.ParquetWriter(out, schema, compression=PARQUET_COMPRESSION) as w:
        for batch in ws.batches(sql, WRITE_BATCH_ROWS):
            w.write_table(pa.Table.from_batches([batch]).cast(schema))


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
