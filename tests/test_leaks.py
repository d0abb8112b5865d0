"""Nothing secret leaks: not into logs, reprs, public messages, wire replies or pickles.

A sequence of searches, prompts, answers and failures runs with every logger at DEBUG,
directly against the registry and through the MCP server. Then every continuation
token, cursor, scope key, argument value, handler secret and private state value is
looked for in everything a host or a client could see. (A search cursor is not among
them: it is the caller's to hold, sealed and bound to its principal.)
"""

from __future__ import annotations

import contextlib
import copy
import logging
import pickle
from typing import Any

import mcp.types as types
import pytest
from mcp import Client

from opgate import (
    Completed,
    Discover,
    Execute,
    Failed,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Pending,
    Registry,
    Result,
    SearchPage,
    Text,
    await_input,
    fail,
    finish,
)
from opgate.mcp import GatewayServer

pytestmark = pytest.mark.anyio

HANDLER_SECRET = "handler-secret-7f3a"
STATE_SECRET = "state-secret-91bc"
ARGUMENT_SECRET = "argument-secret-c0de"
SCOPE_SECRET = "scope-secret-5e11"


class SecretScopePolicy:
    def scope_key(self, ctx: Any) -> str:
        return f"{SCOPE_SECRET}:{ctx}"

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        return None


def boom(inv: Invocation) -> Any:
    raise RuntimeError(f"{HANDLER_SECRET} while handling {inv.arguments}")


def refuse(inv: Invocation) -> Any:
    return fail("refused", diagnostics=None)


async def ask(inv: Invocation) -> Any:
    if inv.resume is None:
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        return await_input(FormInput("Confirm?", schema, state={"private": STATE_SECRET}))
    return finish(Result([Text("done")]))


def leaky_output(inv: Invocation) -> Any:
    # The output schema forbids this member: its name and value are application data.
    return finish(Result(structured={f"card {HANDLER_SECRET}": HANDLER_SECRET}))


SECRET_ARGUMENT = {
    "type": "object",
    "properties": {"code": {"type": "string", "maxLength": 3}},
}


def registry() -> Registry:
    return Registry(
        [
            Operation("leak.boom", "Raises with a secret", boom, input_schema=SECRET_ARGUMENT),
            Operation("leak.refuse", "Fails", refuse),
            Operation("leak.ask", "Asks a form", ask),
            Operation(
                "leak.output",
                "Returns data its schema refuses",
                leaky_output,
                output_schema={"type": "object", "additionalProperties": False},
            ),
            *[
                Operation(f"leak.filler{index}", "A filler for paging", refuse)
                for index in range(8)
            ],
        ],
        SecretScopePolicy(),
    )


def everything_visible(values: list[Any]) -> str:
    """reprs, strs and pickles of everything a host holds, as one text."""
    parts: list[str] = []
    for value in values:
        parts += [repr(value), str(value)]
        with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
            parts.append(pickle.dumps(value).decode("latin-1"))
    return "\n".join(parts)


async def test_no_secret_reaches_logs_reprs_messages_or_pickles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger().setLevel(logging.DEBUG)
    catalog = registry()
    ctx = "principal"
    held: list[Any] = []
    tokens: list[str] = []

    page = await catalog.search(ctx, "filler", limit=2)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None  # a cursor is the caller's to hold: sealed, bound
    held += [page, await catalog.search(ctx, "filler", limit=2, cursor=page.next_cursor)]

    held.append(await catalog.invoke(ctx, "leak.boom", {"code": "ok"}))
    held.append(await catalog.invoke(ctx, "leak.boom", {"code": ARGUMENT_SECRET}))
    held.append(await catalog.invoke(ctx, "leak.refuse", {}))
    held.append(await catalog.invoke(ctx, "leak.output", {}))
    pending = await catalog.invoke(ctx, "leak.ask", {}, input_support={InputMode.FORM})
    assert isinstance(pending, Pending)
    tokens.append(pending.continuation)
    held.append(pending)
    answer = (pending.continuation, InputResponse.accept({"ok": True}))
    done = await catalog.invoke(ctx, "leak.ask", {}, input_support={InputMode.FORM}, resume=answer)
    assert isinstance(done, Completed)
    held.append(done)
    held.append(
        await catalog.invoke(
            "another", "leak.ask", {}, input_support={InputMode.FORM}, resume=answer
        )
    )

    # The same through the MCP server, both eras, with the adapter's logging.
    async def accept(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    replies: list[types.CallToolResult] = []
    for era in ("legacy", "2026-07-28"):
        server = GatewayServer(catalog)
        async with Client(server.sdk_server, mode=era, elicitation_callback=accept) as client:
            for name, arguments in (
                ("leak.boom", {"code": ARGUMENT_SECRET}),
                ("leak.output", {}),
                ("leak.ask", {}),
            ):
                replies.append(
                    await client.call_tool("invoke", {"name": name, "arguments": arguments})
                )

    failures = [outcome.failure for outcome in held if isinstance(outcome, Failed)]
    assert {failure.code.value for failure in failures} >= {
        "internal",
        "invalid_arguments",
        "operation_failed",
        "invalid_result",
        "expired",
    }
    public = "\n".join(failure.message for failure in failures)
    wire = "\n".join(reply.model_dump_json() for reply in replies)
    logs = "\n".join(f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records)
    visible = everything_visible(held)
    # The registry's keyed-hash secret stands in for key material (the AEAD key itself
    # cannot be read back from its cipher object).
    key = catalog._secret.hex()
    secrets = [HANDLER_SECRET, STATE_SECRET, ARGUMENT_SECRET, SCOPE_SECRET, key, *tokens]
    for where, text in (
        ("public messages", public),
        ("MCP replies", wire),
        ("logs", logs),
        ("reprs and pickles", visible),
    ):
        for secret in secrets:
            assert secret not in text, f"{secret[:12]}… leaked into {where}"
    # The private cause is still there for the host, in process.
    internal = next(failure for failure in failures if failure.code.value == "internal")
    assert HANDLER_SECRET in str(internal.cause)


async def test_a_pending_outcome_refuses_to_be_pickled() -> None:
    catalog = registry()
    pending = await catalog.invoke("p", "leak.ask", {}, input_support={InputMode.FORM})
    assert isinstance(pending, Pending)
    with pytest.raises(TypeError, match="bearer continuation"):
        pickle.dumps(pending)
    assert copy.copy(pending) is pending
    assert copy.deepcopy(pending) is pending
    assert pending.continuation not in repr(pending)
