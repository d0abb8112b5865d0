"""Exact, normalized numbers (``_json``'s "Numbers"; ``normalized``, the ``parse_float``
hook ``_fraction``, and ``from_python``'s ``_float_value`` and ``_number``).

An integer token stays an ``int`` (past the profile's digits, an exact ``Decimal``);
an integral token with a fraction or exponent and a small normalized exponent becomes
an ``int``, anything else a normalized ``Decimal``; every zero becomes ``0`` without
expanding its exponent; an exponent ``decimal`` cannot hold is refused; nothing depends
on the interpreter's int digit limit. A Python float becomes the value its shortest
``repr`` spells.

Elsewhere: the profile's bounds (``test_json_profile.py``), how numbers are written
(``test_json_canonical.py``).
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from json_support import FAST, rejection, same
from opgate import _json
from opgate._json import (
    PROFILE_LIMIT,
    JSONError,
    canonical_bytes,
    canonical_text,
    check_profile,
    from_python,
    parse,
)

# --- exact numbers ----------------------------------------------------------------------------


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


# --- normalized numbers (issue 9, item 11) ----------------------------------------------------


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


def test_in_profile_numbers_are_accepted_however_many_within_the_byte_budget() -> None:
    """Issue 20, item 6: every number of ``{"x": [1e4000 x 17]}`` is inside the profile,
    which "is a module validation limit, not a JSON syntax restriction". A large
    exponent stays a normalized ``Decimal``, so a short token never expands."""
    text = '{"x": [' + ",".join(["1e4000"] * 17) + "]}"
    value = parse(text, profile=True)
    assert value == {"x": [10**4000] * 17}
    assert isinstance(value, dict)
    assert all(type(item) is Decimal for item in value["x"])
    # 64 KiB of them, distinct, parse and write back as fast as any other 64 KiB.
    tokens = [f"{1 + i % 9}e{4000 + i % 95}" for i in range(64 * 1024 // 8)]
    many = parse("[" + ",".join(tokens) + "]", profile=True)
    assert isinstance(many, list)
    assert len(many) == len(tokens)
    assert (
        _json.canonical_bytes(many)
        == ("[" + ",".join(t.replace("e", "e+") for t in tokens) + "]").encode()
    )
    # Integral values with a smaller exponent are ints, as before.
    assert parse("[1e99, 1.5e3, 1E+21]") == [10**99, 1500, 10**21]
    assert [type(v) for v in parse("[1e99, 1e100, 10e99]")] == [int, Decimal, Decimal]  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_values_already_held_keep_their_large_numbers() -> None:
    # The budget is for text from outside: schemas, results and state that hold many
    # large numbers as Python values are written as canonical bytes and read back
    # without it (their exponent form, 1e+4000, would otherwise cross it).
    from opgate import Failed, Operation, Registry, Result, Text, finish

    from conftest import AllowAll, Ctx

    big = [k * 10**4000 for k in range(1, 20)]  # past the budget once written as 1e+4000
    assert Result([Text("x")], structured={"v": big}).structured == {"v": big}
    doubles = [1.7976931348623157e308] * 300
    largest = int(Decimal("1.7976931348623157e308"))  # a float is its shortest repr
    assert Result([Text("x")], structured={"d": doubles}).structured == {"d": [largest] * 300}

    def handler(invocation: Any) -> Any:
        return finish(Result([Text("ok")], structured={"v": big}))

    schema = {"type": "object", "properties": {"n": {"enum": big}}}
    output = {"type": "object", "properties": {"v": {"type": "array"}}}
    operation = Operation("op", "does", handler, input_schema=schema, output_schema=output)
    registry = Registry([operation], AllowAll())
    spec = await registry.inspect(Ctx(), "op")
    assert not isinstance(spec, Failed)
    assert spec.input_schema["properties"]["n"]["enum"] == big  # type: ignore[index]
    done = await registry.invoke(Ctx(), "op", {"n": big[3]})
    assert not isinstance(done, Failed), done


# --- the parse_float hook (issue 9, item 1) ---------------------------------------------------


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


# --- Python numbers: an MCP client's arguments arrive as dicts of floats ----------------------


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_convert_to_the_value_their_shortest_repr_spells(number: float) -> None:
    # The fast path (``_float_value``) against the general rule: ``normalized(Decimal(repr))``.
    expected = _json.normalized(Decimal(repr(number)))
    for converted in (
        from_python(number, profile=True),
        from_python([number], profile=True)[0],  # type: ignore[index]
        from_python({"k": [number]})["k"][0],  # type: ignore[call-overload,index]
    ):
        assert type(converted) is type(expected)
        assert str(converted) == str(expected)


@settings(max_examples=150, deadline=None)
@given(
    st.decimals(allow_nan=False, allow_infinity=False)
    | st.builds(
        Decimal,
        st.from_regex(r"-?[1-9][0-9]{0,30}(\.[0-9]{1,30})?(E-?[0-9]{1,4})?", fullmatch=True),
    )
)
def test_decimals_convert_as_the_general_rules_say(number: Decimal) -> None:
    reason = _json._decimal_violation(number)
    if reason is not None:
        with pytest.raises(JSONError, match=re.escape(reason)):
            from_python([number], profile=True)
        return
    expected = _json.normalized(number)
    converted = from_python([number], profile=True)[0]  # type: ignore[index]
    assert type(converted) is type(expected)
    assert str(converted) == str(expected)


def test_non_finite_floats_in_lists_are_refused_with_their_pointer() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(JSONError, match="NaN and infinities") as info:
            from_python({"a": [0.5, bad]})
        assert info.value.pointer == "/a/1"
