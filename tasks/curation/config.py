"""Typed curation config. Pydantic models double as Prefect flow parameters, so the UI shows a form."""
from __future__ import annotations

import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from tasks.curation.cutoff import check_cutoff_date
from tasks.curation.layouts import LAYOUTS


class SourceSpec(BaseModel):
    name: str = Field(description="Short source name, recorded in every row's `source` column")
    path: str = Field(description="A .jsonl or .parquet file (local or fsspec URL), or hf:DATASET[:SPLIT]")
    layout: str = Field("canonical", description=f"Field layout of the rows: one of {sorted(LAYOUTS)}")
    field_map: dict[str, str] = Field(default_factory=dict,
                                      description="Extra renames {raw field: canonical field}, applied first")
    domain: Literal["math", "code"] | None = Field(None, description="Domain for rows that carry none")

    @field_validator("layout")
    @classmethod
    def _known_layout(cls, v: str) -> str:
        if v not in LAYOUTS:
            raise ValueError(f"unknown layout {v!r} (known: {', '.join(sorted(LAYOUTS))})")
        return v


class CurateConfig(BaseModel):
    sources: list[SourceSpec] = Field(description="Input sources, in priority order (earlier wins ties)")
    benchmarks: dict[str, str] = Field(default_factory=dict,
                                       description="Benchmarks to decontaminate against: {name: path}")
    near_dup_threshold: float = Field(0.8, gt=0, le=1,
                                      description="Jaccard similarity above which rows are near duplicates")
    near_dup_num_perm: int = Field(128, ge=16, description="MinHash permutations (more: tighter estimates)")
    near_dup_shingle: int = Field(5, ge=1, description="Words per shingle for near-duplicate detection")
    ngram: int = Field(9, ge=3, description="Contamination n-gram length in words (paper: 9)")
    test_overlap: float = Field(0.5, gt=0, le=1, description=(
        "Code rows whose tests share at least this fraction of the smaller non-trivial test-case set with one "
        "benchmark problem's tests are contaminated (code_overlap.py: half, far beyond chance for distinct "
        "problems, and a partly regenerated copy is still caught)"))
    cutoff_date: str | None = Field(None, description=(
        "Drop rows dated on or after this day (YYYY-MM-DD) as after_cutoff (cutoff.py)"))
    undated: Literal["keep", "drop"] = Field("keep", description=(
        "With cutoff_date, rows without a date: keep (most sources carry none; the count is reported) or drop"))
    top_sources: int | None = Field(None, ge=1, description="Keep only the K best-scoring sources")
    seed: int = Field(0, description="Seed for MinHash permutations")
    store: str | None = Field(None, description="Store directory (default $KLEAR_STORE or ./klear-store)")
    # How to run, not what to compute: the same version either way, so these are not in its content key.
    memory_limit: str | None = Field(None, description=(
        "Curate out of core with about this much memory (e.g. 4GB): rows on disk in Parquet parts, grouping "
        "in DuckDB; same result as in memory (pipeline_out_of_core.py). None: in memory, unless dask is set"))
    dask: str | None = Field(None, description=(
        "Run curation's per-part work (signatures, n-gram scans) on Dask: 'local' for a LocalCluster of "
        "dask_workers processes, or a scheduler address (its workers must reach work_dir). Implies out of core"))
    dask_workers: int = Field(2, ge=1, description="Workers of the 'local' Dask cluster: one per core")
    work_dir: str | None = Field(None, description=(
        "Out of core: where parts and spill files go (default: a temporary directory, removed afterwards)"))

    @field_validator("work_dir")
    @classmethod
    def _plain_dir(cls, v: str | None) -> str | None:
        from tasks.curation.out_of_core import check_work_dir

        return None if v is None else check_work_dir(v)

    @model_validator(mode="after")
    def _shared_dir_for_a_cluster(self) -> "CurateConfig":
        if self.dask not in (None, "local") and self.work_dir is None:
            raise ValueError(f"--dask {self.dask}: give --work-dir, a directory every worker of that cluster "
                             "reaches (parts are files)")
        return self

    @field_validator("memory_limit")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None:
            from tasks.curation.out_of_core import parse_size

            if parse_size(v) < 64 * 2**20:
                raise ValueError(f"{v!r} is below 64MiB, too little for DuckDB and one part")
        return v

    @field_validator("cutoff_date", mode="before")
    @classmethod
    def _iso_date(cls, v: object) -> str | None:
        if isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):  # YAML reads 2024-08-01 so
            v = v.isoformat()
        return None if v is None else check_cutoff_date(v)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, v: list[SourceSpec]) -> list[SourceSpec]:
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"source names must be unique: {', '.join(dup)}")
        if not v:
            raise ValueError("at least one source is needed")
        return v
