"""Helpers shared by the tests of search, inspect and policies through a ``Registry``.

``CATALOG`` is six operations in five groups, ``orders.*`` and ``Orders`` among them,
``admin.purge`` hidden from non-admins by ``TeamPolicy``; ``registry`` serves it (or
the given operations) under ``TeamPolicy`` unless told otherwise. ``op`` builds an
operation whose handler is never called; ``names`` reads one page of names and
``all_pages`` follows every cursor to the end.
"""

from __future__ import annotations

from typing import Any

from opgate import Operation, Registry, SearchPage, finish

from conftest import Ctx, TeamPolicy


def handler(invocation: Any) -> Any:
    return finish(None)  # type: ignore[arg-type]


def op(name: str, summary: str = "does a thing", **kwargs: Any) -> Operation:
    return Operation(name, summary, handler, **kwargs)


CATALOG = [
    op("orders.refund", "Refund an order", group="orders", description="Money back"),
    op("orders.list", "List orders", group="Orders"),
    op("billing.invoice", "Create an invoice for orders", group="billing"),
    op("admin.purge", "Purge everything", group="admin"),
    op("refunds.report", "Monthly report", group="reports", description="all refund totals"),
    op("zeta", "Something with refund in the summary", group="misc"),
]


def registry(
    operations: list[Operation] | None = None, policy: Any = None, **kwargs: Any
) -> Registry:
    return Registry(CATALOG if operations is None else operations, policy or TeamPolicy(), **kwargs)


async def names(reg: Registry, ctx: Ctx, query: str = "", **kwargs: Any) -> list[str]:
    page = await reg.search(ctx, query, **kwargs)
    assert isinstance(page, SearchPage), page
    return [item.name for item in page.items]


async def all_pages(reg: Registry, ctx: Ctx, query: str = "", **kwargs: Any) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        page = await reg.search(ctx, query, cursor=cursor, **kwargs)
        assert isinstance(page, SearchPage), page
        found += [item.name for item in page.items]
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor
