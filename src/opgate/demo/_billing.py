"""Payments and refunds: the operations that move money, and so ask a person first.

* ``refunds.request`` asks for confirmation with a form. The prompt's private state
  carries a fresh intent key (``rf_…``); the refund row is written with that key under
  a ``UNIQUE`` constraint, so a resume that is replayed or recovered
  (``inv.resume.recovery_only``) returns the refund already made instead of paying
  twice. Only ``accept`` with ``confirm: true`` refunds; the order is re-checked
  at confirmation time because it may have changed while the person was deciding.
* ``payments.checkout`` hands the person off to the payment provider's HTTPS page.
  Acceptance means only that the person consented to open it: the handler records a
  *pending* payment (keyed by the checkout id, so a recovery never records two),
  which the provider's confirmation (here ``admin.settle_payment``) settles later.
  URL prompts carry no state, so the checkout id is derived from the invoice itself.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from typing import Any

from .. import FormInput, InputAction, Invocation, Operation, URLInput, await_input, fail
from ._database import cents, money
from ._kit import (
    ID,
    MONEY,
    PAGE,
    Application,
    Schema,
    arguments,
    as_object,
    audit,
    by_id,
    listing,
    not_found,
    obj,
    operation,
    page,
    record,
    reply,
)

__all__ = ["CHECKOUT_BASE", "Billing", "checkout_id"]

#: Where the (fictional) payment provider hosts its checkout pages.
CHECKOUT_BASE = "https://pay.example.com/checkout/"

REFUNDABLE = ("paid", "shipped", "delivered")
REASONS = (
    ("damaged", "Arrived damaged"),
    ("late", "Arrived late"),
    ("wrong_item", "Wrong item sent"),
    ("goodwill", "Goodwill gesture"),
)

PAYMENT: Schema = obj(
    {
        "id": ID,
        "invoice_id": ID,
        "checkout_id": {"type": ["string", "null"]},
        "status": {"enum": ["pending", "settled", "failed"]},
        "method": {"type": "string"},
        "amount": MONEY,
        "created_at": {"type": "string"},
    },
    ("id", "invoice_id", "checkout_id", "status", "method", "amount", "created_at"),
)
CHECKOUT: Schema = obj(
    {**PAYMENT["properties"], "checkout_url": {"type": "string"}},
    (*PAYMENT["required"], "checkout_url"),
)
REFUND: Schema = obj(
    {
        "id": ID,
        "intent": {"type": "string"},
        "order_id": ID,
        "amount": MONEY,
        "reason": {"type": "string"},
        "note": {"type": "string"},
        "created_at": {"type": "string"},
    },
    ("id", "intent", "order_id", "amount", "reason", "note", "created_at"),
)
REFUND_DONE: Schema = obj(
    {**REFUND["properties"], "order_status": {"type": "string"}, "replayed": {"type": "boolean"}},
    (*REFUND["required"], "order_status", "replayed"),
)


def _record(row: sqlite3.Row) -> dict[str, Any]:
    return record(row, amounts=("amount",))


def checkout_id(invoice_id: int, amount_cents: int, issued_at: str) -> str:
    """The provider's checkout id for paying ``amount_cents`` of an invoice (deterministic)."""
    digest = hashlib.sha256(f"{invoice_id}:{amount_cents}:{issued_at}".encode()).hexdigest()
    return f"cs_{invoice_id}_{digest[:16]}"


def refund_form(amount: str, customer: str, order_id: int) -> dict[str, Any]:
    """The confirmation form of a refund (an MCP elicitation ``requestedSchema``)."""
    return {
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": f"Refund {amount} EUR to {customer}?",
                "description": f"Money goes back to the card used for order {order_id}.",
            },
            "reason": {
                "type": "string",
                "title": "Reason",
                "oneOf": [{"const": key, "title": title} for key, title in REASONS],
            },
            "note": {"type": "string", "title": "Note for the customer", "maxLength": 200},
        },
        "required": ["confirm", "reason"],
    }


class Billing(Application):
    """The handlers of the payments and refunds groups."""

    # --- refunds -----------------------------------------------------------------

    def request_refund(self, inv: Invocation) -> object:
        args = arguments(inv)
        order_id = int(args["order"])
        resume = inv.resume
        if resume is None:
            with self.desk.read() as db:
                order = self._order(db, order_id)
            if order is None:
                return not_found("order", order_id)
            remaining = order["total_cents"] - order["refunded_cents"]
            problem = self._refund_problem(order, remaining, args)
            if problem is not None:
                return fail(problem)
            amount = cents(str(args["amount"])) if "amount" in args else remaining
            key = f"rf_{secrets.token_hex(8)}"  # the intent key: one refund per confirmation
            return await_input(
                FormInput(
                    f"Refund {money(amount)} EUR of order {order_id} to {order['customer']}?",
                    refund_form(money(amount), order["customer"], order_id),
                    {"intent": key, "order": order_id, "cents": amount},
                )
            )
        state = as_object(resume.state)
        intent, amount = str(state["intent"]), int(state["cents"])
        with self.desk.write() as db:
            done = db.execute("SELECT * FROM refunds WHERE intent = ?", (intent,)).fetchone()
            if done is not None:  # a replay or a recovery: the refund already happened
                return self._refunded(db, done, replayed=True)
            if resume.action is not InputAction.ACCEPT:
                return fail(f"refund not made: the person chose {resume.action.value}")
            answers = as_object(resume.answers)
            if answers.get("confirm") is not True:
                return fail("refund not made: the person did not confirm it")
            order = self._order(db, order_id)
            if order is None:
                return not_found("order", order_id)
            remaining = order["total_cents"] - order["refunded_cents"]
            problem = self._refund_problem(order, remaining, {"amount": money(amount)})
            if problem is not None:
                return fail(f"refund not made: {problem}")
            cursor = db.execute(
                "INSERT INTO refunds (intent, order_id, amount_cents, reason, note, created_at)"
                " VALUES (?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                (intent, order_id, amount, answers["reason"], str(answers.get("note", ""))),
            )
            db.execute(
                "UPDATE orders SET refunded_cents = refunded_cents + ?,"
                " status = CASE WHEN refunded_cents + ? >= total_cents THEN 'refunded'"
                " ELSE status END WHERE id = ?",
                (amount, amount, order_id),
            )
            audit(db, inv.name, f"order {order_id}: {money(amount)} refunded ({intent})")
            row = db.execute("SELECT * FROM refunds WHERE id = ?", (cursor.lastrowid,)).fetchone()
            return self._refunded(db, row, replayed=False)

    @staticmethod
    def _order(db: sqlite3.Connection, order_id: int) -> sqlite3.Row | None:
        row: sqlite3.Row | None = db.execute(
            "SELECT o.*, c.name AS customer FROM orders o JOIN customers c"
            " ON c.id = o.customer_id WHERE o.id = ?",
            (order_id,),
        ).fetchone()
        return row

    @staticmethod
    def _refund_problem(order: sqlite3.Row, remaining: int, args: dict[str, Any]) -> str | None:
        if order["status"] not in REFUNDABLE:
            return (
                f"order {order['id']} is {order['status']}: only paid, shipped or delivered"
                " orders can be refunded"
            )
        if remaining <= 0:
            return f"order {order['id']} is already fully refunded"
        if "amount" in args and cents(str(args["amount"])) > remaining:
            return f"at most {money(remaining)} EUR of order {order['id']} can still be refunded"
        if "amount" in args and cents(str(args["amount"])) == 0:
            return "a refund must be more than 0.00"
        return None

    @staticmethod
    def _refunded(db: sqlite3.Connection, row: sqlite3.Row, *, replayed: bool) -> object:
        status = db.execute("SELECT status FROM orders WHERE id = ?", (row["order_id"],)).fetchone()
        body = {**_record(row), "order_status": status[0], "replayed": replayed}
        return reply(body)

    def list_refunds(self, inv: Invocation) -> object:
        order = arguments(inv).get("order")
        where = "WHERE ? IS NULL OR order_id = ?"
        count = f"SELECT count(*) FROM refunds {where}"
        select = f"SELECT * FROM refunds {where} ORDER BY id"
        with self.desk.read() as db:
            return reply(page(db, inv, count, select, (order, order), item=_record))

    def get_refund(self, inv: Invocation) -> object:
        refund_id = arguments(inv)["refund"]
        with self.desk.read() as db:
            row = db.execute("SELECT * FROM refunds WHERE id = ?", (refund_id,)).fetchone()
        if row is None:
            return not_found("refund", refund_id)
        return reply(_record(row))

    # --- payments ----------------------------------------------------------------

    def checkout(self, inv: Invocation) -> object:
        invoice_id = int(arguments(inv)["invoice"])
        with self.desk.read() as db:
            invoice = db.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
        if invoice is None:
            return not_found("invoice", invoice_id)
        session = checkout_id(invoice_id, invoice["amount_cents"], invoice["issued_at"])
        url = CHECKOUT_BASE + session
        resume = inv.resume
        if resume is not None:
            with self.desk.read() as db:
                made = db.execute(
                    "SELECT * FROM payments WHERE checkout_id = ?", (session,)
                ).fetchone()
            if made is not None:  # a replay or a recovery: the payment is already recorded
                return reply({**_record(made), "checkout_url": url})
        if invoice["status"] != "open":
            return fail(f"invoice {invoice_id} is {invoice['status']}: only open invoices are paid")
        if resume is None:
            amount = money(invoice["amount_cents"])
            return await_input(
                URLInput(f"Pay invoice {invoice_id} ({amount} EUR) on the secure payment page", url)
            )
        if resume.action is not InputAction.ACCEPT:
            return fail(f"payment not started: the person chose {resume.action.value}")
        with self.desk.write() as db:
            db.execute(
                "INSERT INTO payments (invoice_id, checkout_id, status, method, amount_cents,"
                " created_at) VALUES (?, ?, 'pending', 'card (hosted checkout)', ?,"
                " strftime('%Y-%m-%dT%H:%M:%SZ', 'now')) ON CONFLICT (checkout_id) DO NOTHING",
                (invoice_id, session, invoice["amount_cents"]),
            )
            db.execute(
                "UPDATE invoices SET status = 'pending' WHERE id = ? AND status = 'open'",
                (invoice_id,),
            )
            audit(db, inv.name, f"invoice {invoice_id}: checkout {session} pending")
            made = db.execute("SELECT * FROM payments WHERE checkout_id = ?", (session,)).fetchone()
        return reply({**_record(made), "checkout_url": url})

    def list_payments(self, inv: Invocation) -> object:
        args = arguments(inv)
        invoice, status = args.get("invoice"), args.get("status")
        where = "WHERE (? IS NULL OR invoice_id = ?) AND (? IS NULL OR status = ?)"
        params = (invoice, invoice, status, status)
        count = f"SELECT count(*) FROM payments {where}"
        select = f"SELECT * FROM payments {where} ORDER BY id"
        with self.desk.read() as db:
            return reply(page(db, inv, count, select, params, item=_record))

    def payment_status(self, inv: Invocation) -> object:
        payment_id = arguments(inv)["payment"]
        with self.desk.read() as db:
            row = db.execute("SELECT * FROM payments WHERE id = ?", (payment_id,)).fetchone()
        if row is None:
            return not_found("payment", payment_id)
        return reply(_record(row))

    def operations(self) -> list[Operation]:
        """The payments and refunds operations."""
        return [
            operation(
                "refunds.request",
                "Refund a paid order (all or part) after a person confirms it in a form",
                self.request_refund,
                description=(
                    "Asks the person to confirm the amount and pick a reason. Without 'amount' the"
                    " whole remaining balance is refunded. Safe to retry: a confirmed refund is"
                    " made once."
                ),
                examples=('{"order": 1}', '{"order": 2, "amount": "10.00"}'),
                input_schema=obj({"order": ID, "amount": MONEY}, ("order",)),
                output_schema=REFUND_DONE,
            ),
            operation(
                "refunds.list",
                "List refunds, optionally for one order",
                self.list_refunds,
                input_schema=obj({"order": ID, **PAGE}),
                output_schema=listing(REFUND),
            ),
            operation(
                "refunds.get",
                "Show one refund",
                self.get_refund,
                examples=('{"refund": 1}',),
                input_schema=by_id("refund"),
                output_schema=REFUND,
            ),
            operation(
                "payments.checkout",
                "Pay an open invoice: hands the person off to the payment provider's page",
                self.checkout,
                description=(
                    "Asks the person to open an HTTPS checkout link. Accepting records a pending"
                    " payment; the provider's confirmation settles it later."
                ),
                examples=('{"invoice": 6}',),
                input_schema=by_id("invoice"),
                output_schema=CHECKOUT,
            ),
            operation(
                "payments.list",
                "List payments, optionally by invoice or status",
                self.list_payments,
                input_schema=obj(
                    {"invoice": ID, "status": {"enum": ["pending", "settled", "failed"]}, **PAGE}
                ),
                output_schema=listing(PAYMENT),
            ),
            operation(
                "payments.status",
                "Show one payment and whether it has settled",
                self.payment_status,
                examples=('{"payment": 1}',),
                input_schema=by_id("payment"),
                output_schema=PAYMENT,
            ),
        ]
