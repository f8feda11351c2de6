"""What math-verify reads in a model's answer, and where: its extraction, with the spans it used.

`read(text)` runs math-verify's own extraction (`math_verify.parser`: the same regexes, priorities, order
and extractors as `math_verify.parse(text)` with its default targets, LaTeX then plain expressions) and
returns a `Reading`:

    parsed  exactly what `parse(text)` returns: the object math-verify compares (if any), then the
            first span's text (its string fallback);
    match   the regex match the object was read from, `target` its extraction (LaTeX or plain expression);
    failed  the LaTeX matches math-verify tried before it and could not read (no object); a plain-text
            match that fails is math-verify's own regex reaching too far (`3)`), not a span the model wrote.

`Reading.fragment()` says when the object is only part of what math-verify tried to read: its span lies
inside a span it tried first and could not parse (`3` out of `\\boxed{4 \\doteq 3}`, out of
`\\boxed{4 = 3} \\boxed{}`), or LaTeX math-verify could not parse whole and read by its last `=` part only
(`\\underbrace{4}_{a} = 4 = 3` read as 3). The grader's relation rules (math_relations.py) judge this
reading, so they see what math-verify compares, not a second reading of the text.

The loop mirrors `math_verify.parser.extract_target_from_pred` (math-verify 0.9.0: first extraction per
priority group, rightmost match first, `any_match`, `first_match` fallback); tests check that `parsed`
equals `parse(text)`. Unlike `parse`, `read` lets an exception through (its caller makes the answer wrong).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import groupby


def _default_targets() -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return LatexExtractionConfig(), ExprExtractionConfig()


@dataclass
class Reading:
    text: str
    parsed: list = field(default_factory=list)
    match: re.Match | None = None
    target: object = None
    failed: list = field(default_factory=list)
    string: str = ""  # the text math-verify parsed for the object (normalised LaTeX, or the number)

    @property
    def plain(self) -> bool:
        """The object was read from plain text (math-verify's expression extractor), not from LaTeX."""
        from math_verify import ExprExtractionConfig

        return isinstance(self.target, ExprExtractionConfig)

    def span(self) -> tuple[int, int] | None:
        """Where in the text the object was read: a plain number or expression without the punctuation
        math-verify's pattern takes around it; a LaTeX match whole."""
        if self.match is None:
            return None
        if not self.plain:
            return self.match.span()
        groups = [g for g, v in self.match.groupdict().items() if v is not None]
        return min(self.match.start(g) for g in groups), max(self.match.end(g) for g in groups)

    def fragment(self) -> str | None:
        """Why the object is only a fragment of what math-verify tried to read, or None (module docstring)."""
        span = self.span()
        if span is None:
            return None
        for m in self.failed:
            if m.start() <= span[0] and span[1] <= m.end():
                return (f"math-verify read {self.text[span[0]:span[1]].strip()!r} out of {_short(m.group())!r}, "
                        f"which it could not parse")
        if not self.plain and _latex_spans(self.match) == 1 and _read_by_last_equation(self.string):
            return f"math-verify could not parse {_short(self.string)!r} whole and read only its last '=' part"
        return None


def _latex_spans(match: re.Match) -> int:
    """How many LaTeX spans (`$..$`, `\\boxed{..}`, ...) a LaTeX match joins (`$a$ and $b$`: 2)."""
    return sum(1 for name, value in match.groupdict().items() if value and re.match(r"(first|next\d)_latex", name))


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _read_by_last_equation(latex: str) -> bool:
    """True when math-verify's LaTeX parse of `latex` is the parse of its last `=` part only: the whole
    fails and `get_last_eq` shortened it (math_verify.parser.parse_latex_cached)."""
    from latex2sympy2_extended.latex2sympy2 import latex2sympy
    from math_verify.grader import should_treat_as_complex
    from math_verify.parser import get_last_eq

    if get_last_eq(latex) == latex:
        return False
    try:
        latex2sympy(latex, is_real=not should_treat_as_complex(latex), convert_degrees=False,
                    normalization_config=None)
    except Exception:
        return True
    return False


def read(text: str, targets: tuple | None = None) -> Reading:
    """math-verify's extraction of `text` with its spans (module docstring)."""
    from math_verify import ExprExtractionConfig
    from math_verify.parser import extract_match, get_extraction_regexes

    patterns = [(pattern, target, priority)
                for target_patterns, target in get_extraction_regexes(targets or _default_targets())
                for pattern, priority in target_patterns]
    reading, fallbacks = Reading(text), []
    for _, group in groupby(sorted(patterns, key=lambda p: p[2]), key=lambda p: p[2]):
        matches = sorted(((m, target) for pattern, target, _ in group for m in pattern.finditer(text)),
                         key=lambda mt: (mt[0].end(), -mt[0].start()), reverse=True)
        for m, target in matches:
            extracted, fallback = extract_match(m, target)
            if fallback:
                fallbacks.append(fallback)
            if extracted is not None:
                reading.parsed, reading.match, reading.target, reading.string = [extracted], m, target, fallback
                break
            if not isinstance(target, ExprExtractionConfig):
                reading.failed.append(m)
        if reading.parsed:
            break
    if fallbacks:
        reading.parsed.append(fallbacks[0])
    return reading
