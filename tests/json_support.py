"""Shared helpers for the tests of ``opgate._json`` (``tests/test_json_*.py``).

Hypothesis settings; the rejection, outcome and comparison helpers; the reasons the
profile's refusals cite; generated JSON documents with random spellings; and the
Python-step counter of the linear-work tests.
"""

from __future__ import annotations

import enum
import random
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from opgate._json import MAX_DEPTH, PROFILE_LIMIT, JSONError, from_python, parse

# --- settings ---------------------------------------------------------------------------------


FAST = settings(max_examples=150, deadline=None)
SLOW = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LONG = settings(max_examples=3000, deadline=None)


# --- rejections and comparisons ---------------------------------------------------------------


#: Longest ``str(JSONError)`` any hostile input may produce in these tests.
MESSAGE_BOUND = 240


def rejection(data: Any, *, profile: bool = False) -> JSONError:
    with pytest.raises(JSONError) as info:
        parse(data, profile=profile)
    assert len(str(info.value)) <= MESSAGE_BOUND
    return info.value


def outcome(text: str, profile: bool) -> tuple[str, str | None]:
    try:
        parse(text, profile=profile)
    except JSONError as exc:
        return (exc.reason, exc.pointer)
    return ("", "")


def caught(call: Callable[[], object]) -> JSONError | None:
    """The JSONError ``call`` raises, or ``None``; any other exception propagates."""
    try:
        call()
    except JSONError as exc:
        return exc
    return None


JSON_TYPES = (type(None), bool, int, Decimal, str, list, dict)


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


# --- reasons ----------------------------------------------------------------------------------


#: Each profile rule as its refusal cites it (part of the reason).
WRITTEN = "|written exponent|"
ADJUSTED = "|exponent - fraction digits|"
NORMALIZED = "normalized coefficient digits"

#: Whole reasons, as ``JSONError.reason`` gives them.
WRITTEN_REASON = f"number exceeds the numeric work profile (|written exponent| ≤ {PROFILE_LIMIT})"
NORMALIZED_REASON = (
    f"number exceeds the numeric work profile (normalized coefficient digits + |exponent| ≤ "
    f"{PROFILE_LIMIT})"
)

#: An escaped surrogate pair: one valid character.
EMOJI = '"\\ud83d\\ude00"'


# --- generated documents ----------------------------------------------------------------------


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


# --- Python steps -----------------------------------------------------------------------------


#: Python steps (calls and lines) a parse may take beyond those of the same shape at
#: 8 KiB: pointers and closers are built per level of nesting (at most ``MAX_DEPTH``),
#: and one object's members may be read (bounded by 8 KiB's worth here).
STEP_SLACK = 16 * MAX_DEPTH

#: The steps twice the input may take, at most: linear with room for a shape's units
#: growing faster than its size (a fixed part stays the same).
LINEAR = 2.5


def python_steps(fn: Callable[[], object]) -> int:
    """The Python work done while running ``fn``: frames entered plus lines run."""
    steps = 0

    def count(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        steps += 1
        return count

    sys.settrace(count)
    try:
        fn()
    finally:
        sys.settrace(None)
    return steps
