"""The result of grading one response."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Grade:
    score: float          # 0..1 (soft for code: pass fraction)
    correct: bool         # exactly right (math) / all tests passed (code)
    detail: str = ""
