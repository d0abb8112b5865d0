"""Support tickets, including ``tickets.escalate``: a chain of two form prompts.

Escalation asks first which team takes the ticket and how urgent it is, then whether
to tell the customer (and what). Each prompt's private state carries the ticket and
the answers so far (``step`` says which question was answered), so the handler needs
no server-side session. What each answer does:

* the first question declined or cancelled: nothing is done;
* the second question cancelled (dismissed): nothing is done, the first answers are
  dropped;
* the second question declined: the ticket is escalated and the customer is not told;
* the second question accepted: the ticket is escalated, and the customer is told
  when ``notify`` is yes.

A failure's message and a result's ``outcome`` say what was done and what was not,
for example ``"ticket 1 escalated to Engineering (urgent); Ada Lovelace not told:
the second question was declined"``; ``customer_notified`` says whether the customer
was told. The final write is idempotent: a replayed or recovered last answer for a
ticket that is already escalated to the chosen team returns the ticket as it is, with
the same outcome.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .. import FormInput, InputAction, Invocation, Operation, await_input, fail
from ._kit import (
    ID,
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
    string,
)

__all__ = ["TEAMS", "Support"]

TICKET_STATUSES = ["open", "pending", "escalated", "closed"]
PRIORITIES = ["low", "normal", "high", "urgent"]
TEAMS = (("tier2", "Tier 2 support"), ("billing", "Billing"), ("engineering", "Engineering"))

TICKET: Schema = obj(
    {
        "id": ID,
        "customer_id": ID,
        "customer": {"type": "string"},
        "order_id": {"type": ["integer", "null"]},
        "subject": {"type": "string"},
        "status": {"enum": TICKET_STATUSES},
        "priority": {"enum": PRIORITIES},
        "assignee": {"type": ["string", "null"]},
        "team": {"type": ["string", "null"]},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
    },
    (
        "id",
        "customer_id",
        "customer",
        "order_id",
        "subject",
        "status",
        "priority",
        "assignee",
        "team",
        "created_at",
        "updated_at",
    ),
)
COMMENT: Schema = obj(
    {
        "id": ID,
        "author": {"type": "string"},
        "body": {"type": "string"},
        "internal": {"type": "boolean"},
        "created_at": {"type": "string"},
    },
    ("id", "author", "body", "internal", "created_at"),
)
TICKET_DETAIL: Schema = obj(
    {**TICKET["properties"], "comments": {"type": "array", "items": COMMENT}},
    (*TICKET["required"], "comments"),
)
ESCALATION: Schema = obj(
    {
        "outcome": {"type": "string"},
        **TICKET_DETAIL["properties"],
        "customer_notified": {"type": "boolean"},
    },
    ("outcome", *TICKET_DETAIL["required"], "customer_notified"),
)

_SELECT = (
    "SELECT t.id, t.customer_id, c.name AS customer, t.order_id, t.subject, t.status,"
    " t.priority, t.assignee, t.team, t.created_at, t.updated_at"
    " FROM tickets t JOIN customers c ON c.id = t.customer_id"
)
_NOW = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"


def _past(action: InputAction) -> str:
    return "declined" if action is InputAction.DECLINE else "cancelled"


def _team(team: str) -> str:
    """A team's title, as the escalation form shows it."""
    return dict(TEAMS).get(team, team)


def _escalation(outcome: str, detail: dict[str, Any], notified: bool) -> object:
    """The escalation's result: what was done first, then the ticket (``ESCALATION``)."""
    return reply({"outcome": outcome, **detail, "customer_notified": notified})


def _detail(db: sqlite3.Connection, ticket_id: int) -> dict[str, Any] | None:
    row = db.execute(f"{_SELECT} WHERE t.id = ?", (ticket_id,)).fetchone()
    if row is None:
        return None
    comments = db.execute(
        "SELECT id, author, body, internal, created_at FROM ticket_comments"
        " WHERE ticket_id = ? ORDER BY id",
        (ticket_id,),
    ).fetchall()
    return {
        **record(row),
        "comments": [{**record(c), "internal": bool(c["internal"])} for c in comments],
    }


class Support(Application):
    """The handlers of the tickets group."""

    def list_tickets(self, inv: Invocation) -> object:
        args = arguments(inv)
        status, priority, customer = args.get("status"), args.get("priority"), args.get("customer")
        where = (
            "WHERE (? IS NULL OR t.status = ?) AND (? IS NULL OR t.priority = ?)"
            " AND (? IS NULL OR t.customer_id = ?)"
        )
        params = (status, status, priority, priority, customer, customer)
        count = f"SELECT count(*) FROM tickets t {where}"
        with self.desk.read() as db:
            return reply(page(db, inv, count, f"{_SELECT} {where} ORDER BY t.id", params))

    def get_ticket(self, inv: Invocation) -> object:
        ticket_id = arguments(inv)["ticket"]
        with self.desk.read() as db:
            detail = _detail(db, ticket_id)
        if detail is None:
            return not_found("ticket", ticket_id)
        return reply(detail)

    def open_ticket(self, inv: Invocation) -> object:
        args = arguments(inv)
        customer_id, order_id = args["customer"], args.get("order")
        with self.desk.write() as db:
            customer = db.execute(
                "SELECT name FROM customers WHERE id = ?", (customer_id,)
            ).fetchone()
            if customer is None:
                return not_found("customer", customer_id)
            if order_id is not None:
                owner = db.execute(
                    "SELECT customer_id FROM orders WHERE id = ?", (order_id,)
                ).fetchone()
                if owner is None or owner[0] != customer_id:
                    return fail(f"order {order_id} not found for customer {customer_id}")
            cursor = db.execute(
                "INSERT INTO tickets (customer_id, order_id, subject, status, priority, assignee,"
                f" team, created_at, updated_at) VALUES (?, ?, ?, 'open', ?, NULL, NULL, {_NOW},"
                f" {_NOW})",
                (customer_id, order_id, args["subject"], args.get("priority", "normal")),
            )
            ticket_id = int(cursor.lastrowid or 0)
            db.execute(
                "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
                f" VALUES (?, ?, ?, 0, {_NOW})",
                (ticket_id, customer["name"], args["body"]),
            )
            audit(db, inv.name, f"ticket {ticket_id} opened for customer {customer_id}")
            detail = _detail(db, ticket_id)
        assert detail is not None
        return reply(detail)

    def comment(self, inv: Invocation) -> object:
        args = arguments(inv)
        ticket_id = args["ticket"]
        with self.desk.write() as db:
            if db.execute("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)).fetchone() is None:
                return not_found("ticket", ticket_id)
            db.execute(
                "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
                f" VALUES (?, 'agent', ?, ?, {_NOW})",
                (ticket_id, args["body"], 1 if args.get("internal") is True else 0),
            )
            db.execute(f"UPDATE tickets SET updated_at = {_NOW} WHERE id = ?", (ticket_id,))
            audit(db, inv.name, f"ticket {ticket_id}: comment added")
            detail = _detail(db, ticket_id)
        assert detail is not None
        return reply(detail)

    def assign(self, inv: Invocation) -> object:
        args = arguments(inv)
        ticket_id = args["ticket"]
        with self.desk.write() as db:
            cursor = db.execute(
                f"UPDATE tickets SET assignee = ?, updated_at = {_NOW},"
                " status = CASE status WHEN 'open' THEN 'pending' ELSE status END"
                " WHERE id = ? AND status != 'closed'",
                (args["assignee"], ticket_id),
            )
            if cursor.rowcount == 0:
                exists = db.execute("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
                if exists is None:
                    return not_found("ticket", ticket_id)
                return fail(f"ticket {ticket_id} is closed")
            audit(db, inv.name, f"ticket {ticket_id} assigned to {args['assignee']}")
            detail = _detail(db, ticket_id)
        assert detail is not None
        return reply(detail)

    def close(self, inv: Invocation) -> object:
        args = arguments(inv)
        ticket_id = args["ticket"]
        with self.desk.write() as db:
            row = db.execute("SELECT status FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
            if row is None:
                return not_found("ticket", ticket_id)
            if row["status"] == "closed":
                return fail(f"ticket {ticket_id} is already closed")
            db.execute(
                f"UPDATE tickets SET status = 'closed', updated_at = {_NOW} WHERE id = ?",
                (ticket_id,),
            )
            db.execute(
                "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
                f" VALUES (?, 'agent', ?, 0, {_NOW})",
                (ticket_id, f"Resolved: {args['resolution']}"),
            )
            audit(db, inv.name, f"ticket {ticket_id} closed")
            detail = _detail(db, ticket_id)
        assert detail is not None
        return reply(detail)

    def escalate(self, inv: Invocation) -> object:
        ticket_id = int(arguments(inv)["ticket"])
        resume = inv.resume
        with self.desk.read() as db:
            ticket = db.execute(f"{_SELECT} WHERE t.id = ?", (ticket_id,)).fetchone()
        if ticket is None:
            return not_found("ticket", ticket_id)
        if resume is None:
            if ticket["status"] in ("closed", "escalated"):
                return fail(f"ticket {ticket_id} is {ticket['status']}")
            return await_input(
                FormInput(
                    f"Escalate ticket {ticket_id} ({ticket['subject']}): which team, how urgent?",
                    {
                        "type": "object",
                        "properties": {
                            "team": {
                                "type": "string",
                                "title": "Team",
                                "oneOf": [{"const": k, "title": t} for k, t in TEAMS],
                            },
                            "priority": {
                                "type": "string",
                                "title": "Priority",
                                "enum": PRIORITIES,
                                "default": ticket["priority"],
                            },
                            "reason": {"type": "string", "title": "Why", "maxLength": 300},
                        },
                        "required": ["team", "priority"],
                    },
                    {"ticket": ticket_id, "step": 1},
                )
            )
        state = as_object(resume.state)
        answers = as_object(resume.answers)
        customer = ticket["customer"]
        if state.get("step") != 2:
            if resume.action is not InputAction.ACCEPT:
                return fail(
                    f"ticket {ticket_id} not escalated and {customer} not told:"
                    f" the first question (team and priority) was {_past(resume.action)}"
                )
            return await_input(
                FormInput(
                    f"Tell {customer} that ticket {ticket_id} was escalated?",
                    {
                        "type": "object",
                        "properties": {
                            "notify": {"type": "boolean", "title": "Email the customer?"},
                            "message": {
                                "type": "string",
                                "title": "Message to the customer",
                                "maxLength": 500,
                            },
                        },
                        "required": ["notify"],
                    },
                    {
                        "ticket": ticket_id,
                        "step": 2,
                        "team": answers["team"],
                        "priority": answers["priority"],
                        "reason": answers.get("reason", ""),
                    },
                )
            )
        team, priority = str(state["team"]), str(state["priority"])
        if resume.action is InputAction.CANCEL:
            return fail(
                f"ticket {ticket_id} not escalated to {_team(team)} ({priority}) and {customer}"
                " not told: the second question (tell the customer) was cancelled"
            )
        notify = resume.action is InputAction.ACCEPT and answers.get("notify") is True
        if notify:
            told = f"{customer} told by email"
        elif resume.action is InputAction.DECLINE:
            told = f"{customer} not told: the second question was declined"
        else:
            told = f"{customer} not told: the person answered no"
        outcome = f"ticket {ticket_id} escalated to {_team(team)} ({priority}); {told}"
        if ticket["status"] == "escalated" and ticket["team"] == team:
            # a replay or recovery of the last answer: the write below was made already
            with self.desk.read() as db:
                detail = _detail(db, ticket_id)
            assert detail is not None
            return _escalation(outcome, detail, notify)
        if ticket["status"] in ("closed", "escalated"):
            return fail(f"ticket {ticket_id} is {ticket['status']}")
        with self.desk.write() as db:
            db.execute(
                "UPDATE tickets SET status = 'escalated', team = ?, priority = ?,"
                f" updated_at = {_NOW} WHERE id = ?",
                (team, priority, ticket_id),
            )
            note = f"Escalated to {team} ({priority})"
            if state.get("reason"):
                note += f": {state['reason']}"
            db.execute(
                "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
                f" VALUES (?, 'agent', ?, 1, {_NOW})",
                (ticket_id, note),
            )
            if notify:
                message = str(answers.get("message") or "Your request was passed to a specialist.")
                db.execute(
                    "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
                    f" VALUES (?, 'agent', ?, 0, {_NOW})",
                    (ticket_id, message),
                )
            audit(db, inv.name, f"ticket {ticket_id} escalated to {team}")
            detail = _detail(db, ticket_id)
        assert detail is not None
        return _escalation(outcome, detail, notify)

    def operations(self) -> list[Operation]:
        """The tickets operations."""
        return [
            operation(
                "tickets.list",
                "List support tickets by status, priority or customer",
                self.list_tickets,
                examples=('{"status": "open"}', '{"priority": "urgent"}'),
                input_schema=obj(
                    {
                        "status": {"enum": TICKET_STATUSES},
                        "priority": {"enum": PRIORITIES},
                        "customer": ID,
                        **PAGE,
                    }
                ),
                output_schema=listing(TICKET),
            ),
            operation(
                "tickets.get",
                "Show one ticket with its conversation",
                self.get_ticket,
                examples=('{"ticket": 1}',),
                input_schema=by_id("ticket"),
                output_schema=TICKET_DETAIL,
            ),
            operation(
                "tickets.open",
                "Open a ticket for a customer, optionally about one of their orders",
                self.open_ticket,
                examples=('{"customer": 1, "subject": "Late delivery", "body": "Still waiting."}',),
                input_schema=obj(
                    {
                        "customer": ID,
                        "order": ID,
                        "subject": string(120),
                        "body": string(2000),
                        "priority": {"enum": PRIORITIES, "default": "normal"},
                    },
                    ("customer", "subject", "body"),
                ),
                output_schema=TICKET_DETAIL,
            ),
            operation(
                "tickets.comment",
                "Add a reply or an internal note to a ticket",
                self.comment,
                input_schema=obj(
                    {"ticket": ID, "body": string(2000), "internal": {"type": "boolean"}},
                    ("ticket", "body"),
                ),
                output_schema=TICKET_DETAIL,
            ),
            operation(
                "tickets.assign",
                "Assign a ticket to an agent",
                self.assign,
                examples=('{"ticket": 2, "assignee": "sam"}',),
                input_schema=obj(
                    {"ticket": ID, "assignee": string(40, pattern="^[a-z][a-z0-9_-]*$")},
                    ("ticket", "assignee"),
                ),
                output_schema=TICKET_DETAIL,
            ),
            operation(
                "tickets.close",
                "Close a ticket with a resolution note",
                self.close,
                input_schema=obj(
                    {"ticket": ID, "resolution": string(500)}, ("ticket", "resolution")
                ),
                output_schema=TICKET_DETAIL,
            ),
            operation(
                "tickets.escalate",
                "Escalate a ticket to another team, asking two questions first",
                self.escalate,
                description=(
                    "Asks which team and priority, then whether to notify the customer. Declining"
                    " or cancelling the first question, or cancelling the second, escalates"
                    " nothing; declining the second escalates without telling the customer."
                    " The result's outcome says what was done."
                ),
                examples=('{"ticket": 1}',),
                input_schema=by_id("ticket"),
                output_schema=ESCALATION,
            ),
        ]
