"""Registry construction, policy handling, search and inspect (spec 003)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from opgate import (
    ConfigurationError,
    Discover,
    Failed,
    Failure,
    FailureCode,
    Limits,
    Operation,
    OperationSpec,
    Registry,
    SearchPage,
    finish,
)

from conftest import AllowAll, Ctx, TeamPolicy

pytestmark = pytest.mark.anyio


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


# --- construction --------------------------------------------------------------------


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


@pytest.mark.parametrize("name", ["", "a b", "x" * 129, "naïve", "a/b", "a\n"])
def test_invalid_names_rejected(name: str) -> None:
    with pytest.raises(ConfigurationError, match="operation name"):
        op(name)


def test_name_boundaries_and_case_sensitivity() -> None:
    reg = registry([op("x" * 128), op("A.b-c_9"), op("a.b-c_9")])
    assert len(reg) == 3


def test_duplicate_names_rejected() -> None:
    with pytest.raises(ConfigurationError, match="not unique"):
        registry([op("a"), op("a")])


@pytest.mark.parametrize("summary", ["", "   ", "\n\t"])
def test_blank_summary_rejected(summary: str) -> None:
    with pytest.raises(ConfigurationError, match="summary"):
        op("a", summary)


def test_summary_must_be_valid_utf8() -> None:
    with pytest.raises(ConfigurationError, match="UTF-8"):
        op("a", "bad \ud800 summary")


def test_handler_must_be_callable() -> None:
    with pytest.raises(TypeError, match="handler"):
        Operation("a", "s", "not callable")  # type: ignore[arg-type]


def test_policy_methods_required() -> None:
    class Half:
        def scope_key(self, ctx: Any) -> str:
            return "k"

    with pytest.raises(TypeError, match="authorize"):
        Registry([op("a")], Half())  # type: ignore[arg-type]


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


# --- policy ----------------------------------------------------------------------------


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


class Broken:
    def __init__(self, scope: Any = "k", verdict: Any = None, error: BaseException | None = None):
        self.scope, self.verdict, self.error = scope, verdict, error

    def scope_key(self, ctx: Any) -> Any:
        return self.scope

    def authorize(self, ctx: Any, request: Any) -> Any:
        if self.error is not None:
            raise self.error
        return self.verdict


@pytest.mark.parametrize(
    "policy",
    [
        Broken(error=RuntimeError("secret database password in message")),
        Broken(verdict=True),
        Broken(verdict=False),
        Broken(verdict="yes"),
        Broken(error=Failure(FailureCode.BUSY)),
        Broken(scope=""),
        Broken(scope=None),
        Broken(scope=42),
    ],
)
async def test_broken_policy_fails_internal_never_empty_page(policy: Broken) -> None:
    reg = registry(policy=policy)
    for outcome in (await reg.search(Ctx(), ""), await reg.inspect(Ctx(), "orders.refund")):
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INTERNAL
        assert "secret" not in str(outcome.failure)
        assert "secret" not in repr(outcome.failure)
        assert outcome.failure.cause is not None


async def test_scope_key_exception_kept_privately() -> None:
    class KeyFails(AllowAll):
        def scope_key(self, ctx: Any) -> str:
            raise KeyError("alice-token-123")

    outcome = await registry(policy=KeyFails()).search(Ctx(), "")
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INTERNAL
    assert "alice-token-123" not in str(outcome.failure)
    assert isinstance(outcome.failure.cause, KeyError)


async def test_async_policy_and_returned_denial() -> None:
    class AsyncPolicy:
        async def scope_key(self, ctx: Ctx) -> str:
            return ctx.principal

        async def authorize(self, ctx: Ctx, request: Any) -> Failure | None:
            if request.name.startswith("orders."):
                return Failure(FailureCode.UNAVAILABLE)
            return None

    reg = registry(policy=AsyncPolicy())
    assert "orders.refund" not in await names(reg, Ctx(), "", limit=20)
    assert "billing.invoice" in await names(reg, Ctx(), "", limit=20)


async def test_slow_async_policy_is_awaited() -> None:
    import anyio

    class Slow(AllowAll):
        async def authorize(self, ctx: Any, request: Any) -> None:
            await anyio.sleep(0.01)

    assert await names(registry(policy=Slow()), Ctx(), "orders.refund") == ["orders.refund"]


# --- search ------------------------------------------------------------------------------


async def test_default_and_maximum_page_sizes() -> None:
    reg = registry([op(f"op{i:02}") for i in range(30)], policy=AllowAll())
    assert len(await names(reg, Ctx())) == 5
    assert len(await names(reg, Ctx(), limit=20)) == 20
    for bad in (0, 21, -1, True, 2.0, "5"):
        outcome = await reg.search(Ctx(), "", limit=bad)  # type: ignore[arg-type]
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_REQUEST


async def test_query_and_group_byte_limits() -> None:
    reg = registry()
    assert isinstance(await reg.search(Ctx(), "a" * 256), SearchPage)
    assert isinstance(await reg.search(Ctx(), "", group="g" * 256), SearchPage)
    for kwargs in ({"query": "a" * 257}, {"query": "", "group": "g" * 257}):
        outcome = await reg.search(Ctx(), **kwargs)
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_REQUEST
    # 300 bytes of UTF-8 with a multi-byte character straddling the 256-byte boundary.
    query = "a" * 255 + "é" + "b" * 43
    assert len(query.encode()) == 300
    outcome = await reg.search(Ctx(), query)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_REQUEST
    exactly = "a" * 254 + "é"
    assert len(exactly.encode()) == 256
    assert isinstance(await reg.search(Ctx(), exactly), SearchPage)
    over = "a" * 255 + "é"
    assert isinstance(await reg.search(Ctx(), over), Failed)


async def test_ranking_tiers_then_name() -> None:
    reg = registry()
    # name matches (refund in name) first, then summary, then other documentation.
    assert await names(reg, Ctx(), "refund", limit=20) == [
        "orders.refund",
        "refunds.report",
        "zeta",
    ]
    # group tier: "orders" matches names orders.* (tier 0) and billing's summary (tier 2)
    assert await names(reg, Ctx(), "orders", limit=20) == [
        "orders.list",
        "orders.refund",
        "billing.invoice",
    ]


async def test_all_terms_must_match_case_insensitively() -> None:
    reg = registry()
    assert await names(reg, Ctx(), "REFUND money", limit=20) == ["orders.refund"]
    assert await names(reg, Ctx(), "refund nothing-like-this", limit=20) == []


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


async def test_empty_query_browses_by_name() -> None:
    reg = registry(policy=AllowAll())
    assert await all_pages(reg, Ctx(), "") == sorted(o.name for o in CATALOG)


async def test_group_filter_ignores_case() -> None:
    reg = registry()
    assert await names(reg, Ctx(), "", group="ORDERS", limit=20) == [
        "orders.list",
        "orders.refund",
    ]


async def test_schemas_are_never_indexed() -> None:
    schema = {"type": "object", "properties": {"xylophone": {"type": "string"}}}
    reg = registry([op("a", input_schema=schema, output_schema=schema)])
    assert await names(reg, Ctx(), "xylophone") == []
    page = await reg.search(Ctx(), "")
    assert isinstance(page, SearchPage)
    assert "xylophone" not in repr(page)


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


async def test_page_size_may_change_on_continuation() -> None:
    reg = registry([op(f"op{i:02}") for i in range(30)], policy=AllowAll())
    first = await reg.search(Ctx(), "", limit=3)
    assert isinstance(first, SearchPage)
    second = await reg.search(Ctx(), "", limit=10, cursor=first.next_cursor)
    assert isinstance(second, SearchPage)
    assert [i.name for i in second.items] == [f"op{i:02}" for i in range(3, 13)]


# --- cursors -------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def first_cursor(reg: Registry, ctx: Ctx, query: str = "", group: str = "") -> str:
    page = await reg.search(ctx, query, group=group, limit=1)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    return page.next_cursor


async def assert_invalid_cursor(reg: Registry, ctx: Ctx, cursor: str, **kwargs: Any) -> None:
    outcome = await reg.search(ctx, kwargs.pop("query", ""), cursor=cursor, **kwargs)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code in (FailureCode.INVALID_CURSOR, FailureCode.INVALID_REQUEST)


async def test_tampered_cursor_bytes_fail_at_every_position() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx())
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    for index in range(len(raw)):
        altered = bytearray(raw)
        altered[index] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(altered)).decode().rstrip("=")
        await assert_invalid_cursor(reg, Ctx(), text)
    for index in range(len(cursor)):
        swapped = cursor[:index] + ("A" if cursor[index] != "A" else "B") + cursor[index + 1 :]
        await assert_invalid_cursor(reg, Ctx(), swapped)


async def test_truncated_extended_and_garbage_cursors_fail() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx())
    for bad in (cursor[:-1], cursor[: len(cursor) // 2], "", cursor + "A", "!!!", "x" * 2000):
        await assert_invalid_cursor(reg, Ctx(), bad)


async def test_cursor_bound_to_scope_query_group_and_registry() -> None:
    reg = registry(policy=TeamPolicy())
    cursor = await first_cursor(reg, Ctx(), "orders")
    ok = await reg.search(Ctx(), "orders", cursor=cursor)
    assert isinstance(ok, SearchPage)
    await assert_invalid_cursor(reg, Ctx(principal="bob"), cursor, query="orders")
    await assert_invalid_cursor(reg, Ctx(), cursor, query="refund")
    await assert_invalid_cursor(reg, Ctx(), cursor, query="Orders")  # casing is bound
    await assert_invalid_cursor(reg, Ctx(), cursor, query="orders", group="billing")
    other = registry(policy=TeamPolicy())
    await assert_invalid_cursor(other, Ctx(), cursor, query="orders")
    # whitespace-normalized query continues fine
    again = await reg.search(Ctx(), "  orders ", cursor=cursor)
    assert isinstance(again, SearchPage)


async def test_cursor_group_binding_ignores_group_case() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx(), "", group="orders")
    page = await reg.search(Ctx(), "", group="ORDERS", cursor=cursor)
    assert isinstance(page, SearchPage)
    assert [i.name for i in page.items] == ["orders.refund"]


async def test_cursor_expires_after_ten_minutes() -> None:
    clock = Clock()
    reg = registry(policy=AllowAll(), clock=clock)
    cursor = await first_cursor(reg, Ctx())
    clock.now += 599
    assert isinstance(await reg.search(Ctx(), "", cursor=cursor), SearchPage)
    clock.now += 2
    await assert_invalid_cursor(reg, Ctx(), cursor)


async def test_public_messages_never_contain_scope_key() -> None:
    reg = registry(policy=TeamPolicy())
    cursor = await first_cursor(reg, Ctx(principal="alice-secret-scope"))
    outcome = await reg.search(Ctx(principal="mallory"), "", cursor=cursor)
    assert isinstance(outcome, Failed)
    assert "alice-secret-scope" not in str(outcome.failure)
    assert "alice-secret-scope" not in cursor


# --- inspect -------------------------------------------------------------------------------


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


def test_the_smallest_token_budget_holds_cursors_for_any_name() -> None:
    # cursors carry a catalog position, not a name (issue 9, item 18)
    registry([op("a" * 10)], limits=Limits(token_bytes=64))
    registry([op("a" * 128)], limits=Limits(token_bytes=64))


async def test_spec_is_inspect_without_the_policy() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    asked: list[Any] = []

    class Denying:
        def scope_key(self, ctx: Any) -> str:
            asked.append("scope_key")
            return "k"

        def authorize(self, ctx: Any, request: Any) -> Failure:
            asked.append(request)
            return Failure(FailureCode.UNAVAILABLE)

    reg = Registry([op("a", "sum", description="d", input_schema=schema)], Denying())
    spec = reg.spec("a")
    assert asked == []
    assert (spec.name, spec.summary, spec.description) == ("a", "sum", "d")
    assert spec.input_schema == schema
    assert spec.output_schema is None
    assert isinstance(await reg.inspect(Ctx(), "a"), Failed)  # a principal is still refused
    for unknown in ("b", "A", 3):
        with pytest.raises(KeyError):
            reg.spec(unknown)  # type: ignore[arg-type]
