"""Tests for ``opgate._json``: strict parsing, exact numbers, the numeric work profile,
canonical bytes, detached copies and the shape of every rejection."""

from __future__ import annotations

import collections
import contextlib
import decimal
import enum
import gc
import json
import pickle
import random
import sys
import time
import types
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from opgate import _json
from opgate._json import (
    MAX_DEPTH,
    PROFILE_LIMIT,
    JSONError,
    JSONValue,
    canonical_bytes,
    canonical_text,
    check_profile,
    detach,
    from_python,
    number_text,
    parse,
    pointer,
)

#: Longest ``str(JSONError)`` any hostile input may produce in these tests.
MESSAGE_BOUND = 240

JSON_TYPES = (type(None), bool, int, Decimal, str, list, dict)

FAST = settings(max_examples=150, deadline=None)
SLOW = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- helpers ---------------------------------------------------------------------------


def rejection(data: Any, *, profile: bool = False) -> JSONError:
    with pytest.raises(JSONError) as info:
        parse(data, profile=profile)
    assert len(str(info.value)) <= MESSAGE_BOUND
    return info.value


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def assert_plain(value: Any) -> None:
    """Only exact JSON types, never a float, anywhere in ``value``."""
    for part in walk(value):
        assert type(part) in JSON_TYPES, type(part)


def same(a: Any, b: Any) -> bool:
    """Deep equality that also requires the same types (int stays int, Decimal stays Decimal)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def equal_numbers(a: Any, b: Any) -> bool:
    """Deep equality where numbers compare by exact value (``1 == Decimal("1.0")``)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, int | Decimal) and isinstance(b, int | Decimal):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal_numbers(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal_numbers(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def nested_arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# --- generated documents ---------------------------------------------------------------

WHITESPACE = " \t\n\r"
SHORT_ESCAPES = dict(
    zip('"\\\b\f\n\r\t', ['\\"', "\\\\", *(f"\\{c}" for c in "bfnrt")], strict=True)
)


def spell_string(rnd: random.Random, text: str) -> str:
    """A random valid JSON spelling of ``text`` (literal, short or \\u escapes, any hex case)."""

    def unit(code: int) -> str:
        hex_digits = f"{code:04x}"
        return "\\u" + (hex_digits.upper() if rnd.random() < 0.5 else hex_digits)

    out = ['"']
    for char in text:
        code = ord(char)
        must_escape = char in '"\\' or code < 0x20
        if not must_escape and rnd.random() < 0.7:
            out.append(char)
        elif char in SHORT_ESCAPES and rnd.random() < 0.5:
            out.append(SHORT_ESCAPES[char])
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(unit(0xD800 + (code >> 10)) + unit(0xDC00 + (code & 0x3FF)))
        else:
            out.append(unit(code))
    out.append('"')
    return "".join(out)


def exact(text: str) -> Decimal:
    """``Decimal(text)`` exactly, whatever the context's precision."""
    return Decimal(text)


def spell_number(rnd: random.Random, value: int | Decimal) -> str:
    """A random valid JSON spelling of the exact value (padding zeros, point, exponent)."""
    sign, digit_tuple, exponent = Decimal(value).as_tuple()
    assert isinstance(exponent, int)
    pad = rnd.randrange(4)
    digits = "".join(map(str, digit_tuple)) + "0" * pad
    exponent -= pad
    point = rnd.randrange(len(digits) + 1)
    leading = rnd.randrange(3) if point == 0 else 0  # zeros right after "0."
    whole = digits[:point].lstrip("0") or "0"
    fraction = "0" * leading + digits[point:]
    written = exponent + len(digits) - point + leading
    text = ("-" if sign else "") + whole + ("." + fraction if fraction else "")
    if written or rnd.random() < 0.3:
        mark = rnd.choice("eE")
        sign_text = "-" if written < 0 else rnd.choice(["", "+"])
        text += f"{mark}{sign_text}{'0' * rnd.randrange(2)}{abs(written)}"
    assert Decimal(text) == Decimal(value)
    return text


class Dup(dict[str, Any]):
    """A generated object that ``dump`` writes with its last member name repeated."""


class Key(str):
    """A member name that equals only itself, so a Python dict can hold it twice."""

    __slots__ = ()

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


class Marker(enum.Enum):
    """A deliberately bad token to place in a generated document."""

    NAN = "NaN"
    HUGE_EXPONENT = "1e99999999999999999999999"
    OUT_OF_PROFILE = "1e4097"
    LONE_SURROGATE = '"\\udc00"'


def dump(rnd: random.Random, value: object) -> str:
    """Serialize a JSON value (or a Marker) with random whitespace and random spellings."""

    def ws() -> str:
        return "".join(rnd.choice(WHITESPACE) for _ in range(rnd.choice([0, 0, 0, 1, 2])))

    if isinstance(value, Marker):
        return value.value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | Decimal):
        return spell_number(rnd, value)
    if isinstance(value, str):
        return spell_string(rnd, value)
    if isinstance(value, list):
        return "[" + ws() + ",".join(ws() + dump(rnd, item) + ws() for item in value) + ws() + "]"
    assert isinstance(value, dict)
    members = [
        ws() + spell_string(rnd, key) + ws() + ":" + ws() + dump(rnd, item) + ws()
        for key, item in value.items()
    ]
    if isinstance(value, Dup):
        members.append(spell_string(rnd, list(value)[-1]) + ":0")
    return "{" + ws() + ",".join(members) + ws() + "}"


finite_decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
    lambda d: abs(d.adjusted()) < 10**6
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | finite_decimals
    | st.builds(
        lambda c, e: exact(f"{c}e{e}"), st.integers(-(10**30), 10**30), st.integers(-30, 30)
    )
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=24,
).map(from_python)


# --- strict parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1, "a": 2}', "/a"),
        ('{"a": 1, "\\u0061": 2}', "/a"),
        ('{"x": [0, {"b": 1, "c": 2, "b": 3}]}', "/x/1/b"),
        ('[0, {"x": 1, "x": 2}]', "/1/x"),
        ('{"a/b": {"m~n": [1, {"k": 1, "k": 2}]}}', "/a~1b/m~0n/1/k"),
        ('{"a": {"a": 1}, "b": 1, "b": 2}', "/b"),
        ('{"": 1, "": 2}', "/"),
    ],
)
def test_duplicate_member_names_fail_with_their_pointer(text: str, where: str) -> None:
    error = rejection(text)
    assert "duplicate object member name" in error.reason
    assert error.pointer == where
    rejection(text.encode())
    rejection(text, profile=True)


def test_same_names_in_different_objects_are_fine() -> None:
    assert parse('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}') == {
        "a": {"a": 1},
        "b": [{"a": 2}, {"a": 3}],
    }


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("NaN", ""),
        ("Infinity", ""),
        ("-Infinity", ""),
        ("[1, NaN]", "/1"),
        ('{"a": Infinity}', "/a"),
        ("[[], [[-Infinity]]]", "/1/0/0"),
        ('[{}, [], {"a": [{}, 1, NaN]}]', "/2/a/2"),
    ],
)
def test_nan_and_infinities_fail(text: str, where: str) -> None:
    error = rejection(text)
    assert "is not a JSON number" in error.reason
    assert error.pointer == where


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "infinity", "+1", ".5", "1.", "01", "-"])
def test_other_non_numbers_are_syntax_errors(text: str) -> None:
    error = rejection(text)
    assert error.reason.startswith("invalid JSON")
    assert error.pointer is None


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ('"\\ud800"', "", "string"),
        ('"\\uDFFF"', "", "string"),
        ('["ok", "x\\udc00y"]', "/1", "string"),
        ('{"a": ["ok", "\\ud83d"]}', "/a/1", "string"),
        ('"\\ud83d\\u0041"', "", "string"),
        ('"\\ude00\\ud83d"', "", "string"),
        ('{"\\ud800": 1}', "/\ud800", "member name"),
        ('{"k": {"\\udbff": 1}}', "/k/\udbff", "member name"),
        ('"\ud800"', "", "string"),  # raw surrogate characters in str input
        ('["\udfff"]', "/0", "string"),
        ('{"\udc00x": 1}', "/\udc00x", "member name"),
        ('"\\ud83d\ude00"', "", "string"),  # escaped high half, raw low half
    ],
)
def test_lone_surrogates_fail(text: str, where: str, what: str) -> None:
    error = rejection(text)
    assert error.reason == f"{what} contains a lone surrogate"
    assert error.pointer == where
    str(error).encode("utf-8")  # the message itself is safe to encode


def test_surrogate_pairs_and_other_escapes_decode() -> None:
    assert parse('"\\ud83d\\ude00"') == "\U0001f600"
    assert parse('"\\uD83D\\uDE00"') == "\U0001f600"
    assert parse('"\\\\ud800"') == "\\ud800"  # an escaped backslash, not an escape
    assert parse('{"\\u00e9": "\\u2028\\/"}') == {"é": "\u2028/"}
    assert parse('"\U0001f600"') == "\U0001f600"
    assert parse('"\U0001f600"'.encode()) == "\U0001f600"


@pytest.mark.parametrize(
    "data",
    [
        b'"\xff"',
        b"\xc3",
        b'"\xc0\xaf"',  # overlong
        b'"\xed\xa0\x80"',  # an encoded surrogate (CESU-8)
        b'"\xf4\x90\x80\x80"',  # beyond U+10FFFF
        b'{"a": "\x80"}',
    ],
)
def test_invalid_utf8_fails(data: bytes) -> None:
    error = rejection(data)
    assert error.reason.startswith("invalid UTF-8 at byte ")
    rejection(bytearray(data))


@pytest.mark.parametrize(
    "text",
    ["{} x", "1 2", "[]]", '"a"b', "{}{}", "[1,]", '{"a":1,}', "", "   ", "\ufeff{}", "{}\x00"],
)
def test_trailing_garbage_and_empty_input_fail(text: str) -> None:
    error = rejection(text)
    assert error.reason.startswith("invalid JSON")
    assert " at line " in error.reason


def test_syntax_errors_give_line_and_column() -> None:
    error = rejection('{\n  "a": 1,\n  "b" 2\n}')
    assert error.reason == "invalid JSON: Expecting ':' delimiter at line 3 column 7"
    assert rejection("[1, 2").reason.endswith("at line 1 column 6")
    assert rejection("[1] x").reason == "invalid JSON: Extra data at line 1 column 5"


def test_only_json_whitespace_is_insignificant() -> None:
    assert parse(" \t\r\n[ 1 ,\n2 ] \n") == [1, 2]
    for blank in ["\u00a0", "\f", "\v", "\u2028", "\u3000"]:
        rejection(f"{blank}[1]")
        rejection(f"[1,{blank}2]")


@pytest.mark.parametrize("data", [123, None, 1.5, ["[]"], memoryview(b"[]")])
def test_parse_refuses_non_text(data: Any) -> None:
    assert rejection(data).reason.startswith("expected JSON text, got ")


def test_bytes_bytearray_and_str_parse_alike() -> None:
    text = '{"b": [1, 2.5, "é"], "a": null, "c": true}'
    expected = {"b": [1, Decimal("2.5"), "é"], "a": None, "c": True}
    for data in (text, text.encode(), bytearray(text.encode())):
        assert same(parse(data), expected)
        assert same(parse(data, profile=True), expected)


def test_control_characters_in_strings_fail() -> None:
    for code in (0, 9, 10, 31):
        rejection(f'"a{chr(code)}b"')
    assert parse('"\x7f"') == "\x7f"


# --- nesting -----------------------------------------------------------------------------


def test_nesting_bound_is_exact_in_text() -> None:
    assert parse(nested_arrays(MAX_DEPTH)) is not None
    assert parse(nested_objects(MAX_DEPTH), profile=True) is not None
    array_error = rejection(nested_arrays(MAX_DEPTH + 1))
    assert array_error.reason == f"nesting deeper than {MAX_DEPTH} levels"
    assert array_error.pointer == "/0" * MAX_DEPTH
    object_error = rejection(nested_objects(MAX_DEPTH + 1))
    assert object_error.pointer == "/a" * MAX_DEPTH


@pytest.mark.parametrize(
    "text",
    [
        nested_arrays(100_000),
        nested_objects(100_000),
        "[" * 100_000,
        '{"k":' * 100_000,
        '[{"a":' * 50_000 + "1" + "}]" * 50_000,
        '[{"a": [' * 40_000,
    ],
)
def test_very_deep_text_fails_cleanly(text: str) -> None:
    for data in (text, text.encode()):
        for profile in (False, True):
            error = rejection(data, profile=profile)
            assert error.reason.startswith(f"nesting deeper than {MAX_DEPTH} levels")


def test_brackets_inside_strings_do_not_count() -> None:
    brackets = "[{" * 50_000
    assert parse(f'["{brackets}"]') == [brackets]
    assert parse(f'{{"{brackets}": "]}}{brackets}"}}') == {brackets: "]}" + brackets}
    escaped = '["\\"' + "[" * 1000 + '\\\\", "\\"]"]'
    assert parse(escaped) == ['"' + "[" * 1000 + "\\", '"]']
    # Real nesting still counts around such strings.
    deep = "[" * MAX_DEPTH + f'"{brackets}"' + "]" * MAX_DEPTH
    assert parse(deep) is not None
    rejection("[" + deep + "]")


def test_nesting_bound_in_python_values() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH):
        value = [value]
    assert from_python(value) == value
    check_profile(value)
    assert canonical_bytes(value) == b"[" * MAX_DEPTH + b"1" + b"]" * MAX_DEPTH
    for too_deep in ([value], {"a": value}):
        with pytest.raises(JSONError, match=f"nesting deeper than {MAX_DEPTH}"):
            from_python(too_deep)
        with pytest.raises(JSONError, match=f"nesting deeper than {MAX_DEPTH}"):
            check_profile(too_deep)
        with pytest.raises(JSONError, match=f"nesting deeper than {MAX_DEPTH}"):
            canonical_bytes(too_deep)


def test_very_deep_and_cyclic_python_values_fail_cleanly() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    cyclic_list: list[Any] = []
    cyclic_list.append(cyclic_list)
    cyclic_dict: dict[str, Any] = {}
    cyclic_dict["self"] = {"again": cyclic_dict}
    for value in (deep, cyclic_list, cyclic_dict):
        for call in (from_python, check_profile, canonical_bytes, canonical_text):
            with pytest.raises(JSONError) as info:
                call(value)
            assert info.value.reason == f"nesting deeper than {MAX_DEPTH} levels"
            assert len(str(info.value)) <= MESSAGE_BOUND
        with pytest.raises(JSONError):
            from_python(value, profile=True)
    with pytest.raises(JSONError) as info:
        from_python(cyclic_dict)
    assert info.value.pointer == "/self/again" * (MAX_DEPTH // 2)


# --- exact numbers -------------------------------------------------------------------------


def test_integers_stay_int_and_others_become_decimal() -> None:
    value = parse("[0, -7, 12345678901234567890123, 1.5, 1e2, 1E2, -0.25, 2.50]")
    expected = [0, -7, 12345678901234567890123, Decimal("1.5"), 100, 100, Decimal("-0.25")]
    assert value == [*expected, Decimal("2.5")]
    assert isinstance(value, list)
    # Integral values are ints, others normalized Decimals (issue 9, item 11).
    assert [type(v) for v in value] == [int, int, int, Decimal, int, int, Decimal, Decimal]
    assert str(value[7]) == "2.5"


def test_decimals_are_exact() -> None:
    assert parse("0.1") == Decimal("0.1")
    assert parse("0.1") + parse("0.2") == Decimal("0.3")  # type: ignore[operator]
    assert parse("1e400") == Decimal("1e400")
    assert parse("123456789.123456789123456789") == Decimal("123456789.123456789123456789")
    assert parse("9007199254740993.0") == 9007199254740993  # not rounded through float64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-0", 0),
        ("0", 0),
        ("-0.0", 0),
        ("0e999999999", 0),
        ("0e99999999999999999999999", 0),
        ("-0.000E-99999999999999999999", 0),
        ("0.0e+4097", 0),
    ],
)
def test_zero_normalizes_without_expanding_its_exponent(text: str, expected: int | Decimal) -> None:
    for profile in (False, True):
        value = parse(text, profile=profile)
        assert same(value, expected)
        assert not (isinstance(value, Decimal) and (value.is_signed() or value.as_tuple()[2]))
        assert canonical_bytes(value) == b"0"


def test_integer_digit_limit_is_never_hit() -> None:
    digits = "7" * 5000
    value = parse(digits)
    # Past the profile's 4,096 digits an integer stays an exact Decimal: converting it to
    # an int costs time quadratic in its length (issue 9, items 1 and 11).
    assert type(value) is Decimal
    assert value == int(Decimal(digits))
    assert type(parse("7" * 4096)) is int
    assert parse(f"[-{digits}]") == [-int(Decimal(digits))]
    assert canonical_bytes(value) == ("7." + "7" * 4999 + "e+4999").encode()
    assert canonical_bytes(parse(digits + "0" * 100)) == ("7." + "7" * 4999 + "e+5099").encode()
    error = rejection(digits, profile=True)
    assert error.pointer == ""
    assert "normalized coefficient digits" in error.reason
    assert rejection(f'{{"n": [{digits}]}}', profile=True).pointer == "/n/0"


def test_integer_digit_limit_lowered_by_the_host() -> None:
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        digits = "3" * 1000
        assert parse(f"[{digits}]") == [int(Decimal(digits))]
        assert parse(f"[{digits}]", profile=True) == [int(Decimal(digits))]
        assert parse(f"[{digits}]".encode(), profile=True) == [int(Decimal(digits))]
        big = int(Decimal(digits))
        assert canonical_text(big) == "3." + "3" * 999 + "e+999"
        assert from_python(big, profile=True) == big
        check_profile(int(Decimal("9" * PROFILE_LIMIT)))
        with pytest.raises(JSONError):
            check_profile(int(Decimal("1" + "0" * PROFILE_LIMIT)))
    finally:
        sys.set_int_max_str_digits(previous)


def test_nonzero_exponents_beyond_decimal_fail_cleanly() -> None:
    error = rejection('{"n": 1e99999999999999999999999}')
    assert error.pointer == "/n"
    assert "too large to represent" in error.reason
    assert same(parse("1e999999999999999999"), Decimal("1e999999999999999999"))
    assert canonical_bytes(parse("-2e-999999999999999999")) == b"-2e-999999999999999999"
    rejection("1e999999999999999999", profile=True)


# --- the numeric work profile ----------------------------------------------------------

WRITTEN = "|written exponent|"
ADJUSTED = "|exponent - fraction digits|"
NORMALIZED = "normalized coefficient digits"

PROFILE_CASES: list[tuple[str, str | None]] = [
    # rule 3: normalized coefficient digits + |normalized exponent| <= 4096
    ("1e4095", None),
    ("1e4096", NORMALIZED),
    ("-1E+4095", None),
    ("1e-4095", None),
    ("1e-4096", NORMALIZED),
    ("1" * 4096, None),
    ("-" + "9" * 4096, None),
    ("1" * 4097, NORMALIZED),
    ("1" + "0" * 4095, None),
    ("1" + "0" * 4096, NORMALIZED),
    ("1" * 4000 + "e96", None),
    ("1" * 4000 + "e97", NORMALIZED),
    ("0." + "1" * 2048, None),
    ("0." + "1" * 2049, NORMALIZED),
    ("12.5e4094", None),
    ("12.5e4095", NORMALIZED),
    ("1.5e-4093", None),
    ("1.5e-4094", NORMALIZED),
    # rule 1: |written exponent| <= 4096
    ("0.5e4096", None),
    ("0.001e4096", None),
    ("0.001e4097", WRITTEN),
    ("1e+4097", WRITTEN),
    ("1e-4097", WRITTEN),
    ("100e-4097", WRITTEN),
    ("0.5e0000000004096", None),
    ("0.5e0000000004097", WRITTEN),
    ("1e1000000000", WRITTEN),
    ("1e99999999999999999999", WRITTEN),
    ("1" + "0" * 4096 + "e-4096", None),  # the value is 1
    # rule 2: |written exponent - fraction digits| <= 4096
    ("1." + "0" * 4096, None),
    ("1." + "0" * 4097, ADJUSTED),
    ("1." + "0" * 4100 + "e4", None),
    ("0.1e-4096", ADJUSTED),
    # zero always passes
    ("0e99999999999999999999", None),
    ("-0." + "0" * 9000 + "e-9999", None),
]


@pytest.mark.parametrize(("token", "broken"), PROFILE_CASES, ids=lambda v: str(v)[:24])
def test_profile_boundaries_in_text(token: str, broken: str | None) -> None:
    if broken is None:
        expected = representable(token)
        value = parse(token, profile=True)
        assert value == (0 if expected is None else expected)
        assert parse(f"[{token}]".encode(), profile=True) == [value]
    else:
        error = rejection(f'{{"x": [true, {token}]}}', profile=True)
        assert broken in error.reason
        assert error.pointer == "/x/1"
        assert len(str(error)) < 200


@pytest.mark.parametrize(("token", "broken"), PROFILE_CASES, ids=lambda v: str(v)[:24])
def test_profile_python_values_agree_with_text(token: str, broken: str | None) -> None:
    """A Decimal is its own written form; without a fraction part both paths must agree."""
    number = representable(token)
    if number is None:
        return  # beyond what Python's decimal can hold: there is no Python value to compare
    decimal_broken = _python_verdict(number)
    if "." not in token:
        assert decimal_broken == broken
        parsed = parse(token)
        assert isinstance(parsed, int | Decimal)
        if broken is None:  # normalizing (issue 9, item 11) only lowers the three quantities
            assert _python_verdict(parsed) is None
    elif broken is None:
        # The text passed, so its exponent after moving the point passes as well.
        assert decimal_broken is None
        check_profile(parse(token))


def representable(token: str) -> Decimal | None:
    try:
        return Decimal(token)
    except ArithmeticError:
        return None


def _python_verdict(value: int | Decimal) -> str | None:
    """The rule ``from_python`` and ``check_profile`` cite, checking they agree."""
    verdicts = []
    for call, where in (
        (lambda: from_python([value], profile=True), "/0"),
        (lambda: check_profile({"v": value}), "/v"),
    ):
        error = caught(call)
        if error is None:
            verdicts.append(None)
        else:
            assert error.pointer == where
            verdicts.append(next(r for r in (WRITTEN, ADJUSTED, NORMALIZED) if r in error.reason))
    assert verdicts[0] == verdicts[1]
    return verdicts[0]


def caught(call: Callable[[], object]) -> JSONError | None:
    """The JSONError ``call`` raises, or ``None``; any other exception propagates."""
    try:
        call()
    except JSONError as exc:
        return exc
    return None


def test_profile_for_python_numbers() -> None:
    assert from_python(10**PROFILE_LIMIT - 1, profile=True) == 10**PROFILE_LIMIT - 1
    for big in (10**PROFILE_LIMIT, -(10**PROFILE_LIMIT), 10**20000):
        with pytest.raises(JSONError, match=NORMALIZED):
            from_python(big, profile=True)
        assert from_python(big) == big  # outside the profile is still valid JSON
    for number in (1e308, -1.7976931348623157e308, 5e-324, 0.1, -0.0, 1e16):
        converted = from_python(number, profile=True)
        assert converted == Decimal(repr(number))
        check_profile(number)
    assert same(from_python(Decimal("0E+999999999"), profile=True), 0)
    assert same(from_python(Decimal("-0.000"), profile=True), 0)
    with pytest.raises(JSONError, match=NORMALIZED):
        from_python(Decimal("1" * 10_000), profile=True)
    with pytest.raises(JSONError, match=WRITTEN):
        check_profile([Decimal("1." + "0" * 4097)])
    check_profile([Decimal("1." + "0" * 4096), None, True, "x", {"a": [1, 2.5]}])


def test_check_profile_reports_pointer_of_first_violation() -> None:
    value = parse('{"a": [1, 2, {"b/c": 1e5000}], "d": 1e-5000}')
    with pytest.raises(JSONError) as info:
        check_profile(value)
    assert info.value.pointer in ("/a/2/b~1c", "/d")
    with pytest.raises(JSONError) as info:
        check_profile([[0], [1, 2, 10**5000]])
    assert info.value.pointer == "/1/2"


def test_check_profile_refuses_non_json() -> None:
    cases: list[tuple[Any, str]] = [
        (object(), ""),
        ([1, {2, 3}], "/1"),
        ({"a": float("nan")}, "/a"),
        ({"a": {1: 2}}, "/a"),
    ]
    for value, where in cases:
        with pytest.raises(JSONError) as info:
            check_profile(value)
        assert info.value.pointer == where


def _profile_oracle(token: str) -> str | None:
    """The spec's rule, computed independently through ``Decimal``'s own parsing."""
    _, _, exponent_text = token.lower().partition("e")
    written = int(exponent_text) if exponent_text else 0
    value = Decimal(token)
    if value.is_zero():
        return None
    if abs(written) > PROFILE_LIMIT:
        return WRITTEN
    _, digits, adjusted = value.as_tuple()  # Decimal keeps the decimal point's position
    assert isinstance(adjusted, int)
    if abs(adjusted) > PROFILE_LIMIT:
        return ADJUSTED
    trailing = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    if len(digits) - trailing + abs(adjusted + trailing) > PROFILE_LIMIT:
        return NORMALIZED
    return None


near_limit = st.integers(-8, 8).map(lambda d: PROFILE_LIMIT + d)


@st.composite
def boundary_tokens(draw: st.DrawFn) -> str:
    """Number tokens whose three profile quantities sit near 4,096."""
    digits = draw(
        st.one_of(
            st.integers(1, 12),
            near_limit,
            near_limit.map(lambda n: n // 2),
            near_limit.map(lambda n: n - 1000),
        )
    )
    rnd = random.Random(draw(st.integers(0, 2**32)))  # cheap bulk digits
    body = rnd.choice("123456789") + "".join(rnd.choices("0123456789", k=digits - 1))
    body = body.rstrip("0") + "0" * draw(st.sampled_from([0, 0, 1, 5, 50, 2000, 4097]))
    point = draw(st.sampled_from([0, 1, len(body) - 1, len(body)]) | st.integers(0, len(body)))
    whole, fraction = body[:point].lstrip("0") or "0", body[point:]
    if draw(st.booleans()):
        fraction = "0" * draw(st.sampled_from([1, 10, 2048, 4095])) + fraction
    token = draw(st.sampled_from(["", "-"])) + whole + ("." + fraction if fraction else "")
    exponent = draw(
        st.one_of(st.none(), near_limit, near_limit.map(lambda e: -e), st.integers(-4200, 4200))
    )
    if exponent is not None:
        token += draw(st.sampled_from(["e", "E"])) + ("+" if exponent >= 0 else "") + str(exponent)
    return token


@given(boundary_tokens())
@FAST
@example("1e4096")
@example("0.5e4096")
@example("1." + "0" * 4097)
def test_profile_matches_the_rule_text(token: str) -> None:
    check_token_against_rule_text(token)


@pytest.mark.slow
@given(boundary_tokens())
@SLOW
def test_profile_matches_the_rule_text_long(token: str) -> None:
    check_token_against_rule_text(token)


def check_token_against_rule_text(token: str) -> None:
    expected = _profile_oracle(token)
    error = caught(lambda: parse(token, profile=True))
    if error is not None:
        assert expected is not None
        assert expected in error.reason
    else:
        assert expected is None
        check_profile(parse(token))  # a Decimal keeps its exponent after the point moves
    if "." not in token and (number := representable(token)) is not None:
        assert _python_verdict(number) == expected  # the Decimal as written


# --- canonical bytes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "group",
    [
        ["1", "1.0", "1e0", "10e-1", "0.1e1", "100E-2", "1.000", "0.0001e4", "1E+0"],
        ["-0", "-0.0", "0", "0e5", "-0e-5", "0.000"],
        ["123.45", "123.4500", "12345e-2", "1.2345e2", "0.0012345E5"],
        ["1e21", "1000000000000000000000", "10e20", "1.0e+21"],
    ],
)
def test_equal_numbers_share_canonical_bytes(group: list[str]) -> None:
    assert len({canonical_bytes(parse(text)) for text in group}) == 1


@pytest.mark.parametrize(
    ("text", "spelling"),
    [
        ("1e21", "1e+21"),
        ("-1e21", "-1e+21"),
        ("1e20", "100000000000000000000"),
        ("100000000000000000000", "100000000000000000000"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("0.0000001234", "1.234e-7"),
        ("123.4500", "123.45"),
        ("-1.5E-10", "-1.5e-10"),
        ("1.5e300", "1.5e+300"),
        ("1e6", "1000000"),
        ("12345678901234567890123", "1.2345678901234567890123e+22"),
        ("123456789012345678901.5", "123456789012345678901.5"),
        ("1234567890123456789012.5", "1.2345678901234567890125e+21"),
        ("0.5", "0.5"),
        ("-0.25e1", "-2.5"),
        ("25e-1", "2.5"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("0e-10", "0"),
        ("9.999e20", "999900000000000000000"),
        ("1.23e-6", "0.00000123"),
        ("1.23e-7", "1.23e-7"),
    ],
)
def test_number_spelling(text: str, spelling: str) -> None:
    assert canonical_bytes(parse(text)) == spelling.encode()
    assert number_text(parse(text)) == spelling  # type: ignore[arg-type]


def test_results_do_not_depend_on_the_decimal_context() -> None:
    text = "[1E+3, 0.1234567, 1.5e300, 123456789012345678901234567890.5, 1e99999999999999999999]"
    with decimal.localcontext() as context:
        context.prec = 3
        context.rounding = decimal.ROUND_DOWN
        context.capitals = 0
        context.traps[decimal.InvalidOperation] = False
        assert rejection(text).pointer == "/4"
        value = parse(text[: text.rindex(",")] + "]", profile=True)
        spelled = canonical_text(value)
        assert from_python(value) == value
        check_profile(value)
    assert spelled == "[1000,0.1234567,1.5e+300,1.234567890123456789012345678905e+29]"


def test_number_text_refuses_non_numbers() -> None:
    for value in (True, Decimal("NaN"), Decimal("-Infinity"), Decimal("sNaN"), "1", 1.5):
        with pytest.raises(JSONError):
            number_text(value)  # type: ignore[arg-type]
    assert number_text(Decimal("-0E+5")) == "0"
    assert number_text(-(10**21)) == "-1e+21"


def _ecmascript_spelling(value: Decimal) -> str:
    """ECMAScript Number::toString steps 5-10, applied literally to an exact decimal."""
    if value.is_zero():
        return "0"
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    s = "".join(map(str, digit_tuple)).rstrip("0")
    k = len(s)
    n = exponent + len(digit_tuple) - 1 + 1  # s * 10^(n-k) is the value
    minus = "-" if sign else ""
    if k <= n <= 21:
        return minus + s + "0" * (n - k)
    if 0 < n <= 21:
        return minus + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return minus + "0." + "0" * -n + s
    e = n - 1
    exp_text = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return minus + s + "e" + exp_text
    return minus + s[0] + "." + s[1:] + "e" + exp_text


@given(st.integers(-(10**25), 10**25), st.integers(-40, 40))
@FAST
def test_number_spelling_follows_ecmascript(coefficient: int, exponent: int) -> None:
    value = exact(f"{coefficient}e{exponent}")
    assert number_text(value) == _ecmascript_spelling(value)
    if exponent >= 0:
        assert number_text(coefficient * 10**exponent) == _ecmascript_spelling(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
@FAST
def test_float_spelling_matches_ecmascript_shortest_digits(number: float) -> None:
    # A float's repr has the shortest round-trip digits, as ECMAScript's Number::toString.
    assert canonical_text(number) == _ecmascript_spelling(Decimal(repr(number)))
    # Every float is inside the profile, on the Python path and as the text it spells.
    converted = from_python(number, profile=True)
    check_profile(number)
    assert same(parse(repr(number), profile=True), converted)


def test_keys_sort_by_utf16_code_units() -> None:
    value = {"\ue000": 1, "\U0001f600": 2, "a": 3, "é": 4, "\uffff": 5, "": 6, "aa": 7}
    assert canonical_text(value) == (
        '{"":6,"a":3,"aa":7,"é":4,"\U0001f600":2,"\ue000":1,"\uffff":5}'
    )
    # Code point order would put U+E000 first.
    assert sorted(["\ue000", "\U0001f600"]) == ["\ue000", "\U0001f600"]
    assert canonical_bytes(parse('{"\\ue000": 1, "\\ud83d\\ude00": 2}')) == (
        '{"\U0001f600":2,"\ue000":1}'.encode()
    )


def test_canonical_text_has_no_insignificant_whitespace_and_keeps_meaning() -> None:
    text = ' {\n "b" : [ 3 , 1 , 2 ] ,\t"a" : { "y" : " x y " , "x" : null } } '
    assert canonical_bytes(parse(text)) == b'{"a":{"x":null,"y":" x y "},"b":[3,1,2]}'
    assert canonical_bytes(parse('["b", "a", "B"]')) == b'["b","a","B"]'
    assert canonical_bytes(parse('"\\u0041\\/"')) == canonical_bytes(parse('"A/"')) == b'"A/"'
    assert canonical_bytes(parse("[true, false, null, {}, []]")) == b"[true,false,null,{},[]]"


def test_string_escaping_follows_rfc8785() -> None:
    value = '"\\\b\f\n\r\t\x00\x01\x1f\x7f/é\u2028\U0001f600'
    assert canonical_text(value) == (
        '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f/é\u2028\U0001f600"'
    )
    assert canonical_bytes(value) == canonical_text(value).encode("utf-8")


def test_canonical_accepts_what_from_python_accepts() -> None:
    value = {"t": (1, 2.5, Decimal("1.50")), "n": collections.OrderedDict(b=True, a=None)}
    assert canonical_bytes(value) == b'{"n":{"a":null,"b":true},"t":[1,2.5,1.5]}'  # type: ignore[arg-type]
    assert canonical_bytes(value) == canonical_bytes(from_python(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, float("inf")]}, "/a/1"),
        ({"a": Decimal("NaN")}, "/a"),
        ([{"x": "\ud800"}], "/0/x"),
        ({"\udc00": 1}, "/\udc00"),
        ({1: 2}, ""),
        ([object()], "/0"),
        ({"s": {1, 2}}, "/s"),
    ],
)
def test_canonical_refuses_non_json_with_pointer(value: Any, where: str) -> None:
    for call in (canonical_bytes, canonical_text, from_python):
        with pytest.raises(JSONError) as info:
            call(value)
        assert info.value.pointer == where


# --- Python values and detached copies -----------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    __slots__ = ()


class Amount(Decimal):
    __slots__ = ()


def test_from_python_normalizes_to_plain_types() -> None:
    value = from_python(
        types.MappingProxyType(
            {
                Name("k"): (Color.RED, Name("v"), Amount("1.5"), 0.1, -0.0, Decimal("-0")),
                "d": collections.OrderedDict(z=[None, True, False]),
            }
        )
    )
    assert value == {
        "k": [1, "v", Decimal("1.5"), Decimal("0.1"), 0, 0],
        "d": {"z": [None, True, False]},
    }
    assert_plain(value)
    assert isinstance(value, dict)
    assert [type(item) for item in value["k"]] == [int, str, Decimal, Decimal, int, int]  # type: ignore[union-attr]
    assert all(type(key) is str for key in value)


def test_from_python_refuses_non_json() -> None:
    cases: list[tuple[Any, str, str]] = [
        (float("nan"), "", "NaN and infinities"),
        ([Decimal("Infinity")], "/0", "NaN and infinities"),
        ({"a": b"bytes"}, "/a", "bytes is not a JSON value"),
        ({"a": {1: 2}}, "/a", "member names must be strings, not int"),
        ({Key("x"): 1, Key("x"): 2}, "/x", "duplicate object member name 'x'"),
        ({"a": {"x"}}, "/a", "set is not a JSON value"),
        ("ok\udfff", "", "string contains a lone surrogate"),
        ({"a\ud800": 1}, "/a\ud800", "member name contains a lone surrogate"),
    ]
    for value, where, what in cases:
        with pytest.raises(JSONError) as info:
            from_python(value)
        assert info.value.pointer == where
        assert what in info.value.reason


def test_from_python_returns_a_detached_copy() -> None:
    original: dict[str, Any] = {"a": [1, {"b": [2]}], "c": {"d": "e"}}
    copy = from_python(original)
    assert copy == original
    assert isinstance(copy, dict)
    copy["a"][1]["b"].append(3)
    copy["c"]["new"] = 1
    copy["z"] = 0
    assert original == {"a": [1, {"b": [2]}], "c": {"d": "e"}}
    original["a"].append("later")
    assert copy["a"] == [1, {"b": [2, 3]}]
    shared = [part for part in walk(copy) if isinstance(part, list | dict)]
    originals = {id(part) for part in walk(original) if isinstance(part, list | dict)}
    assert not {id(part) for part in shared} & originals


def test_detach_copies_every_container() -> None:
    value = parse('{"a": [1, {"b": [2, 3]}], "c": "x", "d": 1.5}')
    copy = detach(value)
    assert same(copy, value)
    assert isinstance(copy, dict)
    copy["a"][1]["b"].clear()  # type: ignore[index]
    copy["c"] = "changed"
    assert same(value, parse('{"a": [1, {"b": [2, 3]}], "c": "x", "d": 1.5}'))
    assert detach(None) is None
    assert detach("s") == "s"


def _containers(value: object) -> list[object]:
    found: list[object] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


_DECIMAL_TREES = st.recursive(
    st.sampled_from([Decimal("0.5"), Decimal("-1.25"), 3, "s", None, True]),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)
    ),
    max_leaves=40,
)


@FAST
@given(_DECIMAL_TREES)
def test_detach_copies_every_container_of_trees_with_decimals(value: object) -> None:
    # Trees holding Decimals are copied by pickle or, when Decimals outnumber the
    # containers, level by level: either way equal, type for type, with no container
    # shared with the original.
    if not isinstance(value, dict | list):
        return
    copy = detach(value)  # type: ignore[arg-type]
    assert same(copy, value)
    originals = {id(item) for item in _containers(value)}
    assert originals.isdisjoint(id(item) for item in _containers(copy))


def test_detach_of_many_decimals_shares_only_the_numbers() -> None:
    value = parse("[" + ",".join(f"0.{i + 1}" for i in range(2000)) + ',{"a":[0.5]}]')
    assert isinstance(value, list)
    copy = detach(value)
    assert isinstance(copy, list)
    assert same(copy, value)
    assert copy is not value
    assert copy[-1] is not value[-1]
    copy[-1]["a"].append(1)  # type: ignore[index]
    assert value[-1] == {"a": [Decimal("0.5")]}


def test_parse_hands_out_fresh_values() -> None:
    text = '{"a": [1], "b": {"c": 2}}'
    first = parse(text)
    assert isinstance(first, dict)
    first["a"].append(2)  # type: ignore[union-attr]
    assert parse(text) == {"a": [1], "b": {"c": 2}}


def test_pointer_escapes_rfc6901() -> None:
    assert pointer([]) == ""
    assert pointer(["a/b", "m~n", 0, ""]) == "/a~1b/m~0n/0/"
    assert pointer(("~1", 12)) == "/~01/12"


# --- messages ------------------------------------------------------------------------------


def test_messages_quote_only_a_short_prefix_of_hostile_input() -> None:
    long_name = "k" * 10_000
    error = rejection(f'{{"{long_name}": 1, "{long_name}": 2}}')
    assert "duplicate object member name" in error.reason
    assert error.pointer == "/" + long_name  # the pointer itself is exact
    assert "k" * 100 not in str(error)
    with pytest.raises(JSONError) as info:
        from_python({Key(long_name): 1, Key(long_name): 2})
    assert len(str(info.value)) <= MESSAGE_BOUND
    hostile = [
        "9" * 20_000 + "e99999999999999999999999",
        '{"' + "x" * 10_000 + '": NaN}',
        '{"' + "x" * 10_000 + '\\ud800": 1}',
        '{"' + "x" * 10_000 + '": ' + "1" * 10_000 + ', "' + "x" * 10_000 + '": 0}',
        '["' + "y" * 10_000 + '" "z"]',
        '"' + "y" * 10_000 + "\x01",
        "[" * 200 + '{"' + "x" * 10_000 + '": ' * 200,
    ]
    for text in hostile:
        for profile in (False, True):
            message = str(rejection(text, profile=profile))
            assert "x" * 100 not in message
            assert "y" * 100 not in message
            assert "9" * 100 not in message
    assert len(str(rejection(b"[" + b"\xff" * 10_000))) < 100


def test_error_shape() -> None:
    error = JSONError("bad thing", "/a/0")
    assert isinstance(error, ValueError)
    assert (error.reason, error.pointer, str(error)) == ("bad thing", "/a/0", "bad thing (at /a/0)")
    assert str(JSONError("bad thing", "")) == "bad thing (at the root)"
    assert str(JSONError("bad thing")) == "bad thing"
    assert str(JSONError("bad", "/a\nb")) == "bad (at '/a\\nb')"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, copy.pointer, str(copy)) == (error.reason, error.pointer, str(error))


# --- properties over generated documents -------------------------------------------------


@given(json_values)
@FAST
def test_canonical_form_is_stable(value: JSONValue) -> None:
    assert_plain(value)
    canonical = canonical_bytes(value)
    reparsed = parse(canonical, profile=False)
    assert canonical_bytes(reparsed) == canonical
    assert canonical_text(reparsed) == canonical.decode("utf-8")
    assert equal_numbers(reparsed, value)


@given(json_values, st.randoms(use_true_random=False))
@FAST
def test_parse_agrees_with_stdlib_and_canonical_ignores_spelling(
    value: JSONValue, rnd: random.Random
) -> None:
    text = dump(rnd, value)
    parsed = parse(text)
    assert_plain(parsed)
    assert equal_numbers(parsed, value)
    stdlib = json.loads(text, parse_float=Decimal)
    assert equal_numbers(parsed, stdlib)
    for ours, theirs in zip(walk(parsed), walk(stdlib), strict=True):
        if isinstance(theirs, Decimal):  # integral values become int (issue 9, item 11)
            integral = theirs == theirs.to_integral_value() and theirs.adjusted() < PROFILE_LIMIT
            assert type(ours) is (int if integral else Decimal)
        else:
            assert type(ours) is type(theirs)
    assert canonical_bytes(parsed) == canonical_bytes(value)
    assert same(parse(text.encode()), parsed)


@st.composite
def number_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two spellings of numbers from a small space, so equal values are common."""
    rnd = draw(st.randoms(use_true_random=False))

    def one() -> str:
        coefficient = draw(st.sampled_from([0, 1, 5, 10, 12, 100, 125, 1200, 10**22]))
        exponent = draw(st.integers(-8, 8))
        negative = draw(st.booleans())
        value = exact(f"{'-' if negative else ''}{coefficient}e{exponent}")
        if draw(st.booleans()) and exponent >= 0:
            return spell_number(rnd, int(value))
        return spell_number(rnd, value)

    return one(), one()


@given(number_pairs())
@FAST
@example(("1", "1.0"))
@example(("-0", "0e5"))
@example(("1e21", "1000000000000000000000"))
def test_canonical_bytes_equal_iff_numbers_equal(pair: tuple[str, str]) -> None:
    first, second = pair
    equal = Decimal(first) == Decimal(second)
    assert (canonical_bytes(parse(first)) == canonical_bytes(parse(second))) is equal
    as_members = [canonical_bytes(parse(f'{{"n": [{t}]}}')) for t in pair]
    assert (as_members[0] == as_members[1]) is equal


@given(st.integers(-(10**30), 10**30), st.integers(-30, 30), st.randoms(use_true_random=False))
@FAST
def test_any_spelling_canonicalizes_like_the_value(
    coefficient: int, exponent: int, rnd: random.Random
) -> None:
    value = exact(f"{coefficient}e{exponent}")
    spellings = {canonical_bytes(parse(spell_number(rnd, value))) for _ in range(4)}
    assert spellings == {canonical_bytes(value)}


# Code point order and UTF-16 order differ between U+E000..U+FFFF and astral characters.
KEY_CHARS = st.sampled_from(["a", "é", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001f600"])


@given(
    st.dictionaries(
        st.lists(KEY_CHARS, max_size=3).map("".join) | st.text(max_size=4),
        st.integers(),
        max_size=8,
    )
)
@FAST
def test_key_order_is_utf16_code_unit_order(value: dict[str, int]) -> None:
    def units(key: str) -> list[int]:
        encoded = key.encode("utf-16-be")
        return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]

    reparsed = parse(canonical_bytes(value))
    assert isinstance(reparsed, dict)
    assert list(reparsed) == sorted(value, key=units)


@st.composite
def documents_with_one_problem(draw: st.DrawFn) -> tuple[str, str, Marker | None, bool]:
    """A document with one bad token or one repeated member name, and its pointer.

    Returns ``(text, pointer, marker or None for a duplicate, profile)``.
    """
    rnd = draw(st.randoms(use_true_random=False))
    value: Any = detach(draw(json_values))
    profile = draw(st.booleans())
    if profile:
        try:
            check_profile(value)
        except JSONError:
            profile = False
    path: list[str | int] = []
    parent: Any = None
    node = value
    while isinstance(node, list | dict) and node and draw(st.booleans()):
        keys: list[Any] = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        parent, node = node, node[key]
        path.append(key)
    marker = draw(st.sampled_from([*Marker, None]))
    replacement: Any
    if marker is None:
        replacement = Dup(node if isinstance(node, dict) and node else {"dup": 0})
        where = pointer([*path, list(replacement)[-1]])
    else:
        replacement = marker
        where = pointer(path)
    if parent is None:
        value = replacement
    else:
        parent[path[-1]] = replacement
    return dump(rnd, value), where, marker, profile


EXPECTED_REASON = {
    None: "duplicate object member name",
    Marker.NAN: "NaN is not a JSON number",
    Marker.LONE_SURROGATE: "string contains a lone surrogate",
    Marker.OUT_OF_PROFILE: WRITTEN,
}


@given(documents_with_one_problem(), st.booleans())
@FAST
def test_rejections_point_at_the_problem(
    document: tuple[str, str, Marker | None, bool], as_bytes: bool
) -> None:
    text, where, marker, profile = document
    data: str | bytes = text.encode() if as_bytes else text
    if marker is Marker.OUT_OF_PROFILE and not profile:
        assert parse(data) is not None  # outside the profile is still valid JSON
        return
    error = rejection(data, profile=profile)
    assert error.pointer == where
    if marker is Marker.HUGE_EXPONENT:
        assert (WRITTEN if profile else "too large to represent") in error.reason
    else:
        assert EXPECTED_REASON[marker] in error.reason


# --- fuzzing: only JSONError may escape ------------------------------------------------------

JSON_ALPHABET = list('[]{}",:0123456789eE.-+ \\utrfalsnNIiy\t\n\x00\ud800\udc00é\U0001f600')
fuzz_text = st.text(st.sampled_from(JSON_ALPHABET), max_size=40) | st.text(max_size=40)


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    """A valid document with a few random edits."""
    rnd = draw(st.randoms(use_true_random=False))
    text = dump(rnd, draw(json_values))
    for _ in range(draw(st.integers(1, 4))):
        position = rnd.randrange(len(text) + 1)
        edit = rnd.choice(["insert", "delete", "replace"])
        char = rnd.choice(JSON_ALPHABET)
        if edit == "insert":
            text = text[:position] + char + text[position:]
        elif edit == "delete":
            text = text[:position] + text[position + 1 :]
        else:
            text = text[:position] + char + text[position + 1 :]
    return text


def check_fuzz_input(data: str | bytes, profile: bool) -> None:
    error = caught(lambda: parse(data, profile=profile))
    if error is not None:
        assert error.reason
        assert len(str(error)) <= MESSAGE_BOUND
        return
    value = parse(data, profile=profile)
    assert_plain(value)
    text = data if isinstance(data, str) else data.decode("utf-8")
    assert equal_numbers(value, json.loads(text, parse_float=Decimal))
    assert canonical_bytes(parse(canonical_bytes(value))) == canonical_bytes(value)


@given(fuzz_text | mutated_documents(), st.booleans())
@FAST
def test_fuzz_text_raises_only_json_error(text: str, profile: bool) -> None:
    check_fuzz_input(text, profile)


@given(
    st.binary(max_size=40) | mutated_documents().map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.booleans(),
)
@FAST
def test_fuzz_bytes_raises_only_json_error(data: bytes, profile: bool) -> None:
    check_fuzz_input(data, profile)


@pytest.mark.slow
@given(fuzz_text | mutated_documents(), st.booleans())
@SLOW
def test_fuzz_text_long(text: str, profile: bool) -> None:
    check_fuzz_input(text, profile)


@pytest.mark.slow
@given(
    st.binary(max_size=200) | mutated_documents().map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.booleans(),
)
@SLOW
def test_fuzz_bytes_long(data: bytes, profile: bool) -> None:
    check_fuzz_input(data, profile)


# --- linear time (issue 9, item 1) ------------------------------------------------------------


def unterminated_escaped_quotes(size: int) -> str:
    """An unterminated string of escaped quotes whose tail looks like deep nesting."""
    tail = "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2)
    return '"' + '\\"' * ((size - len(tail)) // 2) + tail


def stray_escaped_quotes(size: int) -> str:
    """Escaped quotes outside any string, then deep nesting."""
    tail = "[" * (MAX_DEPTH + 2)
    return "[" + '\\"' * ((size - len(tail)) // 2) + tail


def closed_escaped_quotes(size: int) -> str:
    """A closed string of escaped quotes, then nesting one level too deep (the locator path)."""
    tail = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    return '["' + '\\"' * ((size - len(tail)) // 2) + '",' + tail + "]"


def objects_then_repeated_name(size: int) -> str:
    """Many small objects, the last one repeating a name (the repeated-name locator)."""
    return "[" + '{"k":[1]},' * ((size - 20) // 10) + '{"x":1,"x":2}]'


def strings_then_refused_number(size: int) -> str:
    """Many strings, some spelling the refused number, then that number (its locator)."""
    number = "1e99999999999999999999"  # too large to represent, with or without the profile
    return "[" + f'"{number}",' * ((size - 30) // 25) + number + "]"


def repeated_name_then_syntax_error(size: int) -> str:
    """Many small objects, one repeating a name, then a syntax error."""
    return "[" + '{"k":[1]},' * ((size - 30) // 10) + '{"k":1,"k":2},x]'


def wide_levels_around_a_repeated_name(size: int) -> str:
    """Levels of 40 small objects, one level deeper per 330 bytes, around one repeated name.

    A locator that checks a container's whole subtree at every level above the repeat
    costs depth times the text.
    """
    levels = max(1, min(120, size // 330))
    inner = '{"k":1,"k":2}'
    for _ in range(levels):
        inner = "[" + '{"a":[]},' * 40 + inner + "]"
    return inner


ADVERSARIAL_SHAPES = [
    unterminated_escaped_quotes,
    stray_escaped_quotes,
    closed_escaped_quotes,
    objects_then_repeated_name,
    strings_then_refused_number,
    repeated_name_then_syntax_error,
    wide_levels_around_a_repeated_name,
]


def cpu_per_call(text: str, calls: int, rounds: int) -> float:
    """The least CPU time one ``parse`` of ``text`` took, over ``rounds`` rounds of ``calls``."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            with contextlib.suppress(JSONError):
                parse(text)
        best = min(best, (time.process_time() - start) / calls)
    return best


@pytest.mark.parametrize("shape", ADVERSARIAL_SHAPES)
def test_parse_work_grows_linearly_with_adversarial_input(shape: Callable[[int], str]) -> None:
    # 16 times the input: a linear scanner does about 16 times the work, a quadratic one
    # about 256 times. CPU time (not wall time) of the best of several rounds keeps other
    # processes' load out; the bound leaves a factor of 3 either way. The heap is frozen
    # while timing: a full collection pass (which parse's paused collector may trigger
    # when it resumes) walks the whole test process, tens of milliseconds in the full
    # suite. A virtual machine's speed also changes by 2x from one moment to the next,
    # so a ratio over the bound is measured again, both sizes in turn, before failing.
    small, large = shape(2 * 1024), shape(32 * 1024)
    gc.collect()
    gc.freeze()
    try:
        small_time = cpu_per_call(small, calls=64, rounds=5)
        large_time = cpu_per_call(large, calls=4, rounds=1)
        for _ in range(6):
            if large_time <= 48 * max(small_time, 1e-6):
                break
            # Single calls: the least of several is the input's cost, not the machine's.
            time.sleep(0.05)
            small_time = min(small_time, cpu_per_call(small, calls=64, rounds=2))
            large_time = min(large_time, cpu_per_call(large, calls=1, rounds=12))
    finally:
        gc.unfreeze()
    assert large_time <= 48 * max(small_time, 1e-6), (small_time, large_time)


def test_unterminated_string_is_reported_as_such_not_as_nesting() -> None:
    for size in (1024, 16 * 1024):
        error = rejection(unterminated_escaped_quotes(size))
        assert "Unterminated string" in error.reason
        assert "nesting" not in error.reason
    error = rejection(stray_escaped_quotes(1024))
    assert "nesting" not in error.reason


def test_first_problem_in_document_order_wins_over_nesting() -> None:
    error = rejection("[{" * 50_000 + "}]" * 50_000)
    assert error.reason == (
        "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 3"
    )
    error = rejection("[1 2" + "[" * (MAX_DEPTH + 5))
    assert error.reason == "invalid JSON: Expecting ',' delimiter at line 1 column 4"
    error = rejection('[{"a":1,"a":2},' + "[" * (MAX_DEPTH + 5))
    assert error.reason == "duplicate object member name 'a'"
    assert error.pointer == "/0/a"
    # Past the bound, nesting is the first problem even if a syntax error follows.
    error = rejection("[" * (MAX_DEPTH + 1) + "1 2")
    assert error.reason == f"nesting deeper than {MAX_DEPTH} levels"


# --- normalized numbers (issue 9, item 11) -----------------------------------------------------


@pytest.mark.parametrize("profile", [False, True])
def test_integral_numbers_parse_as_int_and_others_as_normalized_decimal(profile: bool) -> None:
    value = parse(
        "[3.0, 3e0, 30e-1, 1E+21, -2.50, 0.10e1, 1.5e3, 12.340, 1e4095, -0.0, 7]", profile=profile
    )
    assert value == [3, 3, 3, 10**21, Decimal("-2.5"), 1, 1500, Decimal("12.34"), 10**4095, 0, 7]
    assert isinstance(value, list)
    assert [type(item) for item in value] == [
        int,
        int,
        int,
        int,
        Decimal,
        int,
        int,
        Decimal,
        Decimal,  # 1e4095: a large exponent stays a normalized Decimal (issue 20, item 6)
        int,
        int,
    ]
    assert str(value[8]) == "1E+4095"
    assert str(value[4]) == "-2.5"
    assert str(value[7]) == "12.34"


def test_python_values_are_normalized_alike() -> None:
    value = from_python([Decimal("3.0"), 3.0, Decimal("1E+21"), 10**21, Decimal("2.50"), 0.5])
    assert value == [3, 3, 10**21, 10**21, Decimal("2.5"), Decimal("0.5")]
    assert isinstance(value, list)
    assert [type(item) for item in value] == [int, int, int, int, Decimal, Decimal]
    assert str(value[4]) == "2.5"
    # A result's int reads back as the same int after a canonical round trip.
    assert parse(canonical_bytes(from_python({"n": 10**21}))) == {"n": 10**21}
    assert type(parse(canonical_bytes(from_python({"n": 10**21})))["n"]) is int  # type: ignore[index]


def test_integral_values_beyond_the_profile_stay_exact_decimals() -> None:
    # Expanding 1e999999 to an int would cost time and memory out of all proportion to the
    # text; only outside the profile (state, unvalidated results) can such a value occur.
    huge = parse("1e999999")
    assert huge == Decimal("1e999999")
    assert isinstance(huge, Decimal)
    long_integer = parse("9" * 5000)
    assert long_integer == int("9" * 4000) * 10**1000 + int("9" * 1000)


# --- fast paths (issue 9, item 1) ------------------------------------------------------------


def test_profiled_integers_use_the_native_path_unless_an_integer_is_too_long() -> None:
    digits = "7" * (PROFILE_LIMIT + 1)
    # Long digit runs inside strings, fractions and exponents are not integers.
    zeros = "0" * (PROFILE_LIMIT + 1)
    text = '{"s":"' + digits + '","n":[1,-2,3],"f":0.' + zeros + '1e4000,"g":1e' + zeros + "1}"
    value = parse(text, profile=True)
    assert isinstance(value, dict)
    assert value["n"] == [1, -2, 3]
    assert value["f"] == Decimal("1e-98")
    assert value["g"] == 10
    # A 4,097-digit integer (still below the interpreter's digit limit) is refused wherever it is.
    for integer in (digits, "-" + digits):
        with pytest.raises(JSONError) as caught:
            parse('{"s":"' + digits + '","n":[1,' + integer + "]}", profile=True)
        assert caught.value.pointer == "/n/1"
        assert caught.value.reason == (
            "number exceeds the numeric work profile "
            f"(normalized coefficient digits + |exponent| ≤ {PROFILE_LIMIT})"
        )
    assert parse("[" + "9" * PROFILE_LIMIT + "]", profile=True) == [int("9" * PROFILE_LIMIT)]


def test_parsed_canonical_bytes_hold_no_spare_buffer() -> None:
    # Registries keep these bytes for every distinct schema: the encoder's growth buffer
    # must not stay attached to them (kept as written, 22 MB of real schemas held 61 MB).
    import tracemalloc

    from opgate._json import parsed_canonical_bytes

    documents = [{"type": "object", "properties": {"n": {"maximum": i}}} for i in range(2000)]
    tracemalloc.start()
    try:
        kept = [parsed_canonical_bytes(document) for document in documents]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    written = sum(map(len, kept))
    assert held < 2 * written + 100 * len(kept), (held, written)


def test_parsed_canonical_bytes_equals_canonical_bytes() -> None:
    import random
    from decimal import Decimal

    from opgate._json import canonical_bytes, from_python, parsed_canonical_bytes

    rng = random.Random(4)
    scalars: list[object] = [
        0,
        -1,
        10**20,
        10**21,
        -(10**25),
        12345678901234567890123,
        True,
        False,
        None,
        Decimal("1.5"),
        Decimal("-0.001"),
        Decimal("1e-7"),
        1e21,
        0.1,
        "a",
        "é\u00ff",
        "\U0001f600",
        "\ue000",
        'q"\\\n\x01',
        "1234567890123456789012",
        2**63,
        2**64 - 1,  # 20 digits: written in full by both
        2**64,  # past 64 bits: the fallback
        -(2**63) - 1,
        10**21 - 1,
        "".join(map(chr, range(0x80))) + "\u2028\u2029\ufeff\ud7ff\uffff",
    ]
    keys = ["a", "B", "é", "\ue000", "\U0001f600", "\U0001f600x", "", "10", "~/", "\x00", "\x7f"]

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.5:
            return rng.choice(scalars)
        if roll < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 5))}

    for _ in range(1500):
        document = from_python(value(0), profile=True)
        assert parsed_canonical_bytes(document) == canonical_bytes(document), document


@pytest.mark.parametrize(
    "value",
    [
        {"a": {"b": ["x", "\ud800"]}},
        {"a": {"\udc00": 1}},
        {"a": [1, {"k": "\udfff"}]},
        {"a": {1: 2}},
        {"a": {"b": 1.5, "c": (1, 2), "d": float("inf")}},
    ],
)
def test_from_python_plain_containers_report_what_the_general_rules_report(value: object) -> None:
    from collections import UserDict

    from opgate._json import JSONError, from_python

    def outcome(candidate: object) -> str:
        try:
            return repr(from_python(candidate, profile=True))
        except JSONError as exc:
            return f"{exc.reason} at {exc.pointer}"

    # A Mapping that is not a dict takes the general, member-by-member path all the way.
    def general(node: object) -> object:
        if isinstance(node, dict):
            return UserDict({key: general(item) for key, item in node.items()})
        if isinstance(node, list):
            return [general(item) for item in node]
        return node

    assert outcome(value) == outcome(general(value))


def test_is_plain_means_from_python_returns_an_equal_copy_type_for_type() -> None:
    import random
    from decimal import Decimal

    from opgate._json import JSONError, from_python, is_plain

    rng = random.Random(7)
    scalars: list[object] = [
        0,
        1,
        True,
        None,
        "a",
        "\ud800",
        1.5,
        2.0,
        Decimal("1"),
        10**5000,
        (1,),
        b"x",
        "é",
    ]

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(scalars)
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        keys: list[object] = ["k", "\udfff", 1, "x"]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 3))}

    def shape(node: object) -> object:
        if isinstance(node, dict):
            return {key: shape(item) for key, item in node.items()}
        if isinstance(node, list):
            return [shape(item) for item in node]
        return (type(node), node)

    plain = 0
    for _ in range(2000):
        candidate = value(0)
        if not is_plain(candidate):
            continue
        plain += 1
        try:
            copy = from_python(candidate, profile=True)
        except JSONError as exc:  # pragma: no cover - the property under test
            raise AssertionError(f"is_plain but refused: {candidate!r}") from exc
        assert shape(copy) == shape(candidate)
    assert plain > 100
    nested: object = 1
    for _ in range(200):
        nested = [nested]
    assert not is_plain(nested)


# --- the C-speed parse path (issue 9, item 1) ----------------------------------------------------


def _number_tokens() -> st.SearchStrategy[str]:
    whole = st.sampled_from(["0", "1", "-1", "10", "-0", "123", "5", "100", "-2", "90000"])
    fraction = st.sampled_from(["", ".0", ".5", ".50", ".05", ".000", ".1234", ".10", ".0001"])
    exponent = st.one_of(
        st.just(""),
        st.integers(-4200, 4200).map(lambda x: f"e{x}"),
        st.integers(0, 4200).map(lambda x: f"E+{x}"),
        st.integers(0, 99).map(lambda x: f"e-0{x}"),
        st.sampled_from(["e4096", "e4095", "e4097", "e-4096", "e-4097", "e99999", "e-999999"]),
    )
    return (
        st.tuples(whole, fraction, exponent)
        .map("".join)
        .filter(lambda t: "." in t or "e" in t.lower())
    )


def _hook_result(token: str, profile: bool) -> object:
    try:
        value = _json._fraction(token, profile)
    except _json._Refused:
        return ("refused",)
    return (type(value), value, str(value))


def _exact_rules(token: str, profile: bool) -> object:
    if profile and _json._token_violation(token) is not None:
        return ("refused",)
    value = _json._decimal(token)
    if value is None:
        return ("refused",)
    number = _json.normalized(value)
    return (type(number), number, str(number))


@FAST
@given(_number_tokens())
@example("1.50")
@example("-0.0e-99999")
@example("12.50e3")
@example("0.001e4097")
@example("1.25")
@example("1.5e99")
def test_the_fast_number_hook_agrees_with_the_exact_rules(token: str) -> None:
    # The parse_float hook answers a short fraction without trailing zeros from its
    # text; everything else by the profile rules and normalization. Same value, type,
    # spelling, refusal.
    for profile in (False, True):
        assert _hook_result(token, profile) == _exact_rules(token, profile)


def _problem_documents() -> st.SearchStrategy[str]:
    """Small documents whose values may repeat names or hold refused numbers."""
    names = st.sampled_from(["a", "b", "k", "a:b", "\\u0061"])
    scalars = st.sampled_from(["1", "1.5", "1e4097", "0.001e4097", '"1e4097"', '"x:y"', "null"])
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
            st.lists(st.tuples(names, inner), max_size=4).map(
                lambda members: "{" + ",".join(f'"{n}":{v}' for n, v in members) + "}"
            ),
        ),
        max_leaves=12,
    )


@FAST
@given(_problem_documents())
def test_problems_are_located_as_the_token_walk_locates_them(text: str) -> None:
    # The reference is the token walk (_locate): the first repeated name or refused
    # number in document order, with its pointer. parse finds it without the walk.
    expected = _json._locate(text, profile=True)
    if expected is None:
        parse(text, profile=True)
    else:
        error = rejection(text, profile=True)
        assert (error.reason, error.pointer) == expected
    # After more openers than MAX_DEPTH, mostly arrays (pre-scan and object hook) or
    # mostly objects (depth and names measured on the decoded value).
    for padding in ("[]," * (MAX_DEPTH + 2), '{"k":1},' * (MAX_DEPTH + 2)):
        padded = "[" + padding + text + "]"
        if expected is None:
            parse(padded, profile=True)
        else:
            error = rejection(padded, profile=True)
            assert error.reason == expected[0]
            assert error.pointer == f"/{MAX_DEPTH + 2}{expected[1]}"


def test_repeated_names_are_found_after_a_hookless_decode() -> None:
    assert parse('{"a:b":1,"c":"x:y","d":{"e":":"}}') == {"a:b": 1, "c": "x:y", "d": {"e": ":"}}
    error = rejection('[{"k":1},{"k":2,"k":3}]')
    assert (error.reason, error.pointer) == ("duplicate object member name 'k'", "/1/k")
    error = rejection('[{"k":[1]},{"x":{"y":1,"y":2}}]')
    assert (error.reason, error.pointer) == ("duplicate object member name 'y'", "/1/x/y")
    # Names compare after decoding escapes.
    error = rejection('{"a":1,"\\u0061":2}')
    assert (error.reason, error.pointer) == ("duplicate object member name 'a'", "/a")


def _json_trees() -> st.SearchStrategy[Any]:
    """JSON values with objects as lists of ``(name, value)`` pairs; few names, so
    repeats are common and can sit at any depth and position."""
    leaves = st.sampled_from([0, "s", None])
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(st.tuples(st.sampled_from("abc"), inner), max_size=4).map(tuple)
        ),
        max_leaves=30,
    )


def _tree_text(tree: Any) -> str:
    if type(tree) is tuple:
        return "{" + ",".join(f'"{name}":{_tree_text(item)}' for name, item in tree) + "}"
    if type(tree) is list:
        return "[" + ",".join(map(_tree_text, tree)) + "]"
    return json.dumps(tree)


def _first_repeated_path(tree: Any, path: list[str | int]) -> list[str | int] | None:
    """The rule, written plainly: members in order, a repeated name before the value
    that follows it, and a value's own repeats before the next member."""
    if type(tree) is tuple:
        seen: set[str] = set()
        for name, item in tree:
            if name in seen:
                return [*path, name]
            seen.add(name)
            found = _first_repeated_path(item, [*path, name])
            if found is not None:
                return found
    elif type(tree) is list:
        for index, item in enumerate(tree):
            found = _first_repeated_path(item, [*path, index])
            if found is not None:
                return found
    return None


@FAST
@given(_json_trees())
def test_the_repeated_name_locator_agrees_with_the_rule_written_plainly(tree: Any) -> None:
    text = _tree_text(tree)
    expected = _first_repeated_path(tree, [])
    if expected is None:
        parse(text)
        return
    error = rejection(text)
    assert error.reason == f"duplicate object member name {str(expected[-1])!r}"
    assert error.pointer == _json.pointer(expected)


def test_a_refused_number_is_located_past_the_same_text_in_strings() -> None:
    error = rejection('{"s":"1e4097","t":["1e4097"],"y":[1,{"z":1e4097}]}', profile=True)
    assert error.pointer == "/y/1/z"
    assert (
        error.reason
        == f"number exceeds the numeric work profile (|written exponent| ≤ {PROFILE_LIMIT})"
    )
    # A repeated name before the refused number is the first problem.
    error = rejection('[{"k":1,"k":2},1e4097]', profile=True)
    assert (error.reason, error.pointer) == ("duplicate object member name 'k'", "/0/k")


def test_a_repeated_name_before_a_syntax_error_or_a_too_deep_bracket_comes_first() -> None:
    error = rejection('[{"k":1,"k":2},x]')
    assert (error.reason, error.pointer) == ("duplicate object member name 'k'", "/0/k")
    # Also in an object still open at the too-deep bracket (it was written before it).
    error = rejection('{"a":1,"a":' + "[" * (MAX_DEPTH + 1))
    assert (error.reason, error.pointer) == ("duplicate object member name 'a'", "/a")


@FAST
@given(
    _problem_documents(),
    st.integers(0, 10_000),
    st.sampled_from(["", "x", "]", "}", ",", ":", '"', " 1"]),
)
def test_a_repeated_name_before_a_syntax_error_is_the_first_problem(
    text: str, cut: int, garbage: str
) -> None:
    # Any repeated name written before the syntax error (in a closed or a still open
    # object) is reported instead of it; the reference is the token walk of the text
    # before the error.
    broken = text[: cut % (len(text) + 1)] + garbage
    try:
        json.loads(broken, parse_constant=str)
    except json.JSONDecodeError as exc:
        position = exc.pos
    else:
        return
    expected = _json._locate(broken[:position], profile=False)
    error = rejection(broken)
    if expected is not None and expected[0].startswith("duplicate"):
        assert (error.reason, error.pointer) == expected
    else:
        assert error.reason.startswith("invalid JSON: ")


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 500, 5_000])
def test_closed_documents_nested_too_deep_are_refused_after_a_successful_decode(
    levels: int,
) -> None:
    # Depth is now measured on the decoded value (or the decoder's RecursionError),
    # not before decoding: a complete document nested too deep is still refused,
    # with the pointer of the offending container, and so are deep objects.
    error = rejection("[" * levels + "]" * levels)
    assert error.reason == f"nesting deeper than {MAX_DEPTH} levels"
    assert error.pointer == "/0" * MAX_DEPTH
    error = rejection('{"k":' * levels + "1" + "}" * levels, profile=True)
    assert error.reason == f"nesting deeper than {MAX_DEPTH} levels"
    assert error.pointer == "/k" * MAX_DEPTH
    # Exactly at the bound it parses.
    assert parse("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


@given(st.lists(st.booleans(), max_size=MAX_DEPTH + 8), st.integers(0, 3))
def test_depth_is_measured_outside_strings(kinds: list[bool], width: int) -> None:
    # Arrays and objects nested len(kinds) deep, with brackets in strings beside them:
    # refused exactly past MAX_DEPTH, at the pointer of the first container too deep.
    text = '"[{"'
    for is_array in reversed(kinds):
        text = (
            "[" + ",".join(['"]][["'] * width + [text]) + "]"
            if is_array
            else "{" + "".join(f'"{i}":"{{",' for i in range(width)) + '"k":' + text + "}"
        )
    if len(kinds) <= MAX_DEPTH:
        parse(text)
        return
    error = rejection(text)
    assert error.reason == f"nesting deeper than {MAX_DEPTH} levels"
    assert error.pointer == "".join(f"/{width}" if a else "/k" for a in kinds[:MAX_DEPTH])


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(min_value=1, max_value=140),
    at=st.integers(min_value=0, max_value=139),
    nested=st.booleans(),
    inside_object=st.booleans(),
    tail=st.sampled_from(["", ",x"]),
)
def test_a_repeated_name_is_located_across_chunks(
    width: int, at: int, nested: bool, inside_object: bool, tail: str
) -> None:
    # The pointer names the first repeated member in document order, at any position
    # in a wide container, whether the text then ends or has a syntax error after it.
    at %= width
    clean = '{"k":[1,{"j":2}]}'
    repeated = '{"k":[1,{"j":2,"j":3}]}' if nested else '{"k":1,"k":2}'
    items = [repeated if index == at else clean for index in range(width)]
    if inside_object:
        body = "{" + ",".join(f'"m{index}":{item}' for index, item in enumerate(items)) + tail + "}"
        where = f"/m{at}"
    else:
        body = "[" + ",".join(items) + tail + "]"
        where = f"/{at}"
    expected = f"{where}/k/1/j" if nested else f"{where}/k"
    error = rejection(body)
    assert error.reason.startswith("duplicate object member name"), error.reason
    assert error.pointer == expected


def _colon_trees() -> st.SearchStrategy[Any]:
    """Like ``_json_trees``, with colons inside names and strings too."""
    leaves = st.sampled_from([0, "s", ":", "a:b", None])
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(st.tuples(st.sampled_from(["a", "b", ":", "c:"]), inner), max_size=4).map(
                tuple
            )
        ),
        max_leaves=30,
    )


@FAST
@given(_colon_trees())
@example((("a", 0),))
@example((("a", 0), ("b", 0)))
@example((("a", 0), ("a", 0), ("b", 0)))
@example((("a", ":"), ("b", 0)))
@example((("a", (("b", 0),)), ("c", 0)))
def test_repeated_names_are_found_wherever_colons_are(tree: Any) -> None:
    # Colons in names and strings, repeats at every depth: parse refuses exactly the
    # documents with a repeated name, at the first one.
    text = _tree_text(tree)
    first = _first_repeated_path(tree, [])
    if first is None:
        parse(text)
    else:
        assert rejection(text).pointer == _json.pointer(first)
