"""How much memory curation takes, and how a run's limit is shared out.

The limit: `--memory-limit` when given; otherwise chosen when the run starts (`choose_memory_limit`):

    limit = min(available / 4, 4 GiB), at least 256 MiB

`available` is the memory the machine (or the container's cgroup) can still give: a quarter of it leaves
room for the other jobs of a shared machine, and 4 GiB is enough for near dedup to take its one-array path
on about a million rows (below); more would only raise the peak. The data size needs no part in the
choice: the limit caps what a run takes, and a small corpus stays well under it.

Shares of the limit:
  - DuckDB (grouping, joins, sorting the dropped rows) gets a quarter and spills beyond it;
  - near dedup runs on all rows as one array (near_dedup.near_duplicate_of, the fastest path) when their
    estimated working set, `near_whole_bytes`, fits in half; otherwise it works part by part with band
    keys grouped in DuckDB (out_of_core.py);
  - every other step holds one part at a time: a part is cut at `part_rows` rows or `part_bytes` bytes of
    row text, whichever comes first (a long chain of thought is ~100x a problem).
The rest is the interpreter, Arrow buffers and arrays that grow with the rows dropped (8 bytes each).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MiB, GiB = 2**20, 2**30
AUTO_SHARE = 4  # a quarter of the available memory
AUTO_MAX = 4 * GiB
AUTO_MIN = 256 * MiB  # DuckDB and one part need this much
DUCKDB_SHARE = 4  # DuckDB gets limit / 4

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """Bytes in "4GB", "512MiB", "2.5 GB" or "1000000" (no unit: bytes). ValueError names the value."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 4GB, 512MiB)")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])
WHOLE_SHARE = 2  # near dedup on one array up to limit / 2
NEAR_ROW_BYTES = 640  # near dedup per row: a 126-value signature (504 bytes), offsets, flags
NEAR_TEXT_FACTOR = 3  # ... and per byte of problem text: the text, its shingle hashes, tokenising buffers


@dataclass(frozen=True)
class MemoryChoice:
    limit: int  # bytes
    why: str  # where the number comes from, for the one line the run prints

    def line(self) -> str:
        return f"curate memory limit {self.limit / GiB:.1f} GiB ({self.why})"


def available_memory() -> int | None:
    """Bytes this process can still take: MemAvailable from /proc/meminfo, lowered to what the cgroup
    (a container's limit) has left; None where neither can be read."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, usage in (("memory.max", "memory.current"),  # cgroup v2, then v1
                         ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            cap = Path("/sys/fs/cgroup", limit).read_text().strip()
            if cap != "max" and int(cap) < 2**60:
                found.append(int(cap) - int(Path("/sys/fs/cgroup", usage).read_text()))
                break
        except (OSError, ValueError):
            continue
    return max(0, min(found)) if found else None


def choose_memory_limit(given: str | int | None = None, available: int | None = None) -> MemoryChoice:
    """The run's memory limit: `given` (a size such as "4GB", or bytes) when set; else
    min(available / 4, 4 GiB), at least 256 MiB (`available` defaults to `available_memory()`; unknown, 4 GiB)."""
    if given is not None:
        return MemoryChoice(given if isinstance(given, int) else parse_size(given), "--memory-limit")
    if available is None:
        available = available_memory()
    if available is None:
        return MemoryChoice(AUTO_MAX, "automatic: available memory unknown, so the 4 GiB cap")
    limit = max(AUTO_MIN, min(AUTO_MAX, available // AUTO_SHARE))
    return MemoryChoice(limit, f"automatic: 1/{AUTO_SHARE} of {available / GiB:.1f} GiB available, "
                               f"at most {AUTO_MAX // GiB} GiB; set --memory-limit to change it")


def duckdb_bytes(limit: int) -> int:
    return limit // DUCKDB_SHARE


def near_whole_bytes(rows: int, text_bytes: int) -> int:
    """Estimated peak of near_dedup.near_duplicate_of on `rows` texts of `text_bytes` bytes in all."""
    return rows * NEAR_ROW_BYTES + text_bytes * NEAR_TEXT_FACTOR


def part_rows(limit: int) -> int:
    """Rows per part: ~4 KB of working memory per row while a step holds a part (text, token hashes,
    shingles, signatures) in half the limit, between 10K and 200K (200K rows amortise DuckDB and worker
    start-up; bigger parts only raise the peak)."""
    return int(min(200_000, max(10_000, limit // 2 // 4096)))


def part_bytes(limit: int) -> int:
    """Bytes of row text per part: 1/16 of the limit, so a step that reads a part's text columns (its
    Python objects ~2x the text, and an Arrow copy) stays well inside the limit."""
    return max(16 * MiB, limit // 16)
