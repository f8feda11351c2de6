"""The curation pipeline out of core: pipeline.py's steps and rules, with rows on disk.

Used when a memory limit is set (`klear curate --memory-limit 4GB`, or `--dask`): sources stream in
batches into Parquet parts (`_ord` = position in source order, `_row` = source row), the dedup and
decontamination steps run over the parts (out_of_core.py; on Dask workers with `--dask`), and the
version's `problems` and `dropped` tables are written from DuckDB queries, batch by batch. The result is
the in-memory pipeline's: the same kept rows in the same order, the same dropped rows with the same
reasons and details (tests/curation/test_pipeline_out_of_core.py runs both on the same sources).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.store import PARQUET_COMPRESSION
from tasks.curation import out_of_core as oc
from tasks.curation.code_overlap import BenchmarkTests, CaseOverlapConfig, case_hashes, example_case
from tasks.curation.config import CurateConfig
from tasks.curation.cutoff import after_cutoff
from tasks.curation.decontaminate import DecontamConfig
from tasks.curation.near_dedup import NearDedupConfig
from tasks.curation.pipeline import (READ_REPORT_EVERY, REASONS, _Steps, contamination_detail, ingest_rows,
                                     load_benchmark_rows, overlap_detail)
from tasks.curation.schema import DROPPED_SCHEMA, PROBLEM_SCHEMA
from tasks.curation.source_quality import row_quality, source_score, top_sources

ORD = oc.ORD
DROP_SCHEMA = pa.schema([(ORD, pa.int64()), ("reason", pa.string()), ("detail", pa.string())])


@dataclass
class OutOfCoreResult:
    problems: Path  # Parquet files in the work directory, PROBLEM_SCHEMA / DROPPED_SCHEMA
    dropped: Path
    rows_in: int
    counts: dict[str, int]
    by_source: dict[str, dict[str, int]]
    source_scores: dict[str, float]
    undated_kept: int | None = None


@dataclass
class _Sources:
    """What ingest wrote: per source its parts (files and `_ord` ranges), rows read, rows valid and the sum
    of their row_quality (source_quality.py), in source order."""

    files: dict[str, list[str]] = field(default_factory=dict)
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    rows_in: dict[str, int] = field(default_factory=dict)
    valid: dict[str, int] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)


ROW_SCHEMA = PROBLEM_SCHEMA.append(pa.field(ORD, pa.int64())).append(pa.field("_row", pa.int64()))
INGEST_DROP_SCHEMA = DROPPED_SCHEMA.append(pa.field("_src", pa.int64()))
DROP_BATCH = 4096  # dropped rows buffered per write (a source of mostly bad rows stays bounded too)


def _ingest(config: CurateConfig, ws: oc.Workspace, steps: _Steps) -> _Sources:
    """1. Every source row → a canonical row in a part (`_ord` counting on across sources), or a dropped
    row in ingest-dropped/ (pipeline.ingest_rows: the same rules and details as in memory)."""
    out, ord_, step = _Sources(), 0, ws.config.part_rows
    for s_idx, spec in enumerate(config.sources):
        name, batch, dropped, n = spec.name, [], [], 0
        out.files[name], out.ranges[name], out.quality[name], out.valid[name] = [], [], 0.0, 0

        def write_part() -> None:
            path = ws.dir("rows") / f"part-{s_idx:04d}-{len(out.files[name]):06d}.parquet"
            pq.write_table(pa.Table.from_pylist(batch, schema=ROW_SCHEMA), path)
            out.files[name].append(str(path))
            out.ranges[name].append((batch[0][ORD], batch[-1][ORD]))

        with steps.start(f"read {name}") as report, \
                pq.ParquetWriter(ws.dir("ingest-dropped") / f"{s_idx:04d}.parquet", INGEST_DROP_SCHEMA) as drops:
            for n, (row, problem, drop) in enumerate(ingest_rows(spec), start=1):
                if n % READ_REPORT_EVERY == 0:
                    report.update(n, None, tokens=READ_REPORT_EVERY)
                if drop is not None:
                    dropped.append({**drop, "_src": s_idx})
                    if len(dropped) >= DROP_BATCH:
                        drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
                        dropped = []
                    continue
                out.quality[name] += row_quality(problem)
                out.valid[name] += 1
                batch.append({**problem.as_row(), ORD: ord_, "_row": row})
                ord_ += 1
                if len(batch) >= step:
                    write_part()
                    batch = []
            if batch:
                write_part()
            drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
            out.rows_in[name] = n
            report.update(n, n, tokens=n % READ_REPORT_EVERY, kept=out.valid[name])
    return out


def curate_out_of_core(config: CurateConfig, ws: oc.Workspace, runner=None,
                       progress: Callable[[str], None] = lambda msg: None) -> OutOfCoreResult:
    runner = runner or oc.LocalRunner()
    steps = _Steps(len(config.sources) + 3 + bool(config.benchmarks) + bool(config.cutoff_date), progress)
    src = _ingest(config, ws, steps)
    files, ranges, rows_in = src.files, src.ranges, src.rows_in
    ingest_drops = ws.dir("ingest-dropped")

    # 2. top sources: the excluded sources' parts leave the pipeline
    scores = {s: source_score(src.valid[s], src.quality[s], rows_in[s]) for s in rows_in}
    excluded = []
    if config.top_sources is not None and config.top_sources < len(config.sources):
        chosen = set(top_sources(scores, config.top_sources))
        excluded = [s for s in rows_in if s not in chosen]
    ranked = sorted(scores, key=lambda s: -scores[s])
    parts = oc.Parts([f for s in rows_in if s not in excluded for f in files[s]],
                     [r for s in rows_in if s not in excluded for r in ranges[s]], text="problem", key="id")
    drop_files: list[Path] = []
    if excluded:
        all_parts = oc.Parts([f for s in rows_in for f in files[s]], [], "problem", "id")
        excluded_drop = ws.root / "excluded.parquet"
        ws.con.register("excluded_sources", pa.table({
            "source": excluded, "detail": [f"source score {scores[s]:.3f} ranked {ranked.index(s) + 1} of "
                                           f"{len(ranked)} (top {config.top_sources} kept)" for s in excluded]}))
        ws.con.execute(f"COPY (SELECT r.{ORD}, 'excluded_source' AS reason, e.detail FROM {all_parts.sql} r "
                       f"JOIN excluded_sources e ON e.source = r.source) TO {oc.lit(excluded_drop)} (FORMAT parquet)").fetchall()
        ws.con.unregister("excluded_sources")
    else:
        excluded_drop = None

    # 3. cutoff date (per part: the rule of cutoff.py)
    undated_kept = None
    if config.cutoff_date:
        with steps.start("cutoff") as report:
            out, kept_undated, late = ws.root / "after_cutoff.parquet", 0, []
            for f in parts.files:
                t = pq.read_table(f, columns=[ORD, "date"])
                why = after_cutoff(t.column("date").to_pylist(), config.cutoff_date, config.undated)
                o = t.column(ORD).to_pylist()
                late += [(o[i], w) for i, w in enumerate(why) if w is not None]
                kept_undated += sum(1 for d, w in zip(t.column("date").to_pylist(), why) if w is None and not d)
            _write_drops(out, late, "after_cutoff")
            drop_files.append(out)
            undated_kept = kept_undated
            report.update(1, 1, after_cutoff=len(late), undated_kept=undated_kept)

    # 4. exact dedup: the problem id is a hash of domain + normalised problem, so equal ids are duplicates
    with steps.start("exact-dedup") as report:
        exact = oc.exact_duplicates(ws, _without(ws, parts, drop_files), confirm=False)
        report.update(1, 1)
    with steps.start("near-dedup") as report:  # 5.
        near_cfg = NearDedupConfig(threshold=config.near_dup_threshold, num_perm=config.near_dup_num_perm,
                                   shingle_size=config.near_dup_shingle, seed=config.seed, workers=ws.config.threads)
        near = oc.near_duplicates(ws, parts, _union(ws, drop_files + [exact]), near_cfg, runner)
        report.update(1, 1)
    drops_sql = [_dup_drops(parts, exact, "duplicate"), _dup_drops(parts, near, "near_duplicate")]
    if config.benchmarks:  # 6. decontamination: shared n-grams, then (code) overlapping tests
        with steps.start("decontaminate") as report:
            out = _decontaminate(config, ws, parts, drop_files + [exact, near], runner)
            drop_files.append(out)
            report.update(1, 1)
    if excluded_drop is not None:
        drop_files.append(excluded_drop)
    with steps.start("write") as report:
        result = _write_tables(config, ws, parts, [*files.values()], drop_files, drops_sql, ingest_drops, rows_in,
                               scores, undated_kept)
        report.update(1, 1)
    return result


def _write_drops(path: Path, drops: list[tuple[int, str]], reason: str) -> None:
    pq.write_table(pa.table({ORD: pa.array([o for o, _ in drops], pa.int64()),
                             "reason": pa.array([reason] * len(drops), pa.string()),
                             "detail": pa.array([d for _, d in drops], pa.string())}), path)


def _union(ws: oc.Workspace, paths: list[Path]) -> Path:
    """One Parquet file of the `_ord`s in all `paths`."""
    out = ws.root / f"union-{len(list(ws.root.glob('union-*')))}.parquet"
    ws.con.execute(f"COPY (SELECT {ORD} FROM {oc.read(paths)}) TO {oc.lit(out)} (FORMAT parquet)")
    return out


def _without(ws: oc.Workspace, parts: oc.Parts, drop_files: list[Path]) -> oc.Parts:
    """Parts for exact dedup with the rows in `drop_files` left out (a view over the same files)."""
    if not drop_files:
        return parts
    gone = _union(ws, drop_files)
    view = f"(SELECT * FROM {parts.sql} WHERE {ORD} NOT IN (SELECT {ORD} FROM {oc.read([gone])}))"
    return _SqlParts(parts.files, parts.ranges, parts.text, parts.key, view)


@dataclass
class _SqlParts(oc.Parts):
    view: str = ""

    @property
    def sql(self) -> str:
        return self.view


def _dup_drops(parts: oc.Parts, pairs: Path, reason: str) -> str:
    """SQL: (`_ord`, reason, detail) of duplicates, the detail naming the kept row as pipeline.py does."""
    what = "duplicate of" if reason == "duplicate" else "near duplicate of"
    return (f"SELECT d.{ORD}, '{reason}' AS reason, '{what} ' || k.id || ' (' || k.source || ' row ' || k._row || ')' "
            f"AS detail FROM {oc.read([pairs])} d JOIN {parts.sql} k ON k.{ORD} = d.dup_of")


def _decontaminate(config: CurateConfig, ws: oc.Workspace, parts: oc.Parts, drop: list[Path], runner) -> Path:
    bench = load_benchmark_rows(config.benchmarks)
    text_hits = pq.read_table(oc.contaminated(ws, parts, drop, {n: b.problems for n, b in bench.items()},
                                              DecontamConfig(n=config.ngram, workers=ws.config.threads), runner))
    drops = [(o, contamination_detail(b, g, config.ngram)) for o, b, g in
             zip(*[text_hits.column(c).to_pylist() for c in (ORD, "benchmark", "ngram")])]
    tests = BenchmarkTests({n: b.tests for n, b in bench.items()}, CaseOverlapConfig(threshold=config.test_overlap))
    if tests:
        skip = ws.ords_by_part(parts, oc.read(drop))
        gone = set(o for o, _ in drops)
        df, with_tests = np.zeros(len(tests.keys), np.int64), 0
        for f, s in zip(parts.files, skip):  # pass 1: which cases are trivial among the training rows
            rows = _code_rows(f, s, gone)
            hashes = [case_hashes(t) for _, t in rows]
            df += tests.row_frequency(hashes)
            with_tests += sum(len(h) > 0 for h in hashes)
        trivial = tests.trivial(df, with_tests)
        for f, s in zip(parts.files, skip):  # pass 2: the overlapping rows
            rows = _code_rows(f, s, gone)
            for (o, t), hit in zip(rows, tests.match([case_hashes(t) for _, t in rows], trivial)):
                if hit is not None:
                    hit = example_case(hit, t, tests, trivial)
                    drops.append((o, overlap_detail(hit, bench)))
    out = ws.root / "contaminated-detail.parquet"
    _write_drops(out, sorted(drops), "contaminated")
    return out


def _code_rows(path: str, skip: np.ndarray, gone: set[int]) -> list[tuple[int, object]]:
    """(`_ord`, tests value) of a part's rows with tests, not dropped before."""
    t = pq.read_table(path, columns=[ORD, "tests"])
    skip_set = set(skip.tolist())
    return [(o, json.loads(x) if x else None) for o, x in zip(t.column(ORD).to_pylist(), t.column("tests").to_pylist())
            if x is not None and o not in skip_set and o not in gone]


def _write_tables(config, ws, parts, source_files, drop_files, drops_sql, ingest_drops, rows_in, scores,
                  undated_kept) -> OutOfCoreResult:
    all_rows = oc.Parts([f for fs in source_files for f in fs], [], "problem", "id").sql
    drops = " UNION ALL ".join(drops_sql + [f"SELECT {ORD}, reason, detail FROM {oc.read([p])}" for p in drop_files])
    ws.con.execute(f"CREATE OR REPLACE TABLE drops AS {drops}")
    problems_out, dropped_out = ws.root / "problems.parquet", ws.root / "dropped.parquet"
    cols = ", ".join(PROBLEM_SCHEMA.names)
    _stream(ws, f"SELECT {cols} FROM {all_rows} WHERE {ORD} NOT IN (SELECT {ORD} FROM drops) ORDER BY {ORD}",
            PROBLEM_SCHEMA, problems_out)
    source_rank = pa.table({"source": list(rows_in), "s": list(range(len(rows_in)))})  # noqa: F841 (read by DuckDB)
    ws.con.execute("CREATE OR REPLACE TABLE source_order AS SELECT * FROM source_rank")
    _stream(ws, f"""
        SELECT source, "row", id, reason, detail, problem FROM (
            SELECT source, "row", id, reason, detail, problem, _src AS s FROM read_parquet({oc.lit(ingest_drops / '*.parquet')})
            UNION ALL
            SELECT r.source, r._row, r.id, d.reason, d.detail, r.problem, o.s
            FROM drops d JOIN {all_rows} r ON r.{ORD} = d.{ORD} JOIN source_order o ON o.source = r.source)
        ORDER BY s, "row" """, DROPPED_SCHEMA, dropped_out)
    ws.con.execute("DROP TABLE source_order")
    counts = {"kept": 0, **{r: 0 for r in REASONS}}
    by_source = {s: {"rows_in": n, "kept": 0, **{r: 0 for r in REASONS}} for s, n in rows_in.items()}
    for source, reason, n in ws.con.execute(f"SELECT source, reason, count(*) FROM {oc.read([dropped_out])} "
                                            "GROUP BY ALL").fetchall():
        counts[reason] = counts.get(reason, 0) + n
        by_source[source][reason] = by_source[source].get(reason, 0) + n
    for source, n in ws.con.execute(f"SELECT source, count(*) FROM {oc.read([problems_out])} GROUP BY ALL").fetchall():
        counts["kept"] += n
        by_source[source]["kept"] = n
    total = sum(rows_in.values())
    assert counts["kept"] + sum(v for k, v in counts.items() if k != "kept") == total, \
        "every input row is kept or dropped exactly once"
    ws.con.execute("DROP TABLE drops")
    return OutOfCoreResult(problems_out, dropped_out, total, counts, by_source, scores, undated_kept)


def _stream(ws: oc.Workspace, sql: str, schema: pa.Schema, out: Path) -> None:
    with pq.ParquetWriter(out, schema, compression=PARQUET_COMPRESSION) as w:
        for batch in ws.batches(sql):
            w.write_table(pa.Table.from_batches([batch]).cast(schema))
