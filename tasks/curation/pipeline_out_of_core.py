"""The curation pipeline out of core: pipeline.py's steps and rules, with rows on disk.

Used when a memory limit is set (`klear curate --memory-limit 4GB`, or `--dask`): sources stream in
batches into Parquet parts (`_ord` = position in source order, `_row` = source row), the dedup and
decontamination steps run over the parts (out_of_core.py; on Dask workers with `--dask`), and the
version's `problems` and `dropped` tables are written from DuckDB queries, batch by batch. The result is
the in-memory pipeline's: the same kept rows in the same order, the same dropped rows with the same
reasons and details (tests/curation/test_pipeline_out_of_core.py runs both on the same sources).

Memory: a part is cut at `part_rows` rows or `part_bytes` bytes of row text, whichever comes first (rows of
long chains of thought are large); every per-row result (drops, details) goes to Parquet as it is made.
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
from tasks.curation.cutoff import after_cutoff, is_undated
from tasks.curation.decontaminate import DecontamConfig
from tasks.curation.near_dedup import NearDedupConfig
from tasks.curation.pipeline import (DUPLICATE_DETAIL, _Steps, contamination_detail, excluded_detail, ingest_rows,
                                     load_benchmark_rows, overlap_detail, tally)
from tasks.curation.schema import DROPPED_SCHEMA, PROBLEM_SCHEMA
from tasks.curation.source_quality import row_quality, source_score, top_sources

ORD = oc.ORD
DROP_SCHEMA = pa.schema([(ORD, pa.int64()), ("reason", pa.string()), ("detail", pa.string())])
ROW_SCHEMA = PROBLEM_SCHEMA.append(pa.field(ORD, pa.int64())).append(pa.field("_row", pa.int64()))
INGEST_DROP_SCHEMA = DROPPED_SCHEMA.append(pa.field("_src", pa.int64()))
DROP_BATCH = 4096  # dropped rows buffered per write (a source of mostly bad rows stays bounded too)
WRITE_BATCH_ROWS = 4096  # rows per batch when the version's tables are written (a row may hold a long CoT)


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
    """What ingest wrote: per source its parts (files and `_ord` ranges; every source has at least one,
    maybe empty), rows read, rows valid and the sum of their row_quality (source_quality.py), in order;
    and the files of rows dropped at ingest."""

    files: dict[str, list[str]] = field(default_factory=dict)
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    rows_in: dict[str, int] = field(default_factory=dict)
    valid: dict[str, int] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    dropped: list[Path] = field(default_factory=list)

    def parts(self, names) -> oc.Parts:
        return oc.Parts([f for s in names for f in self.files[s]], [r for s in names for r in self.ranges[s]],
                        text="problem", key="id")


def _row_bytes(row: dict) -> int:
    return sum(len(v) for v in row.values() if isinstance(v, str)) + sum(map(len, row.get("solutions") or []))


def _ingest(config: CurateConfig, ws: oc.Workspace, steps: _Steps) -> _Sources:
    """1. Every source row → a canonical row in a part (`_ord` counting on across sources), or a dropped
    row (pipeline.ingest_rows: the same rules and details as in memory)."""
    out, ord_ = _Sources(), 0
    for s_idx, spec in enumerate(config.sources):
        name, batch, size, dropped = spec.name, [], 0, []
        out.files[name], out.ranges[name], out.quality[name], out.valid[name] = [], [], 0.0, 0

        def write_part() -> None:
            path = ws.dir("rows") / f"part-{s_idx:04d}-{len(out.files[name]):06d}.parquet"
            pq.write_table(pa.Table.from_pylist(batch, schema=ROW_SCHEMA), path)
            out.files[name].append(str(path))
            out.ranges[name].append((batch[0][ORD], batch[-1][ORD]) if batch else (ord_, ord_ - 1))

        drop_path = ws.dir("ingest-dropped") / f"{s_idx:04d}.parquet"
        out.dropped.append(drop_path)
        with steps.start(f"read {name}") as report, pq.ParquetWriter(drop_path, INGEST_DROP_SCHEMA) as drops:
            n = 0
            for n, (row, problem, drop) in enumerate(ingest_rows(spec, report), start=1):
                if drop is not None:
                    dropped.append({**drop, "_src": s_idx})
                    if len(dropped) >= DROP_BATCH:
                        drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
                        dropped = []
                    continue
                out.quality[name] += row_quality(problem)
                out.valid[name] += 1
                batch.append({**problem.as_row(), ORD: ord_, "_row": row})
                size += _row_bytes(batch[-1])
                ord_ += 1
                if len(batch) >= ws.config.part_rows or size >= ws.config.part_bytes:
                    write_part()
                    batch, size = [], 0
            if batch or not out.files[name]:  # an empty part keeps every later query's columns
                write_part()
            drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
            out.rows_in[name] = n
    return out


def curate_out_of_core(config: CurateConfig, ws: oc.Workspace, runner=None,
                       progress: Callable[[str], None] = lambda msg: None) -> OutOfCoreResult:
    runner = runner or oc.LocalRunner()
    steps = _Steps(len(config.sources) + 3 + bool(config.benchmarks) + bool(config.cutoff_date), progress)
    src = _ingest(config, ws, steps)
    rows_in = src.rows_in
    scores = {s: source_score(src.valid[s], src.quality[s], rows_in[s]) for s in rows_in}
    excluded = []  # 2. top sources: the excluded sources' parts leave the pipeline
    if config.top_sources is not None and config.top_sources < len(config.sources):
        chosen = set(top_sources(scores, config.top_sources))
        excluded = [s for s in rows_in if s not in chosen]
    parts = src.parts([s for s in rows_in if s not in excluded])
    drop_files: list[Path] = []
    if excluded:
        out = ws.root / "excluded.parquet"
        with pq.ParquetWriter(out, DROP_SCHEMA) as w:
            for s in excluded:
                for f in src.files[s]:
                    o = pq.read_table(f, columns=[ORD]).column(ORD)
                    w.write_table(pa.table({ORD: o, "reason": pa.array(["excluded_source"] * len(o), pa.string()),
                                            "detail": pa.array([excluded_detail(scores, s, config.top_sources)] * len(o),
                                                               pa.string())}))
        drop_files.append(out)
    undated_kept = None
    if config.cutoff_date:  # 3.
        with steps.start("cutoff") as report:
            out = ws.root / "after_cutoff.parquet"
            undated_kept = _cutoff(config, parts, out)
            drop_files.append(out)
            report.update(1, 1, undated_kept=undated_kept)
    with steps.start("exact-dedup") as report:  # 4. ids hash domain + normalised problem: equal ids, duplicates
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
            drop_files.append(_decontaminate(config, ws, parts, drop_files + [exact, near], runner))
            report.update(1, 1)
    with steps.start("write") as report:
        result = _write_tables(ws, src, drop_files, drops_sql, scores, undated_kept)
        report.update(1, 1)
    return result


def _cutoff(config: CurateConfig, parts: oc.Parts, out: Path) -> int:
    """Rows dated on/after the cutoff → `out` (cutoff.py's rule and details), part by part; the number of
    undated rows kept."""
    undated_kept = 0
    with pq.ParquetWriter(out, DROP_SCHEMA) as w:
        for f in parts.files:
            t = pq.read_table(f, columns=[ORD, "date"])
            dates = t.column("date").to_pylist()
            why = after_cutoff(dates, config.cutoff_date, config.undated)
            late = [i for i, x in enumerate(why) if x is not None]
            undated_kept += sum(1 for d, x in zip(dates, why) if x is None and is_undated(d))
            w.write_table(pa.table({ORD: t.column(ORD).take(pa.array(late, pa.int64())),
                                    "reason": pa.array(["after_cutoff"] * len(late), pa.string()),
                                    "detail": pa.array([why[i] for i in late], pa.string())}))
    return undated_kept


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
    """SQL: (`_ord`, reason, detail) of duplicates, the detail pipeline.DUPLICATE_DETAIL naming the kept row."""
    detail = "'" + DUPLICATE_DETAIL[reason].replace("'", "''").format(
        id="' || k.id || '", source="' || k.source || '", row="' || k._row || '") + "'"
    return (f"SELECT d.{ORD}, {oc.lit(reason)} AS reason, {detail} AS detail FROM {oc.read([pairs])} d "
            f"JOIN {parts.sql} k ON k.{ORD} = d.dup_of")


def _decontaminate(config: CurateConfig, ws: oc.Workspace, parts: oc.Parts, drop: list[Path], runner) -> Path:
    """Rows sharing an n-gram with a benchmark, then code rows whose tests overlap a benchmark problem's
    (pipeline._decontaminate's order and details) → a Parquet file of `contaminated` drops."""
    bench = load_benchmark_rows(config.benchmarks)
    text_hits = oc.contaminated(ws, parts, drop, {n: b.problems for n, b in bench.items()},
                                DecontamConfig(n=config.ngram, workers=ws.config.threads), runner)
    out = ws.root / "contaminated-detail.parquet"
    hit_ords = []
    with pq.ParquetWriter(out, DROP_SCHEMA) as w:
        for b in pq.ParquetFile(text_hits).iter_batches(DROP_BATCH):
            o = b.column(ORD)
            hit_ords.append(o.to_numpy())
            details = [contamination_detail(x, g, config.ngram)
                       for x, g in zip(b.column("benchmark").to_pylist(), b.column("ngram").to_pylist())]
            w.write_table(pa.table({ORD: o, "reason": pa.array(["contaminated"] * len(o), pa.string()),
                                    "detail": pa.array(details, pa.string())}))
        tests = BenchmarkTests({n: b.tests for n, b in bench.items()}, CaseOverlapConfig(threshold=config.test_overlap))
        if tests:
            gone = np.concatenate(hit_ords + [np.zeros(0, np.int64)])
            skip = [np.concatenate([s, gone]) for s in ws.ords_by_part(parts, oc.read(drop))]
            df, with_tests, seen = np.zeros(len(tests.keys), np.int64), 0, set()
            for f, s in zip(parts.files, skip):  # pass 1: which cases are trivial among the training rows
                hashes = [case_hashes(t) for _, t in _code_rows(f, s)]
                df += tests.row_frequency(hashes, seen=seen)  # copies count once across parts too
                with_tests += sum(len(h) > 0 for h in hashes)
            trivial = tests.trivial(df, with_tests)
            for f, s in zip(parts.files, skip):  # pass 2: the overlapping rows
                rows = _code_rows(f, s)
                hits = [(o, overlap_detail(example_case(hit, t, tests, trivial), bench))
                        for (o, t), hit in zip(rows, tests.match([case_hashes(t) for _, t in rows], trivial)) if hit]
                w.write_table(pa.table({ORD: pa.array([o for o, _ in hits], pa.int64()),
                                        "reason": pa.array(["contaminated"] * len(hits), pa.string()),
                                        "detail": pa.array([d for _, d in hits], pa.string())}))
    return out


def _code_rows(path: str, skip: np.ndarray) -> list[tuple[int, object]]:
    """(`_ord`, tests value) of a part's rows with tests, not dropped before."""
    t = pq.read_table(path, columns=[ORD, "tests"])
    ords = t.column(ORD).to_numpy()
    live = ~np.isin(ords, skip)
    return [(int(o), json.loads(x)) for o, x, ok in zip(ords, t.column("tests").to_pylist(), live) if ok and x]


def _write_tables(ws: oc.Workspace, src: _Sources, drop_files: list[Path], drops_sql: list[str],
                  scores: dict[str, float], undated_kept: int | None) -> OutOfCoreResult:
    """The version's `problems` (kept rows by `_ord`) and `dropped` (by source order, then source row)."""
    all_rows = src.parts(src.rows_in).sql
    drops = " UNION ALL ".join(drops_sql + [f"SELECT {ORD}, reason, detail FROM {oc.read([p])}" for p in drop_files])
    ws.con.execute(f"CREATE OR REPLACE TABLE drops AS {drops}")
    problems_out, dropped_out = ws.root / "problems.parquet", ws.root / "dropped.parquet"
    _stream(ws, f"SELECT {', '.join(PROBLEM_SCHEMA.names)} FROM {all_rows} "
                f"WHERE {ORD} NOT IN (SELECT {ORD} FROM drops) ORDER BY {ORD}", PROBLEM_SCHEMA, problems_out)
    source_rank = pa.table({"source": list(src.rows_in), "s": list(range(len(src.rows_in)))})  # noqa: F841 (DuckDB)
    ws.con.execute("CREATE OR REPLACE TABLE source_order AS SELECT * FROM source_rank")
    _stream(ws, f"""
        SELECT source, "row", id, reason, detail, problem FROM (
            SELECT source, "row", id, reason, detail, problem, _src AS s FROM {oc.read(src.dropped)}
            UNION ALL
            SELECT r.source, r._row, r.id, d.reason, d.detail, r.problem, o.s
            FROM drops d JOIN {all_rows} r ON r.{ORD} = d.{ORD} JOIN source_order o ON o.source = r.source)
        ORDER BY s, "row" """, DROPPED_SCHEMA, dropped_out)
    ws.con.execute("DROP TABLE source_order")
    ws.con.execute("DROP TABLE drops")
    outcomes = ws.con.execute(f"SELECT source, reason, count(*) FROM {oc.read([dropped_out])} GROUP BY ALL "
                              f"UNION ALL SELECT source, 'kept', count(*) FROM {oc.read([problems_out])} "
                              "GROUP BY ALL").fetchall()
    counts, by_source = tally(src.rows_in, outcomes)
    return OutOfCoreResult(problems_out, dropped_out, sum(src.rows_in.values()), counts, by_source, scores,
                           undated_kept)


def _stream(ws: oc.Workspace, sql: str, schema: pa.Schema, out: Path) -> None:
    with pq.ParquetWriter(out, schema, compression=PARQUET_COMPRESSION) as w:
        for batch in ws.batches(sql, WRITE_BATCH_ROWS):
            w.write_table(pa.Table.from_batches([batch]).cast(schema))
