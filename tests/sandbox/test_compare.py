"""LiveCodeBench comparison rules (RECIPE.md) and call-based equality. No Docker."""
import math

import pytest

from sandbox.compare import compare_stdout, decode_value, lines_match, values_equal
from sandbox.runner import encode_value


@pytest.mark.parametrize("out, expected", [
    ("3\n", "3"),                      # whole output stripped
    ("  3  \n\n", "3\n"),
    ("1 2\r\n3\r\n", "1 2\n3"),        # each line stripped (CRLF)
    ("1.50\n", "1.5"),                 # Decimal: 1.50 == 1.5
    ("1.0 2", "1 2.00"),
    ("1e2", "100"),                    # Decimal('1e2') == Decimal('100')
    ("-0", "0"),
    ("a  b", "a  b"),                  # string equality first
    ("", ""),
    ("\n\n", ""),
])
def test_stdout_matches(out, expected):
    assert compare_stdout(out, expected)[0]


@pytest.mark.parametrize("out, expected", [
    ("3", "4"),
    ("1 2", "1 2 3"),
    ("1\n2", "1 2"),                   # line structure matters
    ("1\n\n2", "1\n2"),                # inner blank lines count
    ("0.1", "0.10000001"),             # no float tolerance by default
    ("a b", "a  b"),                   # not numeric, not equal as strings
    ("YES", "yes"),                    # case matters
    ("1 2x", "1 2"),                   # one non-numeric token: string rule only
])
def test_stdout_mismatches(out, expected):
    ok, why = compare_stdout(out, expected)
    assert not ok and why


def test_mismatch_message_names_the_line():
    ok, why = compare_stdout("1\n2\n5", "1\n2\n3")
    assert not ok and why.startswith("line 3")


def test_float_tolerance_is_opt_in():
    assert not compare_stdout("0.3333333", "0.33333333")[0]
    assert compare_stdout("0.3333333", "0.33333333", float_tolerance=1e-6)[0]
    assert not compare_stdout("0.34", "0.33", float_tolerance=1e-6)[0]
    assert compare_stdout("x 1.0000001", "x 1", float_tolerance=1e-6)[0]
    assert not lines_match("x 1", "y 1", float_tolerance=1e-6)


@pytest.mark.parametrize("value", [
    None, True, 3, -7, 2**80, 1.5, float("inf"), "s", [1, [2, "x"]], (1, 2), {"a": 1}, {1: [2]},
    {3, 4}, frozenset({1}), {(1, 2): "t"},
])
def test_encode_decode_roundtrip(value):
    from sandbox.compare import listify

    got = decode_value(encode_value(value))
    if isinstance(value, dict) and any(isinstance(k, tuple) for k in value):
        assert got == value  # tuple keys come back as tuples (hashable)
    else:
        assert got == listify(value)


def test_nan_and_unencodable():
    assert math.isnan(decode_value(encode_value(float("nan"))))
    obj = decode_value(encode_value(object()))
    assert obj != obj  # an opaque repr equals nothing


def test_call_based_equality():
    assert values_equal((1, 2), [1, 2])                 # tuples -> lists
    assert values_equal([(1, 2), (3,)], [[1, 2], [3]])  # recursively
    assert values_equal(True, 1)                        # Python == semantics
    assert not values_equal({1: 2}, {"1": 2})           # key types are kept
    assert not values_equal({1, 2}, [1, 2])
    assert not values_equal(3, [3])
    assert values_equal(3, [3], unwrap=True)            # APPS/TACO-style wrapped outputs, opt-in
    assert not values_equal(0.1 + 0.2, 0.3)
    assert values_equal(0.1 + 0.2, 0.3, float_tolerance=1e-9)
    assert values_equal([0.1 + 0.2, "a"], [0.3, "a"], float_tolerance=1e-9)
