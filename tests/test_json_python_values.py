"""Python values to JSON values (``from_python``, ``is_plain``; ``_json``'s Python values).

``from_python`` normalizes to exact plain types, refuses what is not JSON with its
pointer and bounds nesting (deep and cyclic values fail cleanly). Its copies in C
passes (``_copy_through_text``, ``_plain_copy``) must return or raise exactly what the
general conversion (``_convert``) does, type for type, near and at their limits, and in
linear Python steps.

Elsewhere: numbers (``test_json_numbers.py``), copies (``test_json_detach.py``).
"""

from __future__ import annotations

import collections
import enum
import math
import types
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from json_support import LINEAR, LONG, MESSAGE_BOUND, STEP_SLACK, Key, assert_plain, python_steps
from opgate import _json
from opgate._json import (
    MAX_DEPTH,
    PROFILE_LIMIT,
    JSONError,
    canonical_bytes,
    canonical_text,
    check_profile,
    from_python,
)

# --- from_python ------------------------------------------------------------------------------


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


def test_a_lone_surrogate_member_name_before_a_boolean_or_null_is_refused() -> None:
    # The plain-dict loop checked names for surrogates except before true, false and
    # null: from_python accepted the name, and canonical_bytes then raised
    # UnicodeEncodeError (an MCP client's mapping arguments became an internal failure).
    for item in (True, False, None):
        for value in ({"\udc00": item}, {"k": {"a": 1, "\ud800x": item}}):
            with pytest.raises(JSONError, match="member name contains a lone surrogate"):
                from_python(value)
            with pytest.raises(JSONError, match="member name contains a lone surrogate"):
                _json.canonical_bytes(value)  # type: ignore[arg-type]


# --- the C copies against the general conversion ----------------------------------------------


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


class _Str(str):
    pass


def _python_values() -> st.SearchStrategy[Any]:
    """Python values near the plain ones: subclasses, surrogates, huge integers, floats,
    tuples and non-string names, so that the C copy (``_plain_copy``) is tried and
    refused at every level."""
    leaves = st.one_of(
        st.sampled_from(
            [
                *("x", "\ud800", "\U0001f600", 0, True, None, 10**PROFILE_LIMIT, _Str("s")),
                *(1.5, 2.0, -0.0, 1e308, math.nan, math.inf),
            ]
        ),
        st.integers(-(10**30), 10**30),
        st.text(max_size=3),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.sampled_from(["a", "b", "\udc00", 1, _Str("c")]), inner, max_size=3),
        ),
        max_leaves=20,
    )


def _converted(value: Any, profile: bool) -> tuple[str, Any]:
    try:
        return ("ok", from_python(value, profile=profile))
    except JSONError as exc:
        return ("error", (exc.reason, exc.pointer))


def _general(value: Any, profile: bool) -> tuple[str, Any]:
    try:
        return ("ok", _json._convert(value, [], profile))
    except JSONError as exc:
        return ("error", (exc.reason, exc.pointer))


@settings(max_examples=150, deadline=None)
@given(_python_values(), st.booleans(), st.integers(0, MAX_DEPTH + 2))
def test_python_values_convert_as_the_general_rules_say(
    value: Any, profile: bool, depth: int
) -> None:
    # from_python tries a copy in C passes first; whatever it returns or raises must be
    # what the general conversion returns or raises, type for type.
    nested = value
    for _ in range(depth % 4 * 40):
        nested = [nested]
    for candidate in (value, {"k": value}, nested):
        fast, general = _converted(candidate, profile), _general(candidate, profile)
        assert fast[0] == general[0]
        if fast[0] == "error":
            assert fast[1] == general[1]
        else:
            assert _json.canonical_bytes(fast[1]) == _json.canonical_bytes(general[1])
            assert _types(fast[1]) == _types(general[1])


@pytest.mark.slow
@LONG
@given(_python_values(), st.booleans(), st.integers(0, MAX_DEPTH + 2))
def test_python_values_convert_as_the_general_rules_say_long(
    value: Any, profile: bool, depth: int
) -> None:
    test_python_values_convert_as_the_general_rules_say.hypothesis.inner_test(  # type: ignore[attr-defined]
        value, profile, depth
    )


def _types(value: Any) -> Any:
    if type(value) is dict:  # member order too: the caller's order is kept
        return [type(value), *((key, _types(item)) for key, item in value.items())]
    if type(value) is list:
        return [type(value), *map(_types, value)]
    return type(value)


def test_cyclic_and_shared_python_values() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert _converted(cyclic, False) == _general(cyclic, False)
    assert _converted(cyclic, False)[1][0] == f"nesting deeper than {MAX_DEPTH} levels"
    shared = [1]
    copy = from_python({"a": shared, "b": shared})
    assert copy == {"a": [1], "b": [1]}
    assert copy["a"] is not shared  # type: ignore[index]


class _Count(enum.IntEnum):
    ONE = 1
    HUGE = 2**70


class _Word(enum.StrEnum):
    A = "a"


class _Plain(enum.Enum):
    A = 1


def _hostile_python_values() -> st.SearchStrategy[Any]:
    """Values at the limits of the C copies (``_copy_through_text``, ``_plain_copy``):
    every float (subnormals, integral ones past 2**53, NaN beside a JSON null), ints
    at the 64-bit and profile bounds, enum members, what ``marshal`` takes and JSON
    has not, names of every type, strings spelling ``null``."""
    bounds = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, -(2**64)]
    bounds += [10**PROFILE_LIMIT - 1, 10**PROFILE_LIMIT, 2**53 + 1]
    floats = [5e-324, 2.2250738585072014e-308, 1e16, 1e22, 2.0**53 + 2, 1.7976931348623157e308]
    others = [None, True, _Count.ONE, _Count.HUGE, _Word.A, _Plain.A, _Str("s"), Decimal("1.0")]
    others += [bytearray(b"x"), memoryview(b"x"), ..., frozenset(), 1j, StopIteration, b"x"]
    leaves = st.one_of(
        st.floats(),
        st.sampled_from([*bounds, *floats, *others]),
        st.integers(),
        st.sampled_from(["null", "\u2028", "\U0001f600", "\ud800", '"', "\x00"]),
    )
    names = st.sampled_from(
        ["a", "null", "\ud800", "\U0001f600", _Str("a"), _Word.A, True, None, 1]
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(names, inner, max_size=4),
        ),
        max_leaves=25,
    )


@settings(max_examples=150, deadline=None)
@given(_hostile_python_values(), st.booleans(), st.integers(0, MAX_DEPTH + 2))
def test_python_values_at_the_limits_of_the_c_copies_convert_as_the_general_rules_say(
    value: Any, profile: bool, depth: int
) -> None:
    nested = value
    for _ in range(depth % 4 * 42):
        nested = (nested,) if depth % 2 else [nested]
    for candidate in (value, {"k": value}, [value, value], nested):
        fast, general = _converted(candidate, profile), _general(candidate, profile)
        assert fast[0] == general[0]
        if fast[0] == "error":
            assert fast[1] == general[1]
        else:  # repr: every Decimal's exponent, member order, True apart from 1
            assert repr(fast[1]) == repr(general[1])
            assert _types(fast[1]) == _types(general[1])


@pytest.mark.slow
@LONG
@given(_hostile_python_values(), st.booleans(), st.integers(0, MAX_DEPTH + 2))
def test_python_values_at_the_limits_of_the_c_copies_convert_as_the_general_rules_say_long(
    value: Any, profile: bool, depth: int
) -> None:
    test_python_values_at_the_limits_of_the_c_copies_convert_as_the_general_rules_say.hypothesis.inner_test(  # type: ignore[attr-defined]
        value, profile, depth
    )


# --- linear steps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [[], [1.5], [1.5, None], [2**70], [2**70, 0.25], ["\U0001f600", 1e300, -0.0]],
    ids=["plain", "float", "float and null", "long int", "long int and float", "mixed"],
)
def test_python_values_are_converted_by_c_passes(extra: list[object]) -> None:
    # An MCP client's arguments arrive as Python values: a float anywhere sent the
    # whole value down a Python walk, a call per container (64 KiB of nested arrays
    # with one float: 23 ms). Every value made of built-in JSON types is now copied in
    # C passes, and converts as the general rules say.
    def value(size: int) -> dict[str, object]:
        return {"a": [*extra, *([[[]]] * (size // 5))], "b": {"k": extra}}

    for size in (1024, 8 * 1024):
        copy = _json.from_python(value(size), profile=True)
        assert copy == _json._convert(value(size), [], True)
        assert repr(copy) == repr(_json._convert(value(size), [], True))
    small_steps = python_steps(lambda: _json.from_python(value(8 * 1024), profile=True))
    large_steps = python_steps(lambda: _json.from_python(value(64 * 1024), profile=True))
    assert large_steps <= small_steps + STEP_SLACK, (small_steps, large_steps)


@pytest.mark.parametrize(
    "last",
    [
        "x\udc00",
        {"k\ud800": 1},
        {"k": ["\ud83d"]},
        math.nan,
        [1.5, {"NaN": "Infinity", "k": -math.inf}],
        {"-Infinity": [math.inf, math.nan]},
        ["\ud800", math.nan],  # both: the first in document order
        [math.nan, {"\udc00": 1}],
    ],
)
def test_a_lone_surrogate_or_nan_in_python_values_is_located_in_linear_steps(
    last: object,
) -> None:
    # The general conversion names the first lone surrogate (or NaN, infinity) with a
    # Python call per container walked before it: linear, and the same report as the
    # rules written plainly.
    def value(size: int) -> dict[str, object]:
        return {"a": [*([{}] * (size // 3)), 0.5, last]}

    for size in (1024, 8 * 1024):
        assert _converted(value(size), True) == _general(value(size), True)
        assert _converted(value(size), True)[0] == "error"
    small_steps = python_steps(lambda: _converted(value(32 * 1024), True))
    large_steps = python_steps(lambda: _converted(value(64 * 1024), True))
    assert large_steps <= LINEAR * small_steps + STEP_SLACK, (small_steps, large_steps)
