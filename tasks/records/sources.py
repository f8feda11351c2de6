"""Source readers: one registry keyed by kind (jsonl, parquet, hf). Each yields `RawRow`s in file order,
numbered from 1, so every input row can be traced. A row that cannot be used becomes a RawRow with
`error` set to a one-line reason (and the raw text kept) instead of stopping the read:

- JSONL lines are split on b"\\n" only (a bare \\r, \\x0b, \\x1c or U+2028 inside a line is part of it; a
  trailing \\r\\n counts as the line end); a UTF-8 byte-order mark on line 1 is ignored.
- bad rows: not UTF-8, not JSON (including numbers longer than Python parses), nested deeper than
  `MAX_DEPTH` levels, or holding a lone surrogate escape (`"\\ud800"`: not text any UTF-8 file, hash or
  Parquet column can hold). `check_value` is the last two checks, for values parsed elsewhere.
- Parquet rows Arrow cannot convert (invalid UTF-8 written by a foreign writer) are bad rows one by one.
- Parquet float32 and float16 values, at any depth, are read as the shortest decimal that round-trips at
  their precision (a float32 0.1 is 0.1, as a JSON file of the same data holds it; widened bit for bit it
  would be 0.10000000149011612); doubles are read as they are (`shortest_floats`).

PATH forms: `*.jsonl` (or `.json` lines), `*.parquet`, `hf:DATASET[:SPLIT]` (needs the `hf` extra).
A path that cannot be opened (missing, a directory, unknown format) raises SourceError with a one-line
message naming it (`check_source_file`, before any row is read); so does a JSON Lines path whose first
bytes show another format (`not_json_lines`): a JSON array, a Parquet file, gzip data without `.gz`.
"""
from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import fsspec
import numpy as np
import pyarrow as pa
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


_JSONL_SUFFIXES = (".jsonl.gz", ".jsonl", ".json", ".ndjson")


def source_kind(path: str) -> str:
    if path.startswith("hf:"):
        return "hf"
    lower = path.lower()
    if lower.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if lower.endswith(".parquet"):
        return "parquet"
    raise SourceError(f"{path}: unknown source format (expected .jsonl, .parquet or hf:DATASET[:SPLIT])")


def check_source_file(path: str) -> str:
    """The source's kind, after checking that a file path names a file: a missing path or a directory
    (`--source a=data/` for `data/train.jsonl`) is a SourceError naming it, not an IsADirectoryError later."""
    kind = source_kind(path)
    if kind == "hf":
        return kind
    fs, local = paths.fs_for(path)
    if not fs.exists(local):
        raise SourceError(f"{path}: no such file")
    if fs.isdir(local):
        raise SourceError(f"{path}: is a directory, not a .{kind} file")
    if kind == "jsonl" and (heads := _heads(path)) and (why := not_json_lines(path, *heads)):
        raise SourceError(f"{path}: {why}")
    return kind


SNIFF_BYTES = 1 << 16  # how much of a JSON Lines file is read to tell its format
_GZIP_MAGIC, _PARQUET_MAGIC, _BOM = b"\x1f\x8b", b"PAR1", b"\xef\xbb\xbf"


def _heads(path: str) -> tuple[bytes, bytes | None] | None:
    """(the file's first SNIFF_BYTES bytes, the first SNIFF_BYTES of its decompressed text for a .gz
    path, None when that cannot be read), or None when the file cannot be read: the reader reports
    either, naming the line."""
    try:
        with paths.open_binary(path) as f:
            raw = f.read(SNIFF_BYTES)
    except OSError:
        return None
    if not path.lower().endswith(".gz") or not raw.startswith(_GZIP_MAGIC):
        return raw, None
    try:
        with fsspec.open(path, "rb", compression="gzip") as f:
            return raw, f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return raw, None


def not_json_lines(path: str, raw: bytes, text: bytes | None = None) -> str | None:
    """What a JSON Lines path holds instead, judged by its first bytes `raw` (and `text`, the decompressed
    start of a .gz), or None when it may be JSON Lines. The rules:
    - `PAR1` magic: a Parquet file; gzip magic in a name without `.gz`: gzip data; a `.gz` name without it:
      not gzip-compressed.
    - after an optional byte-order mark and whitespace, a `[` whose line is not a complete JSON value
      (a pretty-printed array), or whose line is the whole file and an array of objects (`json.dump`'s
      one line; past the sniffed head, a `[` then `{`): a JSON array. A first line that is a complete array followed by more lines is a JSON
      Lines file whose first row is malformed, left to the reader."""
    gz = path.lower().endswith(".gz")
    suffix = next((path[-len(s):] for s in _JSONL_SUFFIXES if path.lower().endswith(s)), "")
    if gz and not raw.startswith(_GZIP_MAGIC):
        return f"named {suffix} but not gzip-compressed (no gzip magic)"
    if not gz and raw.startswith(_GZIP_MAGIC):
        return f"gzip-compressed data named {suffix}: name it {suffix}.gz"
    head = text if gz else raw
    if head is None:
        return None
    if head.startswith(_PARQUET_MAGIC):
        return f"a Parquet file (PAR1 magic) named {suffix}: name it .parquet"
    if _json_array_start(head, whole=len(head) < SNIFF_BYTES):
        source = f"gunzip -c {path} | jq -c '.[]'" if gz else f"jq -c '.[]' {path}"
        stem = path[: len(path) - len(suffix)] if path.endswith(suffix) else path
        out = f"{stem}.jsonl" if f"{stem}.jsonl" != path else f"{stem}-lines.jsonl"
        return f"a JSON array, not JSON Lines (one object per line): convert it with {source} > {out}"
    return None


def _json_array_start(head: bytes, whole: bool) -> bool:
    """Whether `head` (the start of a file; `whole`: all of it) opens a JSON array file (not_json_lines)."""
    body = head.removeprefix(_BOM).lstrip()
    if not body.startswith(b"["):
        return False
    line, newline, rest = body.partition(b"\n")
    if not newline and not whole:  # a first line longer than the head: json.dump's array of objects, else
        return body[1:].lstrip().startswith(b"{")  # left to the reader
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return True
    return (whole and not rest.strip() and isinstance(value, list) and bool(value)
            and all(isinstance(v, dict) for v in value))


def read_source(path: str) -> Iterator[RawRow]:
    return READERS[check_source_file(path)](path)


MAX_DEPTH = 100  # nesting levels (objects and arrays) a row may have: real rows need < 10 (a call-based
#   test's grid argument is ~6 deep); far deeper ones exhaust the recursion of json, hashing and the judge
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how one gets into JSON text: an escape (UTF-8 can't)


def check_value(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a parsed value cannot be a row (a lone surrogate in a string or key, nesting deeper than
    `max_depth`), or None. Iterative, so any depth is safe to check."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            m = _SURROGATE.search(v)
            if m:
                return f"lone surrogate \\u{ord(m.group()):04x} in a string (not valid Unicode)"
        elif isinstance(v, (dict, list, tuple)):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels"
            items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
            for k, x in items:
                if isinstance(k, str):
                    stack.append((k, depth))
                stack.append((x, depth + 1))
    return None


def check_json(text: str, value: Any) -> str | None:
    """check_value for a value parsed from JSON `text`, walking it only when the text could hide a
    problem (a \\uD8xx-\\uDFxx escape, more brackets than MAX_DEPTH): most rows cost two scans of C."""
    if text.count("[") + text.count("{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(text):
        return check_value(value)
    return None


def check_embedded_json(text: str) -> str | None:
    """check_json for a field that holds JSON text (a `tests` string), parsed here only when suspect;
    text that is simply not JSON is left for the field's own parser to report."""
    if not (text.count("[") + text.count("{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(text)):
        return None
    try:
        value = json.loads(text)
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels"
    except ValueError:
        return None
    return check_value(value)


def _short(exc: Exception) -> str:
    return str(exc).split(": ", 1)[0].split("; ", 1)[0]


def parse_line(row: int, data: bytes) -> RawRow:
    """One JSONL line (bytes, with or without its line end) → a RawRow, never an exception."""
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.endswith(b"\r"):
        data = data[:-1]
    if row == 1 and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return RawRow(row, raw=data.decode("utf-8", "replace"),
                      error=f"not UTF-8 (byte 0x{data[e.start]:02x} at byte {e.start + 1})")
    if not text.strip():
        return RawRow(row, raw=text, error="blank line")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return RawRow(row, raw=text, error=f"not JSON ({e.msg} at char {e.pos})")
    except RecursionError:
        return RawRow(row, raw=text, error=f"nested deeper than {MAX_DEPTH} levels")
    except ValueError as e:  # e.g. an integer longer than Python converts (4300 digits)
        return RawRow(row, raw=text, error=f"not JSON ({_short(e)})")
    why = check_json(text, value)
    if why:
        return RawRow(row, raw=text, error=why)
    return RawRow(row, value=value)


@register_reader("jsonl")
def read_jsonl(path: str) -> Iterator[RawRow]:
    i = 0
    try:
        with fsspec.open(path, "rb", compression="infer") as f:
            for i, line in enumerate(f, start=1):  # binary lines: split on b"\n" only
                yield parse_line(i, line)
    except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz, a vanished file
        raise SourceError(f"{path}: cannot read past line {i} ({type(e).__name__}: "
                          f"{getattr(e, 'strerror', None) or e})") from None


@register_reader("parquet")
def read_parquet(path: str) -> Iterator[RawRow]:
    """Row by row, 8,192 rows in memory at a time, read through a 1 MiB buffer (never the whole file: a
    source may be larger than RAM; pre-buffering would keep every row group read in the memory pool)."""
    try:
        f = paths.open_binary(path)
    except Exception as e:
        raise SourceError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    with f:
        yield from _parquet_rows(path, f)


def _parquet_rows(path: str, f) -> Iterator[RawRow]:
    def broken(e: Exception) -> SourceError:  # pyarrow raises several types for a broken file
        return SourceError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})")

    try:
        batches = pq.ParquetFile(f, pre_buffer=False, buffer_size=1 << 20).iter_batches(batch_size=8192)
    except Exception as e:
        raise broken(e) from None
    i = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as e:  # a corrupt row group part-way: the run stops (no version is published)
            raise broken(e) from None
        shorten = shortest_floats(batch.schema)
        try:
            values = batch.to_pylist()
        except Exception:  # e.g. invalid UTF-8 in a string column: find the rows, keep the others
            values = None
        for j in range(batch.num_rows):
            i += 1
            if values is not None:
                yield RawRow(i, value=shorten(values[j]) if shorten else values[j])
                continue
            try:
                value = batch.slice(j, 1).to_pylist()[0]
            except Exception as e:
                yield RawRow(i, error=f"unreadable row ({type(e).__name__}: {_short(e)})")
            else:
                yield RawRow(i, value=shorten(value) if shorten else value)


_NARROW_FLOATS = {pa.float32(): np.float32, pa.float16(): np.float16}

Fix = Callable[[Any], Any]


def shortest_floats(schema: pa.Schema) -> Fix | None:
    """A function that turns a row of `schema` (as to_pylist gives it) into the same row with each float32
    or float16 value, at any depth, the shortest decimal that round-trips at its precision (numpy's repr:
    0.1f → 0.1), read back as a Python float, an integral one exactly (float16 65504 is no 65500); None when
    the schema holds none (the row is used as it is)."""
    fixes = {f.name: fix for f in schema if (fix := _float_fix(f.type))}
    if not fixes:
        return None
    return lambda row: {k: (fixes[k](v) if k in fixes and v is not None else v) for k, v in row.items()}


def _float_fix(t: pa.DataType) -> Fix | None:
    """shortest_floats for one value of type `t` (not None), or None when `t` holds no narrow float."""
    if t in _NARROW_FLOATS:
        narrow = _NARROW_FLOATS[t]
        return lambda v: float(v) if float(v).is_integer() else float(str(narrow(v)))  # 65504: not 65500
    if pa.types.is_dictionary(t):
        return _float_fix(t.value_type)
    if pa.types.is_struct(t):
        fields = {t.field(i).name: fix for i in range(t.num_fields) if (fix := _float_fix(t.field(i).type))}
        if not fields:
            return None
        return lambda v: {k: (fields[k](x) if k in fields and x is not None else x) for k, x in v.items()}
    if pa.types.is_map(t):
        key, item = _float_fix(t.key_type), _float_fix(t.item_type)
        if not (key or item):
            return None
        return lambda v: [(key(k) if key else k, item(x) if item and x is not None else x) for k, x in v]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        fix = _float_fix(t.value_type)
        return (lambda v: [fix(x) if x is not None else x for x in v]) if fix else None
    return None


def load_hf_split(path: str):
    """`hf:DATASET[:SPLIT]` (split "train" when none) as a `datasets.Dataset`: a Hub dataset at its newest
    revision, or a local folder or file as it is now; SourceError (one line) without the `hf` extra or when
    it cannot be loaded."""
    name, _, split = path.removeprefix("hf:").partition(":")
    try:
        import datasets  # the optional `hf` extra, and slow to import
    except ImportError:
        raise SourceError(f"{path}: Hugging Face sources need the 'hf' extra (pip install 'klear-pipeline[hf]')") from None
    try:
        return datasets.load_dataset(name, split=split or "train")
    except Exception as e:
        raise SourceError(f"{path}: cannot load dataset ({type(e).__name__}: {e})") from None


def hf_content_hash(path: str) -> str:
    """sha256 of what `hf:` reads: the loaded split's Arrow files, which `datasets` writes from the data's
    current content (a new Hub revision or a changed local file gives new ones); the rows' JSON when the
    split has no files. So a dataset that changed under the same name is a new input, never a stale one."""
    import hashlib
    import json

    from storage.keys import hash_file

    ds = load_hf_split(path)
    h = hashlib.sha256()
    files = [f["filename"] for f in ds.cache_files]
    if files:
        for f in files:
            h.update(hash_file(f).encode())
    else:
        for row in ds:
            h.update(json.dumps(row, sort_keys=True, default=str).encode() + b"\n")
    return h.hexdigest()


@register_reader("hf")
def read_hf(path: str) -> Iterator[RawRow]:
    ds = load_hf_split(path)
    for i, value in enumerate(ds, start=1):
        yield RawRow(i, value=dict(value))
