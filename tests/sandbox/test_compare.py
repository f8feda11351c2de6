"""LiveCodeBench comparison rules and call-based equality. No Docker."""
import math
from decimal import Decimal
from fractions import Fraction

import pytest

from sandbox.compare import Opaque, compare_stdout, decode_value, lines_match, values_equal
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


class _LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class _Str(str):
    pass


@pytest.mark.parametrize("value", [
    None, True, 3, -7, 1.5, "s", [1, [2, "x"]], {"a": 1}, {1: [2]}, {3, 4}, 2**53 - 1, -(2**53 - 1),
])
def test_plain_values_roundtrip(value):
    got = decode_value(encode_value(value))
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("value, tag", [
    ((1, (2, "x")), "__tuple__"),
    ((), "__tuple__"),
    ({(1, 2), (3, 4)}, "__set__"),
    (frozenset({(1,)}), "__frozenset__"),
    (bytearray(b"\x01z"), "__bytearray__"),
    ({(1, 2): "t", (3,): [()]}, "__dict__"),
    (b"\x00\xffab", "__bytes__"),
    (1 + 2j, "__complex__"),
    (2**100, "__int__"),
    (-2**60, "__int__"),
    (2**53, "__int__"),
])
def test_tagged_values_roundtrip_with_their_types(value, tag):
    encoded = encode_value(value)
    assert tag in encoded
    got = decode_value(encoded)
    assert got == value and type(got) is type(value)


def test_tuples_stay_tuples_inside_containers():
    got = decode_value(encode_value([(1, 2), {"k": (3,)}]))
    assert got == [(1, 2), {"k": (3,)}] and type(got[0]) is tuple and type(got[1]["k"]) is tuple


def test_big_ints_travel_as_hex():
    assert encode_value(2**100) == {"__int__": hex(2**100)}
    assert encode_value(-2**60) == {"__int__": "-0x1000000000000000"}
    assert decode_value({"__int__": "123"}) == 123  # a decimal string is read too


def test_bytearray_decodes_as_bytes():
    assert decode_value(encode_value(bytearray(b"ab"))) == b"ab"


def test_subclass_of_a_plain_type_becomes_the_plain_type():
    encoded = encode_value(_LyingInt(5))
    assert encoded == 5 and type(encoded) is int
    assert decode_value(encode_value([_LyingInt(1)])) == [1]
    assert decode_value(encode_value(_LyingInt(2**60))) != 7  # no lying __eq__ survives the trip
    assert type(encode_value(_Str("x"))) is str


@pytest.mark.parametrize("value, check", [
    (float("nan"), math.isnan),
    (float("inf"), lambda x: x == math.inf),
    (float("-inf"), lambda x: x == -math.inf),
    (complex(float("nan"), 1.0), lambda x: math.isnan(x.real) and x.imag == 1.0),
])
def test_non_finite_floats_roundtrip(value, check):
    got = decode_value(encode_value(value))
    assert type(got) is type(value) and check(got)


def test_unencodable_object_decodes_as_opaque():
    obj = decode_value(encode_value(object()))
    assert isinstance(obj, Opaque) and obj != obj  # an opaque repr equals nothing


@pytest.mark.parametrize("bad", [
    {"__int__": 5},
    {"__int__": "zz"},
    {"__int__": "1" * 5000},  # a 5,000-digit decimal: over Python's digit limit
    {"__int__": "0x" + "f" * (1 << 20)},  # over the length cap
    {"__float__": "not a float"},
    {"__float__": [1]},
    {"__tuple__": 5},
    {"__tuple__": [{"__tuple__": None}]},
    {"__dict__": [[1]]},
    {"__dict__": "abc"},
    {"__set__": 1},
    {"__bytes__": "zz"},
    {"__bytes__": 1},
    {"__complex__": [1]},
    {"__complex__": ["a", "b"]},
    {"__complex__": 5},
    {},
    {"anything": 1},
    {"__tuple__": "abc"},  # a container's members are a list, never a string's characters
    {"__set__": {"a": 1}},
    {"__dict__": [[1, 2, 3]]},
    {"__fraction__": [1]},
    {"__fraction__": [1, 0]},
    {"__fraction__": [1.5, 2]},
    {"__fraction__": [True, 2]},
    {"__fraction__": ["1", "2"]},
    {"__fraction__": {"n": 1, "d": 2}},
    {"__fraction__": [{"__int__": hex(1 << 70000)}, 3]},  # a numerator too large to normalise cheaply
    {"__decimal__": 1.5},
    {"__decimal__": "abc"},
    {"__decimal__": "NaN"},
    {"__decimal__": "-sNaN"},
    {"__decimal__": "nan123"},
    {"__decimal__": "1e999999999"},  # huge exponents
    {"__decimal__": "1e-1000001"},
    {"__decimal__": "1" * 5001},
])
def test_malformed_tag_decodes_as_opaque(bad):
    assert isinstance(decode_value(bad), Opaque)


def test_unhashable_decoded_key_or_member_becomes_opaque():
    got = decode_value({"__dict__": [[{"__dict__": [[1, 2]]}, 3]]})  # a dict cannot be a key
    assert len(got) == 1 and all(isinstance(k, Opaque) for k in got)
    got = decode_value({"__set__": [{"__dict__": []}, {"__dict__": []}]})
    assert len(got) == 2 and all(isinstance(m, Opaque) for m in got)  # and never equal to each other


def test_decode_of_very_deep_nesting_is_opaque():
    deep = 1
    for _ in range(100_000):
        deep = [deep]
    assert isinstance(decode_value(deep), Opaque)
    tagged = 1
    for _ in range(100_000):
        tagged = {"__tuple__": [tagged]}
    assert isinstance(decode_value(tagged), Opaque)


@pytest.mark.parametrize("out, expected", [
    ("sNaN", "sNaN"), ("sNaN", "1"), ("1", "sNaN"), ("sNaN 1", "1 sNaN"), ("-sNaN", "sNaN"),
    ("NaN", "NaN"), ("NaN", "1"), ("nan", "NaN"), ("sNaN123", "NaN123"),
    ("Infinity", "Infinity"), ("Infinity", "inf"), ("-Infinity", "1"), ("1e999999999", "Infinity"),
])
@pytest.mark.parametrize("tol", [None, 1e-6])
def test_stdout_special_tokens_never_raise(out, expected, tol):
    ok, why = compare_stdout(out, expected, tol)
    assert isinstance(ok, bool) and (ok or why)
    if tol is None:
        assert ok is (out == expected or {out, expected} == {"Infinity", "inf"})  # NaNs as text only


@pytest.mark.parametrize("out, expected", [("sNaN", "sNaN"), ("NaN", "NaN"), ("Infinity", "Infinity")])
def test_special_tokens_equal_as_text(out, expected):
    assert compare_stdout(out, expected) == (True, "")


@pytest.mark.parametrize("out, expected", [
    ("NaN", "nan"), ("Infinity", "1e999999999"), ("1 sNaN", "1 NaN"), ("sNaN", "0"), ("inf", "-inf"),
])
def test_special_tokens_never_equal_numerically(out, expected):
    assert compare_stdout(out, expected)[0] is False


def test_infinities_compare_as_livecodebench_compares_them():
    assert compare_stdout("inf", "Infinity")[0] and compare_stdout("1 -inf", "1.0 -Infinity")[0]


def test_call_based_equality():
    assert values_equal((1, 2), [1, 2])                 # a returned tuple -> list (LiveCodeBench)
    assert not values_equal([(1, 2), (3,)], [[1, 2], [3]])  # at the top level only, as LiveCodeBench
    assert not values_equal(((1, 2),), [[1, 2]])
    assert not values_equal(range(3), [0, 1, 2])       # Python's ==, as LiveCodeBench compares
    assert values_equal(decode_value({"__range__": [0, 3, 1]}), range(3))
    assert values_equal(True, 1)                        # Python == semantics
    assert not values_equal({1: 2}, {"1": 2})           # key types are kept
    assert not values_equal({1, 2}, [1, 2])
    assert not values_equal(3, [3])
    assert values_equal(3, [3], unwrap=True)            # APPS/TACO-style wrapped outputs, opt-in
    assert not values_equal(0.1 + 0.2, 0.3)
    assert values_equal(0.1 + 0.2, 0.3, float_tolerance=1e-9)
    assert values_equal([0.1 + 0.2, "a"], [0.3, "a"], float_tolerance=1e-9)


@pytest.mark.parametrize("encoded, expected", [
    ({"__fraction__": [1, 2]}, Fraction(1, 2)),
    ({"__fraction__": [-3, 6]}, Fraction(-1, 2)),
    ({"__fraction__": [{"__int__": hex(2**80)}, 3]}, Fraction(2**80, 3)),
    ({"__decimal__": "1.5"}, Decimal("1.5")),
    ({"__decimal__": "-0.000"}, Decimal("-0.000")),
    ({"__decimal__": "1E+5"}, Decimal("1E+5")),
    ({"__decimal__": "-Infinity"}, Decimal("-Infinity")),
    ({"__decimal__": "9" * 5000}, Decimal("9" * 5000)),
])
def test_fraction_and_decimal_tags_decode(encoded, expected):
    got = decode_value(encoded)
    assert type(got) is type(expected) and got == expected and str(got) == str(expected)


def test_fractions_and_decimals_inside_containers():
    got = decode_value({"__set__": [{"__fraction__": [1, 3]}, {"__decimal__": "2.5"}]})
    assert got == {Fraction(1, 3), Decimal("2.5")}
    got = decode_value([{"__tuple__": [{"__decimal__": "0.1"}]},
                        {"__dict__": [[{"__fraction__": [1, 2]}, 1]]}])
    assert got == [(Decimal("0.1"),), {Fraction(1, 2): 1}]


def test_fractions_and_decimals_compare_like_python():
    assert values_equal(Fraction(1, 2), 0.5) and values_equal(Decimal("1.5"), 1.5)
    assert values_equal(decode_value({"__fraction__": [1, 2]}), 0.5)
    assert values_equal(decode_value({"__decimal__": "1.50"}), 1.5)
    assert values_equal(decode_value({"__fraction__": [4, 2]}), 2)
    assert not values_equal(Decimal("0.1"), 0.1)  # the float 0.1 is not exactly 1/10
    assert not values_equal(Fraction(1, 3), 0.3333333333333333)


def test_forged_hash_collisions_are_refused_quickly():
    m = 2**61 - 1  # every multiple of the hash modulus hashes to 0
    members = [{"__int__": hex(k * m)} for k in range(1, 27_001)]
    assert isinstance(decode_value({"__set__": members}), Opaque)
    assert isinstance(decode_value({"__dict__": [[v, 0] for v in members]}), Opaque)
    assert isinstance(decode_value({"__set__": [{"__tuple__": [v]} for v in members]}), Opaque)
    few = decode_value({"__set__": members[:64]})  # a few shared hashes are fine
    assert isinstance(few, set) and len(few) == 64


def test_large_honest_set_and_dict_still_decode():
    got = decode_value({"__set__": list(range(100_000))})
    assert type(got) is set and got == set(range(100_000))
    got = decode_value({"__dict__": [[k, k] for k in range(100_000)]})
    assert type(got) is dict and len(got) == 100_000


def test_too_many_elements_is_opaque():
    assert isinstance(decode_value([0] * 1_000_001), Opaque)
    assert isinstance(decode_value([[0] * 600_000, [0] * 600_000]), Opaque)  # counted across levels
    assert decode_value([0] * 1_000_000) == [0] * 1_000_000
