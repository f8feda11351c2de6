"""Typed curation config. Pydantic models double as Prefect flow parameters, so the UI shows a form."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

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
    top_sources: int | None = Field(None, ge=1, description="Keep only the K best-scoring sources")
    seed: int = Field(0, description="Seed for MinHash permutations")
    store: str | None = Field(None, description="Store directory (default $KLEAR_STORE or ./klear-store)")

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
