"""``opgate.openapi._document``: reading a document (JSON, YAML, a mapping, a file) and
following the references inside it.

YAML alias budgets, which need a memory cap, are in ``test_openapi_bombs.py``.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from opgate.openapi import DocumentError, load_document
from opgate.openapi._document import MAX_REF_CHAIN, RefError, split_pointer

from openapi_documents import catalog, doc, op


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


# -- YAML as JSON values ---------------------------------------------------------------


def test_yaml_beyond_json_is_normalised() -> None:
    loaded = load_document(
        "openapi: 3.1.0\npaths: {}\n"
        "x-keys: {200: ok, true: yes, null: none, 2024-01-02: day}\n"
        "x-values: [0.1, 1.5e+3, 2024-01-02, 2024-01-02T03:04:05Z, !!binary aGk=, ~]\n"
    )
    assert loaded.data["x-keys"] == {"200": "ok", "true": True, "null": "none", "2024-01-02": "day"}
    assert loaded.data["x-values"] == [
        Decimal("0.1"),
        Decimal("1500.0"),
        "2024-01-02",
        "2024-01-02T03:04:05+00:00",
        "hi",
        None,
    ]


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan"])
def test_yaml_non_finite_numbers_are_refused(text: str) -> None:
    with pytest.raises(DocumentError, match="non-finite"):
        load_document(f"openapi: 3.0.3\npaths: {{}}\nx: {text}\n")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("[1, 2]", "not a JSON/YAML object"),
        ('{"openapi": 3.1}', "no 'openapi' version string"),
        ('{"openapi": "3.1.0", "paths": []}', "'paths' must be an object"),
        ("openapi: [unclosed", "invalid YAML at line 2"),
    ],
)
def test_what_is_not_a_document_says_why(source: str, message: str) -> None:
    with pytest.raises(DocumentError, match=re.escape(message)):
        load_document(source)


def test_a_mapping_is_taken_as_it_is_and_versions_are_families() -> None:
    data = {"openapi": "3.0.3", "paths": {}, "info": {"title": "Pets"}}
    loaded = load_document(data)
    assert loaded.data is data
    assert (loaded.version, loaded.openapi, loaded.title) == ("3.0", "3.0.3", "Pets")
    assert load_document({"openapi": "3.1.1"}).version == "3.1"
    assert load_document({"openapi": "3.1.1", "info": {"title": 5}}).title == ""
    with pytest.raises(TypeError, match=r"pathlib\.Path"):
        load_document(42)


# -- references -------------------------------------------------------------------------


def test_pointers_unescape_their_tokens() -> None:
    assert split_pointer("") == []
    assert split_pointer("/a~1b/c~0d/e%20f/~01") == ["a/b", "c~d", "e f", "~1"]
    with pytest.raises(RefError, match="not a JSON pointer"):
        split_pointer("components")


def test_a_chain_of_references_is_followed_inside_the_document() -> None:
    loaded = load_document(
        {
            "openapi": "3.1.0",
            "components": {
                "parameters": {
                    "a": {"$ref": "#/components/parameters/b"},
                    "b": {"$ref": "#/x-list/1"},
                },
                "schemas": {"a/b": {"type": "string"}},
            },
            "x-list": [{}, {"name": "limit", "in": "query"}],
        }
    )
    assert loaded.resolve({"$ref": "#/components/parameters/a"}) == {
        "name": "limit",
        "in": "query",
    }
    assert loaded.pointer("#/components/schemas/a~1b") == {"type": "string"}
    assert loaded.resolve({"name": "plain"}) == {"name": "plain"}


@pytest.mark.parametrize(
    ("ref", "kind"),
    [
        ("other.yaml#/components/schemas/A", "external $ref"),
        ("https://example.com/spec.json", "external $ref"),
        ("#/components/schemas/missing", "dangling $ref"),
        ("#/x-list/9", "dangling $ref"),
        ("#/x-list/-1", "dangling $ref"),
        ("#components", "unsupported $ref"),
        (5, "unsupported $ref"),
    ],
)
def test_a_reference_that_cannot_be_followed_names_its_kind(ref: Any, kind: str) -> None:
    loaded = load_document({"openapi": "3.1.0", "x-list": [1], "components": {"schemas": {}}})
    with pytest.raises(RefError) as raised:
        loaded.resolve({"$ref": ref})
    assert raised.value.kind == kind


def test_a_loop_or_a_chain_past_the_limit_is_refused() -> None:
    chain = {f"p{i}": {"$ref": f"#/x/p{i + 1}"} for i in range(MAX_REF_CHAIN)}
    chain[f"p{MAX_REF_CHAIN}"] = {"name": "end"}  # from p0: one reference too many
    loaded = load_document({"openapi": "3.1.0", "x": {**chain, "self": {"$ref": "#/x/self"}}})
    with pytest.raises(RefError) as looped:
        loaded.resolve({"$ref": "#/x/self"})
    assert looped.value.kind == "circular $ref"
    with pytest.raises(RefError) as long:
        loaded.resolve({"$ref": "#/x/p0"})
    assert long.value.kind == "circular $ref"
    assert loaded.resolve({"$ref": "#/x/p1"}) == {"name": "end"}  # MAX_REF_CHAIN: followed
