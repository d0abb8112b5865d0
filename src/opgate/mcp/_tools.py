"""The three gateway tools: their names, descriptions, schemas and argument checks.

Everything here is data and pure functions; ``_server.py`` sequences them. The
tool list has the same size whatever the catalog holds: only pinned operations
add tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "GATEWAY_TOOLS",
    "INSPECT",
    "INVOKE",
    "RELEVANCE_GATEWAY_TOOLS",
    "SEARCH",
    "InspectArguments",
    "InvokeArguments",
    "SearchArguments",
    "ToolArgumentError",
    "ToolSpec",
    "empty_search_hint",
    "inspect_arguments",
    "invoke_arguments",
    "search_arguments",
]

SEARCH = "search"
INSPECT = "inspect"
INVOKE = "invoke"


def empty_search_hint(query: str, groups: tuple[str, ...]) -> str | None:
    """What the search tool adds to an empty first page under the rule, where every
    word must match: for a query of several words, how to ask instead (fewer keywords,
    or one of ``groups``: those the principal may discover operations of). ``None``
    for a query of one word or none, which fewer keywords cannot help."""
    if len(query.split()) < 2:
        return None
    hint = (
        "No operation matches every word of this query: search matches all the words "
        "you give. Try again with one or two keywords"
    )
    if groups:
        listed = ", ".join(json.dumps(group, ensure_ascii=False) for group in groups)
        hint += f", or browse a group with an empty query and group set to one of: {listed}"
    return hint + "."


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as ``tools/list`` shows it."""

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None


_STRING = {"type": "string"}

SEARCH_TOOL = ToolSpec(
    name=SEARCH,
    title="Search operations",
    description=(
        "Find the application operations you can use. Start here: pass a few keywords "
        "(all must match; name matches rank first) and optionally a group, or an exact "
        "operation name. Each item is an operation's name, group and one-line summary; "
        "when next_cursor is not null, call search again with the same query and group "
        "and that cursor for more. Then call inspect with a name to see its input schema, "
        "and invoke to run it. An empty query lists everything you may use by name."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Keywords (all must match) or an exact operation name; "
                "at most 256 UTF-8 bytes. Empty lists operations by name.",
            },
            "group": {
                "type": "string",
                "description": "Only operations of this group (case-insensitive).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "description": "Items per page, 1 to 20 (default 5).",
            },
            "cursor": {
                "type": "string",
                "description": "next_cursor from the previous page of the same search.",
            },
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": _STRING, "group": _STRING, "summary": _STRING},
                    "required": ["name", "group", "summary"],
                },
            },
            "next_cursor": {"type": ["string", "null"]},
        },
        "required": ["items", "next_cursor"],
    },
)

INSPECT_TOOL = ToolSpec(
    name=INSPECT,
    title="Inspect an operation",
    description=(
        "Show one operation found with search: its full description, examples, the JSON "
        "Schema its arguments must match (input_schema) and, when it has one, the schema "
        "of its structured result (output_schema). Read it before calling invoke."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The operation's exact name."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "name": _STRING,
            "group": _STRING,
            "summary": _STRING,
            "description": _STRING,
            "examples": {"type": "array", "items": _STRING},
            "input_schema": {"type": "object"},
            "output_schema": {},
        },
        "required": [
            "name",
            "group",
            "summary",
            "description",
            "examples",
            "input_schema",
            "output_schema",
        ],
    },
)

INVOKE_TOOL = ToolSpec(
    name=INVOKE,
    title="Invoke an operation",
    description=(
        "Run one operation found with search, by its exact name, with an arguments object "
        "matching the input_schema shown by inspect. The result is the operation's own content and "
        "structured data. Some operations ask the person for confirmation or input while "
        "they run; that happens inside this call. On failure the result says why (for "
        "example invalid_arguments with the problem, or confirmation_required)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The operation's exact name."},
            "arguments": {
                "type": "object",
                "description": "The operation's arguments, matching its input_schema.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    output_schema=None,
)

GATEWAY_TOOLS = (SEARCH_TOOL, INSPECT_TOOL, INVOKE_TOOL)

#: ``search`` as described to agents when the registry ranks by relevance
#: (``Ranking.RELEVANCE`` or a host ``Scorer``): not every keyword has to match.
RELEVANCE_SEARCH_TOOL = replace(
    SEARCH_TOOL,
    description=SEARCH_TOOL.description.replace(
        "(all must match; name matches rank first)",
        "(best matches first; not every keyword has to match)",
    ),
    input_schema={
        **SEARCH_TOOL.input_schema,
        "properties": {
            **SEARCH_TOOL.input_schema["properties"],
            "query": {
                "type": "string",
                "description": "Keywords (best matches first) or an exact operation name; "
                "at most 256 UTF-8 bytes. Empty lists operations by name.",
            },
        },
    },
)
RELEVANCE_GATEWAY_TOOLS = (RELEVANCE_SEARCH_TOOL, INSPECT_TOOL, INVOKE_TOOL)


class ToolArgumentError(ValueError):
    """A gateway tool's arguments do not have the shape its input schema states."""


@dataclass(frozen=True, slots=True)
class SearchArguments:
    query: str = ""
    group: str = ""
    limit: int | None = None
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class InspectArguments:
    name: str


@dataclass(frozen=True, slots=True)
class InvokeArguments:
    name: str
    arguments: Mapping[str, Any]


def _members(arguments: Mapping[str, Any] | None, allowed: frozenset[str]) -> Mapping[str, Any]:
    if arguments is None:
        return {}
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        names = ", ".join(repr(name)[:80] for name in unknown[:3])
        raise ToolArgumentError(f"unknown argument {names}; allowed: {', '.join(sorted(allowed))}")
    return arguments


def _string(arguments: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = arguments.get(key)
    if value is None:
        if required:
            raise ToolArgumentError(f"{key} is required (a string)")
        return None
    if not isinstance(value, str):
        raise ToolArgumentError(f"{key} must be a string")
    return value


def search_arguments(arguments: Mapping[str, Any] | None) -> SearchArguments:
    """Check ``search``'s arguments; the registry checks lengths and the cursor."""
    members = _members(arguments, frozenset({"query", "group", "limit", "cursor"}))
    limit = members.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise ToolArgumentError("limit must be an integer from 1 to 20")
    return SearchArguments(
        query=_string(members, "query") or "",
        group=_string(members, "group") or "",
        limit=limit,
        cursor=_string(members, "cursor"),
    )


def inspect_arguments(arguments: Mapping[str, Any] | None) -> InspectArguments:
    """Check ``inspect``'s arguments."""
    members = _members(arguments, frozenset({"name"}))
    name = _string(members, "name", required=True)
    assert name is not None
    return InspectArguments(name)


def invoke_arguments(arguments: Mapping[str, Any] | None) -> InvokeArguments:
    """Check ``invoke``'s arguments; the operation's own schema is the registry's job."""
    members = _members(arguments, frozenset({"name", "arguments"}))
    name = _string(members, "name", required=True)
    assert name is not None
    values = members.get("arguments")
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ToolArgumentError("arguments must be a JSON object")
    return InvokeArguments(name, values)
