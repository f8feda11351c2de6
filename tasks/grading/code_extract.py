"""Code extraction for grading and validation (paper: the last ```python block after `</think>`)."""
from __future__ import annotations

import re

from tasks.grading.math_grader import final_text

_BLOCK = re.compile(r"```(?:python|py|python3)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(response: str, after_think: bool = True) -> str | None:
    """The last ```python fenced block (after the last `</think>` unless `after_think` is False)."""
    text = final_text(response) if after_think else response
    blocks = _BLOCK.findall(text)
    return blocks[-1].strip("\n") if blocks else None
