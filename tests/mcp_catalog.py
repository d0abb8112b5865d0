"""A small catalog for the MCP server tests, served in process, over stdio and over HTTP.

``opgate serve tests.mcp_catalog:build_registry`` (from the repository root) serves
it; ``tests.mcp_catalog:TokenVerifier`` accepts the bearer tokens ``alice-token``
and ``bob-token``. The policy lets a principal with scope ``admin`` see
``admin.*`` and records nothing: it reads only ``ctx.principal`` and ``ctx.scope_key``.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.auth.provider import AccessToken

from opgate import (
    Discover,
    Execute,
    Failure,
    FailureCode,
    FormInput,
    InputAction,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    URLInput,
    await_input,
    fail,
    finish,
)

SECRET = "s3cr3t-handler-detail"

CONFIRM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Confirm"}},
    "required": ["ok"],
}


class ScopePolicy:
    """Everyone may use everything but ``admin.*``, which needs scope ``admin``."""

    def scope_key(self, ctx: Any) -> str:
        return str(ctx.scope_key)

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        if request.name.startswith("admin.") and "admin" not in ctx.principal.scopes:
            raise Failure(FailureCode.UNAVAILABLE)


def echo(inv: Invocation) -> Any:
    return finish(Result([Text(f"echo {inv.arguments['text']}")], structured=dict(inv.arguments)))


def numbers(inv: Invocation) -> Any:
    return finish(Result(structured=[1, 2, 3]))


async def confirm(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(FormInput("Really?", CONFIRM, state={"id": inv.arguments["id"]}))
    resume = inv.resume
    if resume.action is not InputAction.ACCEPT:
        return fail(f"not confirmed: {resume.action.value}")
    if resume.answers != {"ok": True}:
        return fail("not confirmed: answered no")
    return finish(Result([Text("confirmed")], structured={"id": resume.state["id"]}))


async def pay(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(URLInput("Pay here", "https://pay.example.com/checkout/42"))
    return finish(Result([Text(f"payment {inv.resume.action.value}")]))


async def chain(inv: Invocation) -> Any:
    """Three prompts: the round number travels in the private state."""
    round_number = 0 if inv.resume is None else int(inv.resume.state["round"])
    if inv.resume is not None and inv.resume.action is not InputAction.ACCEPT:
        return fail(f"stopped at round {round_number}")
    answers = [] if inv.resume is None else [*inv.resume.state["answers"], inv.resume.answers]
    if round_number < 3:
        schema = {
            "type": "object",
            "properties": {"value": {"type": "integer"}},
            "required": ["value"],
        }
        state = {"round": round_number + 1, "answers": answers}
        return await_input(FormInput(f"Value {round_number + 1}?", schema, state=state))
    total = sum(int(answer["value"]) for answer in answers)
    return finish(Result([Text(f"total {total}")], structured={"total": total}))


async def export(inv: Invocation) -> Any:
    steps = int(inv.arguments.get("steps", 3))
    for step in range(steps + 1):
        await inv.report_progress(step, steps, f"step {step}")
        await anyio.sleep(0.11)  # the registry throttles to one update per 100 ms
    return finish(Result([Text("exported")]))


def broken(inv: Invocation) -> Any:
    raise RuntimeError(SECRET)


def refuse(inv: Invocation) -> Any:
    return fail("the order is closed", {"order": 7})


def huge(inv: Invocation) -> Any:
    # Fits the registry's budget (40 KB) but not as sent: without a text block the
    # server adds a text copy of the structured content, doubling it on the wire.
    return finish(Result(structured={"data": "x" * 40_000}))


def admin_reset(inv: Invocation) -> Any:
    return finish(Result([Text("reset")]))


ID = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "required": ["id"],
    "additionalProperties": False,
}


def operations() -> list[Operation]:
    """The catalog's operations, plus twenty ``items.*`` fillers for paging."""
    text = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    found = [
        Operation(
            "util.echo",
            "Echo text back",
            echo,
            group="util",
            input_schema=text,
            output_schema={"type": "object"},
        ),
        Operation(
            "util.numbers",
            "A list of numbers",
            numbers,
            group="util",
            output_schema={"type": "array"},
        ),
        Operation("orders.confirm", "Confirm an order", confirm, group="orders", input_schema=ID),
        Operation("orders.pay", "Pay for an order", pay, group="orders"),
        Operation("orders.chain", "Ask three questions", chain, group="orders"),
        Operation("reports.export", "Export a report with progress", export, group="reports"),
        Operation("util.broken", "Always raises", broken, group="util"),
        Operation("util.refuse", "Always fails", refuse, group="util"),
        Operation("util.huge", "A result too large to send", huge, group="util"),
        Operation("admin.reset", "Reset everything", admin_reset, group="admin"),
    ]
    found += [
        Operation(f"items.item{index:02d}", f"Filler item number {index}", echo, group="items")
        for index in range(20)
    ]
    return found


def build_registry() -> Registry:
    """A fresh registry over the catalog (what ``opgate serve`` loads)."""
    return Registry(operations(), ScopePolicy())


TOKENS = {
    "alice-token": AccessToken(
        token="alice-token",
        client_id="app",
        scopes=["ops"],
        subject="alice",
        claims={"iss": "https://idp.example"},
    ),
    "bob-token": AccessToken(
        token="bob-token",
        client_id="app",
        scopes=["ops", "admin"],
        subject="bob",
        claims={"iss": "https://idp.example"},
    ),
}


class TokenVerifier:
    """A bearer verifier with two fixed principals (``alice-token``, ``bob-token``)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        return TOKENS.get(token)
