"""The schema compiler profile: dialects, references, roles, formats, counts, caches."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoke_support import Recorder
from opgate import ConfigurationError, Operation, Registry
from opgate._json import canonical_bytes, parse
from opgate._schema import (
    COUNT_KEYWORDS,
    MAX_CACHED_ERROR_DOCUMENTS,
    MAX_CACHED_VALIDATORS,
    MAX_COUNT,
    CompiledSchema,
    SchemaCache,
    SchemaCompiler,
    SchemaRole,
    compile_schema,
)
from opgate._violations import SchemaViolation

from conftest import AllowAll

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"
OUTPUT = SchemaRole.OUTPUT
INPUT = SchemaRole.INPUT
FORM = SchemaRole.FORM


def compile_output(schema: object) -> CompiledSchema:
    return SchemaCompiler().compile(schema, role=OUTPUT, where="schema")


def rejection(schema: object, role: SchemaRole = OUTPUT, where: str = "schema") -> str:
    with pytest.raises(ConfigurationError) as info:
        SchemaCompiler().compile(schema, role=role, where=where)
    return str(info.value)


# --- parsing and the numeric profile -------------------------------------------------


def test_schema_as_text_and_as_python_values_compile_alike() -> None:
    text = '{"type": "object", "properties": {"n": {"maximum": 1.50}}}'
    from_text = compile_output(text)
    from_bytes = compile_output(text.encode())
    from_python = compile_output(json.loads(text, parse_float=Decimal))
    assert from_text.canonical == from_bytes.canonical == from_python.canonical
    assert from_text.document() == {
        "type": "object",
        "properties": {"n": {"maximum": Decimal("1.50")}},
    }
    assert from_text.first_violation({"n": Decimal("1.51")}) is not None
    assert from_text.first_violation({"n": Decimal("1.5")}) is None


def test_duplicate_keys_in_schema_text_fail() -> None:
    message = rejection('{"type": "object", "type": "string"}')
    assert "duplicate object member name 'type'" in message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_as_python_floats_fail_with_pointer(bad: float) -> None:
    message = rejection({"properties": {"a": {"minimum": bad}}})
    assert message.startswith("schema at /properties/a/minimum: ")
    assert "NaN and infinities" in message


@pytest.mark.parametrize("text", ['{"minimum": NaN}', '{"minimum": Infinity}'])
def test_nan_and_infinity_in_text_fail(text: str) -> None:
    assert "not a JSON number" in rejection(text)


@pytest.mark.parametrize(
    "schema",
    [
        '{"properties": {"a": {"maximum": 1e5000}}}',
        {"properties": {"a": {"maximum": Decimal("1e5000")}}},
        {"properties": {"a": {"maximum": 10**5000}}},
        {"properties": {"a": {"enum": [Decimal("1e-5000")]}}},
    ],
)
def test_numbers_outside_the_profile_fail_construction(schema: object) -> None:
    message = rejection(schema)
    assert message.startswith("schema at /properties/a/")
    assert "numeric work profile" in message


def test_numbers_inside_the_profile_are_exact() -> None:
    compiled = compile_output('{"minimum": 1e4000, "multipleOf": 1e-10}')
    assert compiled.is_valid(10**4000)
    assert not compiled.is_valid(Decimal("9.999e3999"))


def test_zero_with_a_huge_exponent_is_zero() -> None:
    assert compile_output('{"const": 0e999999999}').is_valid(0)


@pytest.mark.parametrize("schema", [5, "5", "null", '"text"', [], {1, 2}])
def test_a_schema_must_be_an_object_or_boolean(schema: object) -> None:
    message = rejection(schema)
    assert message.startswith("schema")


def test_role_must_be_a_schema_role() -> None:
    with pytest.raises(TypeError):
        SchemaCompiler().compile({}, role="input", where="schema")  # type: ignore[arg-type]


# --- exact numbers in validation -----------------------------------------------------


def test_decimal_minimum_is_exact() -> None:
    compiled = compile_output({"minimum": Decimal("0.1")})
    assert not compiled.is_valid(Decimal("0.09999999999999999999999"))
    assert compiled.is_valid(Decimal("0.1"))
    assert compiled.is_valid(Decimal("0.10000000000000000000001"))


def test_python_float_in_a_schema_means_its_shortest_repr() -> None:
    compiled = compile_output({"minimum": 0.1})
    assert compiled.document() == {"minimum": Decimal("0.1")}
    assert not compiled.is_valid(Decimal("0.09999999999999999999999"))


def test_big_integers_and_multiple_of_are_exact() -> None:
    compiled = compile_output({"maximum": 10**30, "multipleOf": Decimal("0.01")})
    assert compiled.is_valid(10**30)
    assert not compiled.is_valid(10**30 + 1)
    assert compiled.is_valid(Decimal("0.07"))  # 0.07 / 0.01 is 7.000000000000001 in floats
    assert not compiled.is_valid(Decimal("0.071"))


def test_integer_type_accepts_integral_decimals() -> None:
    compiled = compile_output({"type": "integer", "const": 1})
    assert compiled.is_valid(Decimal("1.0"))
    assert compiled.is_valid(1)
    assert not compiled.is_valid(Decimal("1.5"))


# --- dialects ------------------------------------------------------------------------


def test_default_dialect_is_2020_12() -> None:
    assert compile_output({}).dialect == "2020-12"
    assert compile_output(True).dialect == "2020-12"


@pytest.mark.parametrize(
    ("uri", "dialect"),
    [
        ("https://json-schema.org/draft/2020-12/schema", "2020-12"),
        ("https://json-schema.org/draft/2020-12/schema#", "2020-12"),
        ("http://json-schema.org/draft/2020-12/schema", "2020-12"),
        ("http://json-schema.org/draft/2020-12/schema#", "2020-12"),
        ("http://json-schema.org/draft-07/schema#", "draft-07"),
        ("http://json-schema.org/draft-07/schema", "draft-07"),
        ("https://json-schema.org/draft-07/schema#", "draft-07"),
        ("https://json-schema.org/draft-07/schema", "draft-07"),
    ],
)
def test_accepted_meta_schema_spellings(uri: str, dialect: str) -> None:
    assert compile_output({"$schema": uri}).dialect == dialect


@pytest.mark.parametrize(
    "uri",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://example.com/custom-meta",
        "https://json-schema.org/draft/2020-12/schema##",
        5,
        None,
    ],
)
def test_other_root_dialects_fail(uri: object) -> None:
    message = rejection({"$schema": uri})
    assert message.startswith("schema at /$schema: unsupported $schema")


@given(st.text(max_size=60))
def test_only_the_known_meta_schema_uris_are_accepted(uri: str) -> None:
    known = {
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema",
    }
    accepted = uri.removesuffix("#") in known
    try:
        compile_schema({"$schema": uri}, role=OUTPUT)
    except ConfigurationError:
        assert not accepted
    else:
        assert accepted


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        # an embedded $id resource: jsonschema-rs alone would silently ignore it
        (
            {
                "$defs": {
                    "a": {
                        "$id": "https://example.com/a",
                        "$schema": "http://json-schema.org/draft-04/schema#",
                    }
                }
            },
            "/$defs/a/$schema",
        ),
        ({"properties": {"x": {"$schema": "https://example.com/meta"}}}, "/properties/x/$schema"),
        ({"items": {"anyOf": [{}, {"$schema": "urn:custom"}]}}, "/items/anyOf/1/$schema"),
        ({"$schema": D7, "definitions": {"a": {"$schema": "urn:x"}}}, "/definitions/a/$schema"),
        ({"$schema": D7, "items": [{"$schema": "urn:x"}]}, "/items/0/$schema"),
        # unknown keywords can become schemas through a pointer $ref
        ({"x-extension": {"nested": {"$schema": "urn:x"}}}, "/x-extension/nested/$schema"),
    ],
)
def test_other_dialects_fail_anywhere_in_the_document(schema: object, pointer: str) -> None:
    assert rejection(schema).startswith(f"schema at {pointer}: unsupported $schema")


def test_schema_named_properties_and_data_keywords_are_not_declarations() -> None:
    compiled = compile_output(
        {
            "properties": {"$schema": {"type": "string"}},
            "required": ["$schema"],
            "const": {"$schema": "urn:not-a-dialect"},
            "enum": [{"$schema": "urn:not-a-dialect"}],
            "examples": [{"$schema": "urn:not-a-dialect"}],
            "default": {"$schema": "urn:not-a-dialect"},
        }
    )
    assert compiled.is_valid({"$schema": "urn:not-a-dialect"})


def test_the_two_dialects_may_not_be_mixed() -> None:
    # jsonschema-rs would apply the root's dialect to the draft-07 resource (issue 9, item 19).
    message = rejection(
        {
            "$ref": "https://example.com/d7",
            "$defs": {
                "d7": {
                    "$id": "https://example.com/d7",
                    "$schema": D7,
                    "items": [{"type": "string"}],
                    "additionalItems": False,
                }
            },
        }
    )
    assert message.startswith("schema at /$defs/d7/$schema: the document mixes dialects")


# --- references ------------------------------------------------------------------------


def test_internal_and_bundled_references_work() -> None:
    compiled = compile_output(
        {
            "$id": "https://example.com/root.json",
            "properties": {
                "a": {"$ref": "#/$defs/positive"},
                "b": {"$ref": "item.json"},
                "c": {"$ref": "item.json#/$defs/short"},
                "d": {"$ref": "#named"},
                "e": {"$ref": "urn:example:flag"},
            },
            "$defs": {
                "positive": {"exclusiveMinimum": 0},
                "item": {
                    "$id": "item.json",
                    "type": "string",
                    "$defs": {"short": {"maxLength": 2}},
                },
                "anchored": {"$anchor": "named", "type": "integer"},
                "flag": {"$id": "urn:example:flag", "type": "boolean"},
            },
        }
    )
    assert compiled.is_valid({"a": 1, "b": "x", "c": "ab", "d": 3, "e": True})
    assert compiled.first_violation({"a": 0}) == SchemaViolation(
        "/a", "exclusiveMinimum", "must be greater than 0"
    )
    assert compiled.first_violation({"b": 1}) == SchemaViolation(
        "/b", "type", "expected type string"
    )
    assert compiled.first_violation({"c": "abc"}) is not None
    assert compiled.first_violation({"d": "x"}) is not None
    assert compiled.first_violation({"e": 1}) is not None


def test_recursive_references_compile() -> None:
    compiled = compile_output(
        {
            "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "$ref": "#/$defs/node",
        }
    )
    assert compiled.is_valid([[], [[]]])
    assert not compiled.is_valid([[1]])


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"$ref": "#/$defs/missing"}, "/$ref"),
        ({"properties": {"a": {"$ref": "#/nope"}}}, "/properties/a/$ref"),
        # jsonschema-rs alone compiles these lazily and would accept them
        ({"$defs": {"unused": {"$ref": "#/$defs/missing"}}}, "/$defs/unused/$ref"),
        ({"$defs": {"a": {"$defs": {"b": {"$ref": "#/nowhere"}}}}}, "/$defs/a/$defs/b/$ref"),
        ({"if": {"$ref": "#/$defs/missing"}}, "/if/$ref"),
        ({"$ref": "#missing-anchor"}, "/$ref"),
        ({"$dynamicRef": "#/nope"}, "/$dynamicRef"),
        (
            {"$schema": D7, "definitions": {"unused": {"$ref": "#/definitions/x"}}},
            "/definitions/unused/$ref",
        ),
        (
            {
                "$schema": D7,
                "$ref": "#/definitions/a",
                "definitions": {"a": {}, "b": {"$ref": "#/x"}},
            },
            "/definitions/b/$ref",
        ),
        (
            {"$id": "https://example.com/r", "$defs": {"a": {"$id": "sub/", "$ref": "#/x"}}},
            "/$defs/a/$ref",
        ),
    ],
)
def test_unresolvable_references_fail_naming_the_pointer(schema: object, pointer: str) -> None:
    message = rejection(schema, where="operation 'a.b' output_schema")
    assert message.startswith(f"operation 'a.b' output_schema at {pointer}: unresolvable reference")


@pytest.mark.parametrize(
    "reference",
    [
        "http://example.com/schema.json",
        "https://example.com/schema.json#/definitions/a",
        "http://127.0.0.1:9/x.json",
        "file:///etc/passwd",
        "file:///tmp/schema.json#/x",
        "other.json",
        "urn:example:not-bundled",
    ],
)
def test_remote_and_file_references_are_never_retrieved(reference: str) -> None:
    for schema, pointer in [
        ({"$ref": reference}, "/$ref"),
        ({"$defs": {"unused": {"$ref": reference}}}, "/$defs/unused/$ref"),
    ]:
        started = time.monotonic()
        message = rejection(schema)
        assert time.monotonic() - started < 1  # no network attempt
        assert message.startswith(f"schema at {pointer}: ")
        assert "not bundled" in message or "unresolvable" in message


def test_draft_07_ref_siblings_are_inert() -> None:
    compiled = compile_output(
        {
            "$schema": D7,
            "$ref": "#/definitions/a",
            "definitions": {"a": {"type": "integer"}},
            "maxLength": 1,
            "properties": {"x": {"$ref": "#/ignored-sibling"}},
        }
    )
    assert compiled.is_valid(5)
    assert not compiled.is_valid("long string")


def test_compiler_errors_are_translated() -> None:
    hostile = "secret-" + "x" * 200
    with pytest.raises(ConfigurationError) as info:
        compile_schema({"type": hostile}, role=OUTPUT, where="operation 'x' input_schema")
    message = str(info.value)
    assert message.startswith(
        "operation 'x' input_schema at /type: does not conform to the 2020-12"
    )
    assert "secret" not in message
    assert isinstance(info.value.__cause__, jsonschema_rs.ValidationError)
    pattern = rejection({"properties": {"p": {"pattern": "(unclosed"}}})
    assert pattern.startswith("schema at /properties/p/pattern: ")
    assert "regex" in pattern


# --- roles -----------------------------------------------------------------------------


@pytest.mark.parametrize("role", [INPUT, FORM])
@pytest.mark.parametrize("schema", [True, False])
def test_input_and_form_schemas_must_be_objects(role: SchemaRole, schema: bool) -> None:
    assert "must be a JSON object" in rejection(schema, role)


@pytest.mark.parametrize("role", [INPUT, FORM])
@pytest.mark.parametrize("declared", ["array", ["object", "null"], ["string"], [], "strange"])
def test_input_top_level_type_must_be_object(role: SchemaRole, declared: object) -> None:
    message = rejection({"type": declared}, role)
    named = "a form schema" if role is FORM else "an input schema"
    assert message == f'schema at /type: {named}\'s top-level type must be "object"'


@pytest.mark.parametrize("role", [INPUT, FORM])
@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"type": ["object"]}])
def test_input_object_schemas_compile(role: SchemaRole, schema: object) -> None:
    compiled = SchemaCompiler().compile(schema, role=role, where="schema")
    assert compiled.is_valid({})


@pytest.mark.parametrize("schema", [True, False, {"type": "array"}, {"type": ["integer", "null"]}])
def test_output_schemas_describe_any_value(schema: object) -> None:
    compiled = compile_output(schema)
    assert compiled.is_valid([1]) is (schema is True or schema == {"type": "array"})


# --- formats, content, defaults ----------------------------------------------------------


def test_formats_are_annotations_in_2020_12() -> None:
    assert compile_output({"format": "email"}).is_valid("not an email")
    assert compile_output({"$schema": D2020, "format": "date"}).is_valid("yesterday")


def test_formats_are_asserted_in_draft_07() -> None:
    compiled = compile_output({"$schema": D7, "format": "email"})
    assert compiled.first_violation("not an email") == SchemaViolation(
        "", "format", "is not a valid 'email'"
    )
    assert compiled.is_valid("a@example.com")


def test_form_role_asserts_formats_in_both_dialects() -> None:
    for schema in (
        {"properties": {"d": {"format": "date"}}},
        {"$schema": D7, "properties": {"d": {"format": "date"}}},
    ):
        compiled = compile_schema(schema, role=FORM)
        assert not compiled.is_valid({"d": "yesterday"})
        assert compiled.is_valid({"d": "2025-01-31"})


def test_unknown_formats_are_ignored() -> None:
    for role in (OUTPUT, FORM):
        for schema in ({"format": "x-custom"}, {"$schema": D7, "format": "x-custom"}):
            assert SchemaCompiler().compile(schema, role=role, where="s").is_valid("anything")


@pytest.mark.parametrize("dialect", [D7, D2020])
def test_content_is_never_asserted(dialect: str) -> None:
    compiled = compile_output(
        {
            "$schema": dialect,
            "properties": {
                "b": {"contentEncoding": "base64"},
                "j": {"contentMediaType": "application/json"},
                "s": {
                    "contentEncoding": "base64",
                    "contentMediaType": "application/json",
                    "contentSchema": {"type": "integer"},
                },
            },
        }
    )
    assert compiled.is_valid({"b": "%%% not base64", "j": "{not json", "s": "e30="})


def test_content_keywords_are_still_checked_against_the_meta_schema() -> None:
    assert "meta-schema" in rejection({"$schema": D7, "contentEncoding": 5})


def test_defaults_are_annotations_never_inserted() -> None:
    schema = {"properties": {"a": {"default": 1}, "b": {"default": {"x": []}}}}
    compiled = compile_output(schema)
    instance: dict[str, Any] = {}
    assert compiled.first_violation(instance) is None
    assert instance == {}
    assert compiled.document() == schema


# --- count constraints -------------------------------------------------------------------


@pytest.mark.parametrize("keyword", sorted(COUNT_KEYWORDS))
@pytest.mark.parametrize(
    "value", [MAX_COUNT + 1, 2**64, -1, Decimal("2.5"), Decimal("-1.0"), True, "3", None]
)
def test_count_constraints_out_of_range_fail(keyword: str, value: object) -> None:
    message = rejection(
        {"properties": {"a": {keyword: value}}}, where="operation 'orders.refund' input_schema"
    )
    assert message == (
        f"operation 'orders.refund' input_schema at /properties/a/{keyword}: "
        "count constraint must be an integer in 0..2147483647"
    )


@pytest.mark.parametrize("keyword", sorted(COUNT_KEYWORDS))
@pytest.mark.parametrize("value", [0, MAX_COUNT, Decimal("2.0"), Decimal("2E+3"), Decimal("0E-5")])
def test_count_constraints_in_range_compile(keyword: str, value: object) -> None:
    schema = {keyword: value}
    if keyword in ("minContains", "maxContains"):
        schema["contains"] = {}
    compile_output(schema)


def test_integral_decimal_counts_behave_as_integers() -> None:
    compiled = compile_output({"maxLength": Decimal("2.0"), "minLength": Decimal("1.0")})
    assert compiled.is_valid("ab")
    assert compiled.first_violation("abc") == SchemaViolation(
        "", "maxLength", "exceeds maximum length 2"
    )
    assert compiled.first_violation("") == SchemaViolation(
        "", "minLength", "is shorter than minimum length 1"
    )
    assert compiled.document() == {"maxLength": Decimal("2.0"), "minLength": Decimal("1.0")}


def test_counts_are_checked_in_text_schemas() -> None:
    message = rejection('{"properties": {"a": {"maxItems": 1e10}}}')
    assert message.startswith("schema at /properties/a/maxItems: count constraint")


def test_counts_under_unknown_keywords_are_checked_but_data_is_not() -> None:
    assert "count constraint" in rejection({"x-ext": {"maxLength": -1}})
    compile_output(
        {
            "const": {"maxLength": -1},
            "default": {"minItems": 2**40},
            "properties": {"maxLength": {}},
        }
    )


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_count_rule_for_integers(value: int) -> None:
    try:
        compile_schema({"minItems": value}, role=OUTPUT)
    except ConfigurationError:
        assert not 0 <= value <= MAX_COUNT
    else:
        assert 0 <= value <= MAX_COUNT


@given(
    st.decimals(allow_nan=False, allow_infinity=False, min_value=-10, max_value=3 * 10**9, places=2)
)
def test_count_rule_for_decimals(value: Decimal) -> None:
    acceptable = value == value.to_integral_value() and 0 <= value <= MAX_COUNT
    try:
        compiled = compile_schema({"maxItems": value}, role=OUTPUT)
    except ConfigurationError:
        assert not acceptable
    else:
        assert acceptable
        if value <= 3:
            assert compiled.is_valid([0] * int(value))
            assert not compiled.is_valid([0] * (int(value) + 1))


# --- compiled documents and the cache ------------------------------------------------------


def test_document_is_a_fresh_detached_copy() -> None:
    compiled = compile_output({"properties": {"a": {"enum": [1, 2]}}})
    first = compiled.document()
    assert isinstance(first, dict)
    first["properties"] = {}
    assert compiled.document() == {"properties": {"a": {"enum": [1, 2]}}}
    assert compiled.document() is not compiled.document()
    assert compiled.canonical == canonical_bytes(parse('{"properties":{"a":{"enum":[1,2]}}}'))


def _validator(compiled: CompiledSchema) -> object:
    return compiled._compiler.validator(compiled._role, compiled.canonical)


def test_identical_schemas_share_a_validator() -> None:
    compiler = SchemaCompiler()
    cache = SchemaCache()
    one = compiler.compile({"maxLength": 2, "minimum": 1.0}, role=OUTPUT, where="a", cache=cache)
    two = compiler.compile(
        '{"minimum": 1e0, "maxLength": 2.0}', role=OUTPUT, where="b", cache=cache
    )
    assert one is two
    assert _validator(one) is _validator(two)
    # only the canonical bytes are kept: numbers read back in their canonical spelling
    assert one.canonical == b'{"maxLength":2,"minimum":1}'
    assert one.document() == {"maxLength": 2, "minimum": 1}
    other_role = compiler.compile(
        {"maxLength": 2, "minimum": 1.0}, role=FORM, where="c", cache=cache
    )
    assert _validator(other_role) is not _validator(one)
    elsewhere = SchemaCompiler().compile({"maxLength": 2, "minimum": 1}, role=OUTPUT, where="d")
    assert _validator(elsewhere) is not _validator(one)


def test_validators_are_kept_in_a_bounded_cache_and_recompiled_on_use() -> None:
    compiler = SchemaCompiler()
    schemas = [
        compiler.compile({"maxLength": index + 1, "pattern": "^a"}, role=OUTPUT, where="s")
        for index in range(MAX_CACHED_VALIDATORS + 5)
    ]
    assert len(compiler._validators) == MAX_CACHED_VALIDATORS
    first = schemas[0]
    assert (OUTPUT, first.canonical) not in compiler._validators  # dropped, oldest
    assert first.is_valid("a")  # recompiled from its bytes
    assert not first.is_valid("b")
    assert (OUTPUT, first.canonical) in compiler._validators
    assert len(compiler._validators) == MAX_CACHED_VALIDATORS
    violation = schemas[3].first_violation("abcde")
    assert violation == SchemaViolation("", "maxLength", "exceeds maximum length 4")


def test_failed_checks_describe_violations_from_a_small_cache_of_parsed_documents() -> None:
    compiler = SchemaCompiler()
    schemas = [
        compiler.compile({"maximum": index}, role=OUTPUT, where="s")
        for index in range(MAX_CACHED_ERROR_DOCUMENTS + 3)
    ]
    for index, schema in enumerate(schemas):
        assert schema.first_violation(index + 1) == SchemaViolation(
            "", "maximum", f"exceeds maximum {index}"
        )
    assert len(compiler._documents) == MAX_CACHED_ERROR_DOCUMENTS
    last = schemas[-1]
    parsed = compiler._documents[(OUTPUT, last.canonical)]
    assert last.first_violation(10**6) is not None
    assert compiler._documents[(OUTPUT, last.canonical)] is parsed  # parsed once
    assert schemas[0].first_violation(0) is None  # a passing check parses nothing


@given(
    st.sampled_from(["2", "2.0", "2e0", "20e-1", "0.2e1"]), st.sampled_from(["2", "2.00", "200e-2"])
)
def test_equal_numbers_share_a_validator(first: str, second: str) -> None:
    compiler = SchemaCompiler()
    cache = SchemaCache()
    one = compiler.compile(f'{{"maxItems": {first}}}', role=OUTPUT, where="a", cache=cache)
    two = compiler.compile(f'{{"maxItems": {second}}}', role=OUTPUT, where="b", cache=cache)
    assert one is two
    assert _validator(one) is _validator(two)
    assert one.is_valid([1, 2])
    assert not two.is_valid([1, 2, 3])


def test_a_cache_serves_one_compiler_and_a_compile_without_one_shares_nothing() -> None:
    compiler = SchemaCompiler()
    cache = SchemaCache()
    compiled = compiler.compile({"maxLength": 3}, role=OUTPUT, where="s", cache=cache)
    with pytest.raises(ValueError, match="one SchemaCompiler"):
        SchemaCompiler().compile({"maxLength": 3}, role=OUTPUT, where="s", cache=cache)
    assert compiler.compile({"maxLength": 3}, role=OUTPUT, where="s", cache=cache) is compiled
    one = compiler.compile({"maxLength": 3}, role=OUTPUT, where="s")
    two = compiler.compile({"maxLength": 3}, role=OUTPUT, where="s")
    assert one is not two
    assert one is not compiled
    assert one.canonical == two.canonical == compiled.canonical


def test_compiling_from_threads() -> None:
    compiler = SchemaCompiler()
    results: list[CompiledSchema] = []
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for index in range(50):
                results.append(
                    compiler.compile({"maxItems": (index + offset) % 20}, role=OUTPUT, where="s")
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 200
    assert all(result.is_valid([]) for result in results)


def test_validation_stays_fast() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {
                "order": {"type": "integer", "minimum": 1},
                "reason": {"type": "string", "maxLength": 200},
                "notify": {"type": "boolean"},
            },
            "required": ["order"],
            "additionalProperties": False,
        },
        role=INPUT,
    )
    instance = parse('{"order": 7, "reason": "damaged", "notify": true}', profile=True)
    rounds = 2000
    started = time.perf_counter()
    for _ in range(rounds):
        compiled.first_violation(instance)
    per_call = (time.perf_counter() - started) / rounds
    assert per_call < 50e-6  # typically well under 1 µs


# --- regular expressions (issue 9, item 2) ----------------------------------------------------

BACKTRACKING_PATTERNS = [r"(?<=a+)b", r"(a+)+\1b", r"^(?=x)", r"(?!a)b", r"(\w)\1"]


@pytest.mark.parametrize("pattern", BACKTRACKING_PATTERNS)
def test_patterns_needing_backtracking_fail_construction_by_default(pattern: str) -> None:
    for schema, where in (
        ({"properties": {"a": {"pattern": pattern}}}, "/properties/a/pattern"),
        ({"patternProperties": {pattern: {"type": "string"}}}, "/patternProperties"),
        ({"$defs": {"unused": {"pattern": pattern}}}, "/$defs/unused/pattern"),
    ):
        message = rejection(schema, INPUT, where="operation 'x.y' input_schema")
        assert message.startswith(f"operation 'x.y' input_schema at {where}")
        assert repr(pattern) in message
        assert "lookaround or backreferences" in message
        assert "regex_backtrack_limit" in message


def test_invalid_pattern_is_named_as_invalid() -> None:
    message = rejection({"pattern": "a("}, INPUT)
    assert "'a('" in message
    assert "not a valid regex" in message


def test_backtracking_engine_is_an_explicit_opt_in_with_a_bound() -> None:
    compiler = SchemaCompiler(backtrack_limit=10_000)
    schema = compiler.compile(
        {"properties": {"a": {"pattern": r"(a+)+\1b"}}}, role=INPUT, where="schema"
    )
    started = time.perf_counter()
    violation = schema.first_violation({"a": "a" * 65_000})
    assert time.perf_counter() - started < 5  # bounded by the limit (seconds on main: 0.33)
    assert violation is not None
    assert violation.keyword == "pattern"
    assert schema.first_violation({"a": "aab"}) is None  # a backreference, matched
    linear = SchemaCompiler().compile({"pattern": "^a+$"}, role=OUTPUT, where="schema")
    assert linear.is_valid("a" * 65_000)
    for bad in (0, -1, True, 1.5, 10**9):
        with pytest.raises((ConfigurationError, TypeError)):
            SchemaCompiler(backtrack_limit=bad)  # type: ignore[arg-type]


def test_registry_names_the_operation_and_pattern_and_allows_an_opt_in() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"(a+)+\1b"}}}
    operation = Operation("text.match", "Match", Recorder(), input_schema=schema)
    with pytest.raises(ConfigurationError) as info:
        Registry([operation], AllowAll())
    message = str(info.value)
    assert "'text.match'" in message
    assert r"'(a+)+\\1b'" in message
    assert "regex_backtrack_limit" in message
    Registry([operation], AllowAll(), regex_backtrack_limit=10_000)
    for bad in (0, -5, 10**9):
        with pytest.raises(ConfigurationError, match="regex_backtrack_limit"):
            Registry([operation], AllowAll(), regex_backtrack_limit=bad)
    with pytest.raises(TypeError, match="regex_backtrack_limit"):
        Registry([operation], AllowAll(), regex_backtrack_limit=True)


def test_first_violation_validates_once() -> None:
    schema = compile_output({"type": "object", "properties": {"a": {"type": "integer"}}})

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.calls = 0

        def __getattr__(self, name: str) -> Any:
            method = getattr(self.inner, name)

            def counted(*args: Any) -> Any:
                self.calls += 1
                return method(*args)

            return counted

    # The compiler keeps the compiled validator (compiled on demand, bounded cache).
    compiler = schema._compiler
    counting = Counting(compiler.validator(schema._role, schema.canonical))
    compiler._validators[(schema._role, schema.canonical)] = counting
    violation = schema.first_violation({"a": "x"})
    assert violation is not None
    assert violation.keyword == "type"
    assert counting.calls == 1
    assert schema.first_violation({"a": 1}) is None
    assert counting.calls == 2


# --- mixed dialects (issue 9, item 19) ---------------------------------------------------------

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (
            {"$defs": {"old": {"$id": "https://e.x/old", "$schema": DRAFT_07}}},
            "/$defs/old/$schema",
        ),
        (
            {"properties": {"d": {"$schema": DRAFT_07, "format": "date"}}},
            "/properties/d/$schema",
        ),
        (
            {"$schema": DRAFT_07, "definitions": {"new": {"$schema": DRAFT_2020}}},
            "/definitions/new/$schema",
        ),
        (
            {"$schema": DRAFT_07, "properties": {"n": {"$id": "n", "$schema": DRAFT_2020}}},
            "/properties/n/$schema",
        ),
    ],
)
def test_mixed_dialect_documents_fail_construction(schema: Any, pointer: str) -> None:
    message = rejection(schema, INPUT, where="operation 'x.y' input_schema")
    assert message.startswith(f"operation 'x.y' input_schema at {pointer}:")
    assert "mixes dialects" in message


def test_repeating_the_root_dialect_is_fine() -> None:
    compile_output({"$schema": DRAFT_07, "definitions": {"a": {"$schema": DRAFT_07 + ""}}})
    compile_output({"$defs": {"a": {"$id": "https://e.x/a", "$schema": DRAFT_2020}}})
