"""The catalog the replica tests and the load command serve (``replica_app:build_registry``).

* ``items.itemNN`` — forty fillers, for search paging;
* ``util.echo`` — a plain invoke;
* ``orders.confirm`` — one form prompt, then finish;
* ``orders.chain`` — two form prompts, then finish (the state carries the answers);
* ``orders.slow`` — one form prompt; the answered call appends a line to the file
  named by ``$OPGATE_REPLICA_RUNS`` (``{"id", "pid", "recovery", "phase"}``) when it
  starts and when it ends, and holds for ``hold`` seconds in between — so tests can
  count handler runs across processes and kill a replica mid-handler.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import anyio

from opgate import (
    Discover,
    Execute,
    FormInput,
    InputAction,
    Invocation,
    Limits,
    Operation,
    Registry,
    Result,
    Text,
    await_input,
    fail,
    finish,
)

__all__ = ["build_registry", "operations"]

CONFIRM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Confirm"}},
    "required": ["ok"],
}
VALUE = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
ID = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "hold": {"type": "number", "minimum": 0}},
    "required": ["id"],
}


class OpenPolicy:
    """Everything is allowed; the scope key is the MCP principal's."""

    def scope_key(self, ctx: Any) -> str:
        return str(ctx.scope_key)

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        return None


def echo(inv: Invocation) -> Any:
    return finish(Result([Text(f"echo {inv.arguments.get('text', '')}")]))


async def confirm(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(FormInput("Confirm?", CONFIRM, state={"id": inv.arguments["id"]}))
    if inv.resume.action is not InputAction.ACCEPT or inv.resume.answers != {"ok": True}:
        return fail("not confirmed")
    return finish(Result([Text("confirmed")], structured={"id": inv.resume.state["id"]}))


async def chain(inv: Invocation) -> Any:
    step = 0 if inv.resume is None else int(inv.resume.state["step"])
    if inv.resume is not None and inv.resume.action is not InputAction.ACCEPT:
        return fail(f"stopped at step {step}")
    total = 0 if inv.resume is None else inv.resume.state["total"] + inv.resume.answers["value"]
    if step < 2:
        return await_input(
            FormInput(f"Value {step + 1}?", VALUE, {"step": step + 1, "total": total})
        )
    return finish(Result([Text(f"total {total}")], structured={"total": total}))


def _record(inv: Invocation, phase: str) -> None:
    path = os.environ.get("OPGATE_REPLICA_RUNS")
    if not path or inv.resume is None:
        return
    line = {
        "id": inv.arguments["id"],
        "pid": os.getpid(),
        "recovery": inv.resume.recovery_only,
        "phase": phase,
    }
    with open(path, "a", encoding="utf-8") as runs:
        runs.write(json.dumps(line) + "\n")


async def slow(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(FormInput("Go?", CONFIRM, state={"id": inv.arguments["id"]}))
    _record(inv, "start")
    if not inv.resume.recovery_only:
        await anyio.sleep(float(inv.arguments.get("hold", 0)))
    _record(inv, "end")
    return finish(Result([Text("done")], structured={"recovered": inv.resume.recovery_only}))


def operations() -> list[Operation]:
    found = [
        Operation("util.echo", "Echo text back", echo, group="util"),
        Operation("orders.confirm", "Confirm an order", confirm, group="orders", input_schema=ID),
        Operation("orders.chain", "Ask two values and add them", chain, group="orders"),
        Operation("orders.slow", "A slow confirmed job", slow, group="orders", input_schema=ID),
    ]
    found += [
        Operation(f"items.item{i:02d}", f"Filler item number {i}", echo, group="items")
        for i in range(40)
    ]
    return found


def build_registry() -> Registry:
    """A fresh registry; ``opgate serve`` adds the shared secret and ledger.

    ``$OPGATE_REPLICA_LIFETIME`` (seconds), when set, is the prompts' input lifetime:
    the load command's soak sets it short so that records expire, are swept and their
    bytes come back many times within the run.
    """
    lifetime = os.environ.get("OPGATE_REPLICA_LIFETIME")
    limits = None if not lifetime else Limits(input_lifetime=timedelta(seconds=float(lifetime)))
    return Registry(operations(), OpenPolicy(), limits=limits)
