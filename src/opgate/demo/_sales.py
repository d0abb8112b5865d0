"""Customers, products, orders and invoices: the desk's plain request/response operations.

Every handler here is synchronous (the registry runs it in a worker thread), opens its
own connection through ``Desk.read``/``Desk.write``, uses parameterized SQL only, and
answers a missing record with ``not_found`` (``"<thing> <id> not found"``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .. import Invocation, Operation, fail
from ._database import cents, money
from ._kit import (
    ID,
    MONEY,
    NULLABLE_ID,
    PAGE,
    Application,
    Schema,
    arguments,
    audit,
    by_id,
    like,
    listing,
    not_found,
    obj,
    operation,
    page,
    record,
    reply,
    string,
)

__all__ = ["CUSTOMER", "ORDER", "Sales"]

TIERS = ["standard", "gold", "platinum"]
ORDER_STATUSES = ["placed", "paid", "shipped", "delivered", "cancelled", "refunded"]
INVOICE_STATUSES = ["open", "pending", "paid", "void"]

CUSTOMER: Schema = obj(
    {
        "id": ID,
        "name": {"type": "string"},
        "email": {"type": "string"},
        "tier": {"enum": TIERS},
        "created_at": {"type": "string"},
    },
    ("id", "name", "email", "tier", "created_at"),
)
CUSTOMER_DETAIL: Schema = obj(
    {
        **CUSTOMER["properties"],
        "orders": {"type": "integer", "minimum": 0},
        "open_tickets": {"type": "integer", "minimum": 0},
        "lifetime_value": MONEY,
    },
    (*CUSTOMER["required"], "orders", "open_tickets", "lifetime_value"),
)
PRODUCT: Schema = obj(
    {
        "id": ID,
        "sku": {"type": "string"},
        "name": {"type": "string"},
        "price": MONEY,
        "stock": {"type": "integer", "minimum": 0},
    },
    ("id", "sku", "name", "price", "stock"),
)
ORDER: Schema = obj(
    {
        "id": ID,
        "customer_id": ID,
        "customer": {"type": "string"},
        "status": {"enum": ORDER_STATUSES},
        "total": MONEY,
        "refunded": MONEY,
        "created_at": {"type": "string"},
    },
    ("id", "customer_id", "customer", "status", "total", "refunded", "created_at"),
)
LINE: Schema = obj(
    {
        "product_id": ID,
        "sku": {"type": "string"},
        "name": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 1},
        "unit": MONEY,
    },
    ("product_id", "sku", "name", "quantity", "unit"),
)
INVOICE: Schema = obj(
    {
        "id": ID,
        "order_id": ID,
        "customer": {"type": "string"},
        "status": {"enum": INVOICE_STATUSES},
        "amount": MONEY,
        "issued_at": {"type": "string"},
        "due_at": {"type": "string"},
    },
    ("id", "order_id", "customer", "status", "amount", "issued_at", "due_at"),
)
ORDER_DETAIL: Schema = obj(
    {
        **ORDER["properties"],
        "lines": {"type": "array", "items": LINE},
        "invoice_id": NULLABLE_ID,
        "invoice_status": {"type": ["string", "null"]},
    },
    (*ORDER["required"], "lines", "invoice_id", "invoice_status"),
)
PAYMENT_BRIEF: Schema = obj(
    {
        "id": ID,
        "status": {"type": "string"},
        "method": {"type": "string"},
        "amount": MONEY,
        "created_at": {"type": "string"},
    },
    ("id", "status", "method", "amount", "created_at"),
)
INVOICE_DETAIL: Schema = obj(
    {
        **INVOICE["properties"],
        "balance": MONEY,
        "payments": {"type": "array", "items": PAYMENT_BRIEF},
    },
    (*INVOICE["required"], "balance", "payments"),
)

_ORDER_SELECT = (
    "SELECT o.id, o.customer_id, c.name AS customer, o.status, o.total_cents,"
    " o.refunded_cents, o.created_at FROM orders o JOIN customers c ON c.id = o.customer_id"
)
_INVOICE_SELECT = (
    "SELECT i.id, i.order_id, c.name AS customer, i.status, i.amount_cents, i.issued_at,"
    " i.due_at FROM invoices i JOIN orders o ON o.id = i.order_id"
    " JOIN customers c ON c.id = o.customer_id"
)


def _order(row: sqlite3.Row) -> dict[str, Any]:
    return record(row, amounts=("total", "refunded"))


def _product(row: sqlite3.Row) -> dict[str, Any]:
    return record(row, amounts=("price",))


def _invoice(row: sqlite3.Row) -> dict[str, Any]:
    return record(row, amounts=("amount",))


class Sales(Application):
    """The handlers of the customers, products, orders and invoices groups."""

    # --- customers ---------------------------------------------------------------

    def list_customers(self, inv: Invocation) -> object:
        args = arguments(inv)
        where = "WHERE (? = '' OR name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\')"
        where += " AND (? IS NULL OR tier = ?)"
        query = str(args.get("query", ""))
        tier = args.get("tier")
        params = (query, like(query), like(query), tier, tier)
        with self.desk.read() as db:
            return reply(
                page(
                    db,
                    inv,
                    f"SELECT count(*) FROM customers {where}",
                    f"SELECT * FROM customers {where} ORDER BY id",
                    params,
                )
            )

    def _customer_detail(self, db: sqlite3.Connection, customer_id: int) -> dict[str, Any] | None:
        row = db.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
        if row is None:
            return None
        stats = db.execute(
            "SELECT count(*), coalesce(sum(total_cents - refunded_cents), 0) FROM orders"
            " WHERE customer_id = ? AND status != 'cancelled'",
            (customer_id,),
        ).fetchone()
        tickets = db.execute(
            "SELECT count(*) FROM tickets WHERE customer_id = ? AND status != 'closed'",
            (customer_id,),
        ).fetchone()[0]
        return {
            **record(row),
            "orders": stats[0],
            "open_tickets": tickets,
            "lifetime_value": money(stats[1]),
        }

    def get_customer(self, inv: Invocation) -> object:
        customer_id = arguments(inv)["customer"]
        with self.desk.read() as db:
            detail = self._customer_detail(db, customer_id)
        if detail is None:
            return not_found("customer", customer_id)
        return reply(detail)

    def create_customer(self, inv: Invocation) -> object:
        args = arguments(inv)
        email = str(args["email"]).strip().lower()
        with self.desk.write() as db:
            taken = db.execute("SELECT id FROM customers WHERE email = ?", (email,)).fetchone()
            if taken is not None:
                return fail(f"a customer with that email already exists (customer {taken[0]})")
            cursor = db.execute(
                "INSERT INTO customers (name, email, tier, created_at)"
                " VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                (args["name"], email, args.get("tier", "standard")),
            )
            customer_id = int(cursor.lastrowid or 0)
            audit(db, inv.name, f"customer {customer_id} created")
            row = db.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
        return reply(record(row))

    def update_customer(self, inv: Invocation) -> object:
        args = arguments(inv)
        customer_id = args["customer"]
        changes = {key: args[key] for key in ("name", "email", "tier") if key in args}
        if "email" in changes:
            changes["email"] = str(changes["email"]).strip().lower()
        with self.desk.write() as db:
            row = db.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
            if row is None:
                return not_found("customer", customer_id)
            if "email" in changes:
                taken = db.execute(
                    "SELECT id FROM customers WHERE email = ? AND id != ?",
                    (changes["email"], customer_id),
                ).fetchone()
                if taken is not None:
                    return fail(f"that email belongs to customer {taken[0]}")
            db.execute(
                "UPDATE customers SET name = ?, email = ?, tier = ? WHERE id = ?",
                (
                    changes.get("name", row["name"]),
                    changes.get("email", row["email"]),
                    changes.get("tier", row["tier"]),
                    customer_id,
                ),
            )
            audit(db, inv.name, f"customer {customer_id}: {', '.join(sorted(changes))} changed")
            row = db.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
        return reply(record(row))

    def customer_orders(self, inv: Invocation) -> object:
        customer_id = arguments(inv)["customer"]
        with self.desk.read() as db:
            if (
                db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone()
                is None
            ):
                return not_found("customer", customer_id)
            count = "SELECT count(*) FROM orders WHERE customer_id = ?"
            select = f"{_ORDER_SELECT} WHERE o.customer_id = ? ORDER BY o.id DESC"
            return reply(page(db, inv, count, select, (customer_id,), item=_order))

    # --- products ----------------------------------------------------------------

    def list_products(self, inv: Invocation) -> object:
        args = arguments(inv)
        query = str(args.get("query", ""))
        in_stock = 1 if args.get("in_stock") is True else 0
        where = "WHERE (? = '' OR name LIKE ? ESCAPE '\\' OR sku LIKE ? ESCAPE '\\')"
        where += " AND (? = 0 OR stock > 0)"
        params = (query, like(query), like(query), in_stock)
        count = f"SELECT count(*) FROM products {where}"
        select = f"SELECT * FROM products {where} ORDER BY id"
        with self.desk.read() as db:
            return reply(page(db, inv, count, select, params, item=_product))

    def get_product(self, inv: Invocation) -> object:
        product_id = arguments(inv)["product"]
        with self.desk.read() as db:
            row = db.execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchone()
        if row is None:
            return not_found("product", product_id)
        return reply(_product(row))

    def restock_product(self, inv: Invocation) -> object:
        args = arguments(inv)
        product_id, quantity = args["product"], args["quantity"]
        with self.desk.write() as db:
            cursor = db.execute(
                "UPDATE products SET stock = stock + ? WHERE id = ?", (quantity, product_id)
            )
            if cursor.rowcount == 0:
                return not_found("product", product_id)
            audit(db, inv.name, f"product {product_id}: +{quantity} in stock")
            row = db.execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchone()
        return reply(_product(row))

    def set_price(self, inv: Invocation) -> object:
        args = arguments(inv)
        product_id, price = args["product"], cents(str(args["price"]))
        with self.desk.write() as db:
            cursor = db.execute(
                "UPDATE products SET price_cents = ? WHERE id = ?", (price, product_id)
            )
            if cursor.rowcount == 0:
                return not_found("product", product_id)
            audit(db, inv.name, f"product {product_id}: price {money(price)}")
            row = db.execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchone()
        return reply(_product(row))

    # --- orders ------------------------------------------------------------------

    def list_orders(self, inv: Invocation) -> object:
        args = arguments(inv)
        status, customer = args.get("status"), args.get("customer")
        where = "WHERE (? IS NULL OR o.status = ?) AND (? IS NULL OR o.customer_id = ?)"
        params = (status, status, customer, customer)
        count = f"SELECT count(*) FROM orders o {where}"
        select = f"{_ORDER_SELECT} {where} ORDER BY o.id"
        with self.desk.read() as db:
            return reply(page(db, inv, count, select, params, item=_order))

    def _order_detail(self, db: sqlite3.Connection, order_id: int) -> dict[str, Any] | None:
        row = db.execute(f"{_ORDER_SELECT} WHERE o.id = ?", (order_id,)).fetchone()
        if row is None:
            return None
        lines = db.execute(
            "SELECT l.product_id, p.sku, p.name, l.quantity, l.unit_cents FROM order_lines l"
            " JOIN products p ON p.id = l.product_id WHERE l.order_id = ? ORDER BY l.product_id",
            (order_id,),
        ).fetchall()
        invoice = db.execute(
            "SELECT id, status FROM invoices WHERE order_id = ?", (order_id,)
        ).fetchone()
        return {
            **_order(row),
            "lines": [record(line, amounts=("unit",)) for line in lines],
            "invoice_id": invoice["id"] if invoice is not None else None,
            "invoice_status": invoice["status"] if invoice is not None else None,
        }

    def get_order(self, inv: Invocation) -> object:
        order_id = arguments(inv)["order"]
        with self.desk.read() as db:
            detail = self._order_detail(db, order_id)
        if detail is None:
            return not_found("order", order_id)
        return reply(detail)

    def create_order(self, inv: Invocation) -> object:
        args = arguments(inv)
        customer_id = args["customer"]
        wanted: dict[int, int] = {}
        for line in args["lines"]:
            wanted[line["product"]] = wanted.get(line["product"], 0) + line["quantity"]
        with self.desk.write() as db:
            if (
                db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone()
                is None
            ):
                return not_found("customer", customer_id)
            priced: list[tuple[int, int, int]] = []
            for product_id, quantity in sorted(wanted.items()):
                product = db.execute(
                    "SELECT price_cents, stock, name FROM products WHERE id = ?", (product_id,)
                ).fetchone()
                if product is None:
                    return not_found("product", product_id)
                if product["stock"] < quantity:
                    return fail(f"only {product['stock']} of {product['name']} in stock")
                priced.append((product_id, quantity, product["price_cents"]))
            total = sum(quantity * price for _, quantity, price in priced)
            cursor = db.execute(
                "INSERT INTO orders (customer_id, status, total_cents, refunded_cents, created_at)"
                " VALUES (?, 'placed', ?, 0, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                (customer_id, total),
            )
            order_id = int(cursor.lastrowid or 0)
            for product_id, quantity, price in priced:
                db.execute(
                    "INSERT INTO order_lines (order_id, product_id, quantity, unit_cents)"
                    " VALUES (?, ?, ?, ?)",
                    (order_id, product_id, quantity, price),
                )
                db.execute(
                    "UPDATE products SET stock = stock - ? WHERE id = ?", (quantity, product_id)
                )
            db.execute(
                "INSERT INTO invoices (order_id, status, amount_cents, issued_at, due_at)"
                " VALUES (?, 'open', ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'),"
                " strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '+14 days'))",
                (order_id, total),
            )
            audit(db, inv.name, f"order {order_id} placed for customer {customer_id}")
            detail = self._order_detail(db, order_id)
        assert detail is not None
        return reply(detail)

    def cancel_order(self, inv: Invocation) -> object:
        order_id = arguments(inv)["order"]
        with self.desk.write() as db:
            row = db.execute("SELECT status FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                return not_found("order", order_id)
            if row["status"] != "placed":
                return fail(
                    f"order {order_id} is {row['status']}: only placed (unpaid) orders can be"
                    " cancelled; paid orders are refunded with refunds.request"
                )
            db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (order_id,))
            db.execute("UPDATE invoices SET status = 'void' WHERE order_id = ?", (order_id,))
            db.execute(
                "UPDATE products SET stock = stock + (SELECT quantity FROM order_lines"
                " WHERE order_id = ? AND product_id = products.id)"
                " WHERE id IN (SELECT product_id FROM order_lines WHERE order_id = ?)",
                (order_id, order_id),
            )
            audit(db, inv.name, f"order {order_id} cancelled")
            detail = self._order_detail(db, order_id)
        assert detail is not None
        return reply(detail)

    def ship_order(self, inv: Invocation) -> object:
        args = arguments(inv)
        order_id = args["order"]
        with self.desk.write() as db:
            row = db.execute("SELECT status FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                return not_found("order", order_id)
            if row["status"] != "paid":
                return fail(f"order {order_id} is {row['status']}: only paid orders can ship")
            db.execute("UPDATE orders SET status = 'shipped' WHERE id = ?", (order_id,))
            audit(db, inv.name, f"order {order_id} shipped with {args['carrier']}")
            detail = self._order_detail(db, order_id)
        assert detail is not None
        return reply(detail)

    # --- invoices ----------------------------------------------------------------

    def list_invoices(self, inv: Invocation) -> object:
        args = arguments(inv)
        status, customer = args.get("status"), args.get("customer")
        where = "WHERE (? IS NULL OR i.status = ?) AND (? IS NULL OR o.customer_id = ?)"
        params = (status, status, customer, customer)
        count = f"SELECT count(*) FROM invoices i JOIN orders o ON o.id = i.order_id {where}"
        select = f"{_INVOICE_SELECT} {where} ORDER BY i.id"
        with self.desk.read() as db:
            return reply(page(db, inv, count, select, params, item=_invoice))

    def get_invoice(self, inv: Invocation) -> object:
        invoice_id = arguments(inv)["invoice"]
        with self.desk.read() as db:
            row = db.execute(f"{_INVOICE_SELECT} WHERE i.id = ?", (invoice_id,)).fetchone()
            if row is None:
                return not_found("invoice", invoice_id)
            payments = db.execute(
                "SELECT id, status, method, amount_cents, created_at FROM payments"
                " WHERE invoice_id = ? ORDER BY id",
                (invoice_id,),
            ).fetchall()
        settled = sum(p["amount_cents"] for p in payments if p["status"] == "settled")
        balance = 0 if row["status"] == "void" else max(row["amount_cents"] - settled, 0)
        return reply(
            {
                **_invoice(row),
                "balance": money(balance),
                "payments": [record(p, amounts=("amount",)) for p in payments],
            }
        )

    def send_invoice(self, inv: Invocation) -> object:
        args = arguments(inv)
        invoice_id = args["invoice"]
        with self.desk.write() as db:
            row = db.execute(
                "SELECT i.status, c.email FROM invoices i JOIN orders o ON o.id = i.order_id"
                " JOIN customers c ON c.id = o.customer_id WHERE i.id = ?",
                (invoice_id,),
            ).fetchone()
            if row is None:
                return not_found("invoice", invoice_id)
            if row["status"] == "void":
                return fail(f"invoice {invoice_id} is void")
            recipient = str(args.get("email", row["email"]))
            audit(db, inv.name, f"invoice {invoice_id} sent to {recipient}")
        return reply({"invoice": invoice_id, "sent_to": recipient, "status": row["status"]})

    def void_invoice(self, inv: Invocation) -> object:
        invoice_id = arguments(inv)["invoice"]
        with self.desk.write() as db:
            row = db.execute("SELECT status FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
            if row is None:
                return not_found("invoice", invoice_id)
            if row["status"] != "open":
                return fail(
                    f"invoice {invoice_id} is {row['status']}: only open invoices can be voided"
                )
            db.execute("UPDATE invoices SET status = 'void' WHERE id = ?", (invoice_id,))
            audit(db, inv.name, f"invoice {invoice_id} voided")
            row = db.execute(f"{_INVOICE_SELECT} WHERE i.id = ?", (invoice_id,)).fetchone()
        return reply(_invoice(row))

    def operations(self) -> list[Operation]:
        """The customers, products, orders and invoices operations."""
        return [
            operation(
                "customers.list",
                "List customers, optionally filtered by name/email text or tier",
                self.list_customers,
                description=(
                    "Pages with limit/offset; 'query' matches a substring of name or email."
                ),
                examples=('{"query": "ada"}', '{"tier": "gold", "limit": 5}'),
                input_schema=obj(
                    {"query": string(100, min_length=0), "tier": {"enum": TIERS}, **PAGE}
                ),
                output_schema=listing(CUSTOMER),
            ),
            operation(
                "customers.get",
                "Show one customer with order count, open tickets and lifetime value",
                self.get_customer,
                examples=('{"customer": 1}',),
                input_schema=by_id("customer"),
                output_schema=CUSTOMER_DETAIL,
            ),
            operation(
                "customers.create",
                "Create a customer account",
                self.create_customer,
                description=(
                    "Emails are unique (compared in lower case); the tier defaults to standard"
                ),
                examples=('{"name": "Hedy Lamarr", "email": "hedy@example.com"}',),
                input_schema=obj(
                    {
                        "name": string(100),
                        "email": string(254, format="email"),
                        "tier": {"enum": TIERS, "default": "standard"},
                    },
                    ("name", "email"),
                ),
                output_schema=CUSTOMER,
            ),
            operation(
                "customers.update",
                "Change a customer's name, email or tier",
                self.update_customer,
                examples=('{"customer": 3, "tier": "gold"}',),
                input_schema=obj(
                    {
                        "customer": ID,
                        "name": string(100),
                        "email": string(254, format="email"),
                        "tier": {"enum": TIERS},
                    },
                    ("customer",),
                    minProperties=2,
                ),
                output_schema=CUSTOMER,
            ),
            operation(
                "customers.orders",
                "List one customer's orders, newest first",
                self.customer_orders,
                examples=('{"customer": 1}',),
                input_schema=obj({"customer": ID, **PAGE}, ("customer",)),
                output_schema=listing(ORDER),
            ),
            operation(
                "products.list",
                "List products in the catalogue, optionally only those in stock",
                self.list_products,
                examples=('{"query": "usb"}', '{"in_stock": true}'),
                input_schema=obj(
                    {"query": string(100, min_length=0), "in_stock": {"type": "boolean"}, **PAGE}
                ),
                output_schema=listing(PRODUCT),
            ),
            operation(
                "products.get",
                "Show one product with price and stock",
                self.get_product,
                examples=('{"product": 3}',),
                input_schema=by_id("product"),
                output_schema=PRODUCT,
            ),
            operation(
                "products.restock",
                "Add received units to a product's stock",
                self.restock_product,
                examples=('{"product": 3, "quantity": 10}',),
                input_schema=obj(
                    {
                        "product": ID,
                        "quantity": {"type": "integer", "minimum": 1, "maximum": 10_000},
                    },
                    ("product", "quantity"),
                ),
                output_schema=PRODUCT,
            ),
            operation(
                "products.set_price",
                "Change a product's price (existing orders keep theirs)",
                self.set_price,
                examples=('{"product": 2, "price": "27.50"}',),
                input_schema=obj({"product": ID, "price": MONEY}, ("product", "price")),
                output_schema=PRODUCT,
            ),
            operation(
                "orders.list",
                "List orders, optionally by status or customer",
                self.list_orders,
                examples=('{"status": "delivered"}', '{"customer": 2}'),
                input_schema=obj({"status": {"enum": ORDER_STATUSES}, "customer": ID, **PAGE}),
                output_schema=listing(ORDER),
            ),
            operation(
                "orders.get",
                "Show one order with its lines and invoice",
                self.get_order,
                examples=('{"order": 7}',),
                input_schema=by_id("order"),
                output_schema=ORDER_DETAIL,
            ),
            operation(
                "orders.create",
                "Place an order for a customer; reserves stock and issues an open invoice",
                self.create_order,
                examples=('{"customer": 1, "lines": [{"product": 2, "quantity": 1}]}',),
                input_schema=obj(
                    {
                        "customer": ID,
                        "lines": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 10,
                            "items": obj(
                                {
                                    "product": ID,
                                    "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
                                },
                                ("product", "quantity"),
                            ),
                        },
                    },
                    ("customer", "lines"),
                ),
                output_schema=ORDER_DETAIL,
            ),
            operation(
                "orders.cancel",
                "Cancel an unpaid order: voids its invoice and returns the stock",
                self.cancel_order,
                examples=('{"order": 6}',),
                input_schema=by_id("order"),
                output_schema=ORDER_DETAIL,
            ),
            operation(
                "orders.ship",
                "Mark a paid order as shipped with a carrier",
                self.ship_order,
                examples=('{"order": 4, "carrier": "dhl"}',),
                input_schema=obj(
                    {"order": ID, "carrier": {"enum": ["dhl", "ups", "post"]}}, ("order", "carrier")
                ),
                output_schema=ORDER_DETAIL,
            ),
            operation(
                "invoices.list",
                "List invoices, optionally by status or customer",
                self.list_invoices,
                examples=('{"status": "open"}',),
                input_schema=obj({"status": {"enum": INVOICE_STATUSES}, "customer": ID, **PAGE}),
                output_schema=listing(INVOICE),
            ),
            operation(
                "invoices.get",
                "Show one invoice with its payments and open balance",
                self.get_invoice,
                examples=('{"invoice": 6}',),
                input_schema=by_id("invoice"),
                output_schema=INVOICE_DETAIL,
            ),
            operation(
                "invoices.send",
                "Email an invoice to the customer (or another address)",
                self.send_invoice,
                description="The dispatch is written to the audit log; no mail leaves the machine.",
                examples=('{"invoice": 6}',),
                input_schema=obj(
                    {"invoice": ID, "email": string(254, format="email")}, ("invoice",)
                ),
                output_schema=obj(
                    {
                        "invoice": ID,
                        "sent_to": {"type": "string"},
                        "status": {"enum": INVOICE_STATUSES},
                    },
                    ("invoice", "sent_to", "status"),
                ),
            ),
            operation(
                "invoices.void",
                "Void an open invoice",
                self.void_invoice,
                examples=('{"invoice": 6}',),
                input_schema=by_id("invoice"),
                output_schema=INVOICE,
            ),
        ]
