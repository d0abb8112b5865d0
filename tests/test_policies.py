"""The ready policies ``LocalPolicy`` and ``ScopePolicy``, driven through a real ``Registry``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client

from opgate import (
    Completed,
    DiscoveryScope,
    Failed,
    FailureCode,
    LocalPolicy,
    Operation,
    OperationSpec,
    Registry,
    ScopePolicy,
    SearchPage,
    operation,
)
from opgate.mcp import LOCAL_PRINCIPAL, CallContext, GatewayServer, Principal

pytestmark = pytest.mark.anyio


@operation(group="orders")
def lookup(order: int) -> str:
    """Look up an order."""
    return f"order {order}"


@operation(group="Admin")
def reset() -> str:
    """Reset the desk."""
    return "reset"


@operation(group="help")
def hours() -> str:
    """Opening hours."""
    return "9 to 5"


@operation(name="ping")
def ping() -> str:
    """Answer pong (no group)."""
    return "pong"


OPERATIONS = [lookup, reset, hours, ping]
NAMES = {"orders.lookup", "Admin.reset", "help.hours", "ping"}


def ctx_with(*scopes: str, subject: str = "alice") -> CallContext:
    principal = Principal(client_id="app", issuer="https://id", subject=subject, scopes=scopes)
    return CallContext(principal, "2025-11-25")


async def visible(registry: Registry, ctx: Any) -> set[str]:
    page = await registry.search(ctx, "", limit=20)
    assert isinstance(page, SearchPage), page
    return {item.name for item in page.items}


async def runs(registry: Registry, ctx: Any, name: str) -> bool:
    outcome = await registry.invoke(ctx, name, "{}" if name != "orders.lookup" else '{"order": 1}')
    if isinstance(outcome, Failed):
        assert outcome.failure.code is FailureCode.UNAVAILABLE, outcome
        return False
    assert isinstance(outcome, Completed)
    return True


# -- LocalPolicy -----------------------------------------------------------------------


async def test_local_policy_allows_everything() -> None:
    registry = Registry(OPERATIONS, LocalPolicy())
    for ctx in (None, CallContext(LOCAL_PRINCIPAL, "2025-11-25")):
        assert await visible(registry, ctx) == NAMES
        assert isinstance(await registry.inspect(ctx, "Admin.reset"), OperationSpec)
        for name in NAMES:
            assert await runs(registry, ctx, name), name


def test_local_policy_scope_key_is_the_context_own_or_local() -> None:
    policy = LocalPolicy()
    assert policy.scope_key(None) == "local"
    assert policy.scope_key(object()) == "local"
    local = CallContext(LOCAL_PRINCIPAL, "2025-11-25")
    assert policy.scope_key(local) == local.scope_key
    assert policy.scope_key(local).startswith("mcp:")
    assert policy.authorize(None, object()) is None  # type: ignore[arg-type]
    assert repr(policy) == "LocalPolicy()"


async def test_local_policy_over_mcp_with_the_official_client() -> None:
    server = GatewayServer(Registry(OPERATIONS, LocalPolicy()))
    async with Client(server.sdk_server, mode="legacy") as client:
        found = await client.call_tool("search", {"query": ""})
        assert {item["name"] for item in found.structured_content["items"]} == NAMES
        result = await client.call_tool("invoke", {"name": "Admin.reset"})
        assert not result.is_error
        assert result.structured_content is None
        assert result.content[0].text == "reset"  # type: ignore[union-attr]


# -- ScopePolicy -----------------------------------------------------------------------

GROUPS = {"orders.read": {"orders"}, "desk.admin": {"admin", "orders", ""}}


async def test_scopes_open_their_groups_for_discovery_and_execution() -> None:
    registry = Registry(OPERATIONS, ScopePolicy(GROUPS, everyone={"help"}))
    cases = [
        ((), {"help.hours"}),
        (("unknown.scope",), {"help.hours"}),
        (("orders.read",), {"help.hours", "orders.lookup"}),
        (("desk.admin",), NAMES),  # "admin" opens group "Admin" (case-folded); "" opens ping
        (("orders.read", "unknown.scope"), {"help.hours", "orders.lookup"}),
    ]
    for scopes, expected in cases:
        ctx = ctx_with(*scopes)
        assert await visible(registry, ctx) == expected, scopes
        for name in NAMES:
            spec = await registry.inspect(ctx, name)
            assert isinstance(spec, OperationSpec) == (name in expected), (scopes, name)
            assert await runs(registry, ctx, name) == (name in expected), (scopes, name)


async def test_without_everyone_a_principal_without_scopes_sees_nothing() -> None:
    registry = Registry(OPERATIONS, ScopePolicy(GROUPS))
    assert await visible(registry, ctx_with()) == set()
    assert await visible(registry, CallContext(LOCAL_PRINCIPAL, "2025-11-25")) == set()
    assert not await runs(registry, ctx_with(), "help.hours")


def test_scope_policy_narrows_discovery_up_front() -> None:
    policy = ScopePolicy(GROUPS, everyone=["help"])
    assert policy.discovery_scope(ctx_with("orders.read")) == DiscoveryScope(
        groups=frozenset({"orders", "help"})
    )
    assert policy.groups_for(ctx_with("desk.admin")) == {"admin", "orders", "", "help"}
    assert policy.authorize(ctx_with(), object()) is None  # type: ignore[arg-type]


def test_scope_policy_keys_follow_the_principal_and_its_scopes() -> None:
    policy = ScopePolicy(GROUPS)
    reader = ctx_with("orders.read")
    assert policy.scope_key(reader) == reader.scope_key
    assert policy.scope_key(ctx_with("orders.read", "desk.admin")) != policy.scope_key(reader)
    assert policy.scope_key(ctx_with("orders.read", subject="bob")) != policy.scope_key(reader)


@dataclass
class HostCtx:
    user: str
    grants: tuple[str, ...]


async def test_a_host_reads_its_own_context_with_scopes_and_key() -> None:
    policy = ScopePolicy(
        GROUPS,
        scopes=lambda ctx: ctx.grants,
        key=lambda ctx: f"{ctx.user}:{','.join(sorted(ctx.grants))}",
    )
    registry = Registry(OPERATIONS, policy)
    assert await visible(registry, HostCtx("ann", ("orders.read",))) == {"orders.lookup"}
    assert await runs(registry, HostCtx("ann", ("orders.read",)), "orders.lookup")
    assert policy.scope_key(HostCtx("ann", ("b", "a"))) == "ann:a,b"


async def test_a_context_without_scopes_or_key_fails_as_internal() -> None:
    registry = Registry(OPERATIONS, ScopePolicy(GROUPS))
    for ctx in (None, HostCtx("ann", ())):
        page = await registry.search(ctx, "")
        assert isinstance(page, Failed)
        assert page.failure.code is FailureCode.INTERNAL
        outcome = await registry.invoke(ctx, "help.hours", "{}")
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INTERNAL

    @dataclass
    class KeyOnly:
        scope_key: str
        principal: Any = None

    page = await Registry(OPERATIONS, ScopePolicy(GROUPS)).search(KeyOnly("k"), "")
    assert isinstance(page, Failed)  # no principal.scopes: not taken as "no scopes"
    assert page.failure.code is FailureCode.INTERNAL
    bad = ScopePolicy(GROUPS, scopes=lambda ctx: "orders.read", key=lambda ctx: "k")
    page = await Registry(OPERATIONS, bad).search(None, "")
    assert isinstance(page, Failed)  # a str is not a collection of scopes
    assert page.failure.code is FailureCode.INTERNAL


def test_scope_policy_checks_its_table() -> None:
    with pytest.raises(TypeError, match="mapping"):
        ScopePolicy([("orders.read", {"orders"})])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"groups\['orders.read'\].*not a str"):
        ScopePolicy({"orders.read": "orders"})
    with pytest.raises(TypeError, match="str"):
        ScopePolicy({"orders.read": {1}})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="keys"):
        ScopePolicy({1: {"orders"}})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="everyone"):
        ScopePolicy({}, everyone="help")
    policy = ScopePolicy({"a": ["x", "x"]}, everyone={"h"})
    assert repr(policy) == "ScopePolicy({'a': ['x']}, everyone=['h'])"


def test_both_are_policies_a_registry_needs_explicitly() -> None:
    with pytest.raises(TypeError):
        Registry(OPERATIONS)  # type: ignore[call-arg]  # no default policy
    op = Operation("x", "X", lambda inv: None)
    assert isinstance(Registry([op], LocalPolicy()), Registry)
    assert isinstance(Registry([op], ScopePolicy({})), Registry)


async def test_the_documented_example_builds_both() -> None:
    from conftest import ROOT

    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text[text.index("### Ready policies") :]
    start = section.index("```python\n") + len("```python\n")
    block = section[start : section.index("```\n", start)]
    namespace: dict[str, Any] = {"operations": OPERATIONS}
    exec(block.replace("Registry(operations", "built = Registry(operations", 1), namespace)
    exec(block, namespace)  # both statements build a registry without raising
    assert isinstance(namespace["built"], Registry)
    scoped = Registry(OPERATIONS, ScopePolicy({"orders.read": {"orders"}}, everyone={"help"}))
    assert await visible(scoped, ctx_with("orders.read")) == {"orders.lookup", "help.hours"}
