"""Source readers: one registry keyed by kind (jsonl, parquet, hf). Each yields `RawRow`s in file order,
numbered from 1, so every input row can be traced. A line that is not JSON becomes a RawRow with
`error` set (and the raw text kept) instead of stopping the read.

PATH forms: `*.jsonl` (or `.json` lines), `*.parquet`, `hf:DATASET[:SPLIT]` (needs the `hf` extra).
A path that cannot be opened raises SourceError with a one-line message naming it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow.parquet as pq

from storage import paths


class SourceError(ValueError):
    """A source that cannot be read at all (missing file, unknown format, unreadable Parquet)."""


@dataclass
class RawRow:
    row: int                 # 1-based
    value: Any = None        # the parsed object (any JSON value for JSONL)
    raw: str | None = None   # the raw line, kept when it could not be parsed
    error: str | None = None


Reader = Callable[[str], Iterator[RawRow]]
READERS: dict[str, Reader] = {}


def register_reader(kind: str) -> Callable[[Reader], Reader]:
    def deco(fn: Reader) -> Reader:
        READERS[kind] = fn
        return fn
    return deco


def source_kind(path: str) -> str:
    if path.startswith("hf:"):
        return "hf"
    lower = path.lower()
    if lower.endswith((".jsonl", ".json", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    if lower.endswith(".parquet"):
        return "parquet"
    raise SourceError(f"{path}: unknown source format (expected .jsonl, .parquet or hf:DATASET[:SPLIT])")


def read_source(path: str) -> Iterator[RawRow]:
    kind = source_kind(path)
    if kind != "hf" and not paths.exists(path):
        raise SourceError(f"{path}: no such file")
    return READERS[kind](path)


@register_reader("jsonl")
def read_jsonl(path: str) -> Iterator[RawRow]:
    import fsspec

    with fsspec.open(path, "rt", encoding="utf-8", errors="replace", compression="infer") as f:
        for i, line in enumerate(f, start=1):
            text = line.rstrip("\n").rstrip("\r")
            if not text.strip():
                yield RawRow(i, raw=text, error="blank line")
                continue
            try:
                yield RawRow(i, value=json.loads(text))
            except json.JSONDecodeError as e:
                yield RawRow(i, raw=text, error=f"not JSON ({e.msg} at char {e.pos})")


@register_reader("parquet")
def read_parquet(path: str) -> Iterator[RawRow]:
    try:
        with paths.open_binary(path) as f:
            table = pq.read_table(f)
    except Exception as e:  # pyarrow raises several types for a broken file
        raise SourceError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    i = 0
    for batch in table.to_batches(max_chunksize=8192):
        for value in batch.to_pylist():
            i += 1
            yield RawRow(i, value=value)


@register_reader("hf")
def read_hf(path: str) -> Iterator[RawRow]:
    spec = path.removeprefix("hf:")
    name, _, split = spec.partition(":")
    try:
        import datasets
    except ImportError:
        raise SourceError(f"{path}: Hugging Face sources need the 'hf' extra (pip install 'klear-pipeline[hf]')") from None
    try:
        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as e:
        raise SourceError(f"{path}: cannot load dataset ({type(e).__name__}: {e})") from None
    for i, value in enumerate(ds, start=1):
        yield RawRow(i, value=dict(value))
