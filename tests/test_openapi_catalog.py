"""``opgate.openapi._catalog``: ``build_catalog`` and the registry it builds.

What the schema compiler refuses is dropped (a pattern) or skips only its operation;
no document raises past ``build_catalog`` except one that is not OpenAPI 3.
"""

from __future__ import annotations

from typing import Any

from opgate import Registry
from opgate.openapi import build_catalog

from conftest import AllowAll
from openapi_documents import BASE, catalog, doc, op


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
