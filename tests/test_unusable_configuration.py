"""Configuration that could never be used is refused, and the smallest accepted
configuration works (issue 9, item 18)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from opgate import (
    ConfigurationError,
    Failed,
    FailureCode,
    FormInput,
    InputMode,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    SearchPage,
    await_input,
    finish,
)

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


def handler(inv: Invocation) -> Any:
    return finish(None)  # type: ignore[arg-type]


def test_a_group_longer_than_a_search_filter_is_refused() -> None:
    Operation("a", "does a thing", handler, group="g" * 256)
    Operation("a", "does a thing", handler, group="é" * 128)  # 256 UTF-8 bytes
    with pytest.raises(ConfigurationError, match=r"group.*256"):
        Operation("a", "does a thing", handler, group="g" * 257)
    with pytest.raises(ConfigurationError, match=r"group.*256"):
        Operation("a", "does a thing", handler, group="é" * 129)


async def test_the_longest_accepted_group_can_be_searched() -> None:
    reg = Registry([Operation("a", "does a thing", handler, group="é" * 128)], AllowAll())
    page = await reg.search(Ctx(), group="É" * 128)
    assert isinstance(page, SearchPage)
    assert [item.name for item in page.items] == ["a"]


async def test_the_smallest_token_budget_carries_cursors_for_the_longest_names() -> None:
    names = sorted(f"{'n' * 120}.{index:03d}" for index in range(30))
    reg = Registry(
        [Operation(name, "does a thing", handler) for name in names],
        AllowAll(),
        limits=Limits(token_bytes=64),
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = await reg.search(Ctx(), "", limit=7, cursor=cursor)
        assert isinstance(page, SearchPage), page
        seen += [item.name for item in page.items]
        if page.next_cursor is None:
            break
        assert len(page.next_cursor) <= 64
        cursor = page.next_cursor
    assert seen == names


async def test_a_cursor_is_bound_to_its_registry_revision() -> None:
    operations = [Operation(f"op{index}", "does a thing", handler) for index in range(10)]
    first = Registry(operations, AllowAll())
    second = Registry(operations, AllowAll())
    page = await first.search(Ctx(), "", limit=2)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    outcome = await second.search(Ctx(), "", limit=2, cursor=page.next_cursor)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_CURSOR


def test_a_small_result_budget_gets_defaults_that_fit_it() -> None:
    limits = Limits(result_bytes=16 * 1024)
    assert limits.inline_bytes <= limits.result_bytes
    assert limits.inline_bytes == 12 * 1024
    assert limits.form_schema_bytes == 16 * 1024 - 512
    # explicit values are never adjusted: a prompt budget the results cannot carry fails
    with pytest.raises(ConfigurationError, match="form_schema_bytes"):
        Limits(result_bytes=16 * 1024, form_schema_bytes=16 * 1024)
    assert Limits().inline_bytes == 48 * 1024
    assert Limits().form_schema_bytes == 16 * 1024


async def test_the_largest_prompt_the_limits_allow_can_be_sent() -> None:
    limits = Limits(result_bytes=16 * 1024)
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    message = "m" * (limits.form_schema_bytes - len(b'{"properties":{},"type":"object"}'))

    async def ask(inv: Invocation) -> Any:
        return await_input(FormInput(message, schema, "null"))

    reg = Registry([Operation("ask", "Ask", ask)], AllowAll(), limits=limits)
    outcome = await reg.invoke(Ctx(), "ask", "{}", input_support={InputMode.FORM})
    assert isinstance(outcome, Pending), outcome


async def test_the_longest_input_lifetime_gives_a_representable_deadline() -> None:
    with pytest.raises(ConfigurationError, match="input_lifetime"):
        Limits(input_lifetime=timedelta(days=10**6))
    limits = Limits(input_lifetime=timedelta(days=30))

    async def ask(inv: Invocation) -> Any:
        return await_input(FormInput("ok?", {"type": "object", "properties": {}}, "null"))

    reg = Registry([Operation("ask", "Ask", ask)], AllowAll(), limits=limits)
    outcome = await reg.invoke(Ctx(), "ask", "{}", input_support={InputMode.FORM})
    assert isinstance(outcome, Pending), outcome
