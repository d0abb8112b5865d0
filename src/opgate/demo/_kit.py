"""The one shape of the demo's application modules, and the pieces they share.

Each application module (``_sales``, ``_billing``, ``_support``, ``_reports``) is an
``Application``: its handlers are methods over one ``Desk``, and ``operations()``
lists its operations, each built with ``operation(...)``, which puts it in the group
its name starts with. What a module writes is only what is its own: record schemas,
SQL, and the rules of its groups.

Every successful demo operation answers with ``reply(structured)``: the structured
result, plus a ``Text`` copy of it as compact JSON (what MCP recommends for clients
that read only text). A list operation takes ``PAGE`` and answers ``page(...)``
(output schema ``listing(item)``); an unknown id is answered with ``not_found``.
Amounts are two-place decimal strings (see ``_database``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import Invocation, Operation, Result, Text, fail, finish
from ._database import Desk, money, now

__all__ = [
    "ID",
    "LIMIT",
    "MONEY",
    "NULLABLE_ID",
    "NULLABLE_STRING",
    "OFFSET",
    "PAGE",
    "Application",
    "Schema",
    "arguments",
    "as_object",
    "audit",
    "by_id",
    "like",
    "listing",
    "not_found",
    "obj",
    "operation",
    "page",
    "record",
    "reply",
    "string",
]

Schema = dict[str, Any]

#: Row ids: SQLite's rowid range, kept to 32 bits so agents see a plain integer.
ID: Schema = {"type": "integer", "minimum": 1, "maximum": 2_147_483_647}

#: An amount in euros, written with exactly two decimals.
MONEY: Schema = {
    "type": "string",
    "pattern": r"^\d{1,9}\.\d{2}$",
    "description": 'an amount in EUR with two decimals, e.g. "42.50"',
}

NULLABLE_ID: Schema = {"type": ["integer", "null"]}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}

#: Page size of list operations: small pages keep results far below the result budget.
LIMIT: Schema = {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}
OFFSET: Schema = {"type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 0}
#: The paging properties of a list operation's input (spread into its properties).
PAGE: Schema = {"limit": LIMIT, "offset": OFFSET}


class Application:
    """One application module of the desk: handlers (methods) over one ``Desk``.

    A subclass writes each handler as a method taking the ``Invocation`` and returns
    its operations from ``operations()``; ``build_registry`` gathers them all.
    """

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def operations(self) -> list[Operation]:
        """This module's operations, their handlers bound to ``self``."""
        raise NotImplementedError


def operation(
    name: str,
    summary: str,
    handler: Callable[[Invocation], object],
    *,
    description: str = "",
    examples: tuple[str, ...] = (),
    input_schema: Schema,
    output_schema: Schema,
) -> Operation:
    """An ``Operation`` in the group its name starts with (``orders.get`` is in ``orders``)."""
    return Operation(
        name,
        summary,
        handler,
        group=name.partition(".")[0],
        description=description,
        examples=examples,
        input_schema=input_schema,
        output_schema=output_schema,
    )


def string(max_length: int, *, min_length: int = 1, **extra: Any) -> Schema:
    """A string schema with length bounds (and any extra keywords)."""
    return {"type": "string", "minLength": min_length, "maxLength": max_length, **extra}


def obj(properties: Mapping[str, Schema], required: Iterable[str] = (), **extra: Any) -> Schema:
    """A closed object schema: only ``properties``, the ``required`` ones mandatory."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
        **extra,
    }


def listing(item: Schema) -> Schema:
    """The output shape of a list operation: ``{items: [...], total, offset}``."""
    return obj(
        {
            "items": {"type": "array", "items": item},
            "total": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer", "minimum": 0},
        },
        ("items", "total", "offset"),
    )


def by_id(key: str) -> Schema:
    """The input of an operation on one record: ``{key: <id>}``, required."""
    return obj({key: ID}, (key,))


def record(row: sqlite3.Row, *, amounts: Sequence[str] = ()) -> dict[str, Any]:
    """A row as a JSON object; each ``<name>_cents`` column in ``amounts`` becomes ``<name>``."""
    out: dict[str, Any] = {}
    for key in row.keys():  # noqa: SIM118 - sqlite3.Row is not a mapping
        value = row[key]
        if key.endswith("_cents") and key[: -len("_cents")] in amounts:
            out[key[: -len("_cents")]] = money(value)
        else:
            out[key] = value
    return out


def page(
    db: sqlite3.Connection,
    inv: Invocation,
    count: str,
    select: str,
    params: Sequence[object] = (),
    *,
    item: Callable[[sqlite3.Row], dict[str, Any]] = record,
) -> dict[str, Any]:
    """One page of a list operation, ``{items, total, offset}`` (see ``listing``).

    ``count`` and ``select`` share ``params``; ``select`` is ordered, and gets the
    ``LIMIT``/``OFFSET`` of the invocation's ``limit`` and ``offset`` (see ``PAGE``).
    """
    args = arguments(inv)
    limit, offset = int(args.get("limit", 10)), int(args.get("offset", 0))
    total = db.execute(count, params).fetchone()[0]
    rows = db.execute(f"{select} LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
    return {"items": [item(row) for row in rows], "total": total, "offset": offset}


def audit(connection: sqlite3.Connection, operation: str, detail: str) -> None:
    """Append one line to the audit log (inside the caller's transaction)."""
    connection.execute(
        "INSERT INTO audit (at, operation, detail) VALUES (?, ?, ?)", (now(), operation, detail)
    )


def like(text: str) -> str:
    """A ``LIKE`` pattern matching ``text`` literally anywhere (escape character ``\\``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def arguments(inv: Invocation) -> dict[str, Any]:
    """The invocation's validated arguments, typed loosely (the input schema vouches for them)."""
    return inv.arguments


def as_object(value: object) -> dict[str, Any]:
    """A resume's state or answers as a JSON object (``{}`` when it is not one)."""
    return value if isinstance(value, dict) else {}


def not_found(thing: str, key: object) -> object:
    """Fail with the demo's answer for an unknown id: ``"<thing> <key> not found"``."""
    return fail(f"{thing} {key} not found")


def reply(structured: Mapping[str, Any], text: str | None = None) -> object:
    """Finish with ``structured`` and a Text copy (``text``, or the JSON of ``structured``)."""
    body = dict(structured)
    copy = text if text is not None else json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return finish(Result([Text(copy)], structured=body))
