"""InputResponse, decode_answers and check_response_shape (spec 000, "Prompts and responses")."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._failures import ConfigurationError
from opgate._forms import InputMode
from opgate._json import JSONValue, canonical_bytes, parse
from opgate._responses import (
    AnswerError,
    InputAction,
    InputResponse,
    check_response_shape,
    decode_answers,
)

LIMIT = 16 * 1024


def decode(response: InputResponse, max_bytes: int = LIMIT) -> JSONValue | None:
    return decode_answers(response, max_bytes=max_bytes)


# --- construction -------------------------------------------------------------------------


def test_the_three_constructors_set_the_action() -> None:
    assert InputResponse.accept().action is InputAction.ACCEPT
    assert InputResponse.decline().action is InputAction.DECLINE
    assert InputResponse.cancel().action is InputAction.CANCEL
    assert [a.value for a in InputAction] == ["accept", "decline", "cancel"]


def test_decline_and_cancel_take_no_answers() -> None:
    with pytest.raises(TypeError):
        InputResponse.decline({"ok": True})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        InputResponse.cancel("{}")  # type: ignore[call-arg]
    for action in (InputAction.DECLINE, InputAction.CANCEL):
        with pytest.raises(ConfigurationError, match="carries no answers"):
            InputResponse(action, {})
    assert decode(InputResponse.decline()) is None
    assert decode(InputResponse(InputAction.CANCEL)) is None


def test_action_may_be_given_by_value_but_must_exist() -> None:
    assert InputResponse("decline").action is InputAction.DECLINE
    with pytest.raises(ConfigurationError, match="accept, decline or cancel"):
        InputResponse("maybe")
    with pytest.raises(TypeError):
        InputResponse(1)  # type: ignore[arg-type]


@pytest.mark.parametrize("answers", [["a"], 5, 1.5, True, object()])
def test_answers_of_wrong_type_raise_type_error(answers: object) -> None:
    with pytest.raises(TypeError, match="JSON text or a mapping"):
        InputResponse.accept(answers)


@pytest.mark.parametrize(
    "answers", [{"x": float("nan")}, {"x": float("inf")}, {1: True}, {"x": {1, 2}}]
)
def test_mapping_answers_must_be_json(answers: dict[Any, Any]) -> None:
    with pytest.raises(ConfigurationError, match="answers are not JSON"):
        InputResponse.accept(answers)


def test_text_answers_are_not_parsed_at_construction() -> None:
    response = InputResponse.accept("this is not json")
    assert response.has_answers
    with pytest.raises(AnswerError, match="not valid JSON"):
        decode(response)


def test_mapping_answers_are_detached_at_construction() -> None:
    answers: dict[str, Any] = {"tags": ["a"], "ok": True}
    response = InputResponse.accept(answers)
    answers["tags"].append("b")
    answers["extra"] = 1
    first = decode(response)
    assert first == {"tags": ["a"], "ok": True}
    assert isinstance(first, dict)
    first["tags"].append("c")  # type: ignore[union-attr]
    assert decode(response) == {"tags": ["a"], "ok": True}


def test_bytearray_answers_are_copied() -> None:
    raw = bytearray(b'{"ok": true}')
    response = InputResponse.accept(raw)
    raw[7:11] = b"null"
    assert decode(response) == {"ok": True}


def test_response_is_immutable_and_repr_hides_answers() -> None:
    response = InputResponse.accept({"card": "4111-1111"})
    with pytest.raises(AttributeError):
        response.action = InputAction.DECLINE  # type: ignore[misc]
    assert "4111" not in repr(response)
    assert "accept" in repr(response)
    assert "4111" not in repr(InputResponse.accept('{"card": "4111-1111"}'))
    assert repr(InputResponse.cancel()) == "InputResponse('cancel')"


# --- decode_answers -------------------------------------------------------------------------


def test_raw_size_is_bounded_before_parsing() -> None:
    response = InputResponse.accept("x" * 300)  # not JSON: the size check must come first
    with pytest.raises(AnswerError, match="exceed 256 bytes"):
        decode(response, 256)
    assert decode(InputResponse.accept('{"a":"' + "x" * 248 + '"}'), 256) is not None


def test_canonical_size_is_bounded_too() -> None:
    text = '{"a":1e20}'  # 10 raw bytes, 27 canonical bytes
    assert canonical_bytes(parse(text)) == b'{"a":100000000000000000000}'
    with pytest.raises(AnswerError, match="once encoded"):
        decode(InputResponse.accept(text), 20)
    assert decode(InputResponse.accept(text), 27) == {"a": 10**20}
    mapping = InputResponse.accept({"a": "x" * 300})
    with pytest.raises(AnswerError, match="once encoded"):
        decode(mapping, 256)


def test_mapping_answers_far_over_their_budget_are_refused_before_the_copy() -> None:
    # An MCP client's answer arrives as a mapping: 20,000 floats such as 1e300, each
    # made a 301-digit int, were checked, copied and written (~5 us each, several times
    # making them) only to be refused; their JSON text, measured first in C, bounds
    # the canonical bytes from below.
    import time

    def best_cpu(run: Any) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            run()
            best = min(best, time.process_time() - start)
        return best

    def refuse() -> None:
        with pytest.raises(AnswerError, match="exceed 16384 bytes once encoded"):
            decode(response)

    for extra in ({}, {"x": 0.5}, {"x": 2**70}):  # a Decimal, a long int: still measured
        large = {**extra, **{f"k{k}": float(f"{k}e{200 + k % 100}") for k in range(1, 20_001)}}
        response = InputResponse.accept(large)
        make = best_cpu(lambda large=large: InputResponse.accept(large))
        refusal = best_cpu(refuse)
        assert refusal <= 2 * make + 2e-3, (extra, refusal, make)
    # The copy holds the converted numbers (Decimals), measured as they are written.
    fits = {"v": [0.5] * 4_000}  # 16,007 canonical bytes
    assert decode(InputResponse.accept(fits)) == {"v": [Decimal("0.5")] * 4_000}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"ok": true, "ok": false}', "duplicate"),
        ('{"ok": NaN}', "not valid JSON"),
        ('{"ok": true} trailing', "not valid JSON"),
        (b'{"name": "\xff"}', "UTF-8"),
        ('{"name": "\\ud800"}', "surrogate"),
        ('{"name": "\ud800"}', "UTF-8"),
        ('{"n": 1e5000}', "numeric work profile"),
        ('{"n": 1e-5000}', "numeric work profile"),
    ],
)
def test_invalid_answer_text_fails(text: str | bytes, expected: str) -> None:
    with pytest.raises(AnswerError, match=expected):
        decode(InputResponse.accept(text))


def test_mapping_answers_are_held_to_the_numeric_profile() -> None:
    with pytest.raises(AnswerError, match="numeric"):
        decode(InputResponse.accept({"n": Decimal("1e5000")}))


@pytest.mark.parametrize("text", ["[]", "null", "5", '"x"', "true"])
def test_answers_must_be_an_object(text: str) -> None:
    with pytest.raises(AnswerError, match="must be a JSON object"):
        decode(InputResponse.accept(text))


def test_numbers_normalize_exactly() -> None:
    value = decode(InputResponse.accept('{"a": 1.0, "b": 1e0, "c": 10e-1, "d": -0.0, "e": 0.1}'))
    assert canonical_bytes(value) == b'{"a":1,"b":1,"c":1,"d":0,"e":0.1}'
    assert decode(InputResponse.accept({"e": 0.1})) == {"e": Decimal("0.1")}


def test_url_acceptance_has_no_answers() -> None:
    assert decode(InputResponse.accept()) is None
    assert not InputResponse.accept().has_answers


def test_hostile_answer_errors_quote_only_a_short_prefix() -> None:
    hostile = '{"' + "k" * 5000 + '": 1, "' + "k" * 5000 + '": 2}'
    with pytest.raises(AnswerError) as info:
        decode(InputResponse.accept(hostile), 1 << 20)
    assert len(str(info.value)) < 200


# --- check_response_shape -------------------------------------------------------------------


def shape(mode: InputMode, response: InputResponse) -> str | None:
    return check_response_shape(mode, response, decode(response))


def test_form_acceptance_needs_object_answers() -> None:
    assert shape(InputMode.FORM, InputResponse.accept({})) is None
    assert shape(InputMode.FORM, InputResponse.accept("{}")) is None
    assert shape(InputMode.FORM, InputResponse.accept({"ok": True})) is None
    message = shape(InputMode.FORM, InputResponse.accept())
    assert message is not None
    assert "object answers" in message


def test_url_acceptance_requires_no_answers_checked_at_pairing_time() -> None:
    assert shape(InputMode.URL, InputResponse.accept()) is None
    response = InputResponse.accept({"ok": True})  # constructs: the response knows no prompt
    assert shape(InputMode.URL, response) == "a URL acceptance carries no answers"
    assert shape(InputMode.URL, InputResponse.accept({})) == "a URL acceptance carries no answers"


@pytest.mark.parametrize("mode", list(InputMode))
def test_decline_and_cancel_fit_every_prompt(mode: InputMode) -> None:
    assert shape(mode, InputResponse.decline()) is None
    assert shape(mode, InputResponse.cancel()) is None
    assert check_response_shape(mode, InputResponse.decline(), {}) is not None


def test_mode_may_be_given_by_value() -> None:
    assert check_response_shape("url", InputResponse.accept(), None) is None  # type: ignore[arg-type]


# --- properties --------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**40), 10**40),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=80, deadline=None)
@given(json_objects)
def test_mapping_and_text_answers_decode_to_the_same_value(answers: dict[str, Any]) -> None:
    from_mapping = decode(InputResponse.accept(answers), 1 << 20)
    canonical = canonical_bytes(from_mapping)
    from_text = decode(InputResponse.accept(canonical.decode()), 1 << 20)
    from_bytes = decode(InputResponse.accept(canonical), 1 << 20)
    assert from_mapping == from_text == from_bytes
    assert canonical_bytes(from_text) == canonical


@settings(max_examples=80, deadline=None)
@given(json_objects, st.integers(256, 2048))
def test_decoded_answers_always_fit_the_bound(answers: dict[str, Any], max_bytes: int) -> None:
    text = json.dumps({k: str(v) for k, v in answers.items()}, indent=1)
    try:
        value = decode(InputResponse.accept(text), max_bytes)
    except AnswerError:
        assert len(text.encode()) > max_bytes or len(canonical_bytes(parse(text))) > max_bytes
    else:
        assert len(text.encode()) <= max_bytes
        assert len(canonical_bytes(value)) <= max_bytes


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(InputAction)), st.sampled_from(list(InputMode)), json_objects)
def test_only_form_acceptance_carries_answers(
    action: InputAction, mode: InputMode, answers: dict[str, Any]
) -> None:
    with_answers = mode is InputMode.FORM and action is InputAction.ACCEPT
    response = InputResponse(action, answers if with_answers else None)
    assert check_response_shape(mode, response, decode(response, 1 << 20)) is None
    assert check_response_shape(mode, response, None if with_answers else answers) is not None


class _Reencoded(str):
    def encode(self, *args: Any, **kwargs: Any) -> Any:
        return 5


class _Replaced(str):
    def encode(self, *args: Any, **kwargs: Any) -> Any:
        return b'{"other": 1}'


def test_str_subclass_answers_are_their_characters_not_their_encode() -> None:
    # The text was encoded with its own encode: a subclass's could replace the answers
    # or break the constructor with an unrelated TypeError.
    for kind in (_Reencoded, _Replaced):
        response = InputResponse.accept(kind('{"ok": true}'))
        assert decode(response) == {"ok": True}
