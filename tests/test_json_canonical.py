"""Canonical bytes (``canonical_bytes``, ``canonical_text``, ``number_text``,
``parsed_canonical_bytes``; ``_json``'s "Canonical bytes").

Numbers are written from their exact value in the spelling of ECMAScript's
``Number::toString``, so equal numbers share their bytes whatever their spelling and
the decimal context; names sort by UTF-16 code units; strings are escaped as RFC 8785
does; no insignificant whitespace; the refusals are ``from_python``'s. The orjson
writer of parsed values (``parsed_canonical_bytes``) matches the Python one byte for
byte and keeps no spare buffer.

Elsewhere: the writers' cost (``test_json_linear.py``).
"""

from __future__ import annotations

import collections
import decimal
import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from json_support import (
    FAST,
    assert_plain,
    equal_numbers,
    exact,
    json_values,
    rejection,
    same,
    spell_number,
)
from opgate._json import (
    JSONError,
    JSONValue,
    canonical_bytes,
    canonical_text,
    check_profile,
    from_python,
    number_text,
    parse,
)

# --- numbers ----------------------------------------------------------------------------------


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


# --- names, strings and whitespace ------------------------------------------------------------


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


# --- what can be written ----------------------------------------------------------------------


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


@given(json_values)
@FAST
def test_canonical_form_is_stable(value: JSONValue) -> None:
    assert_plain(value)
    canonical = canonical_bytes(value)
    reparsed = parse(canonical, profile=False)
    assert canonical_bytes(reparsed) == canonical
    assert canonical_text(reparsed) == canonical.decode("utf-8")
    assert equal_numbers(reparsed, value)


# --- parsed_canonical_bytes (orjson) ----------------------------------------------------------


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
