"""``opgate.openapi._schemas``: OpenAPI Schema Objects as JSON Schema 2020-12.

OpenAPI 3.0's ``nullable``, boolean exclusive bounds and ``readOnly``/``writeOnly``,
3.1 schemas taken as they are, components as pointer-safe ``$defs``, other local
references inlined, output schemas. Hostile schemas (reference bombs, deep chains)
are in ``test_openapi_bombs.py``.
"""

from __future__ import annotations

from openapi_documents import catalog, doc, input_schema, op


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
