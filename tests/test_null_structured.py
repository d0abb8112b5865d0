"""JSON ``null`` is a valid structured result; absence has its own marker (issue 9, item 12)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from opgate import (
    NO_STRUCTURED,
    Completed,
    Failed,
    FailureCode,
    Invocation,
    NoStructured,
    Operation,
    Registry,
    Result,
    Text,
    finish,
)

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


def test_null_is_structured_content_and_absence_is_not() -> None:
    null = Result([Text("x")], structured=None)
    assert null.has_structured
    assert null.structured is None
    assert null.structured_json == b"null"
    absent = Result([Text("x")])
    assert not absent.has_structured
    assert absent.structured is NO_STRUCTURED
    assert absent.structured_json is None
    assert Result([Text("x")], structured=NO_STRUCTURED) == absent
    assert null != absent
    assert isinstance(NO_STRUCTURED, NoStructured)
    assert repr(NO_STRUCTURED) == "NO_STRUCTURED"
    assert "NO_STRUCTURED" in repr(absent)


def test_null_and_absent_survive_copies_and_pickles() -> None:
    for result in (Result(structured=None), Result()):
        assert pickle.loads(pickle.dumps(result)) == result
        assert copy.deepcopy(result) == result
        assert pickle.loads(pickle.dumps(result)).has_structured == result.has_structured
    assert pickle.loads(pickle.dumps(NO_STRUCTURED)) is NO_STRUCTURED


def test_results_differ_only_by_null_and_absence_hash_apart() -> None:
    assert len({Result(structured=None), Result(), Result(structured=0)}) == 3


def registry(structured: object, output_schema: object) -> Registry:
    def handler(inv: Invocation) -> Any:
        return finish(Result([Text("done")], structured=structured))

    return Registry(
        [Operation("op", "An operation", handler, output_schema=output_schema)], AllowAll()
    )


@pytest.mark.parametrize("schema", [{"type": "null"}, {"type": ["object", "null"]}, True, {}])
async def test_an_output_schema_allowing_null_can_be_satisfied(schema: object) -> None:
    outcome = await registry(None, schema).invoke(Ctx(), "op", "{}")
    assert isinstance(outcome, Completed), outcome
    assert outcome.result.structured is None
    assert outcome.result.structured_json == b"null"


async def test_absent_structured_content_still_fails_an_output_schema() -> None:
    outcome = await registry(NO_STRUCTURED, {"type": ["object", "null"]}).invoke(Ctx(), "op", "{}")
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_RESULT
    assert "no structured result" in outcome.failure.message


async def test_null_failing_an_output_schema_is_invalid() -> None:
    outcome = await registry(None, {"type": "object"}).invoke(Ctx(), "op", "{}")
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_RESULT
