"""``opgate._json.parse``: strict JSON text to an exact value.

Covers the "Strict" goal of ``_json``'s docstring and Plan step 1 (*Text*): repeated
member names, ``NaN`` and the infinities, lone surrogates, invalid UTF-8, trailing
garbage and other syntax errors with their line and column; ``str`` and ``bytes``
subclasses read through the base type; the nesting bound ``MAX_DEPTH`` in text
(measured on the decoded value, outside strings); ``pointer`` and the shape and
length of every ``JSONError``; agreement with the standard library on generated
documents; fuzzing (only ``JSONError`` may escape).

Elsewhere: which of several problems is reported (``test_json_first_problem.py``),
repeated names (``test_json_repeated_names.py``), numbers (``test_json_numbers.py``,
``test_json_profile.py``).
"""

from __future__ import annotations

import json
import pickle
import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from json_support import (
    FAST,
    MESSAGE_BOUND,
    SLOW,
    Key,
    assert_plain,
    caught,
    dump,
    equal_numbers,
    json_values,
    rejection,
    same,
    walk,
)
from opgate import _json
from opgate._json import (
    MAX_DEPTH,
    PROFILE_LIMIT,
    JSONError,
    JSONValue,
    canonical_bytes,
    from_python,
    parse,
    pointer,
)

# --- strict parsing ---------------------------------------------------------------------------


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


# --- text: str and bytes subclasses are read through the base type ----------------------------


class _Colonless(str):
    """Text whose own ``count`` hides its colons (so the repeated-name checks skip)."""

    def count(self, *args: Any) -> int:
        return 0


class _OneColon(str):
    def count(self, *args: Any) -> int:
        return 1


class _Recoded(bytes):
    """Bytes whose own ``decode`` does not decode them."""

    def decode(self, *args: Any, **kwargs: Any) -> Any:
        return 5


class _Swapped(bytearray):
    def decode(self, *args: Any, **kwargs: Any) -> Any:
        return "[1]"


def test_parse_reads_the_characters_of_str_and_bytes_subclasses_not_their_methods() -> None:
    # parse's passes call the text's own methods (count, find, ...): a subclass that
    # overrides them must not change the result (a repeated name went through, and a
    # decode returning a non-str raised TypeError, not JSONError).
    for kind in (_Colonless, _OneColon):
        for text in ('{"a":1,"a":2}', '{"a":{"b":1,"b":2}}', '[{"c":1,"c":2}]'):
            with pytest.raises(JSONError) as info:
                parse(kind(text))
            assert (info.value.reason, info.value.pointer) == _json._locate(text, profile=False)
            with pytest.raises(JSONError):
                parse(kind(text), profile=True)
        assert parse(kind('{"a":1,"b":":"}')) == {"a": 1, "b": ":"}
        assert type(parse(kind('"s"'))) is str
    assert parse(_Recoded(b'{"a":1}')) == {"a": 1}
    assert parse(_Swapped(b'{"a":1}'), profile=True) == {"a": 1}
    with pytest.raises(JSONError, match="invalid UTF-8 at byte 1"):
        parse(_Recoded(b'"\xff"'))


# --- nesting ----------------------------------------------------------------------------------


def nested_arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


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


# --- pointers and messages --------------------------------------------------------------------


def test_pointer_escapes_rfc6901() -> None:
    assert pointer([]) == ""
    assert pointer(["a/b", "m~n", 0, ""]) == "/a~1b/m~0n/0/"
    assert pointer(("~1", 12)) == "/~01/12"


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


# --- agreement with the standard library ------------------------------------------------------


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


# --- fuzzing: only JSONError may escape -------------------------------------------------------


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
