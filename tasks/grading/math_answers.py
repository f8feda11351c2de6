"""Math answer text before math-verify: notations it misreads, rewritten into ones it reads (pure, no sympy).

`normalize_answer_text(text)` is applied to the reference answer and to the model's final text alike, in
this order:
  1. digits: full-width forms (U+FF01-U+FF5E, by NFKC) and every other Unicode decimal digit
     (`unicodedata.decimal`: Arabic-Indic ٣, Devanagari ३, ...) become ASCII. Other compatibility
     characters are kept (NFKC on everything would turn `x²` into `x2`);
  2. boxes math-verify does not see as boxes: `\\boxed {` (a space before the brace) and `\\fbox{`
     become `\\boxed{` (math-verify only finds `\\boxed{` and read `\\boxed {4 = 3}` as the 3 after `=`);
  3. scientific notation: a number (digits, optionally `.digits`), then `e` or `E`, then an optionally
     signed integer, with nothing between them, no letter, digit, `_`, `.` or `\\` just before and no
     letter, digit, `_`, `^`, `{`, `(`, `!` or `.digit` just after (`1.2e4`, `3e5`, `1.2e-3`, `1.2E+04`),
     becomes the plain decimal it stands for (12000, 300000, 0.0012), or `m \\times 10^{k}` past
     10^±400. math-verify read `1.2e4` as 1.2·e·4. Euler's e keeps any other spelling: `2e` (no
     exponent), `e^{2}`, `2e - 3` (spaces), `2\\mathrm{e}-3` (this rule runs before rule 4); `2e-3` is 0.002;
  4. `\\mathrm{e}` (also `\\text`, `\\textrm`, `\\operatorname`, `\\mathit`, `{\\rm e}`, `\\mathrm e`) becomes
     `e`, which math-verify reads as Euler's number (it drops `\\mathrm{e}`: `2\\mathrm{e}` read as 2);
  5. equals signs latex2sympy cannot parse become `=`: definitions (`:=`, `=:`, `\\coloneqq`, `\\coloneq`,
     `\\eqqcolon`, `\\eqcolon`) and decorated equals (`\\doteq`, `\\triangleq`, `\\stackrel{..}{=}`,
     `\\overset{..}{=}`), so a relation in them is read and judged as one (math_relations.py):
     `x := 3` states 3, `4 := 3` is false. A congruence's modulus `\\pmod{n}` is dropped, leaving the
     residues' equation: `x \\equiv 3 \\pmod{5}` states 3 (latex2sympy cannot parse `\\pmod`), and
     `8 \\equiv 3 \\pmod{5}` is no answer (8 = 3 is false);
  6. digit groups: 1-3 digits, then groups of exactly 3 digits, all joined by the same separator -
     `\\,` `\\ ` `~` `{,}` `\\thinspace` a no-break, thin, narrow no-break or figure space, or one ASCII
     space - lose the separator: `1\\,000` and `1 000 000` become 1000 and 1000000 (math-verify reads a
     space as a product: `1 000` was 0). Not grouping, so kept: `1 2`, `12 34`, `1 2 345` (a group run
     that another digit group precedes or follows with the same separator), `0.123 456` (after a
     decimal point). Commas are left to math-verify, which reads `1,000` as 1000 and `1,2` as a pair;
  7. repeating decimals `I.A\\overline{R}` (`\\bar{R}`, `\\dot{R}` for one digit, `\\dot{a}M\\dot{b}` for the
     repetend aMb) become the exact fraction I + (AR - A) / (10^|A| (10^|R| - 1)) as `\\frac{p}{q}`:
     `0.\\overline{3}` → `\\frac{1}{3}`, `0.1\\overline{6}` → `\\frac{1}{6}`;
  8. a period that ends a number (after a digit, before a space, `}`, `$`, `\\)`, `\\]` or the end) is
     dropped: `\\boxed{3.}` → `\\boxed{3}` (math-verify keeps `3.` as an unparsed string).
A rule may raise on a hostile answer (rule 7 past Python's 4,300-digit int limit): the grader then counts
the answer wrong (math_check.py).

`last_boxed(text)` reads the last `\\boxed{}`. Relations are judged on math-verify's own reading of the
answer (math_relations.py), not on a reading of the text here.
"""
from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
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


_BOX_SPELLINGS = re.compile(r"\\boxed\s+\{|\\fbox\s*\{")


MAX_EXPANDED_EXPONENT = 400  # past this, `m \times 10^{k}`: no thousand-digit strings


def _scientific(m: re.Match) -> str:
    mantissa, exponent = m.group(1), m.group(2)
    if len(exponent.lstrip("+-")) > 3 or abs(int(exponent)) > MAX_EXPANDED_EXPONENT:
        return f"{mantissa} \\times 10^{{{exponent.lstrip('+')}}}"
    return format(Decimal(f"{mantissa}e{exponent}"), "f")


_SCIENTIFIC = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w^{(!]|\.\d)")

_MODULUS = re.compile(r"\s*\\pmod\s*(?:\{[^{}]*\}|\d+|[A-Za-z])")
_EQUALS_SPELLINGS = re.compile(r"(?<!\\):=|=:|\\(?:coloneqq|coloneq|eqqcolon|eqcolon|doteq|triangleq)(?![A-Za-z])"
                               r"|\\(?:stackrel|overset)\s*\{[^{}]*\}\s*\{\s*=\s*\}")

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
    """The module's rules 1-8, in order (see the module docstring)."""
    text = _ascii_digits(text)
    text = _BOX_SPELLINGS.sub(lambda m: "\\boxed{", text)
    text = _SCIENTIFIC.sub(_scientific, text)
    text = _EULER.sub("e", text)
    text = _EQUALS_SPELLINGS.sub("=", text)
    text = _MODULUS.sub("", text)
    text = _GROUPED.sub(_ungroup, text)
    text = _REPEAT_BAR.sub(_bar, text)
    text = _REPEAT_DOTS.sub(_dots, text)
    return _END_PERIOD.sub("", text)


def last_boxed(text: Any) -> str | None:
    """The content of the last `\\boxed{...}` whose braces balance (an earlier one when the last is cut
    off), as written; None when there is none or `text` is not a string. The one reader of boxed answers
    outside math-verify: curation's answers and source scores."""
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
