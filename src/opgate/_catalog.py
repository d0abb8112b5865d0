"""The catalog a ``Registry`` serves: every operation snapshotted and compiled once.

``snapshot_catalog`` turns the host's ``Operation`` definitions into ``Entry``
values in name order: it checks each definition (an ``Operation``, a unique name,
the definition budget, a search item that fits an empty page) and fully checks
every schema (each distinct schema once; the patterns an earlier build proved to
compile are remembered, ``_proven_patterns``, and the new ones are compiled together
at the end, in a child process when there are many, ``_pattern_proof``), and derives
what the registry computes from the entries alone. An ``Entry`` holds what search, inspect
and invoke read on their hot paths, computed here once: the compiled schemas,
whether the handler is async, the search page item, its encoded size and the
``Discover`` request. ``catalog_revision`` derives the definitions revision from
the entries (``_search.search_index`` their search index).

Nothing here awaits or calls the host but to read its operations (its iterable, and
the mappings its schemas are given as; a refused build may read them twice); the
registry calls these in this order, inside a paused collector (``_collector``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, TypeVar

from ._failures import ConfigurationError
from ._json import JSONValue
from ._keys import Definition, definitions_revision
from ._limits import PAGE_BYTES, PAGE_RESERVE_BYTES, Limits
from ._operation import Operation, Summary
from ._pattern_proof import all_compile, regex_options, start_proof
from ._policy import Discover
from ._proven_patterns import load_proven, remember_proven
from ._schema import CompiledSchema, SchemaCache, SchemaCompiler, SchemaRole
from ._text import json_string_size, utf8_size
from ._version import __version__

__all__ = ["Entry", "catalog_revision", "snapshot_catalog"]

Derived = TypeVar("Derived")
Begun = TypeVar("Begun")

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
    operations: Iterable[Operation],
    limits: Limits,
    regex_backtrack_limit: int | None,
    begin: Callable[[list[Operation]], Begun | None],
    derive: Callable[[tuple[Entry, ...], Begun | None], Derived],
) -> tuple[tuple[Entry, ...], Derived]:
    """Every operation snapshotted and compiled, in name order, and ``derive`` of them
    (what the registry computes from the entries alone: its index, its revision).

    The host's operations are read first; when every one is an ``Operation``,
    ``begin`` is called with them (in the host's order, before any check: work that
    can start from their texts alone, a child process building the search index) and
    ``derive`` receives what it returned (else ``None``).

    Raises ``TypeError`` for anything but an ``Operation`` and ``ConfigurationError``
    naming the operation and field for a repeated name, an invalid schema or a
    definition over its budgets.

    The patterns no earlier build proved are compiled together once the snapshot is
    made, in a child process while ``derive`` runs when there are many
    (``_pattern_proof``). If one does not compile, or anything fails (a check, the
    host's iterable or schema mappings), the operations read until then are snapshotted
    again proving each schema's patterns as they go, so that the error raised is the one
    the sequential build raised: the first definition's to fail, else the host's.
    """
    listed: list[object] = []  # the operations as the first snapshot took them
    loaded = load_proven(regex_backtrack_limit)

    def snapshot(defer: bool) -> tuple[tuple[Entry, ...], set[str], list[str]]:
        return _snapshot_all(listed, limits, regex_backtrack_limit, loaded, defer=defer)

    failed: Exception | None = None
    begun: Begun | None = None
    try:  # the host's iterable read once; on failure, those read until then are checked
        for operation in operations:
            listed.append(operation)
        if all(isinstance(operation, Operation) for operation in listed):
            begun = begin(listed)  # type: ignore[arg-type]  # all Operations
        entries, known, pending = _snapshot_all(
            listed, limits, regex_backtrack_limit, loaded, defer=True
        )
    except Exception as exc:  # a check, the host's iterable or a host mapping failed
        failed = exc
    except BaseException:  # KeyboardInterrupt: what began is dropped, not kept by it
        begun = None
        raise
    if failed is not None:
        # What began (a child building the index) is dropped here, so that it stops at
        # once: the error's traceback holds this frame, and it holds the error.
        begun = None
        # A pattern taken as compiling may have come first: the operations read until
        # the failure, proved as they go, raise the first definition's error; if they
        # do not, the failure is the one the sequential build met.
        snapshot(False)
        raise failed
    proof = start_proof(pending, regex_backtrack_limit)
    derived = derive(entries, begun)
    proved = None if proof is None else proof.result()
    if proved is None:  # no child, or no answer from it: this process proves them
        proved = not pending or all_compile(pending, regex_options(regex_backtrack_limit))
    if not proved:
        entries, known, _ = snapshot(False)  # raises the first definition's error
        derived = derive(entries, None)  # pragma: no cover - it raised
    remember_proven(regex_backtrack_limit, loaded, known - loaded)
    return entries, derived


def _snapshot_all(
    operations: Iterable[object],
    limits: Limits,
    regex_backtrack_limit: int | None,
    loaded: frozenset[str],
    *,
    defer: bool,
) -> tuple[tuple[Entry, ...], set[str], list[str]]:
    """The entries in name order, the patterns known to compile, and (``defer``) the
    new ones among them, listed but not compiled. The build's ``SchemaCache`` (the
    schemas' source keys, tens of MiB at real scale) is dropped on return."""
    compiler = SchemaCompiler(backtrack_limit=regex_backtrack_limit)
    cache = SchemaCache(loaded, defer=defer)  # this build's only: dropped when it returns
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
    return tuple(entries[name] for name in sorted(entries)), cache.patterns, cache.deferred or []


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
