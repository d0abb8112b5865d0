"""FormInput, URLInput, the form profile and answer checks (spec 000, "Prompts and responses").

Also, through ``Registry.invoke``: only genuine, fully checked ``FormInput`` and
``URLInput`` values become prompts, and a multiselect answer repeating a choice is
refused before the handler resumes (issue 9, item 13).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import socket
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoke_support import EMPTY_FORM, PROMPT_SUPPORT, ask, ask_registry, code
from opgate import (
    FailureCode,
    InputResponse,
    Invocation,
    Pending,
    Result,
    Text,
    await_input,
    finish,
)
from opgate._failures import ConfigurationError, short_prefix
from opgate._forms import FORM_FORMATS, FormInput, FormPrompt, InputMode, URLInput, URLPrompt
from opgate._json import canonical_bytes, from_python, parse
from opgate._schema import MAX_COUNT

from conftest import Ctx

pytestmark = pytest.mark.anyio

# --- helpers --------------------------------------------------------------------------

REFUND = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Refund order 7?"}},
    "required": ["ok"],
}


def form(properties: dict[str, Any], **root: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **root}


def make(schema: Any, state: Any = "null") -> FormInput:
    return FormInput("Please answer", schema, state)


def rejected(schema: Any) -> str:
    with pytest.raises(ConfigurationError) as info:
        make(schema)
    return str(info.value)


def check(schema: dict[str, Any], answers: Any) -> str | None:
    return make(schema).validate_answers(from_python(answers))


# --- construction: message, schema, state --------------------------------------------


def test_form_input_snapshots_message_schema_and_state() -> None:
    schema = copy.deepcopy(REFUND)
    state = {"order": 7, "intent": ["refund"]}
    prompt_input = FormInput("Refund order 7?", schema, state)
    before = prompt_input.form()
    schema["properties"]["ok"]["type"] = "string"
    schema["required"].append("other")
    state["order"] = 8
    state["intent"].append("changed")
    assert prompt_input.form() == before
    assert prompt_input.state_value() == {"order": 7, "intent": ["refund"]}
    assert prompt_input.message == "Refund order 7?"


@pytest.mark.parametrize("message", ["", " ", "\n\t "])
def test_blank_message_is_invalid(message: str) -> None:
    with pytest.raises(ConfigurationError, match="nonblank message"):
        FormInput(message, REFUND, "null")


def test_message_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="message must be a str"):
        FormInput(b"hi", REFUND, "null")  # type: ignore[arg-type]


def test_message_with_lone_surrogate_is_invalid() -> None:
    with pytest.raises(ConfigurationError, match="surrogate"):
        FormInput("bad \ud800", REFUND, "null")


def test_schema_is_required() -> None:
    with pytest.raises(ConfigurationError, match="needs a form schema"):
        FormInput("Confirm", None, "null")


@pytest.mark.parametrize("schema", [42, ["type", "object"], object()])
def test_schema_of_wrong_type_raises_type_error(schema: object) -> None:
    with pytest.raises(TypeError, match="schema must be JSON text or a mapping"):
        FormInput("Confirm", schema, "null")


@pytest.mark.parametrize("schema", ['"object"', "[]", "null"])
def test_schema_must_be_an_object(schema: str) -> None:
    assert "must be a JSON object" in rejected(schema)


def test_schema_text_must_be_strict_json() -> None:
    assert "duplicate" in rejected('{"type": "object", "type": "object", "properties": {}}')
    assert "not valid JSON" in rejected("{'type': 'object'}")


def test_schema_as_text_or_bytes_equals_schema_as_mapping() -> None:
    text = json.dumps(REFUND, indent=2)
    assert make(text).form() == make(text.encode()).form() == make(REFUND).form()


def test_python_none_state_is_invalid_and_names_the_way_to_null() -> None:
    with pytest.raises(ConfigurationError, match='"null"'):
        FormInput("Confirm", REFUND, None)


@pytest.mark.parametrize("null", ["null", b"null", bytearray(b" null ")])
def test_explicit_json_null_state_is_valid(null: str | bytes | bytearray) -> None:
    prompt_input = FormInput("Confirm", REFUND, null)
    assert prompt_input.state_value() is None
    assert prompt_input.state_bytes == b"null"


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"job": "j-1", "n": 1.0}, b'{"job":"j-1","n":1}'),
        ('{"n": 1e2, "job": "j-1"}', b'{"job":"j-1","n":100}'),
        ('"job-42"', b'"job-42"'),
        ([1, "two", True], b'[1,"two",true]'),
        (7, b"7"),
        (False, b"false"),
        (Decimal("0.10"), b"0.1"),
    ],
)
def test_state_is_json_text_or_a_python_json_value(state: object, expected: bytes) -> None:
    assert FormInput("Confirm", REFUND, state).state_bytes == expected


def test_a_python_str_state_is_read_as_json_text() -> None:
    with pytest.raises(ConfigurationError, match="state is not valid JSON"):
        FormInput("Confirm", REFUND, "job-42")


@pytest.mark.parametrize("state", [object(), {1, 2}, b"x".decode, None.__class__])
def test_state_of_wrong_type_raises_type_error(state: object) -> None:
    with pytest.raises(TypeError, match="state must be JSON text or a JSON value"):
        FormInput("Confirm", REFUND, state)


@pytest.mark.parametrize("state", [{"x": float("nan")}, {1: "a"}, '{"a": 1, "a": 2}'])
def test_state_must_be_json(state: object) -> None:
    with pytest.raises(ConfigurationError, match="state is not valid JSON"):
        FormInput("Confirm", REFUND, state)


def test_state_value_is_a_fresh_detached_copy() -> None:
    prompt_input = FormInput("Confirm", REFUND, {"job": {"id": 1}})
    first = prompt_input.state_value()
    assert isinstance(first, dict)
    first["job"]["id"] = 2  # type: ignore[index]
    assert prompt_input.state_value() == {"job": {"id": 1}}
    assert prompt_input.state_value() is not prompt_input.state_value()


def test_form_returns_canonical_schema_bytes_without_state() -> None:
    prompt_input = FormInput("Confirm", REFUND, {"secret_job_key": "k-123"})
    body = prompt_input.form()
    assert body == canonical_bytes(from_python(REFUND))
    assert b"k-123" not in body
    assert b"secret_job_key" not in body
    assert prompt_input.schema_size == len(body)
    assert "k-123" not in repr(prompt_input)
    assert "secret_job_key" not in repr(prompt_input)
    prompt = prompt_input.prompt()
    assert prompt == FormPrompt("Confirm", body)
    assert [f.name for f in dataclasses.fields(FormPrompt)] == ["message", "schema_bytes"]


def test_form_prompt_schema_is_a_fresh_copy() -> None:
    prompt = make(REFUND).prompt()
    schema = prompt.schema
    schema["properties"]["ok"]["type"] = "string"  # type: ignore[index]
    assert prompt.schema == REFUND
    assert prompt.mode is InputMode.FORM


def test_form_input_is_immutable() -> None:
    prompt_input = make(REFUND)
    with pytest.raises(AttributeError):
        prompt_input._state = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        prompt_input.extra = 1  # type: ignore[attr-defined]
    assert prompt_input.mode is InputMode.FORM
    assert InputMode.FORM == "form"
    assert InputMode.URL == "url"


# --- the profile: what is accepted ---------------------------------------------------

ACCEPTED_PROPERTIES: dict[str, dict[str, Any]] = {
    "string": {"type": "string", "title": "Name", "description": "d", "default": "ab"},
    "string_bounds": {"type": "string", "minLength": 1, "maxLength": 20},
    "email": {"type": "string", "format": "email"},
    "uri": {"type": "string", "format": "uri"},
    "date": {"type": "string", "format": "date", "default": "2025-01-31"},
    "date_time": {"type": "string", "format": "date-time"},
    "number": {"type": "number", "minimum": Decimal("0.5"), "maximum": 10, "default": 1.5},
    "integer": {"type": "integer", "minimum": -3, "maximum": 3, "default": 0},
    "boolean": {"type": "boolean", "default": False},
    "enum": {"type": "string", "enum": ["low", "high"], "default": "low"},
    "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]},
    "titled": {
        "type": "string",
        "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
        "default": "g",
    },
    "multi": {
        "type": "array",
        "items": {"type": "string", "enum": ["x", "y", "z"]},
        "minItems": 1,
        "maxItems": 2,
        "default": ["x"],
    },
    "titled_multi": {
        "type": "array",
        "title": "Colours",
        "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "b", "title": "Blue"}]},
        "maxItems": 2,
    },
}


@pytest.mark.parametrize("name", sorted(ACCEPTED_PROPERTIES))
def test_each_profile_shape_is_accepted(name: str) -> None:
    schema = form({name: ACCEPTED_PROPERTIES[name]})
    assert make(schema).prompt().schema == parse(canonical_bytes(from_python(schema)))


@pytest.mark.parametrize(
    "root",
    [
        {},
        {"additionalProperties": False},
        {"required": []},
        {"$schema": "https://json-schema.org/draft/2020-12/schema"},
        {"$schema": "https://json-schema.org/draft/2020-12/schema#"},
    ],
)
def test_root_options_are_accepted(root: dict[str, Any]) -> None:
    make(form(dict(ACCEPTED_PROPERTIES), **root))


def test_an_empty_form_is_a_valid_confirmation() -> None:
    assert check(form({}), {}) is None


def test_profile_valid_forms_parse_as_mcp_elicitation_schemas() -> None:
    # Cross-check against the MCP SDK's own 2025-11-25 wire models.
    from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition, RequestedSchema
    from pydantic import TypeAdapter

    schema = json.loads(make(form(dict(ACCEPTED_PROPERTIES), required=["email"])).form())
    RequestedSchema.model_validate(schema)
    adapter = TypeAdapter(PrimitiveSchemaDefinition)
    for prop in schema["properties"].values():
        adapter.validate_python(prop)


# --- the profile: what fails, naming the property ------------------------------------


def base() -> dict[str, Any]:
    return form({"field": {"type": "string"}, "count": {"type": "integer"}})


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "object", "properties": {}}, "nested objects"),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 3}, "multiselect"),
        ({"type": "array", "items": {"type": "string"}, "maxItems": 3}, "multiselect"),
        ({"type": "array", "maxItems": 3}, "multiselect"),
        ({"type": "array", "items": {"type": "string", "enum": ["a"]}}, "maxItems"),
        ({"$ref": "#/$defs/x"}, "references"),
        ({"type": "string", "$ref": "#"}, "references"),
        ({"allOf": [{"type": "string"}]}, "combinators"),
        ({"anyOf": [{"type": "string"}]}, "combinators"),
        ({"type": "string", "anyOf": [{"const": "a", "title": "A"}]}, "combinators"),
        ({"type": "number", "oneOf": [{"const": 1}]}, "combinators"),
        ({"type": "string", "not": {"const": "a"}}, "combinators"),
        ({"type": "string", "pattern": "^a"}, "'pattern' is not allowed"),
        ({"type": "number", "multipleOf": 2}, "'multipleOf' is not allowed"),
        ({"type": "number", "exclusiveMinimum": 2}, "'exclusiveMinimum' is not allowed"),
        ({"type": "boolean", "const": True}, "'const' is not allowed"),
        ({"type": "string", "format": "hostname"}, "format must be one of"),
        ({"type": "string", "format": "email", "enum": ["a@b.c"]}, "'format' is not allowed"),
        ({"type": "string", "enumNames": ["A"]}, "enumNames needs an enum"),
        ({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}, "1 titles for 2 choices"),
        ({"type": "string", "enum": ["a"], "enumNames": "A"}, "array of strings"),
        ({"type": "string", "enum": []}, "nonempty"),
        ({"type": "string", "enum": ["a", "a"]}, "repeats"),
        ({"type": "string", "enum": [1, 2]}, "strings"),
        ({"type": "string", "oneOf": [{"const": "a"}]}, "exactly"),
        ({"type": "string", "oneOf": [{"const": "a", "title": "A", "x": 1}]}, "exactly"),
        (
            {
                "type": "string",
                "oneOf": [{"const": "a", "title": "A"}, {"const": "a", "title": "B"}],
            },
            "repeats",
        ),
        ({"type": "string", "enum": ["a"], "oneOf": [{"const": "a", "title": "A"}]}, "'enum'"),
        ({"type": ["string", "null"]}, "type must be one of"),
        ({"type": "null"}, "type must be one of"),
        ({"title": "no type"}, "needs a type"),
        (True, "schema object"),
        ({"type": "string", "title": 5}, "title must be a string"),
        ({"type": "string", "description": None}, "description must be a string"),
        ({"type": "string", "minLength": -1}, "within 0..2147483647"),
        ({"type": "string", "maxLength": 2**31}, "within 0..2147483647"),
        ({"type": "string", "maxLength": 1.5}, "must be an integer"),
        ({"type": "string", "maxLength": True}, "must be an integer"),
        ({"type": "string", "minLength": 3, "maxLength": 2}, "minLength exceeds maxLength"),
        ({"type": "number", "minimum": "0"}, "minimum must be a number"),
        ({"type": "number", "minimum": 2, "maximum": 1}, "minimum exceeds maximum"),
        ({"type": "number", "maximum": Decimal("1e5000")}, "numeric work profile"),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "maxItems": 2**31},
            "within 0..2147483647",
        ),
        (
            {
                "type": "array",
                "items": {"type": "string", "enum": ["a"]},
                "maxItems": 1,
                "minItems": 2,
            },
            "minItems exceeds maxItems",
        ),
        ({"type": "string", "default": 5}, "default is not a valid answer"),
        ({"type": "string", "format": "date", "default": "tomorrow"}, "default is not a valid"),
        ({"type": "string", "enum": ["a"], "default": "b"}, "default is not a valid answer"),
        ({"type": "integer", "default": 1.5}, "default is not a valid answer"),
        ({"type": "boolean", "default": "true"}, "default is not a valid answer"),
    ],
)
def test_unsupported_property_fails_naming_it(prop: Any, expected: str) -> None:
    schema = base()
    schema["properties"]["target prop"] = prop
    message = rejected(schema)
    assert "'target prop'" in message
    assert expected in message


def test_out_of_profile_number_in_schema_text_names_the_property() -> None:
    text = '{"type":"object","properties":{"big":{"type":"number","minimum":1e5000}}}'
    message = rejected(text)
    assert "'big'" in message
    assert "numeric work profile" in message


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ({"additionalProperties": True}, "true is unsupported"),
        ({"additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"required": ["field", "ghost"]}, "'ghost' is not a declared property"),
        ({"required": ["field", "field"]}, "listed twice"),
        ({"required": "field"}, "array of property names"),
        ({"required": [1]}, "must be strings"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "2020-12"),
        ({"$defs": {}}, "references"),
        ({"allOf": []}, "combinators"),
        ({"title": "Root"}, "'title' is not allowed in the form root"),
        ({"patternProperties": {}}, "'patternProperties' is not allowed"),
        ({"type": "array"}, '"type": "object"'),
        ({"properties": []}, "properties object"),
    ],
)
def test_unsupported_root_fails_naming_the_keyword(root: dict[str, Any], expected: str) -> None:
    schema = base()
    schema.update(root)
    assert expected in rejected(schema)


def test_root_needs_type_and_properties() -> None:
    assert '"type": "object"' in rejected({"properties": {}})
    assert "properties object" in rejected({"type": "object"})


def test_property_names_must_be_nonempty() -> None:
    assert "nonempty" in rejected(form({"": {"type": "string"}}))


def test_count_bounds_are_inclusive() -> None:
    make(form({"s": {"type": "string", "minLength": 0, "maxLength": MAX_COUNT}}))
    make(form({"s": {"type": "string", "maxLength": Decimal("5.0")}}))  # integral value
    assert MAX_COUNT == 2_147_483_647


# --- hypothesis: generated forms from the profile grammar --------------------------------

texts = st.text(max_size=12)
names = st.text(min_size=1, max_size=12)
choice_lists = st.lists(st.text(max_size=8), min_size=1, max_size=5, unique=True)
profile_numbers = st.one_of(
    st.integers(-(10**30), 10**30),
    st.decimals(
        allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6
    ),
)
counts = st.integers(0, MAX_COUNT)


@st.composite
def annotations(draw: st.DrawFn) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if draw(st.booleans()):
        result["title"] = draw(texts)
    if draw(st.booleans()):
        result["description"] = draw(texts)
    return result


@st.composite
def string_props(draw: st.DrawFn) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string", **draw(annotations())}
    low, high = sorted(draw(st.lists(st.integers(0, 30), min_size=2, max_size=2)))
    if draw(st.booleans()):
        prop["minLength"] = low
    if draw(st.booleans()):
        prop["maxLength"] = high
    if draw(st.booleans()):
        prop["format"] = draw(st.sampled_from(sorted(FORM_FORMATS)))
    elif draw(st.booleans()):
        prop["default"] = "x" * low
    return prop


@st.composite
def number_props(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["number", "integer"]))
    prop: dict[str, Any] = {"type": kind, **draw(annotations())}
    low, high = sorted(draw(st.lists(profile_numbers, min_size=2, max_size=2)))
    if draw(st.booleans()):
        prop["minimum"] = low
    if draw(st.booleans()):
        prop["maximum"] = high
    if kind == "integer" and "minimum" in prop and "maximum" in prop:
        # the bounds must admit an integer (issue 9, item 13)
        prop["maximum"] = max(high, math.ceil(low))
    if kind == "number" and draw(st.booleans()):
        prop["default"] = low
    return prop


@st.composite
def choice_props(draw: st.DrawFn) -> dict[str, Any]:
    choices = draw(choice_lists)
    shape = draw(st.sampled_from(["enum", "legacy", "titled", "multi", "titled_multi"]))
    prop: dict[str, Any] = draw(annotations())
    titled = [{"const": c, "title": draw(texts)} for c in choices]
    if shape in ("enum", "legacy", "titled"):
        prop["type"] = "string"
        if shape == "titled":
            prop["oneOf"] = titled
        else:
            prop["enum"] = choices
            if shape == "legacy":
                prop["enumNames"] = [draw(texts) for _ in choices]
        if draw(st.booleans()):
            prop["default"] = draw(st.sampled_from(choices))
        return prop
    prop["type"] = "array"
    prop["items"] = {"type": "string", "enum": choices} if shape == "multi" else {"anyOf": titled}
    low, high = sorted(draw(st.lists(st.integers(0, 10), min_size=2, max_size=2)))
    low = min(low, len(choices))  # answers cannot repeat a choice (issue 9, item 13)
    prop["maxItems"] = draw(st.one_of(st.just(high), counts.filter(lambda n: n >= high)))
    if draw(st.booleans()):
        prop["minItems"] = low
    if draw(st.booleans()):
        prop["default"] = choices[:low]
    return prop


def boolean_props() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda extra, default: {"type": "boolean", **extra, **default},
        annotations(),
        st.sampled_from([{}, {"default": True}, {"default": False}]),
    )


property_schemas = st.one_of(string_props(), number_props(), choice_props(), boolean_props())


@st.composite
def valid_forms(draw: st.DrawFn, min_properties: int = 0) -> dict[str, Any]:
    properties = draw(st.dictionaries(names, property_schemas, min_size=min_properties, max_size=5))
    schema = form(properties)
    if properties and draw(st.booleans()):
        schema["required"] = draw(
            st.lists(st.sampled_from(sorted(properties)), unique=True, max_size=len(properties))
        )
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    if draw(st.booleans()):
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(valid_forms())
def test_generated_valid_forms_construct_and_round_trip(schema: dict[str, Any]) -> None:
    expected = parse(canonical_bytes(from_python(schema, profile=True)))
    prompt_input = make(schema)
    assert parse(prompt_input.form()) == expected
    assert prompt_input.prompt().schema == expected
    assert canonical_bytes(parse(prompt_input.form())) == prompt_input.form()
    # The same document given as text gives the same bytes.
    assert make(prompt_input.form().decode()).form() == prompt_input.form()


def nested_object(prop: dict[str, Any]) -> Any:
    return {"type": "object", "properties": {"inner": prop}}


def add_key(key: str, value: Any) -> Any:
    return lambda prop: {**prop, key: value}


PROPERTY_MUTATIONS = {
    "nested object": nested_object,
    "$ref": lambda prop: {"$ref": "#/properties/x"},
    "allOf": lambda prop: {"allOf": [prop]},
    "unknown keyword": add_key("x-unknown", 1),
    "count 2**31": lambda prop: {"type": "string", "maxLength": 2**31},
    "number 1e5000": lambda prop: {"type": "number", "minimum": Decimal("1e5000")},
    "array without maxItems": lambda prop: {
        "type": "array",
        "items": {"type": "string", "enum": ["a"]},
    },
    "enumNames mismatch": lambda prop: {
        "type": "string",
        "enum": ["a", "b"],
        "enumNames": ["A", "B", "C"],
    },
    # Wrapping the property itself could make a valid multiselect (a string enum),
    # so the items are a kind a multiselect never allows.
    "array of numbers": lambda prop: {
        "type": "array",
        "items": {"type": "number"},
        "maxItems": 2,
    },
    "array of objects": lambda prop: {"type": "array", "items": nested_object(prop), "maxItems": 2},
}


@FAST
@given(valid_forms(min_properties=1), st.sampled_from(sorted(PROPERTY_MUTATIONS)), st.data())
def test_generated_invalid_property_mutations_fail_naming_the_property(
    schema: dict[str, Any], mutation: str, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(schema["properties"])))
    schema["properties"][name] = PROPERTY_MUTATIONS[mutation](schema["properties"][name])
    assert short_prefix(name) in rejected(schema)


@FAST
@given(valid_forms(), names)
def test_generated_undeclared_required_name_fails_naming_it(
    schema: dict[str, Any], ghost: str
) -> None:
    if ghost in schema["properties"]:
        return
    schema["required"] = [*schema.get("required", []), ghost]
    assert short_prefix(ghost) in rejected(schema)


@FAST
@given(valid_forms())
def test_generated_additional_properties_true_fails(schema: dict[str, Any]) -> None:
    schema["additionalProperties"] = True
    assert "additionalProperties" in rejected(schema)


@FAST
@given(valid_forms(), names.filter(lambda n: n not in {"$schema", "type", "properties"}))
def test_generated_unknown_root_keyword_fails(schema: dict[str, Any], keyword: str) -> None:
    if keyword in schema or keyword in {"required", "additionalProperties"}:
        return
    schema[keyword] = 1
    assert short_prefix(keyword) in rejected(schema)


@FAST
@given(valid_forms(), names)
def test_generated_undeclared_answer_field_is_rejected(schema: dict[str, Any], extra: str) -> None:
    prompt_input = make(schema)
    if extra in schema["properties"]:
        return
    message = prompt_input.validate_answers({extra: True})
    assert message is not None
    assert short_prefix(extra) in message


@FAST
@given(valid_forms())
def test_generated_empty_answers_pass_exactly_when_nothing_is_required(
    schema: dict[str, Any],
) -> None:
    outcome = make(schema).validate_answers({})
    assert (outcome is None) == (not schema.get("required"))


# --- answer checks ---------------------------------------------------------------------

ANSWER_FORM = form(
    {
        "ok": {"type": "boolean"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 9},
        "name": {"type": "string", "minLength": 2, "maxLength": 4},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "level": {"type": "string", "enum": ["low", "high"], "default": "low"},
        "colour": {
            "type": "string",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
        },
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "maxItems": 2,
            "minItems": 1,
        },
        "titled_tags": {
            "type": "array",
            "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y", "title": "Y"}]},
            "maxItems": 1,
        },
    },
    required=["ok"],
)


@pytest.mark.parametrize(
    "answers",
    [
        {"ok": True},
        {"ok": False},
        {"ok": True, "qty": 9, "name": "éé", "email": "a@example.com"},
        {"ok": True, "qty": Decimal("3.0")},
        {"ok": True, "site": "https://example.com/x", "day": "2025-02-28"},
        {"ok": True, "at": "2025-02-28T10:00:00Z", "level": "high", "colour": "g"},
        {"ok": True, "tags": ["a", "c"], "titled_tags": ["y"], "name": "😀😀😀😀"},
    ],
)
def test_valid_answers_pass(answers: dict[str, Any]) -> None:
    assert check(ANSWER_FORM, answers) is None


@pytest.mark.parametrize(
    ("answers", "field"),
    [
        ({"ok": True, "extra": 1}, "'extra' is not declared"),
        ({"ok": "true"}, "'ok'"),
        ({"ok": 1}, "'ok'"),
        ({"ok": True, "qty": "5"}, "'qty'"),
        ({"ok": True, "qty": 1.5}, "'qty'"),
        ({"ok": True, "qty": 10}, "'qty'"),
        ({}, "'ok' is required"),
        ({"level": "low"}, "'ok' is required"),
        ({"ok": True, "name": "a"}, "'name'"),
        ({"ok": True, "name": "😀😀😀😀😀"}, "'name'"),
        ({"ok": True, "email": "not-an-email"}, "'email'"),
        ({"ok": True, "site": "no scheme"}, "'site'"),
        ({"ok": True, "day": "2025-02-30"}, "'day'"),
        ({"ok": True, "day": "28/02/2025"}, "'day'"),
        ({"ok": True, "at": "2025-02-28"}, "'at'"),
        ({"ok": True, "level": "medium"}, "'level'"),
        ({"ok": True, "colour": "Red"}, "'colour'"),
        ({"ok": True, "tags": ["a", "b", "c"]}, "'tags'"),
        ({"ok": True, "tags": []}, "'tags'"),
        ({"ok": True, "tags": ["d"]}, "'tags'"),
        ({"ok": True, "tags": "a"}, "'tags'"),
        ({"ok": True, "titled_tags": ["X"]}, "'titled_tags'"),
        ({"ok": True, "level": None}, "'level'"),
    ],
)
def test_invalid_answers_fail_naming_the_field(answers: dict[str, Any], field: str) -> None:
    message = check(ANSWER_FORM, answers)
    assert message is not None
    assert field in message


@pytest.mark.parametrize("answers", [[], "x", None, 5])
def test_answers_must_be_an_object(answers: Any) -> None:
    assert check(ANSWER_FORM, answers) == "answers must be a JSON object"


def test_defaults_are_never_inserted() -> None:
    prompt_input = make(
        form({"level": {"type": "string", "enum": ["low"], "default": "low"}}, required=["level"])
    )
    answers: dict[str, Any] = {}
    assert prompt_input.validate_answers(answers) == "answer field 'level' is required"
    assert answers == {}
    optional = make(form({"level": {"type": "string", "enum": ["low"], "default": "low"}}))
    assert optional.validate_answers(answers) is None
    assert answers == {}


def test_additional_properties_omitted_still_allows_only_declared_fields() -> None:
    message = check(form({"a": {"type": "string"}}), {"a": "x", "b": "y"})
    assert message == "answer field 'b' is not declared by the form"


def test_answer_messages_quote_only_a_short_prefix() -> None:
    hostile = "x" * 5000
    message = check(ANSWER_FORM, {"ok": True, hostile: 1})
    assert message is not None
    assert len(message) < 200
    message = check(ANSWER_FORM, {"ok": True, "email": hostile})
    assert message is not None
    assert hostile not in message


# --- URL input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://pay.example.com/checkout?order=7#top",
        "HTTPS://Example.COM",
        "https://example.com:8443/a%20b",
        "https://[2001:db8::1]/pay",
        "https://127.0.0.1/pay",
        "https://xn--bcher-kva.example/",
    ],
)
def test_absolute_https_urls_are_accepted(url: str) -> None:
    prompt_input = URLInput("Pay for order 7", url)
    assert prompt_input.url() == URLPrompt("Pay for order 7", url)
    assert prompt_input.prompt() == prompt_input.url()
    assert prompt_input.mode is InputMode.URL
    assert prompt_input.url().mode is InputMode.URL


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/pay", "https"),
        ("http://localhost:8080/pay", "https"),
        ("http://127.0.0.1/pay", "https"),
        ("ftp://example.com/", "https"),
        ("javascript:alert(1)", "https"),
        ("/relative/path", "https"),
        ("example.com/pay", "https"),
        ("https:example.com", "absolute"),
        ("https:///path", "absolute"),
        ("https://:443/", "no host"),
        ("https://user@example.com/", "user information"),
        ("https://user:pass@example.com/", "user information"),
        ("https://@example.com/", "user information"),
        ("https://exa mple.com/", "whitespace"),
        (" https://example.com/", "whitespace"),
        ("https://example.com/\n", "whitespace"),
        ("https://example.com/\x00", "control"),
        ("https://example.com/\x7f", "control"),
        ("https://bücher.example/", "non-ASCII"),
        ("https://example.com\\@evil.com/", "not allowed"),
        ("https://example.com/<script>", "not allowed"),
        ("https://example.com/%zz", "percent"),
        ("https://example.com:99999/", "malformed"),
        ("https://example.com:port/", "malformed"),
        ("https://[::1/", "malformed"),
        ("https://example.com:/", "empty port"),
        ("", "empty"),
    ],
)
def test_other_urls_are_rejected(url: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match="URLInput url") as info:
        URLInput("Pay", url)
    assert expected in str(info.value)


def test_url_input_checks_types_and_message() -> None:
    with pytest.raises(TypeError, match="url must be a str"):
        URLInput("Pay", b"https://example.com")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="nonblank"):
        URLInput("  ", "https://example.com")


def test_url_prompt_exposes_only_message_and_url() -> None:
    assert [f.name for f in dataclasses.fields(URLPrompt)] == ["message", "url"]
    prompt_input = URLInput("Pay", "https://example.com/pay")
    with pytest.raises(AttributeError):
        prompt_input._url = "https://evil.example"  # type: ignore[misc]


def test_url_input_keeps_private_state_out_of_its_prompt() -> None:
    prompt_input = URLInput("Pay", "https://example.com/pay", state={"job": 7})
    assert prompt_input.state_bytes == b'{"job":7}'
    assert prompt_input.url() == URLPrompt("Pay", "https://example.com/pay")
    assert "job" not in repr(prompt_input)
    again = pickle.loads(pickle.dumps(prompt_input))
    assert (again.state_bytes, again.url()) == (prompt_input.state_bytes, prompt_input.url())
    assert URLInput("Pay", "https://example.com/pay").state_bytes == b""
    with pytest.raises(TypeError, match="URLInput state"):
        URLInput("Pay", "https://example.com/pay", state=object())
    with pytest.raises(ConfigurationError, match="URLInput state is not valid JSON"):
        URLInput("Pay", "https://example.com/pay", state="{")


def test_hostile_url_is_quoted_only_as_a_prefix() -> None:
    url = "http://" + "a" * 5000
    with pytest.raises(ConfigurationError) as info:
        URLInput("Pay", url)
    assert len(str(info.value)) < 200


def test_url_input_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the library opened a connection")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    prompt_input = URLInput("Pay", "https://unreachable.invalid/pay")
    assert prompt_input.url().url == "https://unreachable.invalid/pay"


def test_an_array_of_a_string_enum_property_is_a_valid_multiselect() -> None:
    # Why the "arbitrary array" mutation above had to go: it sometimes built this.
    make(
        form({"pick": {"type": "array", "items": {"type": "string", "enum": [""]}, "maxItems": 2}})
    )


# --- genuine prompt classes, multiselects, hosts, the answer-check cache (issue 9) -----


@pytest.mark.parametrize("cls", [FormInput, URLInput])
def test_prompt_classes_cannot_be_subclassed(cls: type) -> None:
    with pytest.raises(TypeError, match="subclass"):
        type("Sneaky", (cls,), {"__slots__": ()})


@pytest.mark.parametrize("cls", [FormInput, URLInput])
async def test_an_unconstructed_prompt_is_an_invalid_result(cls: Any) -> None:
    async def handler(inv: Invocation) -> Any:
        return await_input(cls.__new__(cls))

    outcome = await ask(handler)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "FormInput or URLInput" in outcome.failure.message


async def test_a_forged_url_prompt_never_reaches_the_person() -> None:
    forged = URLInput.__new__(URLInput)
    object.__setattr__(forged, "_message", "pay here")
    object.__setattr__(forged, "_url", "http://user:pw@127.0.0.1/")

    async def handler(inv: Invocation) -> Any:
        return await_input(forged)

    assert code(await ask(handler)) is FailureCode.INVALID_RESULT


def test_genuine_prompts_copy_and_pickle_as_themselves() -> None:
    form = FormInput("ok?", EMPTY_FORM, {"job": 1})
    url = URLInput("pay", "https://example.com/pay")
    for prompt in (form, url):
        assert copy.copy(prompt) is prompt
        assert copy.deepcopy(prompt) is prompt
    again = pickle.loads(pickle.dumps(form))
    assert (again.message, again.form(), again.state_bytes) == (
        form.message,
        form.form(),
        form.state_bytes,
    )
    assert pickle.loads(pickle.dumps(url)).url() == url.url()
    with pytest.raises(TypeError):
        pickle.dumps(FormInput.__new__(FormInput))


MULTISELECT = {
    "type": "object",
    "properties": {
        "colors": {
            "type": "array",
            "maxItems": 3,
            "items": {"type": "string", "enum": ["red", "green", "blue"]},
        },
        "sizes": {
            "type": "array",
            "maxItems": 2,
            "items": {"anyOf": [{"const": "s", "title": "S"}, {"const": "m", "title": "M"}]},
        },
    },
}


@pytest.mark.parametrize(
    ("answers", "field"),
    [({"colors": ["red", "red"]}, "colors"), ({"sizes": ["s", "s"]}, "sizes")],
)
def test_a_multiselect_answer_must_not_repeat_a_choice(answers: Any, field: str) -> None:
    form = FormInput("pick", MULTISELECT, "null")
    problem = form.validate_answers(answers)
    assert problem is not None
    assert field in problem
    assert "repeat" in problem
    assert form.validate_answers({"colors": ["red", "blue"], "sizes": ["m"]}) is None


async def test_a_repeated_choice_is_refused_before_the_handler_resumes() -> None:
    calls: list[Any] = []

    async def handler(inv: Invocation) -> Any:
        calls.append(inv.resume)
        if inv.resume is None:
            return await_input(FormInput("pick", MULTISELECT, "null"))
        return finish(Result([Text("ok")]))

    reg = ask_registry(handler)
    pending = await reg.invoke(Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT)
    assert isinstance(pending, Pending)
    outcome = await reg.invoke(
        Ctx(),
        "ask",
        "{}",
        input_support=PROMPT_SUPPORT,
        resume=(pending.continuation, InputResponse.accept({"colors": ["red", "red"]})),
    )
    assert code(outcome) is FailureCode.INVALID_REQUEST
    assert len(calls) == 1


def test_a_multiselect_default_must_not_repeat_a_choice() -> None:
    schema = json.loads(json.dumps(MULTISELECT))
    schema["properties"]["colors"]["default"] = ["red", "red"]
    with pytest.raises(ConfigurationError, match="colors"):
        FormInput("pick", schema, "null")


def test_a_multiselect_cannot_require_more_items_than_it_has_choices() -> None:
    schema = json.loads(json.dumps(MULTISELECT))
    schema["properties"]["colors"]["minItems"] = 3
    FormInput("pick", schema, "null")
    schema["properties"]["colors"]["minItems"] = 4
    schema["properties"]["colors"]["maxItems"] = 4
    with pytest.raises(ConfigurationError, match="minItems"):
        FormInput("pick", schema, "null")


def test_an_integer_field_must_admit_an_integer() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1.25, "maximum": 1.75}},
    }
    with pytest.raises(ConfigurationError, match="integer"):
        FormInput("n?", schema, "null")
    schema["properties"]["n"]["maximum"] = 2
    FormInput("n?", schema, "null")


@pytest.mark.parametrize(
    "url",
    [
        "https://-bad_host-/",
        "https://bad_host/",
        "https://-leading.example/",
        "https://trailing-.example/",
        "https://a..b/",
        "https://" + "a" * 64 + ".example/",
        "https://" + ".".join(["abcdefghij"] * 25) + ".com/",  # 278 characters
        "https://1.2.3/",
        "https://256.1.1.1/",
        "https://01.2.3.4/",
        "https://0x7f.0.0.1/",
        "https://[::1%25eth0]/",
        "https://[v1.future]/",
        "https://[not-ip]/",
        "https://ex%61mple.com/",
        "https://example.com:0/",
    ],
)
def test_a_url_host_must_be_a_host_name_or_ip_literal(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"host|port"):
        URLInput("go", url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/pay?x=1",
        "https://EXAMPLE.com/",
        "https://xn--bcher-kva.example/",
        "https://a-b.c-d.example:8443/x",
        "https://127.0.0.1/",
        "https://[::1]:8443/",
        "https://[2001:db8::1]/",
        "https://localhost/",
        "https://" + "a" * 63 + ".example/",
    ],
)
def test_valid_hosts_are_accepted(url: str) -> None:
    assert URLInput("go", url).url().url == url


def test_the_answer_check_cache_is_bounded_in_bytes() -> None:
    from opgate._forms import FormChecks

    checks = FormChecks(capacity=256, max_bytes=64 * 1024)
    for index in range(40):
        title = f"{index:04d}" + "t" * 4000
        schema = FormInput(
            "ok?",
            {"type": "object", "properties": {"a": {"type": "string", "title": title}}},
            "null",
        ).form()
        assert checks.validate(schema, {"a": "x"}) is None
        assert checks.cached_bytes <= 64 * 1024
    huge = FormInput(
        "ok?",
        {"type": "object", "properties": {"a": {"type": "string", "title": "h" * 70_000}}},
        "null",
    ).form()
    assert checks.validate(huge, {"a": 1}) is not None  # still checked, never cached
    assert checks.cached_bytes <= 64 * 1024
