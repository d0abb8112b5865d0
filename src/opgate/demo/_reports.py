"""Reports (one of them a streamed export) and the ``admin.*`` operations.

``reports.export_orders`` is asynchronous: it reads the orders in a worker thread,
then writes the CSV in five chunks, reporting progress after each one with a short
pause (about a second in all), and returns the file as an embedded ``text/csv``
resource plus a structured summary.

The ``admin`` group is only discoverable with the ``desk.admin`` scope (see
``_policy``); ``admin.reset_demo`` also asks for confirmation in a form.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import anyio
import anyio.to_thread

from .. import (
    EmbeddedResource,
    FormInput,
    InputAction,
    Invocation,
    Operation,
    Result,
    Text,
    await_input,
    fail,
    finish,
)
from ._database import money
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
from ._sales import ORDER_STATUSES

__all__ = ["EXPORT_STEPS", "Reports"]

#: The export writes its file in this many chunks, reporting progress after each.
EXPORT_STEPS = 5
#: The pause after each chunk, so a person can watch the progress bar move.
EXPORT_PAUSE = 0.2

MONTH: Schema = {"type": "string", "pattern": r"^\d{4}-(0[1-9]|1[0-2])$"}

SALES_ROW: Schema = obj(
    {
        "month": {"type": "string"},
        "orders": {"type": "integer", "minimum": 0},
        "revenue": MONEY,
        "refunded": MONEY,
    },
    ("month", "orders", "revenue", "refunded"),
)
EXPORT: Schema = obj(
    {
        "uri": {"type": "string"},
        "rows": {"type": "integer", "minimum": 0},
        "bytes": {"type": "integer", "minimum": 0},
        "status": {"type": ["string", "null"]},
    },
    ("uri", "rows", "bytes", "status"),
)


class Reports(Application):
    """The handlers of the reports and admin groups."""

    def sales_summary(self, inv: Invocation) -> object:
        month = arguments(inv).get("month")
        with self.desk.read() as db:
            rows = db.execute(
                "SELECT substr(created_at, 1, 7) AS month, count(*) AS orders,"
                " sum(total_cents) AS revenue_cents, sum(refunded_cents) AS refunded_cents"
                " FROM orders WHERE status != 'cancelled'"
                " AND (? IS NULL OR substr(created_at, 1, 7) = ?)"
                " GROUP BY month ORDER BY month",
                (month, month),
            ).fetchall()
        months = [record(r, amounts=("revenue", "refunded")) for r in rows]
        totals = {
            "orders": sum(int(r["orders"]) for r in rows),
            "revenue": money(sum(int(r["revenue_cents"]) for r in rows)),
            "refunded": money(sum(int(r["refunded_cents"]) for r in rows)),
        }
        return reply({"months": months, **totals})

    def top_customers(self, inv: Invocation) -> object:
        limit = int(arguments(inv).get("limit", 5))
        with self.desk.read() as db:
            rows = db.execute(
                "SELECT c.id, c.name, count(o.id) AS orders,"
                " sum(o.total_cents - o.refunded_cents) AS spent_cents"
                " FROM customers c JOIN orders o ON o.customer_id = c.id"
                " WHERE o.status != 'cancelled' GROUP BY c.id ORDER BY spent_cents DESC, c.id"
                " LIMIT ?",
                (limit,),
            ).fetchall()
        return reply({"items": [record(r, amounts=("spent",)) for r in rows]})

    def ticket_backlog(self, inv: Invocation) -> object:
        with self.desk.read() as db:
            rows = db.execute(
                "SELECT status, priority, count(*) AS n FROM tickets GROUP BY status, priority"
            ).fetchall()
        by_status: dict[str, int] = {}
        by_priority: dict[str, int] = {}
        for row in rows:
            by_status[row["status"]] = by_status.get(row["status"], 0) + row["n"]
            if row["status"] != "closed":
                by_priority[row["priority"]] = by_priority.get(row["priority"], 0) + row["n"]
        unresolved = sum(n for status, n in by_status.items() if status != "closed")
        return reply(
            {"by_status": by_status, "open_by_priority": by_priority, "unresolved": unresolved}
        )

    def _export_rows(self, status: Any) -> list[list[str]]:
        with self.desk.read() as db:
            rows = db.execute(
                "SELECT o.id, c.name, c.email, o.status, o.total_cents, o.refunded_cents,"
                " o.created_at FROM orders o JOIN customers c ON c.id = o.customer_id"
                " WHERE ? IS NULL OR o.status = ? ORDER BY o.id",
                (status, status),
            ).fetchall()
        return [[str(r[0]), r[1], r[2], r[3], money(r[4]), money(r[5]), r[6]] for r in rows]

    async def export_orders(self, inv: Invocation) -> object:
        status = arguments(inv).get("status")
        await inv.report_progress(0, EXPORT_STEPS, "reading orders")
        rows = await anyio.to_thread.run_sync(self._export_rows, status)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["order", "customer", "email", "status", "total", "refunded", "created_at"])
        chunk = -(-len(rows) // EXPORT_STEPS) if rows else 0
        for step in range(1, EXPORT_STEPS + 1):
            writer.writerows(rows[(step - 1) * chunk : step * chunk])
            await anyio.sleep(EXPORT_PAUSE)
            written = min(step * chunk, len(rows))
            await inv.report_progress(step, EXPORT_STEPS, f"{written} of {len(rows)} orders")
        text = buffer.getvalue()
        uri = f"opgate-demo://exports/orders-{status or 'all'}.csv"
        summary = {"uri": uri, "rows": len(rows), "bytes": len(text.encode()), "status": status}
        return finish(
            Result(
                [
                    Text(f"exported {len(rows)} orders to {uri}"),
                    EmbeddedResource(uri, text=text, mime_type="text/csv"),
                ],
                structured=summary,
            )
        )

    # --- admin -------------------------------------------------------------------

    def audit_log(self, inv: Invocation) -> object:
        with self.desk.read() as db:
            return reply(
                page(db, inv, "SELECT count(*) FROM audit", "SELECT * FROM audit ORDER BY id DESC")
            )

    def settle_payment(self, inv: Invocation) -> object:
        payment_id = arguments(inv)["payment"]
        with self.desk.write() as db:
            payment = db.execute("SELECT * FROM payments WHERE id = ?", (payment_id,)).fetchone()
            if payment is None:
                return not_found("payment", payment_id)
            if payment["status"] != "pending":
                return fail(f"payment {payment_id} is {payment['status']}, not pending")
            db.execute("UPDATE payments SET status = 'settled' WHERE id = ?", (payment_id,))
            db.execute("UPDATE invoices SET status = 'paid' WHERE id = ?", (payment["invoice_id"],))
            db.execute(
                "UPDATE orders SET status = 'paid' WHERE status = 'placed'"
                " AND id = (SELECT order_id FROM invoices WHERE id = ?)",
                (payment["invoice_id"],),
            )
            audit(db, inv.name, f"payment {payment_id} settled")
            payment = db.execute("SELECT * FROM payments WHERE id = ?", (payment_id,)).fetchone()
        return reply(record(payment, amounts=("amount",)))

    def database_info(self, inv: Invocation) -> object:
        counts: dict[str, Any] = {}
        with self.desk.read() as db:
            for table in ("customers", "products", "orders", "invoices", "payments", "refunds"):
                counts[table] = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            counts["tickets"] = db.execute("SELECT count(*) FROM tickets").fetchone()[0]
            seeded = db.execute("SELECT value FROM meta WHERE key = 'seeded_at'").fetchone()
        return reply(
            {"path": str(self.desk.path), "seeded_at": seeded[0] if seeded else "", "rows": counts}
        )

    def reset_demo(self, inv: Invocation) -> object:
        resume = inv.resume
        if resume is None:
            return await_input(
                FormInput(
                    "Delete every change and restore the demo data?",
                    {
                        "type": "object",
                        "properties": {
                            "confirm": {"type": "boolean", "title": "Yes, reset the database"}
                        },
                        "required": ["confirm"],
                    },
                    {"reset": True},
                )
            )
        confirmed = as_object(resume.answers).get("confirm") is True
        if resume.action is not InputAction.ACCEPT or not confirmed:
            return fail("database not reset: not confirmed")
        self.desk.reset()  # a recovery resets again, which leaves the same state
        return reply({"reset": True, "path": str(self.desk.path)})

    def operations(self) -> list[Operation]:
        """The reports and admin operations."""
        count = {"type": "integer", "minimum": 0}
        return [
            operation(
                "reports.sales_summary",
                "Orders, revenue and refunds per month",
                self.sales_summary,
                examples=("{}", '{"month": "2025-02"}'),
                input_schema=obj({"month": MONTH}),
                output_schema=obj(
                    {
                        "months": {"type": "array", "items": SALES_ROW},
                        "orders": count,
                        "revenue": MONEY,
                        "refunded": MONEY,
                    },
                    ("months", "orders", "revenue", "refunded"),
                ),
            ),
            operation(
                "reports.top_customers",
                "The customers who spent the most, net of refunds",
                self.top_customers,
                input_schema=obj({"limit": {"type": "integer", "minimum": 1, "maximum": 20}}),
                output_schema=obj(
                    {
                        "items": {
                            "type": "array",
                            "items": obj(
                                {
                                    "id": ID,
                                    "name": {"type": "string"},
                                    "orders": count,
                                    "spent": MONEY,
                                },
                                ("id", "name", "orders", "spent"),
                            ),
                        }
                    },
                    ("items",),
                ),
            ),
            operation(
                "reports.ticket_backlog",
                "Unresolved tickets by status and priority",
                self.ticket_backlog,
                input_schema=obj({}),
                output_schema=obj(
                    {
                        "by_status": {"type": "object", "additionalProperties": count},
                        "open_by_priority": {"type": "object", "additionalProperties": count},
                        "unresolved": count,
                    },
                    ("by_status", "open_by_priority", "unresolved"),
                ),
            ),
            operation(
                "reports.export_orders",
                "Export orders as CSV, streaming progress while the file is written",
                self.export_orders,
                description="Returns the CSV as an embedded text/csv resource (about a second).",
                examples=("{}", '{"status": "delivered"}'),
                input_schema=obj({"status": {"enum": ORDER_STATUSES}}),
                output_schema=EXPORT,
            ),
            operation(
                "admin.audit_log",
                "Read the audit log of every change, newest first",
                self.audit_log,
                input_schema=obj(PAGE),
                output_schema=listing(
                    obj(
                        {
                            "id": ID,
                            "at": {"type": "string"},
                            "operation": {"type": "string"},
                            "detail": {"type": "string"},
                        },
                        ("id", "at", "operation", "detail"),
                    )
                ),
            ),
            operation(
                "admin.settle_payment",
                "Mark a pending payment as settled (what the provider's webhook does)",
                self.settle_payment,
                input_schema=by_id("payment"),
                output_schema=obj(
                    {
                        "id": ID,
                        "invoice_id": ID,
                        "checkout_id": {"type": ["string", "null"]},
                        "status": {"type": "string"},
                        "method": {"type": "string"},
                        "amount": MONEY,
                        "created_at": {"type": "string"},
                    },
                    ("id", "invoice_id", "status", "amount"),
                ),
            ),
            operation(
                "admin.database_info",
                "Where the demo database lives and how many rows it holds",
                self.database_info,
                input_schema=obj({}),
                output_schema=obj(
                    {
                        "path": {"type": "string"},
                        "seeded_at": {"type": "string"},
                        "rows": {"type": "object", "additionalProperties": count},
                    },
                    ("path", "seeded_at", "rows"),
                ),
            ),
            operation(
                "admin.reset_demo",
                "Restore the seeded demo data, after a confirmation form",
                self.reset_demo,
                input_schema=obj({}),
                output_schema=obj(
                    {"reset": {"type": "boolean"}, "path": {"type": "string"}}, ("reset", "path")
                ),
            ),
        ]
