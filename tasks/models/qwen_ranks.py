"""Qwen's byte-level BPE, from its published ranks to the vocabulary and merges a Hugging Face `tokenizers`
BPE model takes.

Source: `qwen.tiktoken`, shipped in the `dashscope` package (pinned in pyproject.toml; Apache-2.0): one line
per token, `base64(token bytes) rank`, ranks 0…151642. The ranks are Qwen's BPE: encoding a pre-tokenised
piece starts from its bytes and repeatedly merges the adjacent pair whose concatenation has the lowest rank,
until no adjacent pair concatenates to a token. The file is found without importing dashscope (an API
client whose import loads its whole SDK): `importlib.util.find_spec` locates the installed package, the
file lies beside it. `KLEAR_QWEN_RANKS=FILE` names the file instead (a machine without dashscope that was
handed the file, as bench/gpu.sh's device runs are).

Merges from ranks (`merges_from_ranks`): a token t of rank r and more than one byte is what that same
procedure builds from t's bytes using only tokens of rank < r, which stops at exactly two pieces (a, b);
(a, b) is t's merge, and merges are listed in rank order. So a `tokenizers` BPE over these merges, which
applies the listed merge of lowest index first, replays the ranks' own merge order: one merge per
multi-byte token (151,387), as Qwen's own merges.txt has.

Token strings (`byte_level_text`): `tokenizers`' ByteLevel pre-tokenizer maps each byte to one printable
character (GPT-2's table, `bytes_to_unicode`), so the vocabulary and merges are written in that alphabet.

Pre-tokenisation (`QWEN_PATTERN`): Qwen's regex splits text into pieces before BPE (letters with one
leading non-letter, single digits, punctuation runs, newlines, spaces). Qwen2/Qwen3's tokenizer applies
Unicode NFC first (tasks/models/qwen_tokenizer.py does too).
"""
from __future__ import annotations

import base64
import functools
import importlib.util
import os
from pathlib import Path

RANKS_PACKAGE, RANKS_FILE = "dashscope", "resources/qwen.tiktoken"
RANKS_VERSION = "2.0.2"
RANKS_ENV = "KLEAR_QWEN_RANKS"
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


class RanksMissing(RuntimeError):
    """Qwen's ranks file is not installed (the message says how to get it)."""


def ranks_path() -> Path:
    """$KLEAR_QWEN_RANKS, else where the installed dashscope package keeps qwen.tiktoken; RanksMissing (one
    line) when neither is a file."""
    named = os.environ.get(RANKS_ENV)
    if named:
        if not Path(named).is_file():
            raise RanksMissing(f"{RANKS_ENV}={named}: no such file (Qwen's BPE ranks, {RANKS_PACKAGE}'s {RANKS_FILE})")
        return Path(named)
    spec = importlib.util.find_spec(RANKS_PACKAGE)
    where = list(spec.submodule_search_locations or []) if spec else []
    for folder in where:
        path = Path(folder) / RANKS_FILE
        if path.is_file():
            return path
    raise RanksMissing(f"Qwen's BPE ranks ({RANKS_PACKAGE}/{RANKS_FILE}) are not installed: "
                       f"pip install {RANKS_PACKAGE}=={RANKS_VERSION}")


def read_ranks(path: str | Path) -> dict[bytes, int]:
    """token bytes → rank from a tiktoken ranks file; ValueError naming the file and line when malformed."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(Path(path).read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:
            raise ValueError(f"{path} line {number}: not 'base64-token rank'") from None
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError(f"{path}: ranks are not 0…{len(ranks) - 1}, each once")
    return ranks


def _two_pieces(token: bytes, rank: int, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
    """The BPE procedure (module docstring) on `token` with tokens of rank < `rank`: its last two pieces."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, at = rank, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], rank)
            if r < best:
                best, at = r, i
        if at < 0:
            return None
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts[0], parts[1]


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges, in rank order (module rule); ValueError for a token the lower ranks cannot build."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        pair = _two_pieces(token, rank, ranks)
        if pair is None:
            raise ValueError(f"token {token!r} (rank {rank}) is not a merge of two lower-ranked tokens")
        merges.append(pair)
    return merges


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table, the one `tokenizers`' ByteLevel uses: printable Latin-1
    bytes map to themselves, the other 68 bytes to U+0100 onwards in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def byte_level_text(token: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)
