"""Problem-text normalisation for exact dedup and problem ids.

Rule: Unicode NFKC, then case-fold, then every run of whitespace collapsed to one space, ends trimmed.
So "Compute  2+2." and "compute 2+2. " are the same problem; "２+2" (full-width) equals "2+2".
At scale, exact_dedup.py applies the same rule vectorised.
"""
from __future__ import annotations

import hashlib
import unicodedata


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def problem_id(domain: str, problem: str) -> str:
    """Stable id of a problem: first 16 hex digits of SHA-256 over `domain` + NUL + normalised problem."""
    return hashlib.sha256(f"{domain}\0{normalize_text(problem)}".encode()).hexdigest()[:16]
