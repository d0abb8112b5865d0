"""Repeated member names (``_json``'s Plan step 3, ``_too_deep_or_repeating``).

The standard decoder keeps the last of repeated names, so they are looked for after the
decode, against the colons outside strings, and located by the token walk: names
compared after decoding escapes, colons in names and strings, repeats at any depth and
at any position of a wide container, the flat-object shortcut. The references are the
rule written plainly and the token walk (``_json._locate``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from json_support import FAST, LONG, outcome, rejection
from opgate import _json
from opgate._json import JSONError, parse

# --- repeated names found after a decode that kept the last -----------------------------------


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


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2,"b\\u003a":3}',  # a repeat, an escaped colon: 2 members, 3 colons
        '{"a\\u003a":1,"a:":2}',  # the escape decodes to the other name
        '{"a":":","a":2}',  # a repeat, a colon in a string: 1 member, 3 colons
        '{"a":1,"\\u0061":2}',
        '{"x":{},"a":1,"a":{}}',
        '[{"a":1,"a":2},{"b":":"}]',
        '{"a":{"b":1},"a":{"c":2},"d":3}',
    ],
)
def test_the_flat_object_shortcut_reports_what_the_token_walk_does(text: str) -> None:
    # _shape answers a root object with as many members as its text has colons without
    # the walk: repeats with colons and escaped colons elsewhere must still be found.
    for profile in (False, True):
        expected = _json._locate(text, profile=profile)
        assert expected is not None, text
        assert expected[0].startswith("duplicate"), text
        for data in (text, text.encode()):
            with pytest.raises(JSONError) as info:
                parse(data, profile=profile)
            assert (info.value.reason, info.value.pointer) == expected, text


# --- repeats in chains, against the token walk ------------------------------------------------


def _chains() -> st.SearchStrategy[str]:
    """Documents of nested arrays and objects whose objects often repeat a name."""
    names = st.sampled_from(["a", "b", "\\u0061"])
    leaves = st.sampled_from(["0", '"s"', "[]", "{}"])
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, min_size=1, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
            | st.lists(st.tuples(names, inner), min_size=1, max_size=3).map(
                lambda members: "{" + ",".join(f'"{n}":{v}' for n, v in members) + "}"
            )
        ),
        max_leaves=25,
    )


@settings(max_examples=150, deadline=None)
@given(_chains(), st.integers(0, 3))
def test_repeated_names_agree_with_the_token_walk(text: str, padding: int) -> None:
    # The reference is the token walk (``_locate``): the first repeated name in
    # document order. Padding with many small containers first moves the problem.
    document = "[" + "[[]]," * (padding * 40) + text + "]"
    expected = _json._locate(document, profile=False)
    if expected is None:
        parse(document)
    else:
        assert outcome(document, False) == expected


@pytest.mark.slow
@LONG
@given(_chains(), st.integers(0, 3))
def test_repeated_names_agree_with_the_token_walk_long(text: str, padding: int) -> None:
    test_repeated_names_agree_with_the_token_walk.hypothesis.inner_test(text, padding)  # type: ignore[attr-defined]
