"""Tests of ``opgate._search._discovery``: the steps that ask the policy about entries.

An unknown and an undiscoverable name get the same answer; the exact name of an
authorized operation is its own page; a ranked page asks the policy about every
candidate it places, on every page and again on every continuation, and ends early
rather than truncate a summary past the page budget; inspect returns the whole
definition, detached. (Discovery scopes are ``test_search_discovery_scope.py``.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate import Discover, Failed, Failure, FailureCode, OperationSpec, SearchPage
from registry_support import all_pages, names, op, registry

from conftest import AllowAll, Ctx, TeamPolicy

pytestmark = pytest.mark.anyio


async def test_unknown_and_undiscoverable_names_get_identical_answers() -> None:
    reg = registry()
    unknown = await reg.inspect(Ctx(), "no.such")
    hidden = await reg.inspect(Ctx(), "admin.purge")
    assert isinstance(unknown, Failed)
    assert isinstance(hidden, Failed)
    assert unknown == hidden
    assert (unknown.failure.code, str(unknown.failure)) == (
        hidden.failure.code,
        str(hidden.failure),
    )
    assert unknown.failure.code is FailureCode.UNAVAILABLE
    assert isinstance(await reg.inspect(Ctx(admin=True), "admin.purge"), OperationSpec)


async def test_exact_authorized_name_resolves_directly() -> None:
    reg = registry()
    page = await reg.search(Ctx(), "orders.list")
    assert isinstance(page, SearchPage)
    assert [i.name for i in page.items] == ["orders.list"]
    assert page.next_cursor is None
    # exact names are case-sensitive: another casing is an ordinary search
    assert await names(reg, Ctx(), "ORDERS.LIST") == ["orders.list"]
    # an undiscoverable exact name resolves to nothing
    assert await names(reg, Ctx(), "admin.purge") == []


async def test_discovery_asked_for_every_item_on_every_page() -> None:
    policy = TeamPolicy()
    reg = registry([op(f"op{i:02}") for i in range(12)], policy=policy)
    await all_pages(reg, Ctx(), "", limit=5)
    asked = [r.name for r in policy.calls if isinstance(r, Discover)]
    for i in range(12):
        assert f"op{i:02}" in asked
    policy.calls.clear()
    await all_pages(reg, Ctx(), "", limit=5)  # nothing cached between requests
    assert len([r for r in policy.calls if isinstance(r, Discover)]) >= 12


async def test_permission_is_rechecked_on_continuation() -> None:
    allowed = {f"op{i:02}" for i in range(12)}

    class Shrinking(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if request.name not in allowed:
                raise Failure(FailureCode.UNAVAILABLE)

    reg = registry([op(f"op{i:02}") for i in range(12)], policy=Shrinking())
    first = await reg.search(Ctx(), "", limit=5)
    assert isinstance(first, SearchPage)
    allowed.discard("op06")
    second = await reg.search(Ctx(), "", limit=5, cursor=first.next_cursor)
    assert isinstance(second, SearchPage)
    assert [i.name for i in second.items] == ["op05", "op07", "op08", "op09", "op10"]


@pytest.mark.parametrize("filler", ["s" * 5000, "é" * 2500, "😀" * 1250])
async def test_full_page_ends_early_and_never_truncates(filler: str) -> None:
    summaries = [f"{i:02} " + filler for i in range(8)]
    reg = registry([op(f"op{i}", summaries[i]) for i in range(8)], policy=AllowAll())
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await reg.search(Ctx(), "", limit=20, cursor=cursor)
        assert isinstance(page, SearchPage)
        pages += 1
        assert 1 <= len(page.items) <= 3
        encoded = json.dumps(
            {
                "items": [
                    {"name": i.name, "group": i.group, "summary": i.summary} for i in page.items
                ],
                "next_cursor": page.next_cursor,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        assert len(encoded) <= 16 * 1024  # the page's JSON fits the spec's budget
        seen += [item.summary for item in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == summaries
    assert pages >= 3


async def test_inspect_returns_full_detached_definition() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number", "minimum": 0.5}}}
    out = {"type": "array"}
    reg = registry(
        [op("a", "sum", description="d", examples=("e1",), input_schema=schema, output_schema=out)]
    )
    spec = await reg.inspect(Ctx(), "a")
    assert isinstance(spec, OperationSpec)
    assert (spec.name, spec.summary, spec.description, spec.examples) == ("a", "sum", "d", ("e1",))
    got = spec.input_schema
    assert isinstance(got, dict)
    got["type"] = "changed"
    assert spec.input_schema == {
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": __import__("decimal").Decimal("0.5")}},
    }
    assert spec.output_schema == {"type": "array"}


async def test_inspect_without_schemas() -> None:
    spec = await registry([op("a")]).inspect(Ctx(), "a")
    assert isinstance(spec, OperationSpec)
    assert spec.input_schema == {"type": "object"}
    assert spec.output_schema is None


# --- the groups a principal may search -------------------------------------------------


async def test_groups_name_only_what_the_principal_may_discover() -> None:
    from opgate import DiscoveryScope
    from opgate._search import _discovery

    operations = [
        op("orders.refund", group="orders"),
        op("orders.list", group="Orders"),  # the same group, folded: named once
        op("billing.invoice", group="billing"),
        op("admin.purge", group="admin"),
        op("plain"),  # no group: names none
    ]
    policy = TeamPolicy()
    reg = registry(operations, policy)
    assert await reg.groups(Ctx()) == ("billing", "Orders")
    assert await reg.groups(Ctx(admin=True)) == ("admin", "billing", "Orders")
    assert await reg.groups(Ctx(admin=True), limit=1) == ("admin",)
    # each group is judged until one operation is allowed, then not asked about again
    policy.calls.clear()
    await reg.groups(Ctx())
    assert [call.name for call in policy.calls] == ["admin.purge", "billing.invoice", "orders.list"]

    class Scoped(TeamPolicy):
        def discovery_scope(self, ctx: Ctx) -> DiscoveryScope:
            return DiscoveryScope(groups=frozenset({"billing"}))

    assert await registry(operations, Scoped()).groups(Ctx(admin=True)) == ("billing",)

    class Broken(TeamPolicy):
        def authorize(self, ctx: Ctx, request: Any) -> None:
            raise RuntimeError("secret detail")

    failed = await registry(operations, Broken()).groups(Ctx())
    assert isinstance(failed, Failed)
    assert failed.failure.code is FailureCode.INTERNAL
    with pytest.raises(ValueError, match="1 to 20"):
        await reg.groups(Ctx(), limit=0)
    with pytest.raises(TypeError):
        await reg.groups(Ctx(), limit=True)
    assert _discovery.GROUPS_CHECKED >= 100


async def test_groups_ask_the_policy_about_a_bounded_number_of_operations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opgate._search import _discovery

    monkeypatch.setattr(_discovery, "GROUPS_CHECKED", 5)
    operations = [op(f"admin.op{i:02d}", group=f"admin{i:02d}") for i in range(9)]
    operations.append(op("zoo.visible", group="zoo"))
    policy = TeamPolicy()
    assert await registry(operations, policy).groups(Ctx()) == ()
    assert len(policy.calls) == 5


class _Recorded:
    """A policy allowing the names in ``allowed``, scoped to ``groups``, recording asks."""

    def __init__(self, allowed: set[str], groups: frozenset[str] | None) -> None:
        self.allowed = allowed
        self.groups = groups
        self.asked: list[str] = []

    def scope_key(self, ctx: Any) -> str:
        return "one"

    def discovery_scope(self, ctx: Any) -> Any:
        from opgate import DiscoveryScope

        return None if self.groups is None else DiscoveryScope(groups=self.groups)

    def authorize(self, ctx: Any, request: Any) -> Failure | None:
        self.asked.append(request.name)
        return None if request.name in self.allowed else Failure(FailureCode.UNAVAILABLE, "no")


def _walked_groups(
    entries: list[tuple[str, str]], policy: _Recorded, limit: int, checked: int
) -> tuple[str, ...]:
    """The groups as one walk over the entries in catalog order finds them: the
    definition ``discoverable_groups`` must agree with, asks included."""
    found: dict[str, str] = {}
    asked = 0
    for name, group in entries:
        if len(found) == limit or asked == checked:
            break
        folded = group.casefold()
        if not folded or folded in found:
            continue
        if policy.groups is not None and folded not in policy.groups:
            continue
        asked += 1
        policy.asked.append(name)
        if name in policy.allowed:
            found[folded] = group
    return tuple(found[folded] for folded in sorted(found))


@settings(max_examples=150, deadline=None)
@given(
    groups=st.lists(st.sampled_from(["", "a", "A", "b", "c", "d", "e"]), min_size=1, max_size=30),
    allowed=st.lists(st.booleans(), min_size=30, max_size=30),
    scope=st.none() | st.frozensets(st.sampled_from(["a", "b", "c"])),
    limit=st.integers(1, 4),
    checked=st.integers(1, 12),
)
def test_groups_ask_as_one_walk_in_catalog_order_would(
    groups: list[str],
    allowed: list[bool],
    scope: frozenset[str] | None,
    limit: int,
    checked: int,
) -> None:
    import anyio

    from opgate._search import _discovery

    entries = [(f"op{index:02d}", group) for index, group in enumerate(groups)]
    names_allowed = {name for (name, _), yes in zip(entries, allowed, strict=False) if yes}
    operations = [op(name, group=group) for name, group in entries]
    expected_policy = _Recorded(names_allowed, scope)
    expected = _walked_groups(entries, expected_policy, limit, checked)
    policy = _Recorded(names_allowed, scope)
    reg = registry(operations, policy)
    policy.asked.clear()
    original = _discovery.GROUPS_CHECKED
    _discovery.GROUPS_CHECKED = checked
    try:
        got = anyio.run(lambda: reg.groups(Ctx(), limit=limit))
    finally:
        _discovery.GROUPS_CHECKED = original
    assert got == expected
    assert policy.asked == expected_policy.asked
