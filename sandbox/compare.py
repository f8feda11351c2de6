"""Output comparison: LiveCodeBench's rules for stdin/stdout, `==` for call-based return values.

stdin/stdout (RECIPE.md): strip the whole output, split on newlines, strip each line; the line counts
must match; a line matches if it is equal as a string, or else if every whitespace-separated token of
both lines parses as a Decimal and the two token lists are equal ("1.50" equals "1.5"; no tolerance).
Optionally (`float_tolerance`, off by default) numeric tokens may differ by that relative/absolute amount.

Call-based: the value returned by the program (sent back by the runner with its types kept, see
runner.encode_value) equals the expected value under Python `==`, tuples read as lists.
"""
from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any


def _decimals(line: str) -> list[Decimal] | None:
    """The line's tokens as finite Decimals, or None (a NaN or infinity token compares as text only: a
    signalling NaN would raise on ==, and "nan" never equals "nan" numerically)."""
    try:
        values = [Decimal(tok) for tok in line.split()]
    except (InvalidOperation, ValueError):
        return None
    return values if all(v.is_finite() for v in values) else None


def _tolerant(a: str, b: str, tol: float) -> bool:
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except (ValueError, OverflowError):
            return False
        if not math.isclose(fx, fy, rel_tol=tol, abs_tol=tol):
            return False
    return True


def lines_match(out_line: str, exp_line: str, float_tolerance: float | None = None) -> bool:
    if out_line == exp_line:
        return True
    if float_tolerance is not None:
        return _tolerant(out_line, exp_line, float_tolerance)
    got, want = _decimals(out_line), _decimals(exp_line)
    return got is not None and want is not None and got == want


def compare_stdout(output: str, expected: str, float_tolerance: float | None = None) -> tuple[bool, str]:
    """(matches, why not) under LiveCodeBench's rules."""
    got = [line.strip() for line in output.strip().split("\n")]
    want = [line.strip() for line in expected.strip().split("\n")]
    if len(got) != len(want):
        return False, f"expected {len(want)} lines, got {len(got)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not lines_match(g, w, float_tolerance):
            return False, f"line {i + 1}: expected {w[:100]!r}, got {g[:100]!r}"
    return True, ""


class Opaque:
    """A returned object the runner could only describe (its repr): equal to nothing."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return self.text


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    if isinstance(value, dict):
        return Opaque(repr(value)[:200])
    return value


def decode_value(value: Any) -> Any:
    """Inverse of runner.encode_value. Whatever arrives (the program may have written it itself) decodes
    to plain data or to Opaque values; a malformed tag is Opaque, never an exception."""
    try:
        return _decode(value)
    except Exception as exc:  # RecursionError, a bad tag shape, a 5,000-digit decimal int...
        return Opaque(f"<undecodable: {type(exc).__name__}>")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__int__" in value:
        text = value["__int__"]
        if not isinstance(text, str) or len(text) > 1 << 20:
            raise ValueError("bad int")
        return int(text, 16) if text.lstrip("-").startswith("0x") else int(text)
    if "__float__" in value:
        return float(value["__float__"])
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__dict__" in value:
        return {_hashable(_decode(k)): _decode(v) for k, v in value["__dict__"]}
    if "__set__" in value:
        return {_hashable(_decode(v)) for v in value["__set__"]}
    if "__bytes__" in value:
        return bytes.fromhex(value["__bytes__"])
    if "__complex__" in value:
        re, im = value["__complex__"]
        return complex(_decode(re), _decode(im))
    return Opaque(f"<{str(value.get('__type__', '?'))[:80]}: {str(value.get('__repr__', ''))[:200]}>")


def listify(value: Any) -> Any:
    """Tuples become lists, recursively (LiveCodeBench's only normalisation of return values)."""
    if isinstance(value, (list, tuple)):
        return [listify(v) for v in value]
    if isinstance(value, dict):
        return {k: listify(v) for k, v in value.items()}
    return value


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    return a == b


def values_equal(actual: Any, expected: Any, float_tolerance: float | None = None,
                 unwrap: bool = False) -> bool:
    """Call-based comparison. `unwrap` also accepts expected == [actual] (APPS/TACO wrap outputs)."""
    a, e = listify(actual), listify(expected)
    same = (lambda x, y: _close(x, y, float_tolerance)) if float_tolerance is not None else (
        lambda x, y: bool(x == y))
    try:
        if same(a, e):
            return True
        return bool(unwrap and isinstance(e, list) and len(e) == 1 and same(a, e[0]))
    except Exception:  # a comparison that raises is a mismatch, never a crash of the judge
        return False
