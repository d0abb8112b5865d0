"""Violations: the first way an instance fails its schema, and the message for it."""

from __future__ import annotations

import string
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._schema import CompiledSchema, SchemaCompiler, SchemaRole, compile_schema
from opgate._violations import SchemaViolation

D7 = "http://json-schema.org/draft-07/schema#"
INPUT = SchemaRole.INPUT
FORM = SchemaRole.FORM


def compile_output(schema: object) -> CompiledSchema:
    return SchemaCompiler().compile(schema, role=SchemaRole.OUTPUT, where="schema")


OBJECT_SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "maximum": Decimal("5.50"), "minimum": 0},
        "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]*$"},
        "e": {"enum": ["red", "green"]},
        "c": {"const": "fixed"},
        "list": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 2},
        "a/b": {"type": "boolean"},
        "m~n": {"type": "boolean"},
    },
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({"n": "x"}, ("/n", "type", "expected type integer")),
        ({"n": 7}, ("/n", "maximum", "exceeds maximum 5.5")),
        ({"n": -1}, ("/n", "minimum", "is below minimum 0")),
        ({"n": 1, "s": "abcd"}, ("/s", "maxLength", "exceeds maximum length 3")),
        ({"n": 1, "s": "AB"}, ("/s", "pattern", "does not match the pattern '^[a-z]*$'")),
        ({"n": 1, "e": "blue"}, ("/e", "enum", "is not one of the allowed values")),
        ({"n": 1, "c": "other"}, ("/c", "const", "does not equal the required constant")),
        ({"n": 1, "list": [1, "x"]}, ("/list/1", "type", "expected type integer")),
        ({"n": 1, "list": [1, 1]}, ("/list", "uniqueItems", "has duplicate items")),
        ({"n": 1, "list": [1, 2, 3]}, ("/list", "maxItems", "has more than 2 items")),
        ({"n": 1, "a/b": 1}, ("/a~1b", "type", "expected type boolean")),
        ({"n": 1, "m~n": 1}, ("/m~0n", "type", "expected type boolean")),
        ({}, ("", "required", "missing required property 'n'")),
        (
            {"n": 1, "extra/x": 1},
            ("/extra~1x", "additionalProperties", "is a property the schema does not allow"),
        ),
        ([], ("", "type", "expected type object")),
    ],
)
def test_first_violation(instance: Any, expected: tuple[str, str, str]) -> None:
    compiled = compile_schema(OBJECT_SCHEMA, role=INPUT)
    violation = compiled.first_violation(instance)
    assert violation == SchemaViolation(*expected)
    assert not compiled.is_valid(instance)


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        (
            {"minContains": 2, "contains": {"const": 1}},
            [1],
            ("", "minContains", "has too few items matching the contains schema"),
        ),
        (
            {"maxContains": 1, "contains": {"const": 1}},
            [1, 1],
            ("", "maxContains", "has too many items matching the contains schema"),
        ),
        (
            {"contains": {"const": 1}},
            [2],
            ("", "contains", "has no item matching the contains schema"),
        ),
        (
            {"dependentRequired": {"a": ["b"]}},
            {"a": 1},
            ("", "dependentRequired", "missing required property 'b'"),
        ),
        ({"properties": {"a": False}}, {"a": 1}, ("/a", "false", "is not allowed here")),
        (
            {"properties": {"items": False}},
            {"items": 1},
            ("/items", "false", "is not allowed here"),
        ),
        (
            {"additionalProperties": False},
            {"x": 1},
            ("", "additionalProperties", "has a property the schema does not allow"),
        ),
        (
            {"propertyNames": False},
            {"x": 1},
            ("", "propertyNames", "has a property name the schema does not allow"),
        ),
        ({"items": False}, [1], ("/0", "items", "is an item the schema does not allow")),
        (
            {"prefixItems": [{}, False]},
            [1, 2],
            ("/1", "prefixItems", "is an item the schema does not allow"),
        ),
        (False, 1, ("", "false", "is not allowed here")),
        ({"oneOf": [{}, {}]}, 1, ("", "oneOf", "matches more than one of the alternative schemas")),
        (
            {"oneOf": [{"type": "string"}]},
            1,
            ("", "oneOf", "does not match any of the alternative schemas"),
        ),
        (
            {"anyOf": [{"type": "string"}]},
            1,
            ("", "anyOf", "does not match any of the allowed schemas"),
        ),
        ({"not": {}}, 1, ("", "not", "matches a schema it must not match")),
        (
            {"propertyNames": {"maxLength": 2}},
            {"abc": 1},
            (
                "/abc",
                "propertyNames",
                "is a property name the schema does not allow: exceeds maximum length 2",
            ),
        ),
        (
            {"unevaluatedProperties": False},
            {"z": 1},
            ("/z", "unevaluatedProperties", "is a property the schema does not allow"),
        ),
        (
            {"prefixItems": [{}], "unevaluatedItems": False},
            [1, 2],
            ("", "unevaluatedItems", "has items the schema does not allow"),
        ),
        (
            {"exclusiveMaximum": Decimal("1e3")},
            1000,
            ("", "exclusiveMaximum", "must be less than 1000"),
        ),
        (
            {"exclusiveMinimum": 10**30},
            10**30,
            ("", "exclusiveMinimum", "must be greater than 1e+30"),
        ),
        ({"multipleOf": Decimal("0.3")}, 1, ("", "multipleOf", "is not a multiple of 0.3")),
        (
            {"minimum": Decimal("0.1000000000000000000001")},
            Decimal("0.1"),
            ("", "minimum", "is below minimum 0.1000000000000000000001"),
        ),
        ({"minProperties": 2}, {"a": 1}, ("", "minProperties", "has fewer than 2 properties")),
        ({"maxProperties": 0}, {"a": 1}, ("", "maxProperties", "has more than 0 properties")),
        ({"minItems": 1}, [], ("", "minItems", "has fewer than 1 items")),
        ({"type": ["string", "null"]}, 1, ("", "type", "expected type null or string")),
        (
            {"$schema": D7, "items": [{}], "additionalItems": False},
            [1, 2],
            ("", "additionalItems", "has more than the 1 items the schema allows"),
        ),
        (
            {"$schema": D7, "dependencies": {"a": ["b"]}},
            {"a": 1},
            ("", "dependencies", "missing required property 'b'"),
        ),
    ],
)
def test_violation_kinds(schema: object, instance: Any, expected: tuple[str, str, str]) -> None:
    assert compile_output(schema).first_violation(instance) == SchemaViolation(*expected)


def test_violation_is_a_small_frozen_value() -> None:
    violation = SchemaViolation("/a", "type", "expected type integer")
    assert str(violation) == "/a: expected type integer"
    assert str(SchemaViolation("", "required", "missing required property 'n'")) == (
        "(root): missing required property 'n'"
    )
    with pytest.raises(AttributeError):
        violation.pointer = "/b"  # type: ignore[misc]


def test_violation_str_cuts_long_member_names() -> None:
    name = "k" * 5000
    compiled = compile_output({"properties": {"a": {}}, "additionalProperties": False})
    violation = compiled.first_violation({name: 1})
    assert violation is not None
    assert violation.pointer == "/" + name  # exact for programs
    assert len(str(violation)) < 120  # short for people


SECRET = st.text(alphabet=string.ascii_letters + string.digits, min_size=6, max_size=40).map(
    lambda text: "Zq" + text
)


@settings(max_examples=60)
@given(SECRET)
def test_messages_never_contain_the_instance_value(secret: str) -> None:
    compiled = compile_schema(
        {
            "properties": {
                "t": {"type": "integer"},
                "e": {"enum": ["a"]},
                "c": {"const": "a"},
                "l": {"maxLength": 2},
                "p": {"pattern": "^[0-9]+$"},
                "f": {"format": "email"},
                "n": {"not": {"type": "string"}},
                "o": {"oneOf": [{"type": "integer"}]},
                "u": {"items": {"const": 1}},
            },
            "propertyNames": {"maxLength": 1},
        },
        role=FORM,
    )
    for key in "teclpfno":
        violation = compiled.first_violation({key: secret})
        assert violation is not None
        assert secret not in str(violation)
    violation = compiled.first_violation({"u": [secret]})
    assert violation is not None
    assert secret not in str(violation)
    violation = compiled.first_violation({secret: 1})
    assert violation is not None
    assert secret not in violation.message


@given(st.integers(min_value=10**6, max_value=10**40))
def test_numeric_messages_quote_only_the_limit(value: int) -> None:
    violation = compile_output({"maximum": 5}).first_violation(value)
    assert violation == SchemaViolation("", "maximum", "exceeds maximum 5")
