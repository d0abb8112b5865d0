"""``opgate.openapi._operations``: paths and methods to operation plans.

Parameters of every location and a body make one strict object; what cannot be
represented is skipped, and what is dropped is warned, with the report's kinds.
"""

from __future__ import annotations

from openapi_documents import catalog, doc, op


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


def test_a_header_parameter_whose_name_is_not_an_http_token_is_dropped() -> None:
    """'X-Mémo' or 'X-A B' could never be sent; calls failed with a misleading message."""
    names = ["X-M\u00e9mo", "X-A B", "X-A:B", "X-Ok"]
    parameters = [{"name": n, "in": "header", "schema": {"type": "string"}} for n in names]
    built = catalog(doc({"/q": {"get": op(operationId="q", parameters=parameters)}}))
    assert list(built.plans["q"].input_schema["properties"]) == ["X-Ok"]
    assert built.report.warnings_by_kind() == {"header parameter": 3}
