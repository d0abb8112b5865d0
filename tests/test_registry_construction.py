"""Construction keeps only what it needs (issue 10, item 4): schemas are fully checked up
front, kept as canonical bytes, their validators compiled again on first use once
dropped from the bounded cache; the cyclic garbage collector is paused during the
build and always restored."""

from __future__ import annotations

import gc
from collections.abc import Iterator
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
from opgate._schema import MAX_CACHED_VALIDATORS

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


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_enabled")
def test_the_collector_is_restored_after_construction_and_after_a_refusal() -> None:
    Registry([Operation("a", "does a", handler)], AllowAll())
    assert gc.isenabled()
    bad = Operation("b", "does b", handler, input_schema={"type": "object", "pattern": "("})
    with pytest.raises(ConfigurationError, match="operation 'b'"):
        Registry([Operation("a", "does a", handler), bad], AllowAll())
    assert gc.isenabled()
    gc.disable()
    try:
        Registry([Operation("a", "does a", handler)], AllowAll())
        assert not gc.isenabled()  # a host that turned it off keeps it off
    finally:
        gc.enable()


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
