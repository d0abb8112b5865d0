"""The numeric work profile (``check_profile``, ``parse(..., profile=True)``,
``from_python(..., profile=True)``; the profile rules of ``_json``'s "Numbers").

Each of the three rules (the written exponent, the decimal adjustment, normalized
digits plus exponent, each against ``PROFILE_LIMIT``) at its boundary, in text and as
Python values, which must agree; the pointer of the first violation; generated tokens
near 4,096 against the rule text computed independently; a too-long integer refused on
the native path.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from json_support import ADJUSTED, FAST, NORMALIZED, SLOW, WRITTEN, caught, rejection, same
from opgate._json import PROFILE_LIMIT, JSONError, check_profile, from_python, parse

# --- the three rules at their boundaries ------------------------------------------------------


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


# --- check_profile and from_python(profile=True) ----------------------------------------------


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


# --- the rule text as an oracle ---------------------------------------------------------------


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


# --- long integers (issue 9, item 1) ----------------------------------------------------------


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
