"""``build_registry``: the support desk's operations over one database, behind the demo policy."""

from __future__ import annotations

import os

from .. import Registry
from ._billing import billing_operations
from ._database import Desk, resolve_database_path
from ._policy import DeskPolicy
from ._reports import report_operations
from ._sales import sales_operations
from ._support import support_operations

__all__ = ["build_registry"]


def build_registry(database: str | os.PathLike[str] | None = None) -> Registry:
    """The support desk's registry over ``database``.

    The database file is ``database`` when given, else ``$OPGATE_DEMO_DB``, else
    ``$XDG_DATA_HOME/opgate/demo.sqlite3`` (``~/.local/share/opgate/demo.sqlite3``).
    It is created and seeded on first use and kept afterwards.
    """
    desk = Desk(resolve_database_path(database))
    desk.open()
    operations = [
        *sales_operations(desk),
        *billing_operations(desk),
        *support_operations(desk),
        *report_operations(desk),
    ]
    return Registry(operations, DeskPolicy())
