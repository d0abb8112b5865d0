"""The optional ``discovery_scope`` policy hook: discovery narrowed up front (issue 10).

How ``opgate._search._discovery`` and the index apply a principal's scope: search never
considers, nor asks ``authorize`` about, a name outside it; inspect, invoke and the
exact name treat such a name as unavailable; a broken scope fails ``internal`` and
never widens discovery. (``DiscoveryScope``'s own checks are ``test_policy.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest

from opgate import (
    Discover,
    DiscoveryScope,
    Failed,
    FailureCode,
    Operation,
    OperationSpec,
    Registry,
    SearchPage,
    finish,
)

pytestmark = pytest.mark.anyio


def handler(invocation: Any) -> Any:
    return finish(None)  # never called here


OPERATIONS = [
    Operation(f"{group}.op_{number:03d}", f"Operation {number} of {group}.", handler, group=group)
    for group in ("billing", "Orders", "admin")
    for number in range(60)
]


class Scoped:
    """Sees the billing group and names starting with ``Orders.op_00``; records calls."""

    def __init__(self, scope: DiscoveryScope | None, *, is_async: bool = False) -> None:
        self.scope = scope
        self.asked: list[str] = []
        self.is_async = is_async

    def scope_key(self, ctx: Any) -> str:
        return "guest"

    def discovery_scope(self, ctx: Any) -> Any:
        if self.is_async:

            async def later() -> DiscoveryScope | None:
                return self.scope

            return later()
        return self.scope

    def authorize(self, ctx: Any, request: Any) -> None:
        if isinstance(request, Discover):
            self.asked.append(request.name)


GUEST = DiscoveryScope(groups=frozenset({"BILLING"}), prefixes=("Orders.op_00",))


def inside(name: str) -> bool:
    return name.startswith(("billing.", "Orders.op_00"))


async def all_pages(registry: Registry, query: str = "", group: str = "") -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await registry.search(None, query, group=group, limit=20, cursor=cursor)
        assert isinstance(page, SearchPage), page
        names += [item.name for item in page.items]
        if page.next_cursor is None:
            return names
        cursor = page.next_cursor


@pytest.mark.parametrize("is_async", [False, True])
async def test_search_never_considers_or_asks_about_names_outside_the_scope(
    is_async: bool,
) -> None:
    policy = Scoped(GUEST, is_async=is_async)
    registry = Registry(OPERATIONS, policy)
    for query, group in [("", ""), ("op_0", ""), ("Operation", "billing"), ("", "orders")]:
        policy.asked.clear()
        names = await all_pages(registry, query, group)
        unscoped = await all_pages(Registry(OPERATIONS, Scoped(None)), query, group)
        assert names == [name for name in unscoped if inside(name)]
        assert all(inside(name) for name in policy.asked)


async def test_no_hook_or_none_narrows_nothing() -> None:
    everything = sorted(op.name for op in OPERATIONS)
    assert await all_pages(Registry(OPERATIONS, Scoped(None))) == everything


async def test_an_empty_scope_sees_nothing_and_asks_nothing() -> None:
    policy = Scoped(DiscoveryScope())
    registry = Registry(OPERATIONS, policy)
    assert await all_pages(registry) == []
    assert await all_pages(registry, "op") == []
    assert policy.asked == []


async def test_inspect_invoke_and_the_exact_name_respect_the_scope() -> None:
    policy = Scoped(GUEST)
    registry = Registry(OPERATIONS, policy)
    assert isinstance(await registry.inspect(None, "billing.op_007"), OperationSpec)
    outside = await registry.inspect(None, "admin.op_007")
    assert isinstance(outside, Failed)
    assert outside.failure.code is FailureCode.UNAVAILABLE
    page = await registry.search(None, "admin.op_007")
    assert isinstance(page, SearchPage)
    assert page.items == ()
    invoked = await registry.invoke(None, "admin.op_007", "{}")
    assert isinstance(invoked, Failed)
    assert invoked.failure.code is FailureCode.UNAVAILABLE
    assert "admin.op_007" not in policy.asked


@pytest.mark.parametrize("returned", ["billing", {"groups": ["billing"]}, 3])
async def test_a_broken_scope_fails_internal_never_widens(returned: Any) -> None:
    registry = Registry(OPERATIONS, Scoped(returned))
    page = await registry.search(None, "")
    assert isinstance(page, Failed)
    assert page.failure.code is FailureCode.INTERNAL
    spec = await registry.inspect(None, "billing.op_001")
    assert isinstance(spec, Failed)
    assert spec.failure.code is FailureCode.INTERNAL
