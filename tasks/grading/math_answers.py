"""Math answer text before math-verify: notations it misreads, rewritten into ones it reads (pure, no sympy).

`normalize_answer_text(text)` is applied to the reference answer and to the model's final text alike, in
this order:
  1. digits: full-width forms (U+FF01-U+FF5E, by NFKC) and every other Unicode decimal digit
     (`unicodedata.decimal`: Arabic-Indic ٣, Devanagari ३, ...) become ASCII. Other compatibility
     characters are kept (NFKC on everything would turn `x²` into `x2`);
  2. `\\mathrm{e}` (also `\\text`, `\\textrm`, `\\operatorname`, `\\mathit`, `{\\rm e}`, `\\mathrm e`) becomes
     `e`, which math-verify reads as Euler's number (it drops `\\mathrm{e}`: `2\\mathrm{e}` read as 2);
  3. digit groups: 1-3 digits, then groups of exactly 3 digits, all joined by the same separator -
     `\\,` `\\ ` `~` `{,}` `\\thinspace` a no-break, thin, narrow no-break or figure space, or one ASCII
     space - lose the separator: `1\\,000` and `1 000 000` become 1000 and 1000000 (math-verify reads a
     space as a product: `1 000` was 0). Not grouping, so kept: `1 2`, `12 34`, `1 2 345` (a group run
     that another digit group precedes or follows with the same separator), `0.123 456` (after a
     decimal point). Commas are left to math-verify, which reads `1,000` as 1000 and `1,2` as a pair;
  4. repeating decimals `I.A\\overline{R}` (`\\bar{R}`, `\\dot{R}` for one digit, `\\dot{a}M\\dot{b}` for the
     repetend aMb) become the exact fraction I + (AR - A) / (10^|A| (10^|R| - 1)) as `\\frac{p}{q}`:
     `0.\\overline{3}` → `\\frac{1}{3}`, `0.1\\overline{6}` → `\\frac{1}{6}`;
  5. a period that ends a number (after a digit, before a space, `}`, `$`, `\\)`, `\\]` or the end) is
     dropped: `\\boxed{3.}` → `\\boxed{3}` (math-verify keeps `3.` as an unparsed string).

`last_boxed(text)` reads the last `\\boxed{}`. `answer_span(text)` and `equality_chain(span)` find a relation
chain in the model's answer, so the grader can refuse one whose numeric parts disagree (`4 = 3`,
`x = 4 = 3`; math-verify reads both as 3).
"""
from __future__ import annotations

import re
import unicodedata
from fractions import Fraction
from typing import Any

_FULL_WIDTH = re.compile("[\uff01-\uff5e]")


def _ascii_digits(text: str) -> str:
    text = _FULL_WIDTH.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    if text.isascii():
        return text
    out = []
    for ch in text:
        if not ch.isascii() and unicodedata.category(ch) == "Nd":
            out.append(str(unicodedata.decimal(ch)))
        else:
            out.append(ch)
    return "".join(out)


_EULER = re.compile(r"\\(?:mathrm|text|textrm|operatorname|mathit)\s*\{\s*e\s*\}"
                    r"|\{\s*\\rm\s+e\s*\}|\\mathrm\s+e(?![A-Za-z])")

_SEPARATORS = [r"\\,", r"\\ ", "~", r"\{,\}", r"\\thinspace\s*", "\u00a0", "\u2009", "\u202f", "\u2007", " "]
_SEP = "|".join(_SEPARATORS)
_GROUPED = re.compile(rf"(?<![\d.])\d{{1,3}}(?P<sep>{_SEP})\d{{3}}(?:(?P=sep)\d{{3}})*(?!\d)")


def _ungroup(m: re.Match) -> str:
    text, sep = m.string, m.group("sep")
    before, after = text[:m.start()], text[m.end():]
    if before.endswith(sep) and before[:-len(sep)][-1:].isdigit():
        return m.group()  # `1 2 345`: a list of numbers, not one grouped number
    if after.startswith(sep) and after[len(sep):][:1].isdigit():
        return m.group()  # `1 000 12`: the run goes on with a group that is not 3 digits
    return m.group().replace(sep, "")


_BAR = r"\\(?:overline|bar)\s*"
_REPEAT_BAR = re.compile(rf"(?<![\d.])(\d*)\.(\d*)(?:\{{{_BAR}\{{(\d+)\}}\}}|{_BAR}\{{(\d+)\}}|{_BAR}(\d))")
_DOT = r"\\dot\s*(?:\{(\d)\}|(\d))"
_REPEAT_DOTS = re.compile(rf"(?<![\d.])(\d*)\.(\d*){_DOT}(?:(\d*){_DOT})?")


def repeating_decimal(integer: str, fixed: str, repetend: str) -> Fraction:
    """I.A(R repeating) = I + (AR - A) / (10^|A| (10^|R| - 1))."""
    num = int(fixed + repetend) - int(fixed or "0")
    return int(integer or "0") + Fraction(num, 10 ** len(fixed) * (10 ** len(repetend) - 1))


def _fraction_latex(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"\\frac{{{v.numerator}}}{{{v.denominator}}}"


def _bar(m: re.Match) -> str:
    repetend = next(g for g in m.groups()[2:] if g is not None)
    return _fraction_latex(repeating_decimal(m.group(1), m.group(2), repetend))


def _dots(m: re.Match) -> str:
    first = m.group(3) or m.group(4)
    last = m.group(6) or m.group(7)
    repetend = first + (m.group(5) + last if last is not None else "")
    return _fraction_latex(repeating_decimal(m.group(1), m.group(2), repetend))


_END_PERIOD = re.compile(r"(?<=\d)\.(?=\s|$|\}|\$|\\\)|\\\])")


def normalize_answer_text(text: str) -> str:
    """The module's rules 1-5, in order (see the module docstring)."""
    text = _ascii_digits(text)
    text = _EULER.sub("e", text)
    text = _GROUPED.sub(_ungroup, text)
    text = _REPEAT_BAR.sub(_bar, text)
    text = _REPEAT_DOTS.sub(_dots, text)
    return _END_PERIOD.sub("", text)


def last_boxed(text: Any) -> str | None:
    """The content of the last `\\boxed{...}` whose braces balance (an earlier one when the last is cut
    off), as written; None when there is none or `text` is not a string. The one reader of boxed answers:
    the graders' answer span, curation's answers and source scores."""
    if not isinstance(text, str):
        return None
    i = text.rfind("\\boxed{")
    while i >= 0:
        start = i + len("\\boxed{")
        depth = 1
        for j in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[start:j]
        i = text.rfind("\\boxed{", 0, i)
    return None


_MATH_SPANS = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$([^$]+?)\$", re.S)
_LINE_CHAIN_PART = r"(?:[^=A-Za-z\n]|\\[A-Za-z]+|(?<![A-Za-z])[A-Za-z](?![A-Za-z]))+"
_LINE_CHAIN = re.compile(rf"{_LINE_CHAIN_PART}(?:={_LINE_CHAIN_PART})+$")


def answer_span(text: str) -> str:
    """Where the model states its answer: the last `\\boxed{}`'s content; else the last math span
    (`$$..$$`, `\\[..\\]`, `\\(..\\)`, `$..$`); else the math at the end of the last non-empty line (the
    run of symbols, numbers and one-letter names after its last word: `The answer is x = 4 = 3.` →
    `x = 4 = 3`)."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    spans = _MATH_SPANS.findall(text)
    if spans:
        return next(s for s in spans[-1] if s)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    m = _LINE_CHAIN.search(lines[-1].rstrip("."))
    return m.group().strip() if m else lines[-1]


_NOT_EQUALS_BEFORE = "<>!=:\\"


def equality_chain(span: str) -> list[str]:
    """The parts of `span` split at its top-level `=` signs (outside braces and brackets; `<=`, `>=`,
    `!=`, `==`, `:=` are not splits), or [] when there is no such `=` or a part is empty."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(span):
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        elif (ch == "=" and depth == 0 and (i == 0 or span[i - 1] not in _NOT_EQUALS_BEFORE)
              and span[i + 1:i + 2] != "="):
            parts.append(span[start:i])
            start = i + 1
    if not parts:
        return []
    parts.append(span[start:])
    parts = [p.strip() for p in parts]
    return parts if all(parts) else []
