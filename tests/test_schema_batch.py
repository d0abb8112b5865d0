"""Tests of ``opgate._schema`` as a registry's construction uses it (issue 10, item 4).

Every schema is fully checked up front, kept as canonical bytes, and its validator
compiled on first use (again, once dropped from the bounded cache). Plain documents
take a batch path that proves them against the meta-schema without building a
validator; it must accept and refuse exactly as the full compile does, whatever came
before in the batch and however ``$defs`` members are shared between its documents.
A build's ``SchemaCache`` is its own: two registries share nothing, and a built
registry does not keep it.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from opgate import (
    Completed,
    ConfigurationError,
    Failed,
    FailureCode,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    finish,
)
from opgate._schema import MAX_CACHED_VALIDATORS, SchemaCache, SchemaCompiler, SchemaRole

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


def handler(inv: Invocation) -> Any:
    return finish(Result([Text("done")]))


def _schema(index: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": index}},
        "required": ["n"],
        "additionalProperties": False,
    }


def test_every_schema_is_still_checked_at_construction() -> None:
    bad = {"type": "object", "properties": {"x": {"type": "string", "pattern": "[a-"}}}
    operations = [Operation(f"op{i}", "does", handler, input_schema=_schema(i)) for i in range(3)]
    with pytest.raises(ConfigurationError, match=r"operation 'z'.*input_schema"):
        Registry([*operations, Operation("z", "does", handler, input_schema=bad)], AllowAll())


async def test_validators_dropped_from_the_cache_are_recompiled_on_first_use() -> None:
    count = MAX_CACHED_VALIDATORS + 20
    registry = Registry(
        [Operation(f"op{i:04}", "does", handler, input_schema=_schema(i)) for i in range(count)],
        AllowAll(),
    )
    ctx = Ctx()
    # op0000 was compiled first, so its validator is no longer cached; it still checks.
    assert isinstance(await registry.invoke(ctx, "op0000", '{"n": 0}'), Completed)
    refused = await registry.invoke(ctx, "op0000", '{"n": 1}')
    assert isinstance(refused, Failed)
    assert refused.failure.code is FailureCode.INVALID_ARGUMENTS
    last = f"op{count - 1:04}"
    assert isinstance(await registry.invoke(ctx, last, f'{{"n": {count - 1}}}'), Completed)
    spec = await registry.inspect(ctx, "op0007")
    assert not isinstance(spec, Failed)
    assert spec.input_schema == _schema(7)


# --- the batch path: plain documents checked without a validator -------------------------


def _outcome(schema: object, *, batch: bool, role: SchemaRole = SchemaRole.INPUT) -> str:
    """``ok <dialect> <canonical>`` or the ``ConfigurationError`` message, by one path."""
    compiler = SchemaCompiler()
    try:
        compiled = compiler.compile(
            schema, role=role, where="s", cache=SchemaCache() if batch else None
        )
    except ConfigurationError as exc:
        return f"error {exc}"
    return f"ok {compiled.dialect} {compiled.canonical!r}"


def _deep(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


_BASE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"$ref": "#/$defs/Name"},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "maxItems": 5},
    },
    "required": ["name"],
    "additionalProperties": False,
    "$defs": {
        "Name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z]+$"},
        "Tag": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"$ref": "#/$defs/Name"}},
        },
    },
}


# Value shapes the walk proves against the meta-schema (the call skipped) and the near
# misses it must leave to the meta-schema (one property's schema each).
_PROVED_SHAPES: list[dict[str, Any]] = [
    {"enum": []},
    {"type": ["string", "null"], "required": ["a", "b"]},
    {"multipleOf": 3, "minimum": -2, "exclusiveMaximum": 9},
    {"deprecated": True, "readOnly": False, "uniqueItems": True},
    {"const": [1, {"a": None}], "default": "x"},
]


_META_SHAPES: list[dict[str, Any]] = [
    *_PROVED_SHAPES,
    {"type": []},
    {"type": ["string", "string"]},
    {"type": ["string", 5]},
    {"required": ["a", "a"]},
    {"required": "a"},
    {"allOf": []},
    {"prefixItems": []},
    {"multipleOf": -3},
    {"minimum": "1"},
    {"exclusiveMaximum": True},
    {"deprecated": "yes"},
    {"writeOnly": None},
    {"uniqueItems": 1},
    {"examples": {}},
    {"examples": "x"},
    {"title": 5},
    {"$comment": ["x"]},
    {"contentMediaType": 5},
    {"format": ["date"]},
    {"dependentRequired": {"a": ["b"]}},
    {"dependentRequired": {"a": ["b", "b"]}},
]


# Each replaces one value (by path) in _BASE: valid variants, and every kind of failure the
# full compile reports (meta-schema, references, patterns, counts, dialects, roles).
_MUTATIONS: list[tuple[tuple[str, ...], object]] = [
    ((), None),  # unchanged
    (("$defs", "Name", "type"), "strang"),
    (("$defs", "Name", "type"), 5),
    (("$defs", "Name", "minLength"), -1),
    (("$defs", "Name", "maxLength"), 2.5),
    (("$defs", "Name", "maxLength"), 2**40),
    (("$defs", "Name", "pattern"), "[a-"),
    (("$defs", "Name", "pattern"), "(?=a)b"),
    (("$defs", "Name", "pattern"), 7),
    (("$defs", "Name", "format"), "no-such-format"),
    (("$defs", "Name", "format"), 3),
    (("$defs", "Name", "enum"), "not-an-array"),
    (("$defs", "Name", "x-unknown"), {"type": 5}),
    (("$defs", "Name", "$id"), "urn:name"),
    (("$defs", "Name", "$schema"), "https://json-schema.org/draft/2020-12/schema"),
    (("$defs", "Name", "$schema"), "http://json-schema.org/draft-07/schema#"),
    (("$defs", "Tag", "properties", "value", "$ref"), "#/$defs/Missing"),
    (("$defs", "Tag", "properties", "value", "$ref"), "#/$defs/Name/pattern"),
    (("$defs", "Tag", "properties", "value", "$ref"), "#/properties/name"),
    (("$defs", "Tag", "properties", "value", "$ref"), "https://example.com/x.json"),
    (("$defs", "Tag", "properties", "value", "$ref"), 5),
    (("$defs", "Tag", "properties"), []),
    (("$defs", "Tag", "required"), [1]),
    (("$defs", "Tag", "minimum"), float("nan")),
    (("$defs", "Tag", "minimum"), 0.5),
    (("$defs", "Tag", "multipleOf"), 0),
    (("$defs", "Weird~Name"), {"type": "string"}),
    (("$defs", "Other"), {"$ref": "#/$defs/Missing"}),
    (("$defs", "Other"), {"items": [{"type": "string"}]}),
    (("$defs", "Other"), True),
    (("$defs",), []),
    (("$schema",), "https://json-schema.org/draft/2020-12/schema"),
    (("$schema",), "http://json-schema.org/draft-07/schema#"),
    (("$schema",), "https://example.com/meta"),
    (("type",), "string"),
    (("properties", "name", "$dynamicRef"), "#meta"),
    (("properties", "n"), {"type": "integer", "maximum": 10**30}),
    (("properties", "s"), {"const": "\ud800"}),
    (("properties", "s"), {"enum": [1, (2, 3), {"a": 1.5}]}),
    (("properties", "s"), {"if": {"minLength": 1}, "then": {"maxLength": 3}}),
    (("properties", "s"), {"contentEncoding": "base64", "contentMediaType": "text/plain"}),
    (("properties", "s"), {"default": {1: 2}}),
    (("properties", "s"), {"const": 10**5000}),
    (("properties", "s"), {"examples": [_deep(130)]}),
    (("properties", "s"), {"examples": [_deep(100)]}),
    (("properties", "s"), {"properties": {"\udc00": {"type": "string"}}}),
    (("properties", "s"), {"patternProperties": {"^a\\d$": {"type": "string"}}}),
    (("properties", "s"), {"patternProperties": {"(?=a)": {"type": "string"}}}),
    (("properties", "s"), {"allOf": [{"$ref": "#/$defs/Name"}, True, 5]}),
    (("properties", "s"), {"items": [{"type": "string"}]}),
    (("properties", "s"), {"minItems": True}),
    (("properties", "s"), {"maxItems": 2147483648}),
    *((("properties", "s"), shape) for shape in _META_SHAPES),
]


def _mutated(path: tuple[str, ...], value: object) -> dict[str, Any]:
    import copy

    schema = copy.deepcopy(_BASE)
    if not path:
        return schema
    node: Any = schema
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return schema


@pytest.mark.parametrize(("path", "value"), _MUTATIONS)
def test_the_batch_path_accepts_and_refuses_exactly_as_the_full_compile(
    path: tuple[str, ...], value: object
) -> None:
    schema = _mutated(path, value)
    assert _outcome(schema, batch=True) == _outcome(schema, batch=False)


def test_the_batch_path_agrees_with_the_full_compile_for_form_schemas() -> None:
    # Form schemas (compile_schema) are checked by the batch path too, formats asserted.
    forms: list[object] = [_mutated(path, value) for path, value in _MUTATIONS]
    for name in ("email", "uri", "date", "date-time", "unknown-format"):
        forms.append({"type": "object", "properties": {"f": {"type": "string", "format": name}}})
    forms.append({"type": "object", "properties": {"f": {"format": 5}}})
    for schema in forms:
        batch = _outcome(schema, batch=True, role=SchemaRole.FORM)
        assert batch == _outcome(schema, batch=False, role=SchemaRole.FORM), schema


def test_the_batch_path_agrees_on_random_mutations() -> None:
    import random

    rng = random.Random(10)
    values = [value for _, value in _MUTATIONS[1:]]
    for _ in range(150):
        schema = _mutated((), None)
        for _ in range(rng.randint(1, 3)):
            path, _value = rng.choice(_MUTATIONS[1:])
            node: Any = schema
            for part in path[:-1]:
                if not isinstance(node, dict) or not isinstance(node.get(part), dict):
                    break
                node = node[part]
            else:
                node[path[-1]] = rng.choice(values)
        assert _outcome(schema, batch=True) == _outcome(schema, batch=False), schema


def test_construction_keeps_no_validator_and_shares_identical_schemas() -> None:
    import copy

    operations = [
        Operation(f"op{i}", "does", handler, input_schema=copy.deepcopy(_BASE)) for i in range(3)
    ]
    registry = Registry(operations, AllowAll())
    schemas = [entry.input_schema for entry in registry._entries]
    assert schemas[0] is schemas[1] is schemas[2]  # one CompiledSchema, one bytes object
    assert not schemas[0]._compiler._validators  # compiled on first use


async def test_the_first_invoke_compiles_the_validator_and_checks() -> None:
    registry = Registry([Operation("op", "does", handler, input_schema=_BASE)], AllowAll())
    ctx = Ctx()
    refused = await registry.invoke(ctx, "op", '{"name": "ABC"}')
    assert isinstance(refused, Failed)
    assert refused.failure.code is FailureCode.INVALID_ARGUMENTS
    assert isinstance(await registry.invoke(ctx, "op", '{"name": "abc"}'), Completed)


def test_a_plain_document_is_checked_without_building_a_validator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def build(*args: object) -> None:
        raise AssertionError("the full compile ran")

    monkeypatch.setattr(SchemaCompiler, "_build", build)
    SchemaCompiler().compile(_BASE, role=SchemaRole.INPUT, where="s", cache=SchemaCache())
    with pytest.raises(AssertionError, match="full compile"):  # not plain: compiled
        SchemaCompiler().compile(
            _mutated(("$defs", "Name", "$id"), "urn:n"),
            role=SchemaRole.INPUT,
            where="s",
            cache=SchemaCache(),
        )


def test_the_walk_proves_the_meta_schema_for_plain_value_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opgate import _schema

    def meta(document: object) -> bool:
        raise AssertionError("the meta-schema ran")

    monkeypatch.setattr(_schema, "_meta_valid", meta)
    compiler = SchemaCompiler()
    for shape in [{}, *_META_SHAPES]:
        schema = _mutated(("properties", "s"), shape)
        if shape in [{}, *_PROVED_SHAPES]:
            compiler.compile(schema, role=SchemaRole.INPUT, where="s", cache=SchemaCache())
        else:  # a shape the walk does not vouch for goes to the meta-schema
            with pytest.raises(AssertionError, match="meta-schema ran"):
                compiler.compile(schema, role=SchemaRole.INPUT, where="s", cache=SchemaCache())


# --- $defs members shared between the documents of one batch ------------------------------

_MEMBER_NAMES = ["Name", "Tag", 'a"b', "é", "\U0001f600x", "\uff01", "\x01", "Z", "_1", "$x"]


_MEMBERS: list[object] = [
    _BASE["$defs"]["Name"],
    _BASE["$defs"]["Tag"],
    {"type": "string", "pattern": "^x+$"},
    {"type": "string", "pattern": "[a-"},
    {"type": "string", "pattern": "(?=a)b"},
    {"$ref": "#/$defs/Name"},
    {"$ref": "#/$defs/Z"},
    {"items": {"$ref": "#/$defs/_1"}, "maxItems": 3},
    True,
    False,
    {"minimum": 0.5},
    {"type": "integer", "maximum": 10**30},
    {"enum": ["é", "\U0001f600", 10**21]},
    {"type": ["string", "string"]},
    {"$id": "urn:x"},
    {"properties": {"v": {"$ref": "#/$defs/Tag"}}, "required": ["v"]},
    [],
]


def _document(rng: Any) -> dict[str, Any]:
    """A document whose root ``$defs`` members come from a small pool (so they repeat
    across documents), under names that may need escapes or sort past ASCII."""
    names = rng.sample(_MEMBER_NAMES, rng.randint(1, 6))
    document: dict[str, Any] = {}
    if rng.random() < 0.3:
        document["$comment"] = "sorts before $defs"
    document["$defs"] = {name: rng.choice(_MEMBERS) for name in names}
    if rng.random() < 0.8:
        document["type"] = "object"
        document["properties"] = {
            "p": {"$ref": f"#/$defs/{rng.choice(['Name', 'Tag', 'Z', '_1'])}"}
        }
    if rng.random() < 0.2:
        document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return document


def test_one_batch_sharing_defs_members_decides_each_document_as_alone() -> None:
    # Every document of a batch must be accepted or refused, with the same canonical
    # bytes or message, as when compiled alone — whatever documents came before it,
    # refused ones included, and however its $defs members are named and ordered.
    import random

    rng = random.Random(11)
    compiler = SchemaCompiler()
    cache = SchemaCache()
    kinds: set[str] = set()
    fixed: list[dict[str, Any]] = [
        {"$defs": {"\U0001f600x": True, "\uff01": {"type": "string"}}},  # UTF-16 order
        {"$defs": {"\uff01": True, "\U0001f600x": {"type": "string"}}, "type": "object"},
        {"$comment": "c", "$defs": {"b": True, "a": {"type": "string"}}, "type": "object"},
        {"$defs": {'a"b': {"$ref": "#/$defs/\x01"}, "\x01": {"type": "integer"}}},
    ]
    for document in [*fixed, *(_document(rng) for _ in range(600))]:
        try:
            compiled = compiler.compile(document, role=SchemaRole.INPUT, where="s", cache=cache)
            batch = f"ok {compiled.dialect} {compiled.canonical!r}"
        except ConfigurationError as exc:
            batch = f"error {exc}"
        assert batch == _outcome(document, batch=False), document
        kinds.add(batch.split(" ", 1)[0])
    assert kinds == {"ok", "error"}


def test_a_shared_member_is_checked_against_each_documents_own_defs() -> None:
    compiler = SchemaCompiler()
    cache = SchemaCache()
    refers = {"$ref": "#/$defs/Target"}
    whole = {"$defs": {"Member": refers, "Target": {"type": "string"}}}
    compiler.compile(whole, role=SchemaRole.INPUT, where="s", cache=cache)
    alone = {"$defs": {"Member": refers}}
    with pytest.raises(ConfigurationError, match="Target"):
        compiler.compile(alone, role=SchemaRole.INPUT, where="s", cache=cache)


def test_a_refused_document_is_refused_again_in_the_same_batch() -> None:
    compiler = SchemaCompiler()
    cache = SchemaCache()
    bad = {"type": "string", "pattern": "[a-"}
    for _ in range(2):  # refused both times: the first refusal left nothing behind
        with pytest.raises(ConfigurationError, match="pattern"):
            compiler.compile({"$defs": {"Bad": bad}}, role=SchemaRole.INPUT, where="s", cache=cache)


# --- registries built in one process share nothing -----------------------------------------


def _patterns_in(value: object) -> list[str]:
    if isinstance(value, dict):
        found = [value["pattern"]] if isinstance(value.get("pattern"), str) else []
        return found + [p for item in value.values() for p in _patterns_in(item)]
    if isinstance(value, list):
        return [p for item in value for p in _patterns_in(item)]
    return []


def test_two_registries_built_in_one_process_share_no_schema_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever one build learnt (that a pattern compiles, a schema's compiled form) must
    # not serve another: each registry checks and compiles its own schemas. (With the
    # memory of proven patterns on, only that a pattern compiled is carried over:
    # test_proven_patterns.py.)
    import jsonschema_rs

    monkeypatch.setenv("OPGATE_CACHE_DIR", "")
    compiled_patterns: list[str] = []
    real = jsonschema_rs.Draft202012Validator

    def recording(schema: Any, *args: Any, **kwargs: Any) -> Any:
        compiled_patterns.extend(_patterns_in(schema))
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema_rs, "Draft202012Validator", recording)
    pattern = "^only-in-this-test-[a-z]+$"
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    operations = [Operation("op", "does", handler, input_schema=schema)]
    first = Registry(operations, AllowAll())
    assert pattern in compiled_patterns
    compiled_patterns.clear()
    second = Registry(operations, AllowAll())
    assert pattern in compiled_patterns  # checked again, not taken from the first build
    one, two = first._entries[0].input_schema, second._entries[0].input_schema
    assert one is not two
    assert one._compiler is not two._compiler
    assert one.canonical == two.canonical


async def test_a_built_registry_does_not_keep_its_schema_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import weakref

    from opgate import _catalog

    made: list[weakref.ref[SchemaCache]] = []

    class Watched(SchemaCache):  # no __slots__: weak references allowed
        def __init__(self, proven: Any = (), *, defer: bool = False) -> None:
            super().__init__(proven, defer=defer)
            made.append(weakref.ref(self))

    monkeypatch.setattr(_catalog, "SchemaCache", Watched)
    registry = Registry([Operation("op", "does", handler, input_schema=_BASE)], AllowAll())
    gc.collect()
    assert len(made) == 1
    assert made[0]() is None  # dropped with the build; the validators live on
    refused = await registry.invoke(Ctx(), "op", '{"name": "ABC"}')
    assert isinstance(refused, Failed)
    assert isinstance(await registry.invoke(Ctx(), "op", '{"name": "abc"}'), Completed)


_D07 = "http://json-schema.org/draft-07/schema#"
_REFUSED_SCHEMAS: list[object] = [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)b"}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "[a-"}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}},
    {"type": "object", "properties": {"a": {"type": "strung"}}},
    '{"type": "object", "properties": {"a": {"pattern": "(?=a)b"}}}',
    {"$schema": _D07, "type": "object", "properties": {"a": {"pattern": "(?=a)b"}}},
]


@pytest.mark.parametrize("schema", _REFUSED_SCHEMAS)
def test_a_schema_refused_in_one_registry_is_refused_identically_in_a_second(
    schema: object,
) -> None:
    def refusal() -> str:
        operations = [
            Operation("ok", "does", handler, input_schema=_BASE),
            Operation("z", "does", handler, input_schema=schema),
        ]
        with pytest.raises(ConfigurationError) as caught:
            Registry(operations, AllowAll())
        return str(caught.value)

    first = refusal()
    assert "operation 'z' input_schema" in first
    assert refusal() == first
    # A registry that opted in to the backtracking engine, built in between, accepts the
    # lookaround patterns; that teaches the next linear-engine build nothing.
    if "(?=a)b" in str(schema):
        Registry(
            [Operation("z", "does", handler, input_schema=schema)],
            AllowAll(),
            regex_backtrack_limit=1000,
        )
    assert refusal() == first
