"""``build_registry``: the support desk's operations over one database, behind the demo policy."""

from __future__ import annotations

import os

from .. import Registry
from ._billing import Billing
from ._database import Desk, resolve_database_path
from ._policy import DeskPolicy
from ._reports import Reports
from ._sales import Sales
from ._support import Support

__all__ = ["APPLICATIONS", "build_registry"]

#: The desk's application modules, in the order their operations are registered.
APPLICATIONS = (Sales, Billing, Support, Reports)


def build_registry(database: str | os.PathLike[str] | None = None) -> Registry:
    """The support desk's registry over ``database``.

    The database file is ``database`` when given, else ``$OPGATE_DEMO_DB``, else
    ``$XDG_DATA_HOME/opgate/demo.sqlite3`` (``~/.local/share/opgate/demo.sqlite3``).
    It is created and seeded on first use and kept afterwards.
    """
    desk = Desk(resolve_database_path(database))
    desk.open()
    operations = [op for application in APPLICATIONS for op in application(desk).operations()]
    return Registry(operations, DeskPolicy())
