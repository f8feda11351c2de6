"""Reading, curation's first step: every source row → a canonical row in a Parquet part, or a dropped record
with its reason: `malformed` (schema.py, sources.py, a layout's missing field), `invalid_tests` (assert
tests that cannot be judged outside the program's process) or `invalid_answer` (validate_math.py). A row
dropped for a missing field says which fields it has and how to map one (source_fields.missing_field_hint).

Parts hold PROBLEM_SCHEMA plus `_ord` (position among all valid rows, in source order: earlier wins) and
`_row` (the source row), with the problems also in the part's memory-mapped text file (out_of_core.text_file),
the column the steps read most. A part is cut at the workspace's part_rows rows or part_bytes bytes of row text
(memory.py); rows reach it a row group at a time, so reading holds at most WRITE_ROWS rows (or
WRITE_BYTES of text) as Python objects, whatever the part size.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.curation import out_of_core as oc
from tasks.curation.config import CurateConfig
from tasks.curation.layouts import apply_layout
from tasks.curation.schema import PROBLEM_SCHEMA, Malformed, MissingField, Problem, to_problem
from tasks.curation.source_fields import missing_field_hint
from tasks.records.schema import DROPPED_SCHEMA
from tasks.curation.source_quality import row_quality, source_score
from tasks.records.sources import RawRow, check_value, read_source
from tasks.curation.validate_math import drop_invalid_answers
from tasks.progress import Progress

ORD = oc.ORD
ROW_SCHEMA = (PROBLEM_SCHEMA.set(PROBLEM_SCHEMA.get_field_index("problem"), pa.field("problem", pa.large_string()))
              .append(pa.field(ORD, pa.int64())).append(pa.field("_row", pa.int64())))  # large_string: what the steps read
INGEST_DROP_SCHEMA = DROPPED_SCHEMA.append(pa.field("_src", pa.int64()))
WRITE_ROWS = 4096  # rows per row group (and per batch of dropped records)
WRITE_BYTES = 8 * 2**20  # ... or fewer, when their text reaches this (rows of long chains of thought)
READ_REPORT_EVERY = 256  # rows read between progress updates (an update is a clock read; a row ~10 µs)


@dataclass
class Sources:
    """What reading wrote: per source its parts (files and `_ord` ranges; every source has at least one,
    maybe empty), rows read, rows valid and the sum of their row_quality (source_quality.py), in the
    order given; and the files of the rows dropped while reading."""

    files: dict[str, list[str]] = field(default_factory=dict)
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    rows_in: dict[str, int] = field(default_factory=dict)
    valid: dict[str, int] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    dropped: list[Path] = field(default_factory=list)

    def parts(self, names) -> oc.Parts:
        return oc.Parts([f for s in names for f in self.files[s]], [r for s in names for r in self.ranges[s]],
                        text="problem")

    def scores(self) -> dict[str, float]:
        return {s: source_score(self.valid[s], self.quality[s], self.rows_in[s]) for s in self.rows_in}


def read_sources(config: CurateConfig, ws: oc.Workspace, start_step) -> Sources:
    """Every row of every source into parts (`_ord` counting on across sources) or a dropped record;
    `start_step(what)` gives the progress of one source (a tasks.progress.StepProgress, a context manager)."""
    out, first = Sources(), 0
    for s_idx, spec in enumerate(config.sources):
        name, parts = spec.name, _PartWriter(ws, s_idx, first)
        out.valid[name], out.quality[name] = 0, 0.0
        drop_path = ws.dir("ingest-dropped") / f"{s_idx:04d}.parquet"
        out.dropped.append(drop_path)
        with start_step(f"read {name}") as report, pq.ParquetWriter(drop_path, INGEST_DROP_SCHEMA) as drops:
            dropped, n = [], 0
            for n, (row, problem, drop) in enumerate(ingest_rows(spec, report), start=1):
                if drop is None:
                    out.quality[name] += row_quality(problem)
                    out.valid[name] += 1
                    parts.add({**problem.as_row(), ORD: first + out.valid[name] - 1, "_row": row})
                    continue
                dropped.append({**drop, "_src": s_idx})
                if len(dropped) >= WRITE_ROWS:
                    drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
                    dropped = []
            drops.write_table(pa.Table.from_pylist(dropped, schema=INGEST_DROP_SCHEMA))
            parts.close()
        out.rows_in[name], out.files[name], out.ranges[name] = n, parts.files, parts.ranges
        first += out.valid[name]
    return out


class _PartWriter:
    """One source's rows into numbered parts, a row group at a time."""

    def __init__(self, ws: oc.Workspace, source: int, first_ord: int):
        self.ws, self.source, self.next_ord = ws, source, first_ord
        self.files: list[str] = []
        self.ranges: list[tuple[int, int]] = []
        self.rows: list[dict] = []
        self.texts: list[pa.Table] = []  # the part's (`_ord`, problem) so far, for its text file
        self.writer: pq.ParquetWriter | None = None
        self.buffered = self.part_rows = self.part_bytes = 0

    def add(self, row: dict) -> None:
        size = sum(len(v) for v in row.values() if isinstance(v, str)) + sum(map(len, row.get("solutions") or []))
        self.rows.append(row)
        self.buffered += size
        self.part_rows += 1
        self.part_bytes += size
        if len(self.rows) >= WRITE_ROWS or self.buffered >= WRITE_BYTES:
            self._flush()
        if self.part_rows >= self.ws.config.part_rows or self.part_bytes >= self.ws.config.part_bytes:
            self._end_part()

    def _flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:
            path = self.ws.dir("rows") / f"part-{self.source:04d}-{len(self.files):06d}.parquet"
            self.writer = pq.ParquetWriter(path, ROW_SCHEMA, compression="zstd")
            self.files.append(str(path))
            self.ranges.append((self.rows[0][ORD], self.rows[0][ORD]))
        t = pa.Table.from_pylist(self.rows, schema=ROW_SCHEMA)
        self.writer.write_table(t)
        self.texts.append(t.select([ORD, "problem"]))
        self.ranges[-1] = (self.ranges[-1][0], self.rows[-1][ORD])
        self.next_ord = self.rows[-1][ORD] + 1
        self.rows, self.buffered = [], 0

    def _end_part(self) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            t = pa.concat_tables(self.texts).combine_chunks()
            oc.write_text_file(self.files[-1], t.column(ORD).chunk(0), t.column("problem").chunk(0), "problem")
        self.part_rows = self.part_bytes = 0
        self.texts = []

    def close(self) -> None:
        self._end_part()
        if not self.files:  # an empty part keeps every later query's columns
            path = self.ws.dir("rows") / f"part-{self.source:04d}-000000.parquet"
            pq.write_table(ROW_SCHEMA.empty_table(), path)
            oc.write_text_file(str(path), pa.array([], pa.int64()), pa.array([], pa.large_string()), "problem")
            self.files.append(str(path))
            self.ranges.append((self.next_ord, self.next_ord - 1))


def ingest_rows(spec, report: Progress | None = None) -> Iterator[tuple[int, Problem | None, dict | None]]:
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


def drop_record(source: str, row: int, reason: str, detail: str, problem: str, pid: str | None = None) -> dict:
    return {"source": source, "row": row, "id": pid, "reason": reason, "detail": detail, "problem": problem}


def _ingest_rows(spec) -> Iterator[tuple[int, Problem | None, dict | None]]:
    return drop_invalid_answers(_canonical_rows(spec), lambda row, p, detail: drop_record(
        spec.name, row, "invalid_answer", detail, p.problem, p.id))


def _raw_text(raw: RawRow) -> str:
    if raw.raw is not None:
        return raw.raw
    v = raw.value
    if isinstance(v, dict) and isinstance(v.get("problem"), str):
        return v["problem"]
    return json.dumps(v, ensure_ascii=False, default=str)


def _canonical_rows(spec) -> Iterator[tuple[int, Problem | None, dict | None]]:
    for raw in read_source(spec.path):
        if raw.error:
            yield raw.row, None, drop_record(spec.name, raw.row, "malformed", raw.error, _raw_text(raw))
            continue
        try:
            p = to_problem(apply_layout(raw.value, spec.layout, spec.field_map), spec.name, spec.domain)
            why = check_value([p.response, p.answer, p.tests])  # text a layout decoded from a field
            if why:
                raise Malformed(why)
        except Malformed as e:  # malformed, or invalid_tests for tests that cannot be judged safely
            missing = e.field if isinstance(e, MissingField) else None
            detail = str(e) + (missing_field_hint(raw.value, spec.name, missing) if missing else "")
            yield raw.row, None, drop_record(spec.name, raw.row, e.reason, detail, _raw_text(raw))
            continue
        except (RecursionError, UnicodeError) as e:  # a value no check above foresaw: still one row
            yield raw.row, None, drop_record(spec.name, raw.row, "malformed", f"unusable row ({type(e).__name__})",
                                             _raw_text(raw))
            continue
        yield raw.row, p, None
