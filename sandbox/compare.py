"""Output comparison: LiveCodeBench's rules for stdin/stdout, `==` for call-based return values.

stdin/stdout (LiveCodeBench's grader): strip the whole output, split on newlines, strip each line; the line counts
must match; a line matches if it is equal as a string, or else if every whitespace-separated token of
both lines parses as a Decimal and the two token lists are equal ("1.50" equals "1.5"; no tolerance).
Optionally (`float_tolerance`, off by default) numeric tokens may differ by that relative/absolute amount.

Call-based: the value returned by the program (sent back by the runner with its types kept, see
runner.encode_value) equals the expected value under Python `==`, tuples read as lists.
"""
from __future__ import annotations

import math
from collections import Counter, deque
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any


def _decimals(line: str) -> list[Decimal] | None:
    """The line's tokens as Decimals, or None. Infinities compare as LiveCodeBench's Decimal comparison
    does ("inf" equals "Infinity", never a finite number); a NaN token compares as text only (a signalling
    NaN would raise on ==, and "nan" never equals "nan" numerically)."""
    try:
        values = [Decimal(tok) for tok in line.split()]
    except (InvalidOperation, ValueError):
        return None
    return None if any(v.is_nan() for v in values) else values


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


MAX_ELEMENTS = 1_000_000  # list/tuple/set/dict members in one decoded value, all levels together
MAX_SAME_HASH = 64  # members of one set (keys of one dict) that may share a hash value
MAX_DECIMAL_CHARS = 5000
MAX_DECIMAL_EXPONENT = 999_999  # the default context's Emax: beyond it even `x + 1` overflows
MAX_FRACTION_BITS = 1 << 16  # per numerator / denominator (a Fraction's gcd is quadratic in its size)
_FRACTION_WORK = 1 << 34  # total bits**2 of the large fractions in one decoded value


class _Refused(ValueError):
    """A value the host will not build: too big, or built to be slow (hash collisions)."""


def decode_value(value: Any) -> Any:
    """Inverse of runner.encode_value. Whatever arrives (the program may have written it itself) decodes
    to plain data or to Opaque values; a malformed tag is Opaque, never an exception.

    Decoding costs the host time linear in the size of what arrived: a value with more than MAX_ELEMENTS
    members, a set or dict with more than MAX_SAME_HASH members of one hash (a forged collision set would
    make building it quadratic), or a fraction or decimal too large to handle cheaply is Opaque."""
    try:
        return _Decoder().decode(value)
    except Exception as exc:  # RecursionError, a bad tag shape, a 5,000-digit decimal int...
        return Opaque(f"<undecodable: {type(exc).__name__}>")


def _decode(value: Any) -> Any:
    return _Decoder().decode(value)


def _distinct_hashes(members: list) -> list:
    """The members, if no more than MAX_SAME_HASH of them share a hash value (O(n), unlike a set)."""
    if len(members) > MAX_SAME_HASH:
        top = Counter(hash(m) for m in members).most_common(1)
        if top and top[0][1] > MAX_SAME_HASH:
            raise _Refused("hash collisions")
    return members


class _Decoder:
    def __init__(self):
        self.elements = 0
        self.fraction_work = 0

    def _members(self, payload: Any) -> list:
        if type(payload) is not list:
            raise ValueError("a container tag holds a list")
        self.elements += len(payload)
        if self.elements > MAX_ELEMENTS:
            raise _Refused("too many elements")
        return payload

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(v) for v in self._members(value)]
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
            return tuple(self.decode(v) for v in self._members(value["__tuple__"]))
        for tag in ("__dict__", "__counter__", "__odict__"):  # == against JSON or a literal: a dict's
            if tag in value:
                return self._dict(value[tag])
        if "__defaultdict__" in value:
            payload = value["__defaultdict__"]
            if type(payload) is not list or len(payload) != 2:
                raise ValueError("a defaultdict is [factory, items]")
            return self._dict(payload[1])
        if "__set__" in value or "__frozenset__" in value:
            frozen = "__frozenset__" in value
            members = [_hashable(self.decode(v)) for v in self._members(value["__frozenset__" if frozen else "__set__"])]
            return (frozenset if frozen else set)(_distinct_hashes(members))
        if "__namedtuple__" in value:
            payload = value["__namedtuple__"]
            if type(payload) is not list or len(payload) != 3:
                raise ValueError("a named tuple is [name, fields, members]")
            return tuple(self.decode(v) for v in self._members(payload[2]))
        if "__deque__" in value:  # a deque equals no list, as in Python
            payload = value["__deque__"]
            if type(payload) is not list or len(payload) != 2:
                raise ValueError("a deque is [members, maxlen]")
            return deque(self.decode(v) for v in self._members(payload[0]))
        if "__bytearray__" in value:
            return bytearray.fromhex(value["__bytearray__"])
        if "__bytes__" in value:
            return bytes.fromhex(value["__bytes__"])
        if "__complex__" in value:
            re, im = value["__complex__"]
            return complex(self.decode(re), self.decode(im))
        if "__fraction__" in value:
            return self._fraction(value["__fraction__"])
        if "__decimal__" in value:
            return _decimal(value["__decimal__"])
        if "__range__" in value:
            bounds = self._members(value["__range__"])
            if len(bounds) != 3 or not all(type(b) is int for b in bounds):
                raise ValueError("a range is [start, stop, step] ints")
            return range(*bounds)
        return Opaque(f"<{str(value.get('__type__', '?'))[:80]}: {str(value.get('__repr__', ''))[:200]}>")

    def _dict(self, payload: Any) -> dict:
        pairs = self._members(payload)
        if not all(type(p) is list and len(p) == 2 for p in pairs):
            raise ValueError("a dict item is a [key, value] pair")
        keys = _distinct_hashes([_hashable(self.decode(k)) for k, _ in pairs])
        return dict(zip(keys, [self.decode(v) for _, v in pairs]))

    def _fraction(self, payload: Any) -> Fraction:
        if type(payload) is not list or len(payload) != 2:
            raise ValueError("a fraction is [numerator, denominator]")
        num, den = self.decode(payload[0]), self.decode(payload[1])
        if type(num) is not int or type(den) is not int or den == 0:
            raise ValueError("a fraction is two ints, the denominator non-zero")
        bits = max(num.bit_length(), den.bit_length())
        if bits > MAX_FRACTION_BITS:
            raise _Refused("fraction too large")
        if bits > 1024:  # normalising (a gcd) costs about bits**2: bound the total
            self.fraction_work += bits * bits
            if self.fraction_work > _FRACTION_WORK:
                raise _Refused("fractions too large")
        return Fraction(num, den)


def _decimal(text: Any) -> Decimal:
    if type(text) is not str or len(text) > MAX_DECIMAL_CHARS:
        raise ValueError("a decimal is a string of at most 5,000 characters")
    number = Decimal(text)
    if number.is_nan():  # NaN equals nothing and a signalling NaN raises on ==
        raise ValueError("NaN decimal")
    if number.is_finite() and abs(number.adjusted()) > MAX_DECIMAL_EXPONENT:
        raise _Refused("decimal exponent out of range")
    return number


def listify(value: Any) -> Any:
    """A returned tuple becomes a list, at the top level only: LiveCodeBench's one normalisation of a
    call's value (`if isinstance(prediction, tuple): prediction = list(prediction)`), so a list of tuples
    does not equal the expected list of lists."""
    return list(value) if isinstance(value, tuple) else value


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
    a, e = listify(actual), expected
    same = (lambda x, y: _close(x, y, float_tolerance)) if float_tolerance is not None else (
        lambda x, y: bool(x == y))
    try:
        if same(a, e):
            return True
        return bool(unwrap and isinstance(e, list) and len(e) == 1 and same(a, e[0]))
    except Exception:  # a comparison that raises is a mismatch, never a crash of the judge
        return False
