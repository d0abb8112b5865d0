"""``opgate.openapi._naming``: operation names, deterministic, unique and within
``[A-Za-z0-9_.-]{1,128}``.

Naming many operations of one id in linear time is in ``test_openapi_bombs.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from opgate.openapi import base_name

from openapi_documents import catalog, doc, op


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


def test_suffixes_skip_names_taken_literally() -> None:
    from opgate.openapi._naming import Namer

    namer = Namer()
    names = [namer.name("get", "/", i) for i in ("x", "x_3", "x", "x", "x", "x_2")]
    assert names == ["x", "x_3", "x_2", "x_4", "x_5", "x_2_2"]
