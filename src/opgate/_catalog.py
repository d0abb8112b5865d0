"""The catalog a ``Registry`` serves: every operation snapshotted and compiled once.

``snapshot_catalog`` turns the host's ``Operation`` definitions into ``Entry``
values in name order: it checks each definition (an ``Operation``, a unique name,
the definition budget, a search item that fits an empty page) and fully checks
every schema (each distinct schema once; the patterns an earlier build proved to
compile are remembered, ``_proven_patterns``). An ``Entry`` holds what search, inspect
and invoke read on their hot paths, computed here once: the compiled schemas,
whether the handler is async, the search page item, its encoded size and the
``Discover`` request. ``catalog_revision`` derives the definitions revision from
the entries (``_search.search_index`` their search index).

Nothing here runs a callback or awaits; the registry calls these in this order,
inside a paused collector (``_collector``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from ._failures import ConfigurationError
from ._json import JSONValue
from ._keys import Definition, definitions_revision
from ._limits import PAGE_BYTES, PAGE_RESERVE_BYTES, Limits
from ._operation import Operation, Summary
from ._policy import Discover
from ._proven_patterns import load_proven, remember_proven
from ._schema import CompiledSchema, SchemaCache, SchemaCompiler, SchemaRole
from ._text import json_string_size, utf8_size
from ._version import __version__

__all__ = ["Entry", "catalog_revision", "snapshot_catalog"]

#: Accepted when an operation declares no input schema: any argument object.
_ANY_OBJECT: dict[str, JSONValue] = {"type": "object"}


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """A registered operation as the registry keeps it (snapshotted, compiled)."""

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]
    source: str
    handler: Callable[..., Any]
    is_async: bool
    input_schema: CompiledSchema
    output_schema: CompiledSchema | None
    item_bytes: int  # encoded size of its search page item, comma included
    discover: Discover  # immutable, so one request value serves every search
    summary_item: Summary


def snapshot_catalog(
    operations: Iterable[Operation], limits: Limits, regex_backtrack_limit: int | None
) -> tuple[Entry, ...]:
    """Every operation snapshotted and compiled, in name order.

    Raises ``TypeError`` for anything but an ``Operation`` and ``ConfigurationError``
    naming the operation and field for a repeated name, an invalid schema or a
    definition over its budgets.
    """
    compiler = SchemaCompiler(backtrack_limit=regex_backtrack_limit)
    loaded = load_proven(regex_backtrack_limit)
    cache = SchemaCache(loaded)  # this build's only: dropped when it returns
    default_input = compiler.compile(
        _ANY_OBJECT, role=SchemaRole.INPUT, where="default", cache=cache
    )
    entries: dict[str, Entry] = {}
    for operation in operations:
        if not isinstance(operation, Operation):
            raise TypeError(f"expected opgate.Operation, got {type(operation).__name__}")
        if operation.name in entries:
            raise ConfigurationError(f"operation name {operation.name!r} is not unique")
        entries[operation.name] = _snapshot(operation, limits, compiler, default_input, cache)
    remember_proven(regex_backtrack_limit, loaded, cache.patterns - loaded)
    return tuple(entries[name] for name in sorted(entries))


def _snapshot(
    operation: Operation,
    limits: Limits,
    compiler: SchemaCompiler,
    default_input: CompiledSchema,
    cache: SchemaCache,
) -> Entry:
    where = f"operation {operation.name!r}"

    def compiled(schema: object, role: SchemaRole, field: str) -> CompiledSchema:
        return compiler.compile(schema, role=role, where=f"{where} {field}", cache=cache)

    input_schema = (
        default_input
        if operation.input_schema is None
        else compiled(operation.input_schema, SchemaRole.INPUT, "input_schema")
    )
    output_schema = (
        None
        if operation.output_schema is None
        else compiled(operation.output_schema, SchemaRole.OUTPUT, "output_schema")
    )
    texts = "".join(
        (
            operation.name,
            operation.group,
            operation.summary,
            operation.description,
            operation.source,
            *operation.examples,
        )
    )
    size = (
        json_string_size(texts)  # as inspect writes them, escapes included
        + len(input_schema.canonical)
        + (len(output_schema.canonical) if output_schema else 0)
    )
    if size > limits.definition_bytes:
        raise ConfigurationError(
            f"{where} is {size} bytes (texts, examples and source as JSON escapes them, "
            f"and schemas), over Limits.definition_bytes ({limits.definition_bytes})"
        )
    item_bytes = _item_bytes(operation.name, operation.group, operation.summary)
    if item_bytes > PAGE_BYTES - PAGE_RESERVE_BYTES:
        raise ConfigurationError(
            f"{where} cannot fit an empty search page: its name, group and summary "
            f"encode to {item_bytes} bytes, over {PAGE_BYTES - PAGE_RESERVE_BYTES}; "
            f"shorten the summary"
        )
    handler = operation.handler
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    )
    return Entry(
        name=operation.name,
        group=operation.group,
        summary=operation.summary,
        description=operation.description,
        examples=operation.examples,
        source=operation.source,
        handler=handler,
        is_async=is_async,
        input_schema=input_schema,
        output_schema=output_schema,
        item_bytes=item_bytes,
        discover=Discover(operation.name),
        summary_item=Summary(operation.name, operation.group, operation.summary),
    )


def catalog_revision(entries: tuple[Entry, ...]) -> str:
    """The definitions revision (``_keys``): the entries as compiled, and the version."""
    return definitions_revision(
        (
            Definition(
                e.name,
                e.group,
                e.summary,
                e.description,
                e.examples,
                e.source,
                e.input_schema.canonical,
                None if e.output_schema is None else e.output_schema.canonical,
            )
            for e in entries
        ),
        __version__,
    )


_string = encode_basestring  # json.dumps's string encoder for ensure_ascii=False


def _item_bytes(name: str, group: str, summary: str) -> int:
    # The bytes of json.dumps({"group": ..., "name": ..., "summary": ...},
    # ensure_ascii=False, separators=(",", ":")) plus one, without building the dict.
    item = f'{{"group":{_string(group)},"name":{_string(name)},"summary":{_string(summary)}}}'
    return utf8_size(item) + 1
