"""The DuckDB catalog `<store>/catalog.duckdb`: tables describing every artifact, and views over the
latest Parquet of each kind, so users can query everything with plain SQL.

- `datasets`: one row per dataset version (id, kind, created, parameters, row counts, parents, inputs, path).
- `problems`, `dropped`: views over the Parquet of the current (latest published) dataset version.
- `checkpoints`: every model checkpoint (id, stage base/sft/rl, path, parent checkpoint, dataset version,
  config JSON, created) — lineage from any checkpoint back to its data and config.
- `evaluations`: one row per (checkpoint, benchmark, k, seed, settings): avg@k, pass@k, n_problems, and
  `infra` / `infra_problems` (infra-outcome samples, and problems with only those, left out of the metrics).
- `ablations`: one row per (ablation, arm, seed) run: final and best held-out avg@k (`loss` always,
  `arm` / `settings` name what the arm changed).
- `current_views`: which dataset and file each view points at (so publishing twice changes nothing).
Later stages add `verifications`, `evaluations`, `checkpoints` through `append_rows`.
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import duckdb

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    created TIMESTAMP NOT NULL,
    parameters JSON,
    rows_in BIGINT,
    rows_kept BIGINT,
    rows_dropped BIGINT,
    counts JSON,
    parents VARCHAR[],
    inputs JSON,
    path VARCHAR
);
CREATE TABLE IF NOT EXISTS checkpoints (
    id VARCHAR PRIMARY KEY,
    stage VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    parent VARCHAR,
    dataset VARCHAR,
    config JSON,
    created TIMESTAMP NOT NULL
);
CREATE TABLE IF NOT EXISTS evaluations (
    id VARCHAR PRIMARY KEY,
    checkpoint VARCHAR,
    benchmark VARCHAR NOT NULL,
    benchmark_path VARCHAR,
    k INTEGER,
    seed INTEGER,
    avg_at_k DOUBLE,
    pass_at_k DOUBLE,
    n_problems INTEGER,
    created TIMESTAMP NOT NULL,
    results_path VARCHAR
);
CREATE TABLE IF NOT EXISTS ablations (
    id VARCHAR PRIMARY KEY,
    ablation VARCHAR NOT NULL,
    loss VARCHAR NOT NULL,
    seed INTEGER,
    checkpoint VARCHAR,
    final_avg_at_k DOUBLE,
    best_avg_at_k DOUBLE,
    steps INTEGER,
    benchmark VARCHAR,
    created TIMESTAMP NOT NULL
);
-- added after the first release: ALTER so catalogs created before gain the columns (NULL for old rows)
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS infra INTEGER;
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS infra_problems INTEGER;
ALTER TABLE ablations ADD COLUMN IF NOT EXISTS arm VARCHAR;        -- e.g. loss=gppo,sft_alpha=0.1
ALTER TABLE ablations ADD COLUMN IF NOT EXISTS settings JSON;      -- the arm's overrides
CREATE TABLE IF NOT EXISTS current_views (
    name VARCHAR PRIMARY KEY,
    dataset VARCHAR NOT NULL,
    url VARCHAR NOT NULL
);
"""


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class Catalog:
    def __init__(self, path: str):
        self.path = path

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        con = duckdb.connect(self.path, read_only=read_only)
        try:
            if not read_only:
                con.execute(_SCHEMA)
            yield con
        finally:
            con.close()

    def add_dataset(self, row: Mapping[str, Any]) -> bool:
        """Insert a `datasets` row unless its id is already there. Returns True when inserted."""
        with self.connect() as con:
            if con.execute("SELECT 1 FROM datasets WHERE id = ?", [row["id"]]).fetchone():
                return False
            con.execute(
                "INSERT INTO datasets VALUES (?, ?, ?::TIMESTAMP, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row["id"], row["kind"], row["created"], json.dumps(row["parameters"], sort_keys=True),
                    row["rows_in"], row["rows_kept"], row["rows_dropped"],
                    json.dumps(row["counts"], sort_keys=True), list(row["parents"]),
                    json.dumps(row["inputs"], sort_keys=True), row["path"],
                ],
            )
            return True

    def insert_once(self, table: str, row: Mapping[str, Any]) -> bool:
        """Insert `row` into `table` unless a row with its `id` exists (content-addressed ids make
        re-runs idempotent). JSON-able dict/list values are stored as JSON text. True when inserted."""
        cols = list(row)
        vals = [json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in row.values()]
        with self.connect() as con:
            if con.execute(f"SELECT 1 FROM {table} WHERE id = ?", [row["id"]]).fetchone():
                return False
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", vals)
            return True

    def publish(self, dataset: str, views: Mapping[str, str]) -> bool:
        """Point each view name at a Parquet URL of `dataset`. A view already pointing there is left
        alone, so publishing the same version twice changes nothing. Returns True if anything changed."""
        changed = False
        with self.connect() as con:
            for name, url in views.items():
                cur = con.execute("SELECT dataset, url FROM current_views WHERE name = ?", [name]).fetchone()
                if cur == (dataset, url):
                    continue
                con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(url)})")
                con.execute("INSERT OR REPLACE INTO current_views VALUES (?, ?, ?)", [name, dataset, url])
                changed = True
        return changed

    def current_dataset(self, view: str = "problems") -> str | None:
        with self.connect() as con:
            row = con.execute("SELECT dataset FROM current_views WHERE name = ?", [view]).fetchone()
        return row[0] if row else None

    def datasets(self) -> list[dict[str, Any]]:
        with self.connect() as con:
            cur = con.execute("SELECT * FROM datasets ORDER BY created")
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()
