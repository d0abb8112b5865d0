"""opgate.openapi: loading documents, names, schema conversion, and what is skipped or warned."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from opgate import Registry
from opgate.openapi import DocumentError, base_name, build_catalog, load_document

from conftest import AllowAll

BASE = "https://api.example.com/v1"


def doc(paths: dict[str, Any], *, version: str = "3.0.3", schemas: Any = None) -> dict[str, Any]:
    document: dict[str, Any] = {"openapi": version, "info": {"title": "T", "version": "1"}}
    document["paths"] = paths
    if schemas is not None:
        document["components"] = {"schemas": schemas}
    return document


def op(**fields: Any) -> dict[str, Any]:
    return {"responses": {"200": {"description": "ok"}}, **fields}


def catalog(document: Any, **options: Any) -> Any:
    built = build_catalog(document, base_url=BASE, **options)
    built.registry(AllowAll())  # every produced schema compiles
    return built


# -- loading --------------------------------------------------------------------------


def test_json_yaml_mapping_and_path_give_the_same_catalog(tmp_path: Path) -> None:
    document = doc({"/pets": {"get": op(operationId="listPets", summary="List pets")}})
    text = json.dumps(document)
    yaml_text = (
        "openapi: 3.0.3\ninfo: {title: T, version: '1'}\npaths:\n  /pets:\n    get:\n"
        "      operationId: listPets\n      summary: List pets\n      responses:\n"
        "        200: {description: ok}\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml_text)
    names = [
        list(catalog(source).plans) for source in (document, text, text.encode(), yaml_text, path)
    ]
    assert names == [["listPets"]] * 5


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"swagger": "2.0"}, "Swagger 2.0"),
        ({"openapi": "4.0.0"}, "not supported"),
        ("[1, 2", "invalid JSON"),
        ('{"openapi": "3.0.0", "x": NaN}', "not JSON"),
        ("openapi.yaml", "pathlib.Path"),
    ],
)
def test_documents_that_are_not_openapi_3_are_refused_clearly(source: Any, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        load_document(source)


def test_numbers_are_exact() -> None:
    loaded = load_document('{"openapi": "3.1.0", "paths": {}, "x": 0.1}')
    assert loaded.data["x"] == Decimal("0.1")


# -- names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "operation_id", "name"),
    [
        ("get", "/repos/{owner}/{repo}", "repos/get", "repos.get"),
        ("get", "/repos/{owner}/{repo}", None, "get_repos.owner.repo"),
        ("get", "/", None, "get_root"),
        ("post", "/a b", "create item (v2)!", "create.item._v2__"),
        ("get", "/x", "", "get_x"),
    ],
)
def test_base_names(method: str, path: str, operation_id: Any, name: str) -> None:
    assert base_name(method, path, operation_id) == name


def test_names_are_unique_deterministic_and_within_the_rule() -> None:
    long_id = "x" * 300
    document = doc(
        {
            "/a": {"get": op(operationId="same"), "post": op(operationId="same")},
            "/b": {"get": op(operationId=long_id), "put": op(operationId=long_id)},
        }
    )
    names = list(catalog(document).plans)
    assert names[:2] == ["same", "same_2"]
    assert len(names[2]) == 128
    assert names[3].endswith("_2")
    assert len(names[3]) == 128
    assert names == list(catalog(document).plans)


# -- schema conversion ----------------------------------------------------------------


def input_schema(document: Any, name: str, **options: Any) -> dict[str, Any]:
    built = catalog(document, **options)
    schema = built.plans[name].input_schema
    assert isinstance(schema, dict)
    return schema


def test_openapi_30_isms_are_converted() -> None:
    schemas = {
        "Pet": {
            "type": "object",
            "required": ["id", "name"],
            "properties": {
                "id": {"type": "integer", "readOnly": True},
                "name": {"type": "string", "nullable": True, "example": "rex", "x-foo": 1},
                "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "owner": {"$ref": "#/components/schemas/Owner", "nullable": True},
                "weird": {"type": "file", "maxLength": 99999999999},
            },
        },
        "Owner": {"type": "object", "properties": {"pet": {"$ref": "#/components/schemas/Pet"}}},
        "Unused": {"type": "string"},
    }
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}
    document = doc({"/pets": {"post": op(operationId="add", requestBody=body)}}, schemas=schemas)
    built = catalog(document)
    schema = built.plans["add"].input_schema
    assert schema["properties"]["body"] == {"$ref": "#/$defs/Pet"}
    assert set(schema["$defs"]) == {"Pet", "Owner"}  # only what is reached
    pet = schema["$defs"]["Pet"]
    assert pet["required"] == ["name"]  # readOnly id is not required in a request
    assert pet["properties"]["name"] == {"type": ["string", "null"]}
    assert pet["properties"]["age"] == {"type": "integer", "exclusiveMinimum": 0}
    assert pet["properties"]["owner"] == {"anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}]}
    assert pet["properties"]["weird"] == {}
    kinds = built.report.warnings_by_kind()
    assert kinds["constraint dropped"] == 2


def test_openapi_31_schemas_are_taken_as_they_are() -> None:
    schemas = {
        "N": {
            "type": ["string", "null"],
            "exclusiveMinimum": 3,
            "$schema": "https://spec.openapis.org/oas/3.1/dialect/base",
            "examples": ["a"],
        }
    }
    body = {
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/N", "description": "d"}}
        }
    }
    document = doc(
        {"/n": {"post": op(operationId="n", requestBody=body)}}, version="3.1.0", schemas=schemas
    )
    schema = input_schema(document, "n")
    assert schema["properties"]["body"] == {"description": "d", "$ref": "#/$defs/N"}
    assert schema["$defs"]["N"] == {"type": ["string", "null"], "exclusiveMinimum": 3}


def test_component_names_are_made_pointer_safe() -> None:
    schemas = {"a/b c~d": {"type": "string"}, "a_b_c_d": {"type": "integer"}}
    param = [
        {"name": "x", "in": "query", "schema": {"$ref": "#/components/schemas/a~1b c~0d"}},
        {"name": "y", "in": "query", "schema": {"$ref": "#/components/schemas/a_b_c_d"}},
    ]
    document = doc({"/x": {"get": op(operationId="x", parameters=param)}}, schemas=schemas)
    schema = input_schema(document, "x")
    assert schema["properties"]["x"] == {"$ref": "#/$defs/a_b_c_d"}
    assert schema["properties"]["y"] == {"$ref": "#/$defs/a_b_c_d_2"}


def test_other_local_references_are_inlined() -> None:
    shared = {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 100}}
    document = doc(
        {
            "/a": {"get": op(operationId="a", parameters=[shared])},
            "/b": {
                "get": op(
                    operationId="b",
                    parameters=[
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"$ref": "#/paths/~1a/get/parameters/0/schema"},
                        }
                    ],
                )
            },
        }
    )
    schema = input_schema(document, "b")
    assert schema["properties"]["limit"] == {"type": "integer", "maximum": 100}


def test_unrepresentable_operations_are_skipped_with_reasons() -> None:
    document = doc(
        {
            "/ext": {
                "get": op(
                    parameters=[{"name": "a", "in": "query", "schema": {"$ref": "other.yaml#/A"}}]
                )
            },
            "/cookie": {
                "get": op(
                    parameters=[
                        {
                            "name": "s",
                            "in": "cookie",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ]
                )
            },
            "/upload": {
                "post": op(
                    requestBody={
                        "required": True,
                        "content": {"multipart/form-data": {"schema": {"type": "object"}}},
                    }
                )
            },
            "/undeclared/{id}": {"get": op()},
            "/dangling": {"get": op(parameters=[{"$ref": "#/components/parameters/nope"}])},
            "/fine": {
                "get": op(parameters=[{"name": "s", "in": "cookie", "schema": {"type": "string"}}])
            },
        }
    )
    built = catalog(document)
    assert list(built.plans) == ["get_fine"]
    assert built.report.skipped_by_kind() == {
        "external $ref": 1,
        "cookie parameter": 1,
        "request body media type": 1,
        "path parameter": 1,
        "dangling $ref": 1,
    }
    assert built.report.warnings_by_kind() == {"cookie parameter": 1}
    assert "1 operation imported, 5 skipped, 1 warning" in built.report.summary()


def test_a_pattern_the_compiler_rejects_is_dropped_with_a_warning() -> None:
    bad = {"name": "q", "in": "query", "schema": {"type": "string", "pattern": "(unclosed"}}
    good = {"name": "r", "in": "query", "schema": {"type": "string", "pattern": "^a+$"}}
    document = doc({"/bad": {"get": op(parameters=[bad, good])}, "/good": {"get": op()}})
    built = build_catalog(document, base_url=BASE)
    registry = built.registry(AllowAll())
    assert len(registry) == 2
    schema = built.plans["get_bad"].input_schema
    assert schema["properties"]["q"] == {"type": "string"}
    assert schema["properties"]["r"] == {"type": "string", "pattern": "^a+$"}
    assert built.report.warnings_by_kind() == {"pattern dropped": 1}


def test_a_schema_the_compiler_rejects_skips_only_its_operation() -> None:
    bad = {"name": "q", "in": "query", "schema": {"type": "integer", "minimum": 1e5000}}
    document = doc({"/bad": {"get": op(parameters=[bad])}, "/good": {"get": op()}})
    built = build_catalog(document, base_url=BASE)
    registry = built.registry(AllowAll())
    assert len(registry) == 1
    assert "get_good" in registry
    assert built.report.skipped_by_kind() == {"schema compiler": 1}
    assert built.report.operations == ["get_good"]


def test_parameters_of_every_location_and_a_body_make_one_strict_object() -> None:
    params = [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
        {"name": "id", "in": "query", "schema": {"type": "string"}},
        {
            "name": "X-Trace",
            "in": "header",
            "description": "trace id",
            "schema": {"type": "string"},
        },
        {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
        {"name": "body", "in": "query", "schema": {"type": "string"}},
    ]
    body = {
        "required": True,
        "content": {"application/vnd.api+json": {"schema": {"type": "object"}}},
    }
    document = doc({"/t/{id}": {"put": op(operationId="t", parameters=params, requestBody=body)}})
    built = catalog(document)
    schema = built.plans["t"].input_schema
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["path_id", "query_id", "X-Trace", "query_body", "body"]
    assert schema["properties"]["X-Trace"]["description"] == "trace id"
    assert schema["required"] == ["path_id", "body"]
    assert built.plans["t"].body is not None
    assert built.plans["t"].body.media_type == "application/vnd.api+json"


def test_output_schemas_only_when_asked() -> None:
    responses = {
        "200": {
            "description": "ok",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/P"}}},
        }
    }
    schemas = {
        "P": {
            "type": "object",
            "properties": {"secret": {"type": "string", "writeOnly": True}},
            "required": ["secret"],
        }
    }
    document = doc({"/p": {"get": {"operationId": "p", "responses": responses}}}, schemas=schemas)
    assert catalog(document).plans["p"].output_schema is None
    output = catalog(document, output_schemas=True).plans["p"].output_schema
    assert output == {
        "$ref": "#/$defs/P",
        "$defs": {
            "P": {"type": "object", "properties": {"secret": {"type": "string", "writeOnly": True}}}
        },
    }


def test_a_definition_over_budget_is_skipped() -> None:
    document = doc(
        {
            "/big": {
                "get": op(
                    description="d" * 100,
                    parameters=[
                        {
                            "name": f"p{i}",
                            "in": "query",
                            "description": "x" * 400,
                            "schema": {"type": "string"},
                        }
                        for i in range(200)
                    ],
                )
            }
        }
    )
    built = catalog(document)
    assert built.report.skipped_by_kind() == {"definition too large": 1}


def test_hostile_documents_never_raise() -> None:
    documents: list[Any] = [
        doc({"/a": "nope"}),
        doc({"/a": {"get": "nope"}}),
        doc({"/a": {"get": op(parameters="nope")}}),
        doc({"/a": {"get": op(parameters=[1, {"name": 1}])}}),
        doc({"/a": {"get": op(requestBody={"$ref": "#/x"})}}),
        doc({"/a": {"$ref": "#/paths/~1a"}}),
        doc({"a": {"get": op()}}),
        doc({"/a": {"get": op(parameters=[{"name": "q", "in": "query", "schema": 5}])}}),
        doc(
            {
                "/a": {
                    "get": op(
                        parameters=[
                            {
                                "name": "q",
                                "in": "query",
                                "schema": {"$ref": "#/paths/~1a/get/parameters/0/schema"},
                            }
                        ]
                    )
                }
            }
        ),
    ]
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "array", "items": deep}
    documents.append(
        doc({"/a": {"get": op(parameters=[{"name": "q", "in": "query", "schema": deep}])}})
    )
    for document in documents:
        built = catalog(document)
        assert len(built.report.operations) + len(built.report.skipped) <= 1
    assert Registry(catalog(doc({})).operations, AllowAll()) is not None


def test_a_header_parameter_whose_name_is_not_an_http_token_is_dropped() -> None:
    """'X-Mémo' or 'X-A B' could never be sent; calls failed with a misleading message."""
    names = ["X-M\u00e9mo", "X-A B", "X-A:B", "X-Ok"]
    parameters = [{"name": n, "in": "header", "schema": {"type": "string"}} for n in names]
    built = catalog(doc({"/q": {"get": op(operationId="q", parameters=parameters)}}))
    assert list(built.plans["q"].input_schema["properties"]) == ["X-Ok"]
    assert built.report.warnings_by_kind() == {"header parameter": 3}
