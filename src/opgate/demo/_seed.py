"""The demo's seed data: the same customers, products, orders and tickets on every machine.

``seed(connection)`` inserts everything inside the caller's transaction. The data is
derived from fixed lists and a fixed-seed ``random.Random``, with timestamps counted
from a fixed date, so two fresh databases are identical row for row.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import UTC, datetime, timedelta

__all__ = ["SEED_CUSTOMERS", "SEED_ORDERS", "SEED_PRODUCTS", "SEED_TICKETS", "seed"]

#: The fixed seed of the generator that picks order lines and statuses.
RANDOM_SEED = 20250106

#: The date the seeded history starts from.
EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)

_CUSTOMERS = (
    ("Ada Lovelace", "ada@example.com", "platinum"),
    ("Grace Hopper", "grace@example.com", "gold"),
    ("Alan Turing", "alan@example.com", "standard"),
    ("Katherine Johnson", "katherine@example.com", "gold"),
    ("Edsger Dijkstra", "edsger@example.com", "standard"),
    ("Barbara Liskov", "barbara@example.com", "platinum"),
    ("Donald Knuth", "donald@example.com", "standard"),
    ("Margaret Hamilton", "margaret@example.com", "gold"),
    ("Dennis Ritchie", "dennis@example.com", "standard"),
    ("Frances Allen", "frances@example.com", "standard"),
    ("Ken Thompson", "ken@example.com", "gold"),
    ("Radia Perlman", "radia@example.com", "standard"),
)

_PRODUCTS = (
    ("KB-101", "Mechanical keyboard", 8900, 40),
    ("MS-202", "Wireless mouse", 2950, 120),
    ("MN-303", "27-inch monitor", 24900, 15),
    ("HD-404", "Noise-cancelling headset", 15900, 30),
    ("CB-505", "USB-C cable (2 m)", 1250, 500),
    ("DK-606", "Laptop dock", 18900, 22),
    ("WC-707", "HD webcam", 6900, 60),
    ("LS-808", "Laptop stand", 4500, 75),
    ("SD-909", "Portable SSD 1 TB", 11900, 45),
    ("MP-010", "Desk mat", 1900, 200),
)

#: How many orders the seed places; the statuses cycle through a fixed mix.
_ORDER_COUNT = 48
_STATUS_MIX = (
    "delivered",
    "delivered",
    "shipped",
    "paid",
    "delivered",
    "placed",
    "delivered",
    "cancelled",
    "delivered",
    "paid",
    "shipped",
    "delivered",
)

_TICKETS = (
    (1, "Keyboard arrived with a broken key", "high"),
    (2, "Where is my monitor?", "normal"),
    (3, "Invoice shows the wrong address", "low"),
    (4, "Headset left ear is silent", "high"),
    (5, "Please cancel my order", "normal"),
    (6, "Dock does not charge the laptop", "urgent"),
    (7, "Double charged for one order", "urgent"),
    (8, "Webcam drivers for Linux?", "low"),
    (9, "Need a copy of my invoice", "low"),
    (10, "SSD slower than advertised", "normal"),
    (11, "Desk mat colour differs from the photo", "low"),
    (12, "Cable stopped working after a week", "normal"),
    (2, "Change of delivery address", "normal"),
    (6, "Bulk order for our team", "normal"),
)
_TICKET_STATUSES = ("open", "open", "pending", "open", "closed", "open", "escalated")
_AGENTS = ("sam", "riley", "jo")

SEED_CUSTOMERS = len(_CUSTOMERS)
SEED_PRODUCTS = len(_PRODUCTS)
SEED_ORDERS = _ORDER_COUNT
SEED_TICKETS = len(_TICKETS)


def _at(days: float) -> str:
    return (EPOCH + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def seed(connection: sqlite3.Connection) -> None:
    """Insert the demo data (inside the caller's transaction)."""
    rng = random.Random(RANDOM_SEED)
    connection.executemany(
        "INSERT INTO customers (id, name, email, tier, created_at) VALUES (?, ?, ?, ?, ?)",
        [
            (i, name, email, tier, _at(-90 + i))
            for i, (name, email, tier) in enumerate(_CUSTOMERS, 1)
        ],
    )
    connection.executemany(
        "INSERT INTO products (id, sku, name, price_cents, stock) VALUES (?, ?, ?, ?, ?)",
        [(i, *product) for i, product in enumerate(_PRODUCTS, 1)],
    )
    for order_id in range(1, _ORDER_COUNT + 1):
        customer_id = (order_id * 5) % len(_CUSTOMERS) + 1
        status = _STATUS_MIX[(order_id - 1) % len(_STATUS_MIX)]
        placed = order_id * 1.5
        products = rng.sample(range(1, len(_PRODUCTS) + 1), rng.randint(1, 3))
        lines = [(order_id, p, rng.randint(1, 3), _PRODUCTS[p - 1][2]) for p in sorted(products)]
        total = sum(quantity * unit for _, _, quantity, unit in lines)
        connection.execute(
            "INSERT INTO orders (id, customer_id, status, total_cents, refunded_cents, created_at)"
            " VALUES (?, ?, ?, ?, 0, ?)",
            (order_id, customer_id, status, total, _at(placed)),
        )
        connection.executemany(
            "INSERT INTO order_lines (order_id, product_id, quantity, unit_cents)"
            " VALUES (?, ?, ?, ?)",
            lines,
        )
        invoice_status = {"placed": "open", "cancelled": "void"}.get(status, "paid")
        connection.execute(
            "INSERT INTO invoices (id, order_id, status, amount_cents, issued_at, due_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (order_id, order_id, invoice_status, total, _at(placed), _at(placed + 14)),
        )
        if invoice_status == "paid":
            connection.execute(
                "INSERT INTO payments (invoice_id, checkout_id, status, method, amount_cents,"
                " created_at) VALUES (?, NULL, 'settled', ?, ?, ?)",
                (order_id, rng.choice(("card", "bank transfer")), total, _at(placed + 1)),
            )
    for ticket_id, (customer_id, subject, priority) in enumerate(_TICKETS, 1):
        status = _TICKET_STATUSES[(ticket_id - 1) % len(_TICKET_STATUSES)]
        order = connection.execute(
            "SELECT id FROM orders WHERE customer_id = ? ORDER BY id LIMIT 1", (customer_id,)
        ).fetchone()
        opened = 40 + ticket_id * 2.25
        assignee = _AGENTS[ticket_id % len(_AGENTS)] if status != "open" else None
        team = "tier2" if status == "escalated" else None
        connection.execute(
            "INSERT INTO tickets (id, customer_id, order_id, subject, status, priority, assignee,"
            " team, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ticket_id,
                customer_id,
                order[0] if order is not None else None,
                subject,
                status,
                priority,
                assignee,
                team,
                _at(opened),
                _at(opened + 1),
            ),
        )
        connection.execute(
            "INSERT INTO ticket_comments (ticket_id, author, body, internal, created_at)"
            " VALUES (?, ?, ?, 0, ?)",
            (ticket_id, _CUSTOMERS[customer_id - 1][0], subject + ".", _at(opened)),
        )
