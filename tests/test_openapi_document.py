"""``opgate.openapi._document``: reading a document (JSON, YAML, a mapping, a file) and
following the references inside it.

YAML alias budgets, which need a memory cap, are in ``test_openapi_bombs.py``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from opgate.openapi import DocumentError, load_document

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
