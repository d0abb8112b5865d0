"""Tests of ``opgate._catalog``: a host's operations snapshotted and compiled once.

Construction snapshots every definition (mutating it afterwards changes nothing),
refuses anything but an ``Operation``, a repeated name, a definition over
``Limits.definition_bytes`` (texts counted as JSON writes them) and a search item too
large for an empty page, and names the operation and field of a bad schema. Entries
are in name order; the revision follows what a caller can see or send and nothing
else.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from opgate import (
    ConfigurationError,
    Limits,
    Operation,
    OperationSpec,
    Registry,
    Result,
    Text,
    _catalog,
    finish,
)
from opgate._catalog import snapshot_catalog
from opgate._schema import SchemaCache
from registry_support import handler, op, registry

from conftest import AllowAll, Ctx


def test_construction_snapshots_schemas() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    reg = registry([op("a", input_schema=schema)])
    schema["properties"]["n"]["type"] = "string"
    schema["extra"] = 1
    spec = _run(reg.inspect(Ctx(), "a"))
    assert isinstance(spec, OperationSpec)
    assert spec.input_schema == {"type": "object", "properties": {"n": {"type": "integer"}}}


def _run(coro: Any) -> Any:
    import anyio

    async def main() -> Any:
        return await coro

    return anyio.run(main)


def test_duplicate_names_rejected() -> None:
    with pytest.raises(ConfigurationError, match="not unique"):
        registry([op("a"), op("a")])


def test_definition_budget() -> None:
    limits = Limits(definition_bytes=300)
    registry([op("a", description="d" * 200)], limits=limits)
    with pytest.raises(ConfigurationError, match=r"operation 'a'.*definition_bytes"):
        registry([op("a", description="d" * 300)], limits=limits)


@pytest.mark.parametrize("character", ['"', "\\", "\n", "\x01"])
def test_definition_budget_counts_texts_as_json_writes_them(character: str) -> None:
    """200 characters fit 300 bytes raw, but ``inspect`` writes each as an escape."""
    limits = Limits(definition_bytes=300)
    with pytest.raises(ConfigurationError, match=r"operation 'a' is \d+ bytes.*definition_bytes"):
        registry([op("a", description=character * 200)], limits=limits)


def test_schema_errors_name_operation_and_pointer() -> None:
    bad = {"type": "object", "properties": {"n": {"maxLength": 2**31}}}
    with pytest.raises(ConfigurationError, match=r"operation 'a' input_schema.*/properties/n"):
        registry([op("a", input_schema=bad)])
    with pytest.raises(ConfigurationError, match="operation 'a' input_schema"):
        registry([op("a", input_schema={"type": "string"})])


def test_summary_that_cannot_fit_an_empty_page_fails_at_startup() -> None:
    with pytest.raises(ConfigurationError, match="empty search page"):
        registry([op("a", "s" * 16000)])


def test_only_operations_make_a_catalog() -> None:
    with pytest.raises(TypeError, match=r"expected opgate\.Operation, got dict"):
        registry([op("a"), {"name": "b"}])  # type: ignore[list-item]


def test_entries_are_in_name_order_and_know_an_async_handler() -> None:
    class AsyncCallable:
        async def __call__(self, invocation: Any) -> Any:
            return finish(Result([Text("ok")]))

    async def async_function(invocation: Any) -> Any:
        return finish(Result([Text("ok")]))

    entries, derived = snapshot_catalog(
        [
            Operation("c", "sync", handler),
            Operation("a", "async object", AsyncCallable()),
            Operation("b", "async function", async_function),
        ],
        Limits(),
        None,
        lambda listed: None,
        lambda entries, begun: len(entries),
    )
    assert derived == 3  # what the registry derives is computed from the entries
    assert [entry.name for entry in entries] == ["a", "b", "c"]
    assert [entry.is_async for entry in entries] == [True, True, False]


def test_begin_sees_every_operation_before_any_check_and_derive_gets_its_answer() -> None:
    """``begin`` (a child building the index) starts from the host's operations as
    read, before the schema walk; ``derive`` receives what it began."""
    seen: list[list[str]] = []
    bad = {"type": "object", "properties": {"n": {"type": "nope"}}}

    def begin(listed: list[Operation]) -> str:
        seen.append([operation.name for operation in listed])
        return "begun"

    _entries, derived = snapshot_catalog(
        iter([op("b"), op("a")]), Limits(), None, begin, lambda entries, begun: begun
    )
    assert seen == [["b", "a"]]
    assert derived == "begun"
    seen.clear()
    with pytest.raises(ConfigurationError, match="'b'"):
        snapshot_catalog(
            [op("a"), op("b", input_schema=bad)], Limits(), None, begin, lambda e, b: b
        )
    assert seen == [["a", "b"]]  # begun before the walk found the error


def test_begin_is_not_called_unless_every_item_is_an_operation() -> None:
    called: list[object] = []
    with pytest.raises(TypeError, match="got dict"):
        snapshot_catalog(
            [op("a"), {"name": "b"}],  # type: ignore[list-item]
            Limits(),
            None,
            called.append,
            lambda entries, begun: None,
        )
    assert called == []


def test_the_schema_cache_is_gone_before_the_index_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The build's schema cache (its source keys: tens of MiB at real scale) does not
    live on while the registry derives its index from the entries."""
    made: list[weakref.ref[SchemaCache]] = []

    class Watched(SchemaCache):  # no __slots__: weak references allowed
        def __init__(self, proven: Any = (), *, defer: bool = False) -> None:
            super().__init__(proven, defer=defer)
            made.append(weakref.ref(self))

    def derive(entries: tuple[Any, ...], begun: None) -> bool:
        gc.collect()
        return all(ref() is None for ref in made)

    monkeypatch.setattr(_catalog, "SchemaCache", Watched)
    schema = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^a$"}}}
    _, dropped = snapshot_catalog(
        [op("a", "does a", input_schema=schema)], Limits(), None, lambda listed: None, derive
    )
    assert made
    assert dropped


def test_the_revision_follows_what_a_caller_sees_and_sends() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    base = registry([op("a", "does a", input_schema=schema), op("b", "does b")]).revision
    # the same definitions in another order, spelling or with another handler
    respelt = '{"properties": {"n": {"type": "integer"}}, "type": "object"}'
    again = Registry(
        [
            op("b", "does b"),
            Operation("a", "does a", lambda invocation: None, input_schema=respelt),
        ],
        AllowAll(),
        limits=Limits(argument_bytes=1024),
    )
    assert again.revision == base
    for changed in (
        [op("a", "does A", input_schema=schema), op("b", "does b")],
        [op("a", "does a", input_schema=schema, examples=("x",)), op("b", "does b")],
        [op("a", "does a"), op("b", "does b")],
        [op("a", "does a", input_schema=schema, output_schema={}), op("b", "does b")],
        [op("a", "does a", input_schema=schema), op("b", "does b", group="g")],
        [op("a", "does a", input_schema=schema)],
    ):
        assert registry(changed).revision != base
