"""The support desk's SQLite database: where it lives, its schema, connections and money.

``Desk(path)`` owns one database file. ``Desk.open()`` creates the file, its folder and
the schema when they are missing and seeds the deterministic demo data exactly once
(a ``meta`` row records it), so a second run keeps everything the first one changed.

Connections are never shared: ``read()`` and ``write()`` each open a fresh connection
for one unit of work and close it afterwards, so handlers may run in any worker thread.
``write()`` wraps its work in ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on an
exception), which serializes writers across threads and processes. Every statement in
the demo is parameterized; no value is ever formatted into SQL text.

Money is stored as integer cents and shown as a decimal string with two places
(``"42.50"``), which is also how it travels in arguments and results: no float ever
touches an amount.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ._seed import seed

__all__ = [
    "DATABASE_ENV",
    "Desk",
    "cents",
    "default_database_path",
    "money",
    "now",
    "resolve_database_path",
]

#: Environment variable naming the database file (the ``database`` argument wins over it).
DATABASE_ENV = "OPGATE_DEMO_DB"

#: Seconds a connection waits for another writer before giving up (SQLite's busy timeout).
BUSY_TIMEOUT = 10.0

_MONEY = re.compile(r"\d{1,9}\.\d{2}")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS customers (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT NOT NULL UNIQUE,
    tier       TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS products (
    id          INTEGER PRIMARY KEY,
    sku         TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    stock       INTEGER NOT NULL CHECK (stock >= 0)
);
CREATE TABLE IF NOT EXISTS orders (
    id             INTEGER PRIMARY KEY,
    customer_id    INTEGER NOT NULL REFERENCES customers (id),
    status         TEXT NOT NULL CHECK (status IN
                       ('placed', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded')),
    total_cents    INTEGER NOT NULL CHECK (total_cents >= 0),
    refunded_cents INTEGER NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
    created_at     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS order_lines (
    order_id   INTEGER NOT NULL REFERENCES orders (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity   INTEGER NOT NULL CHECK (quantity > 0),
    unit_cents INTEGER NOT NULL CHECK (unit_cents >= 0),
    PRIMARY KEY (order_id, product_id)
);
CREATE TABLE IF NOT EXISTS invoices (
    id           INTEGER PRIMARY KEY,
    order_id     INTEGER NOT NULL UNIQUE REFERENCES orders (id),
    status       TEXT NOT NULL CHECK (status IN ('open', 'pending', 'paid', 'void')),
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    issued_at    TEXT NOT NULL,
    due_at       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS payments (
    id           INTEGER PRIMARY KEY,
    invoice_id   INTEGER NOT NULL REFERENCES invoices (id),
    checkout_id  TEXT UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'settled', 'failed')),
    method       TEXT NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    created_at   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id           INTEGER PRIMARY KEY,
    intent       TEXT NOT NULL UNIQUE,
    order_id     INTEGER NOT NULL REFERENCES orders (id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason       TEXT NOT NULL,
    note         TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tickets (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    order_id    INTEGER REFERENCES orders (id),
    subject     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'pending', 'escalated', 'closed')),
    priority    TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    assignee    TEXT,
    team        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ticket_comments (
    id         INTEGER PRIMARY KEY,
    ticket_id  INTEGER NOT NULL REFERENCES tickets (id),
    author     TEXT NOT NULL,
    body       TEXT NOT NULL,
    internal   INTEGER NOT NULL CHECK (internal IN (0, 1)),
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    id        INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    operation TEXT NOT NULL,
    detail    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_by_customer ON orders (customer_id);
CREATE INDEX IF NOT EXISTS tickets_by_status ON tickets (status);
CREATE INDEX IF NOT EXISTS payments_by_invoice ON payments (invoice_id);
"""


def default_database_path() -> Path:
    """``$XDG_DATA_HOME/opgate/demo.sqlite3`` (``~/.local/share`` when unset or relative)."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if data_home and Path(data_home).is_absolute() else None
    if base is None:
        base = Path.home() / ".local" / "share"
    return base / "opgate" / "demo.sqlite3"


def resolve_database_path(database: str | os.PathLike[str] | None = None) -> Path:
    """The database file to use: ``database``, else ``$OPGATE_DEMO_DB``, else the default."""
    if database is not None:
        return Path(database).expanduser()
    configured = os.environ.get(DATABASE_ENV, "")
    if configured:
        return Path(configured).expanduser()
    return default_database_path()


def now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def money(amount_cents: int) -> str:
    """Integer cents as a two-place decimal string: ``4250`` → ``"42.50"``."""
    sign = "-" if amount_cents < 0 else ""
    whole, part = divmod(abs(amount_cents), 100)
    return f"{sign}{whole}.{part:02d}"


def cents(amount: str) -> int:
    """A two-place decimal string as integer cents: ``"42.50"`` → ``4250``.

    Raises ``ValueError`` for anything else (the input schemas already enforce the
    same pattern, so a handler only sees valid amounts).
    """
    if not _MONEY.fullmatch(amount):
        raise ValueError("an amount is written like 42.50")
    whole, part = amount.split(".")
    return int(whole) * 100 + int(part)


class Desk:
    """The support desk's database file (see the module docstring for the contract)."""

    __slots__ = ("path",)

    path: Path

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def open(self) -> bool:
        """Create the schema if needed and seed it once; ``True`` when it seeded now."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.executescript(SCHEMA)
            connection.execute("BEGIN IMMEDIATE")
            try:
                seeded = connection.execute(
                    "SELECT value FROM meta WHERE key = ?", ("seeded_at",)
                ).fetchone()
                if seeded is None:
                    seed(connection)
                    connection.execute(
                        "INSERT INTO meta (key, value) VALUES (?, ?)", ("seeded_at", now())
                    )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return seeded is None

    def reset(self) -> None:
        """Delete every row and seed the demo data again (one transaction)."""
        with self.write() as connection:
            for table in _TABLES_CHILD_FIRST:
                connection.execute(f"DELETE FROM {table}")  # table names are constants
            seed(connection)
            connection.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("seeded_at", now()))

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection for reading (autocommit; closed on exit)."""
        with self._connect() as connection:
            yield connection

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection inside ``BEGIN IMMEDIATE``; committed on success, else rolled back."""
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA foreign_keys = ON")
            yield connection
        finally:
            connection.close()

    def __repr__(self) -> str:
        return f"Desk({str(self.path)!r})"


_TABLES_CHILD_FIRST = (
    "audit",
    "ticket_comments",
    "tickets",
    "refunds",
    "payments",
    "invoices",
    "order_lines",
    "orders",
    "products",
    "customers",
    "meta",
)
