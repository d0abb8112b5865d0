"""Small OpenAPI documents written in code, for the tests of ``opgate.openapi``'s modules.

``doc(paths, version=, schemas=)`` is a document of those paths (and components);
``op(**fields)`` an operation answering 200; ``catalog(document)`` imports it against
``BASE`` and builds its registry (every produced schema compiles);
``input_schema(document, name)`` is one operation's input schema.
"""

from __future__ import annotations

from typing import Any

from opgate.openapi import build_catalog

from conftest import AllowAll

__all__ = ["BASE", "catalog", "doc", "input_schema", "op"]

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


def input_schema(document: Any, name: str, **options: Any) -> dict[str, Any]:
    built = catalog(document, **options)
    schema = built.plans[name].input_schema
    assert isinstance(schema, dict)
    return schema
