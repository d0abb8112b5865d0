"""The bundled demo: a tiny support desk driven through search, inspect and invoke.

``opgate demo`` builds a registry over a few operations — an order lookup, a refund
that needs form confirmation, a payment that needs an HTTPS hand-off and a report
that streams progress — and drives it in process as a host would, printing each
step. It uses only the public API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import anyio

from .. import (
    Completed,
    Discover,
    Execute,
    Failed,
    Failure,
    FailureCode,
    FormInput,
    InputAction,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    OperationSpec,
    Pending,
    ProgressUpdate,
    Registry,
    Result,
    SearchPage,
    Text,
    URLInput,
    await_input,
    fail,
    finish,
)

__all__ = ["build_registry", "run"]

ORDERS: dict[int, dict[str, Any]] = {
    7: {"customer": "Ada", "total": Decimal("42.50"), "refunded": False},
    8: {"customer": "Grace", "total": Decimal("19.99"), "refunded": False},
}


@dataclass(frozen=True)
class Principal:
    """The demo's request context: who is calling."""

    name: str
    agent: bool = True


class DeskPolicy:
    """Agents may use everything except ``admin.*``."""

    def scope_key(self, ctx: Principal) -> str:
        return f"user:{ctx.name}"

    def authorize(self, ctx: Principal, request: Discover | Execute) -> None:
        if request.name.startswith("admin.") and ctx.agent:
            raise Failure(FailureCode.UNAVAILABLE)


ORDER_ARGUMENT = {
    "type": "object",
    "properties": {"order": {"type": "integer", "minimum": 1}},
    "required": ["order"],
    "additionalProperties": False,
}


def lookup(inv: Invocation) -> Any:
    number = inv.arguments["order"]
    order = ORDERS.get(number) if isinstance(number, int) else None
    if order is None:
        return fail("no such order")
    return finish(Result([Text(f"order for {order['customer']}")], structured=order))


async def refund(inv: Invocation) -> Any:
    number = inv.arguments["order"]
    order = ORDERS.get(number) if isinstance(number, int) else None
    if order is None:
        return fail("no such order")
    resume = inv.resume
    if resume is None:
        form = {
            "type": "object",
            "properties": {
                "confirm": {"type": "boolean", "title": f"Refund {order['total']}?"},
                "reason": {"type": "string", "maxLength": 200},
            },
            "required": ["confirm"],
        }
        return await_input(
            FormInput(f"Refund order {number}?", form, {"intent": f"refund-{number}"})
        )
    answers = resume.answers
    confirmed = isinstance(answers, dict) and answers.get("confirm") is True
    if resume.action is not InputAction.ACCEPT or not confirmed:
        return fail("refund not confirmed")
    if order["refunded"] and not resume.recovery_only:
        return fail("already refunded")
    order["refunded"] = True  # the application's own record doubles as the intent key
    return finish(Result([Text(f"refunded {order['total']}")], structured={"refunded": number}))


async def checkout(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(URLInput("Complete the payment", "https://pay.example.com/s/demo"))
    return finish(Result([Text(f"payment page {inv.resume.action.value}")]))


async def monthly_report(inv: Invocation) -> Any:
    for step in range(1, 6):
        await inv.report_progress(step, 5, f"chapter {step}")
        await anyio.sleep(0.12)
    return finish(Result([Text("report ready")]))


def build_registry() -> Registry:
    """The demo's registry."""
    return Registry(
        [
            Operation(
                "orders.lookup",
                "Look up an order",
                lookup,
                group="orders",
                input_schema=ORDER_ARGUMENT,
            ),
            Operation(
                "orders.refund",
                "Refund an order after a person confirms",
                refund,
                group="orders",
                description="Asks the customer to confirm with a form.",
                input_schema=ORDER_ARGUMENT,
                output_schema={"type": "object", "required": ["refunded"]},
            ),
            Operation(
                "payments.checkout",
                "Hand a payment off to the payment page",
                checkout,
                group="payments",
            ),
            Operation(
                "reports.monthly",
                "Build the monthly report, streaming progress",
                monthly_report,
                group="reports",
            ),
            Operation("admin.purge", "Delete every order", lookup, group="admin"),
        ],
        DeskPolicy(),
    )


def _show(label: str, outcome: object) -> None:
    if isinstance(outcome, SearchPage):
        names = ", ".join(item.name for item in outcome.items)
        text = f"[{names}] next_cursor={'yes' if outcome.next_cursor else 'no'}"
    elif isinstance(outcome, OperationSpec):
        text = f"{outcome.name}: input {json.dumps(outcome.input_schema, default=str)}"
    elif isinstance(outcome, Completed):
        text = f"completed: {[getattr(b, 'text', b) for b in outcome.result.content]}"
    elif isinstance(outcome, Failed):
        text = f"failed: {outcome.failure}"
    elif isinstance(outcome, Pending):
        text = f"pending: {outcome.prompt!r} until {outcome.expires_at:%H:%M:%S}Z"
    else:
        text = repr(outcome)
    print(f"  {label:38} -> {text}")


async def _main() -> None:
    registry = build_registry()
    agent = Principal("ada")
    print(f"opgate demo: {len(registry)} operations, one agent ({agent.name})")
    print("search / inspect")
    _show("search 'order'", await registry.search(agent, "order"))
    _show("search '' group='ORDERS'", await registry.search(agent, "", group="ORDERS"))
    _show("search 'purge' (admin only)", await registry.search(agent, "purge"))
    _show("inspect orders.refund", await registry.inspect(agent, "orders.refund"))
    print("invoke")
    _show("orders.lookup {order: 7}", await registry.invoke(agent, "orders.lookup", '{"order": 7}'))
    _show(
        "orders.lookup {order: '7'}",
        await registry.invoke(agent, "orders.lookup", '{"order": "7"}'),
    )
    _show("admin.purge", await registry.invoke(agent, "admin.purge", "{}"))
    print("human input: a form")
    args = '{"order": 7}'
    _show(
        "orders.refund without input support", await registry.invoke(agent, "orders.refund", args)
    )
    pending = await registry.invoke(agent, "orders.refund", args, input_support={InputMode.FORM})
    _show("orders.refund with form support", pending)
    assert isinstance(pending, Pending)
    answer = InputResponse.accept({"confirm": True, "reason": "damaged"})
    resume = (pending.continuation, answer)
    done = await registry.invoke(
        agent, "orders.refund", args, input_support={InputMode.FORM}, resume=resume
    )
    _show("resume: accept {confirm: true}", done)
    again = await registry.invoke(
        agent, "orders.refund", args, input_support={InputMode.FORM}, resume=resume
    )
    _show("replay of the same answer (recovery)", again)
    other = await registry.invoke(
        Principal("mallory"), "orders.refund", args, input_support={InputMode.FORM}, resume=resume
    )
    _show("same token, another principal", other)
    print("human input: an HTTPS hand-off")
    pay = await registry.invoke(agent, "payments.checkout", "{}", input_support={InputMode.URL})
    _show("payments.checkout", pay)
    assert isinstance(pay, Pending)
    _show(
        "resume: accept (navigation consent)",
        await registry.invoke(
            agent,
            "payments.checkout",
            "{}",
            input_support={InputMode.URL},
            resume=(pay.continuation, InputResponse.accept()),
        ),
    )
    print("progress")

    def sink(update: ProgressUpdate) -> None:
        print(f"    progress {update.completed}/{update.total} {update.message}")

    _show("reports.monthly", await registry.invoke(agent, "reports.monthly", "{}", progress=sink))


def run() -> int:
    """Run the demo; returns the process exit status."""
    anyio.run(_main)
    return 0
