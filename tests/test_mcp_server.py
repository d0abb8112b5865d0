"""The MCP server in process, driven by the official ``mcp.Client`` in both protocol eras.

``legacy`` negotiates 2025-11-25 (prompts are ``elicitation/create`` requests inside
the call); ``2026-07-28`` gets ``InputRequiredResult`` replies, which the client
answers through the same elicitation callback and retries. The gateway tools' own
specs and argument checks are in ``test_mcp_tools.py``; the translation of results,
failures and prompts to wire values in ``test_mcp_wire.py``; ``Principal`` and
``CallContext`` in ``test_mcp_context.py``.
"""

from __future__ import annotations

import logging
import warnings
from datetime import timedelta
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from tests.mcp_catalog import SECRET, ScopePolicy, build_registry, operations

from opgate import (
    ConfigurationError,
    Limits,
    Operation,
    Ranking,
    Registry,
)
from opgate.mcp import LOCAL_PRINCIPAL, CallContext, GatewayServer

from mcp_client import ERAS, accept, connect, error_of, manual_client, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- pinned operations ----------------------------------------------------------


async def test_pinned_operations_are_tools_through_the_same_path(era: str) -> None:
    server = GatewayServer(build_registry(), pinned=["util.echo", "orders.confirm"])
    async with connect(server, era, accept({"ok": True})) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"search", "inspect", "invoke", "util.echo", "orders.confirm"}
        assert tools["orders.confirm"].input_schema["required"] == ["id"]
        result = await client.call_tool("util.echo", {"text": "hi"})
        assert text_of(result) == "echo hi"
        assert result.structured_content == {"text": "hi"}
        result = await client.call_tool("orders.confirm", {"id": 5})
        assert result.structured_content == {"id": 5}
        code, _ = error_of(await client.call_tool("orders.confirm", {"id": "five"}))
        assert code == "invalid_arguments"


async def test_pinned_operations_follow_the_discovery_policy(era: str) -> None:
    server = GatewayServer(build_registry(), pinned=["admin.reset"])
    async with connect(server, era) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "admin.reset" not in names  # the local principal has no admin scope
        code, _ = error_of(await client.call_tool("admin.reset", {}))
        assert code == "unavailable"


def test_pinning_an_unknown_or_clashing_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not in the registry"):
        GatewayServer(build_registry(), pinned=["util.nothing"])
    registry = Registry([Operation("search", "A clash", lambda inv: None)], ScopePolicy())
    with pytest.raises(ConfigurationError, match="gateway tool"):
        GatewayServer(registry, pinned=["search"])
    with pytest.raises(TypeError):
        GatewayServer(build_registry(), pinned="util.echo")


async def test_replace_keeps_the_server_options(era: str) -> None:
    def hook(ctx: CallContext, tool: str, failure: Any) -> None:
        return None

    def other(ctx: CallContext, tool: str, failure: Any) -> None:
        return None

    server = GatewayServer(build_registry(), name="desk", pinned=["util.echo"], on_failure=hook)
    assert server.on_failure is hook
    kept = server.replace()
    assert kept is not server
    assert (kept.registry, kept.on_failure, kept.pinned) == (server.registry, hook, ("util.echo",))
    assert kept.sdk_server.name == "desk"
    registry = build_registry()
    replaced = server.replace(registry=registry, on_failure=other)
    assert (replaced.registry, replaced.on_failure) == (registry, other)
    async with connect(replaced, era) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"search", "inspect", "invoke", "util.echo"}
    with pytest.raises(ConfigurationError, match="not in the registry"):
        server.replace(registry=Registry([], ScopePolicy()))


# -- search and inspect -------------------------------------------------------------


async def test_search_pages_follow_cursors_to_the_end(era: str) -> None:
    registry = build_registry()
    async with connect(GatewayServer(registry), era) as client:
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            arguments: dict[str, Any] = {"query": "filler", "limit": 6}
            if cursor is not None:
                arguments["cursor"] = cursor
            result = await client.call_tool("search", arguments)
            assert not result.is_error
            page = result.structured_content
            assert len(page["items"]) <= 6
            names += [item["name"] for item in page["items"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert names == [f"items.item{index:02d}" for index in range(20)]
    assert pages == 4


async def test_search_text_copy_equals_structured_content(era: str) -> None:
    import json

    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool("search", {"query": "", "group": "orders"})
    assert json.loads(text_of(result)) == result.structured_content
    assert [item["name"] for item in result.structured_content["items"]] == [
        "orders.chain",
        "orders.confirm",
        "orders.pay",
    ]


async def test_an_empty_rule_search_says_how_to_ask_naming_only_visible_groups(
    era: str,
) -> None:
    import json

    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool("search", {"query": "echo nothingmatches"})
        assert result.structured_content == {"items": [], "next_cursor": None}
        assert json.loads(text_of(result)) == result.structured_content
        assert len(result.content) == 2
        hint = result.content[1]
        assert isinstance(hint, types.TextContent)
        assert "one or two keywords" in hint.text
        # the local principal may not discover admin.*: that group is never named
        assert hint.text.endswith('one of: "items", "orders", "reports", "util".')
        assert "admin" not in hint.text
        # one word, or a page with items: nothing added
        for arguments in ({"query": "nothingmatches"}, {"query": "echo text"}):
            assert len((await client.call_tool("search", arguments)).content) == 1
    relevance = build_registry().replace(ranking=Ranking.RELEVANCE)
    async with connect(GatewayServer(relevance), era) as client:
        result = await client.call_tool("search", {"query": "zzzq nothingmatches"})
        assert result.structured_content["items"] == []
        assert len(result.content) == 1  # not every word must match: no hint


async def test_search_failures_are_tool_errors(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        assert error_of(await client.call_tool("search", {"cursor": "garbage"}))[0] == (
            "invalid_cursor"
        )
        assert error_of(await client.call_tool("search", {"limit": 50}))[0] == "invalid_request"
        assert error_of(await client.call_tool("search", {"limit": "5"}))[0] == "invalid_request"
        assert error_of(await client.call_tool("search", {"query": "x" * 300}))[0] == (
            "invalid_request"
        )
        code, message = error_of(await client.call_tool("search", {"color": "red"}))
        assert code == "invalid_request"
        assert "color" in message


async def test_inspect_returns_both_schemas(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool("inspect", {"name": "util.echo"})
        spec = result.structured_content
        assert spec["input_schema"]["required"] == ["text"]
        assert spec["output_schema"] == {"type": "object"}
        assert spec["name"] == "util.echo"
        code, _ = error_of(await client.call_tool("inspect", {"name": "admin.reset"}))
        assert code == "unavailable"  # undiscoverable looks like unknown
        code, _ = error_of(await client.call_tool("inspect", {"name": "no.such"}))
        assert code == "unavailable"
        assert error_of(await client.call_tool("inspect", {}))[0] == "invalid_request"


async def test_an_unknown_tool_is_a_protocol_error(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        with pytest.raises(MCPError):
            await client.call_tool("util.echo", {"text": "not pinned"})


# -- invoke -----------------------------------------------------------------------


async def test_invoke_success_carries_content_and_structured(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool(
            "invoke", {"name": "util.echo", "arguments": {"text": "hello"}}
        )
    assert not result.is_error
    assert text_of(result) == "echo hello"
    assert result.structured_content == {"text": "hello"}


async def test_every_failure_path_is_an_error_result(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:

        async def code(name: str, arguments: Any = None) -> tuple[str, str]:
            payload: dict[str, Any] = {"name": name}
            if arguments is not None:
                payload["arguments"] = arguments
            return error_of(await client.call_tool("invoke", payload))

        assert (await code("no.such"))[0] == "unavailable"
        assert (await code("admin.reset"))[0] == "unavailable"
        failed, message = await code("util.echo", {"text": 5})
        assert failed == "invalid_arguments"
        assert "/text" in message
        failed, message = await code("util.broken")
        assert failed == "internal"
        assert SECRET not in message
        result = await client.call_tool("invoke", {"name": "util.refuse"})
        assert result.structured_content["error"] == {
            "code": "operation_failed",
            "message": "the order is closed",
            "diagnostics": {"order": 7},
        }
        assert (await code("util.huge"))[0] == "invalid_result"
        assert error_of(await client.call_tool("invoke", {"arguments": {}}))[0] == (
            "invalid_request"
        )
        assert (
            error_of(await client.call_tool("invoke", {"name": "util.echo", "arguments": 3}))[0]
            == "invalid_request"
        )


async def test_internal_failure_cause_is_logged_sanitized(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, str]] = []

    def hook(ctx: CallContext, tool: str, failure: Any) -> None:
        seen.append((tool, type(failure.cause).__name__))

    caplog.set_level(logging.DEBUG)
    server = GatewayServer(build_registry(), on_failure=hook)
    async with connect(server, era) as client:
        await client.call_tool("invoke", {"name": "util.broken", "arguments": {}})
    assert seen == [("invoke", "RuntimeError")]
    logged = [record.getMessage() for record in caplog.records if record.name == "opgate.mcp"]
    assert any("internal (RuntimeError)" in line for line in logged)
    assert all(SECRET not in record.getMessage() for record in caplog.records)


# -- human input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (types.ElicitResult(action="accept", content={"ok": True}), None),
        (types.ElicitResult(action="accept", content={"ok": False}), "not confirmed: answered no"),
        (types.ElicitResult(action="decline"), "not confirmed: decline"),
        (types.ElicitResult(action="cancel"), "not confirmed: cancel"),
    ],
)
async def test_form_elicitation(era: str, answer: types.ElicitResult, expected: str | None) -> None:
    seen: list[types.ElicitRequestParams] = []
    async with connect(
        GatewayServer(build_registry()), era, lambda params: answer, seen=seen
    ) as client:
        result = await client.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 3}}
        )
    [params] = seen
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Really?"
    assert params.requested_schema["required"] == ["ok"]
    if expected is None:
        assert result.structured_content == {"id": 3}
    else:
        assert error_of(result) == ("operation_failed", expected)


async def test_an_answer_that_breaks_the_form_is_refused(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era, accept({"ok": "yes"})) as client:
        result = await client.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 3}}
        )
    code, message = error_of(result)
    assert code == "invalid_request"
    assert "answers" in message


async def test_three_prompt_chain(era: str) -> None:
    values = iter([4, 5, 6])
    seen: list[types.ElicitRequestParams] = []

    def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": next(values)})

    async with connect(GatewayServer(build_registry()), era, answer, seen=seen) as client:
        result = await client.call_tool("invoke", {"name": "orders.chain"})
    assert result.structured_content == {"total": 15}
    assert [params.message for params in seen] == ["Value 1?", "Value 2?", "Value 3?"]


async def test_a_client_without_elicitation_gets_confirmation_required_at_once(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        with anyio.fail_after(5):
            result = await client.call_tool(
                "invoke", {"name": "orders.confirm", "arguments": {"id": 1}}
            )
    code, message = error_of(result)
    assert code == "confirmation_required"
    assert "person" in message


async def test_progress_reaches_the_progress_callback(era: str) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, total, message))

    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool(
            "invoke",
            {"name": "reports.export", "arguments": {"steps": 3}},
            progress_callback=progress,
        )
    assert text_of(result) == "exported"
    assert updates, "no progress arrived"
    values = [value for value, _, _ in updates]
    assert values == sorted(set(values))  # strictly increasing
    assert all(total == 3 for _, total, _ in updates)
    assert updates[0][2] == "step 0"


# -- serving lifetime ---------------------------------------------------------------


async def test_closing_a_serving_run_expires_its_prompts_only() -> None:
    registry = build_registry()
    server = GatewayServer(registry)
    direct_lifetime = registry.open_lifetime()
    ctx = CallContext(LOCAL_PRINCIPAL, "direct")
    from opgate import InputMode, InputResponse, Pending

    direct = await registry.invoke(
        ctx, "orders.confirm", {"id": 9}, input_support={InputMode.FORM}, lifetime=direct_lifetime
    )
    assert isinstance(direct, Pending)
    async with manual_client(server) as client:
        pending = await client.session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 1}}, allow_input_required=True
        )
        assert isinstance(pending, types.InputRequiredResult)
    # The client's serving run has ended; a fresh one cannot answer that prompt.
    async with manual_client(server) as client:
        with pytest.raises(MCPError, match="expired"):
            await client.session.call_tool(
                "invoke",
                {"name": "orders.confirm", "arguments": {"id": 1}},
                request_state=pending.request_state,
                input_responses={
                    "opgate": types.ElicitResult(action="accept", content={"ok": True})
                },
            )
    # The direct caller's prompt is untouched.
    finished = await registry.invoke(
        ctx,
        "orders.confirm",
        {"id": 9},
        input_support={InputMode.FORM},
        lifetime=direct_lifetime,
        resume=(direct.continuation, InputResponse.accept({"ok": True})),
    )
    assert finished.result.structured == {"id": 9}  # type: ignore[union-attr]


# -- the 2026-07-28 retry ------------------------------------------------------------


async def test_modern_retry_with_tampered_state_fails_safely() -> None:
    async with manual_client(GatewayServer(build_registry())) as client:
        first = await client.session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 1}}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state is not None
        request = first.input_requests["opgate"]
        assert isinstance(request.params, types.ElicitRequestFormParams)
        yes = {"opgate": types.ElicitResult(action="accept", content={"ok": True})}

        async def retry(state: str | None, arguments: dict[str, Any], responses: Any = yes) -> Any:
            return await client.session.call_tool(
                "invoke",
                {"name": "orders.confirm", "arguments": arguments},
                request_state=state,
                input_responses=responses,
                allow_input_required=True,
            )

        state = first.request_state
        flipped = state[:-1] + ("A" if state[-1] != "A" else "B")
        for forged, arguments in (
            (flipped, {"id": 1}),  # tampered: unknown to the ledger
            ("zz" + state[2:], {"id": 1}),  # not a state this server issues
            (state + "-TAMPERED", {"id": 1}),
            (state, {"id": 2}),  # bound to other arguments
        ):
            with pytest.raises(MCPError) as raised:
                await retry(forged, arguments)
            assert raised.value.error.code == types.INVALID_PARAMS
        # Responses without a state answer nothing: a fresh call asks again.
        fresh = await retry(None, {"id": 1})
        assert isinstance(fresh, types.InputRequiredResult)
        assert fresh.request_state != state
        wrong = {"other": types.ElicitResult(action="accept", content={"ok": True})}
        assert error_of(await retry(state, {"id": 1}, wrong))[0] == "invalid_request"
        done = await retry(state, {"id": 1})
        assert done.structured_content == {"id": 1}
        # The same answer again is a recovery call: it finishes the same way.
        again = await retry(state, {"id": 1})
        assert again.structured_content == {"id": 1}


async def test_legacy_call_with_modern_retry_fields_is_refused() -> None:
    async with connect(GatewayServer(build_registry()), "legacy") as client:
        result = await client.session.call_tool(
            "invoke",
            {"name": "util.echo", "arguments": {"text": "x"}},
            request_state="f." + "A" * 43,
        )
    assert error_of(result)[0] == "invalid_request"


async def test_a_prompt_nobody_answers_expires_instead_of_hanging() -> None:
    registry = Registry(
        operations(), ScopePolicy(), limits=Limits(input_lifetime=timedelta(seconds=0.3))
    )

    async def slow(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        await anyio.sleep(3)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(
        GatewayServer(registry).sdk_server, mode="legacy", elicitation_callback=slow
    ) as client:
        with anyio.fail_after(2.5):
            result = await client.call_tool(
                "invoke", {"name": "orders.confirm", "arguments": {"id": 1}}
            )
    assert error_of(result)[0] == "expired"


@pytest.mark.parametrize("era", ERAS)
async def test_failure_causes_reach_mcp_log_notifications_when_asked(era: str) -> None:
    received: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    server = GatewayServer(build_registry())
    async with Client(
        server.sdk_server,
        mode=era,
        logging_callback=on_log,
        log_level="warning" if era != "legacy" else None,
    ) as client:
        await client.call_tool("invoke", {"name": "util.broken"})
        if era == "legacy":
            assert received == []  # no level set yet
        if era == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("warning")
            await client.call_tool("invoke", {"name": "util.broken"})
    assert [entry.data for entry in received] == ["invoke: internal (RuntimeError)"]
    assert all(SECRET not in str(entry.data) for entry in received)


@pytest.mark.parametrize("era", ERAS)
async def test_no_log_notifications_without_a_level(era: str) -> None:
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async with Client(
        GatewayServer(build_registry()).sdk_server, mode=era, logging_callback=on_log
    ) as client:
        await client.call_tool("invoke", {"name": "util.broken"})
    assert received == []


async def test_an_elicitation_the_client_refuses_reaches_the_handler_as_cancel() -> None:
    async def refuse(context: ClientRequestContext, params: Any) -> types.ErrorData:
        return types.ErrorData(code=types.INVALID_REQUEST, message="no UI here")

    async with Client(
        GatewayServer(build_registry()).sdk_server, mode="legacy", elicitation_callback=refuse
    ) as client:
        result = await client.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 1}}
        )
    assert error_of(result) == ("operation_failed", "not confirmed: cancel")


async def test_input_request_keys_name_the_prompt_of_an_operation() -> None:
    server = GatewayServer(build_registry(), input_request_keys={"orders.confirm": "confirm_it"})
    async with manual_client(server) as client:
        first = await client.session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 6}}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        assert list(first.input_requests) == ["confirm_it"]
        done = await client.session.call_tool(
            "invoke",
            {"name": "orders.confirm", "arguments": {"id": 6}},
            request_state=first.request_state,
            input_responses={
                "confirm_it": types.ElicitResult(action="accept", content={"ok": True})
            },
        )
    assert done.structured_content == {"id": 6}
    with pytest.raises(ConfigurationError, match="unknown operation"):
        GatewayServer(build_registry(), input_request_keys={"no.such": "x"})


async def test_an_on_failure_hook_that_raises_never_changes_the_reply() -> None:
    class HookBoom(BaseException):
        pass

    def hook(ctx: CallContext, tool: str, failure: Any) -> None:
        raise HookBoom("secret")

    server = GatewayServer(build_registry(), on_failure=hook)
    async with connect(server, "legacy") as client:
        result = await client.call_tool("invoke", {"name": "util.refuse"})
    assert error_of(result)[0] == "operation_failed"
