"""The first problem in document order (``_json``'s "Located" goal; Plan step 4,
``_first_problem`` and ``_locate``).

A refused document is walked token by token up to where the decoder stopped, and the
first problem met is reported with its pointer: a repeated name, a refused constant or
number, a lone surrogate, nesting past ``MAX_DEPTH``, or else the syntax error. The
references are the token walk itself (``_json._locate``) or the rule written plainly
over a decoded value.

Elsewhere: repeated names alone (``test_json_repeated_names.py``), the walk's cost
(``test_json_linear.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from json_support import (
    EMOJI,
    FAST,
    LONG,
    NORMALIZED_REASON,
    WRITTEN,
    WRITTEN_REASON,
    Dup,
    Marker,
    dump,
    json_values,
    outcome,
    rejection,
)
from opgate import _json
from opgate._json import MAX_DEPTH, PROFILE_LIMIT, JSONError, check_profile, detach, parse, pointer

# --- one problem anywhere in a generated document ---------------------------------------------


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


# --- the first problem in document order ------------------------------------------------------


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


def test_refused_constants_and_numbers_are_located_past_their_spellings_in_strings() -> None:
    text = '["NaN","-Infinity","1e4097",{"NaN":[1,"Infinity"]},[-Infinity]]'
    assert outcome(text, False) == ("-Infinity is not a JSON number", "/4/0")
    text = '["1e4097-", {"k":"9' + "9" * PROFILE_LIMIT + '"}, 1e4097e5]'
    assert outcome(text, True) == (WRITTEN_REASON, "/2")
    # Infinity inside -Infinity's spelling in a string, then Infinity.
    assert outcome('["-Infinity",Infinity]', True) == ("Infinity is not a JSON number", "/1")


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


def test_a_repeated_name_before_a_missing_value_and_a_too_deep_bracket_comes_first() -> None:
    # The decoder reports a missing value inside an array as StopIteration; the text
    # before it was not checked for repeated names when a too-deep bracket followed.
    deep = "[" * (MAX_DEPTH + 2)
    for text in (
        '[{"a":1,"a":2},x,' + deep,
        '[{"a":1,"a":2},],' + deep,
        '{"k":{"a":1,"a":2},"j":,' + deep,
    ):
        assert outcome(text, False)[0] == "duplicate object member name 'a'", text
    assert outcome('[{"a":1,"a":2},x,' + deep, True) == ("duplicate object member name 'a'", "/0/a")
    # And before a too-long integer (profile), the same.
    long = "9" * (PROFILE_LIMIT + 1)
    assert outcome('[{"a":1,"a":2},x,' + long + "]", True) == (
        "duplicate object member name 'a'",
        "/0/a",
    )
    assert (
        outcome("[1,x," + long + "]", True)[0] == "invalid JSON: Expecting value at line 1 column 4"
    )
    assert outcome("{" + long + "}", True)[0].startswith("invalid JSON: Expecting property name")
    assert (
        outcome("[0" + long + "]", True)[0]
        == "invalid JSON: Expecting ',' delimiter at line 1 column 3"
    )
    assert outcome("[] " + long, True)[0] == "invalid JSON: Extra data at line 1 column 4"
    assert outcome(" " + long + " x", True) == (NORMALIZED_REASON, "")


def test_a_byte_order_mark_before_repeated_names_is_a_syntax_error() -> None:
    for data in ('\ufeff{"a":1,"a":2}', '\ufeff{"a":1,"a":2}'.encode()):
        with pytest.raises(JSONError, match="Expecting value at line 1 column 1"):
            parse(data)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A lone surrogate before a string the decoder refuses is first (it was not).
        ('["\\ud800", "\\x"]', ("string contains a lone surrogate", "/0")),
        ('{"\\udc00": 1, "a": "\t"}', ("member name contains a lone surrogate", "/\udc00")),
        ('"\\ud83d"\\ude00"', ("string contains a lone surrogate", "")),
        # A bracket where the decoder expects a comma is a syntax error, not nesting.
        (
            "[" * 127 + '{"":-1[]}' + "]" * 127,
            ("invalid JSON: Expecting ',' delimiter at line 1 column 134", None),
        ),
    ],
)
def test_the_first_problem_is_the_first_the_walk_meets(
    text: str, expected: tuple[str, str | None]
) -> None:
    for profile in (False, True):
        assert outcome(text, profile) == expected


# --- a lone surrogate is a problem in document order like any other ---------------------------


def _surrogate_documents() -> st.SearchStrategy[str]:
    strings = st.sampled_from(
        ['"x"', EMOJI, '"\\ud800"', '"\\udc00y"', '"\\\\ud800"', '"a\\ud83d\\ud83d"']
    )
    return st.recursive(
        strings,
        lambda inner: (
            st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
            | st.lists(st.tuples(strings, inner), max_size=3).map(
                lambda members: (
                    "{"
                    + ",".join(f"{n[:-1]}{i}{n[-1]}:{v}" for i, (n, v) in enumerate(members))
                    + "}"
                )
            )
        ),
        max_leaves=12,
    )


def _first_surrogate(value: Any, path: list[str | int]) -> tuple[str, str] | None:
    """The rule written plainly: the first string or member name in document order."""
    if isinstance(value, str):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            return ("string contains a lone surrogate", _json.pointer(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            if any(0xD800 <= ord(c) <= 0xDFFF for c in key):
                return ("member name contains a lone surrogate", _json.pointer([*path, key]))
            found = _first_surrogate(item, [*path, key])
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_surrogate(item, [*path, index])
            if found is not None:
                return found
    return None


@settings(max_examples=150, deadline=None)
@given(_surrogate_documents())
def test_lone_surrogates_are_located_as_the_rule_says(text: str) -> None:
    import json

    expected = _first_surrogate(json.loads(text), [])
    if expected is None:
        parse(text)
    else:
        assert outcome(text, False) == expected
        assert outcome(text.encode(), True) == expected


@pytest.mark.slow
@LONG
@given(_surrogate_documents())
def test_lone_surrogates_are_located_as_the_rule_says_long(text: str) -> None:
    test_lone_surrogates_are_located_as_the_rule_says.hypothesis.inner_test(text)  # type: ignore[attr-defined]


LONE = '"x\\ud800"'
OTHER_PROBLEMS = [
    ("NaN", False, "NaN is not a JSON number"),
    ("1e4097", True, WRITTEN_REASON),
    ("9" * (PROFILE_LIMIT + 1), True, NORMALIZED_REASON),
    ('{"a":1,"a":2}', False, "duplicate object member name 'a'"),
    ("x", False, "invalid JSON: Expecting value"),
    ("[" * (MAX_DEPTH + 2), False, f"nesting deeper than {MAX_DEPTH} levels"),
]


@pytest.mark.parametrize(("problem", "profile", "reason"), OTHER_PROBLEMS)
def test_a_lone_surrogate_before_another_problem_is_reported_first(
    problem: str, profile: bool, reason: str
) -> None:
    for lone, what in ((LONE, "string"), ('{"\\udc00":1}', "member name")):
        where = "/1" if what == "string" else "/1/\udc00"
        for padding in ("", "[[]]," * 50):
            text = "[" + padding + "1," + lone + "," + problem + "]"
            at = where.replace("/1", f"/{padding.count('[[]]') + 1}", 1)
            assert outcome(text, profile) == (f"{what} contains a lone surrogate", at), text
            # After the other problem, the other problem is reported.
            text = "[" + padding + "1," + problem + "," + lone + "]"
            assert outcome(text, profile)[0].startswith(reason), text
    # At the root, before trailing garbage.
    assert outcome(LONE + " x", False) == ("string contains a lone surrogate", "")
    assert outcome(LONE + " x", True) == ("string contains a lone surrogate", "")


# --- a stray closer before a too-deep bracket -------------------------------------------------


def _stray_closers() -> st.SearchStrategy[str]:
    """Bracket texts that close more than they opened (or misplace a value) somewhere,
    in runs long and short, and then nest too deep: the run/short-run split of the
    locators (``_first_too_deep``, ``_closers``) on prefixes that are not valid JSON."""
    pieces = st.sampled_from(["[", "]", "}", "[]", "[[]]", "{}", ",", "0", "[0,", "]]", "[["])
    runs = st.tuples(pieces, st.sampled_from([1, 2, 3, 7, 40, 64, 127, 128, 129, 200]))
    return st.lists(runs.map(lambda run: run[0] * run[1]), min_size=1, max_size=5).map("".join)


def _syntax_reference(text: str) -> tuple[str, str | None] | None:
    """The standard decoder's first syntax error, if it comes before the first bracket
    that opens level ``MAX_DEPTH + 1`` (these texts hold nothing else parse refuses)."""
    import json

    depth = 0
    deep_at = len(text)
    for position, character in enumerate(text):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(character, 0)
        if depth > MAX_DEPTH:
            deep_at = position
            break
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos < deep_at:
            return (f"invalid JSON: {exc.msg} at line 1 column {exc.pos + 1}", None)
    return None


@settings(max_examples=150, deadline=None)
@given(_stray_closers(), st.sampled_from(["[" * (MAX_DEPTH + 1), "[" * 300, "[]" * 30 + "[" * 140]))
def test_a_syntax_error_before_a_too_deep_bracket_is_reported_as_such(head: str, deep: str) -> None:
    # A prefix that closes more than it opened made the running depth negative, and
    # ``bytes`` of it raised a bare ValueError out of parse (bytes must be in range(0,
    # 256)): ``[]]`` then 50 ``[]`` then 130 ``[``.
    text = head + deep
    expected = _syntax_reference(text)
    for profile in (False, True):
        found = outcome(text, profile)  # raises nothing but JSONError
        if expected is not None:
            assert found == expected, text
    assert outcome("[]]" + "[]" * 50 + "[" * 130, False) == (
        "invalid JSON: Extra data at line 1 column 3",
        None,
    )


@pytest.mark.slow
@LONG
@given(_stray_closers(), st.sampled_from(["[" * (MAX_DEPTH + 1), "[" * 300, "[]" * 30 + "[" * 140]))
def test_a_syntax_error_before_a_too_deep_bracket_is_reported_as_such_long(
    head: str, deep: str
) -> None:
    test_a_syntax_error_before_a_too_deep_bracket_is_reported_as_such.hypothesis.inner_test(  # type: ignore[attr-defined]
        head, deep
    )
