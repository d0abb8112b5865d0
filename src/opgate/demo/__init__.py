"""The bundled demo: a small support desk on SQLite, served over MCP.

``build_registry(database=None)`` builds the desk's registry: 39 operations in the
groups customers, products, orders, invoices, payments, refunds, tickets, reports
and admin, over a real SQLite file (``$OPGATE_DEMO_DB``, else
``$XDG_DATA_HOME/opgate/demo.sqlite3``) created and seeded on first use. Its policy
lets every caller use everything except ``admin.*``, which needs the ``desk.admin``
scope. ``opgate serve opgate.demo:build_registry`` serves it like any registry.

``opgate demo`` (``run``) starts the server as a subprocess over stdio and drives it
with the official MCP client, printing each step; ``opgate demo --serve``
(``serve``) runs the server alone on stdio, for an MCP client to launch.
"""

from __future__ import annotations

import os
import sys

from ._app import build_registry
from ._database import DATABASE_ENV, default_database_path, resolve_database_path
from ._policy import ADMIN_SCOPE, DeskPolicy

__all__ = [
    "ADMIN_SCOPE",
    "DATABASE_ENV",
    "INTERRUPTED",
    "DeskPolicy",
    "build_registry",
    "default_database_path",
    "resolve_database_path",
    "run",
    "serve",
]

#: The server name MCP clients see for the demo.
SERVER_NAME = "opgate-demo"

#: The exit status after Ctrl-C: 128 + SIGINT, what shells report for a command it ended.
INTERRUPTED = 130


def serve(database: str | os.PathLike[str] | None = None) -> int:
    """Serve the demo registry on stdio until the client disconnects; returns 0."""
    import anyio

    from ..mcp import GatewayServer

    server = GatewayServer(build_registry(database), name=SERVER_NAME)
    anyio.run(server.run_stdio)
    return 0


def run(database: str | os.PathLike[str] | None = None, *, interactive: bool | None = None) -> int:
    """Run the demo: a server subprocess driven by the official MCP client.

    ``interactive`` defaults to whether stdin and stdout are both terminals; when
    it is false a script answers the prompts. Returns the process exit status:
    0 when every step behaved as expected, 1 otherwise, and ``INTERRUPTED`` (130)
    after Ctrl-C, which ends the server and says so in one line on stderr.
    """
    import anyio

    from ._driver import drive

    path = resolve_database_path(database).resolve()
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        return anyio.run(lambda: drive(path, interactive=interactive))
    except KeyboardInterrupt:
        # The first Ctrl-C cancels the run, which ends the server before this is reached.
        sys.stdout.flush()
        sys.stderr.write(("\n" if interactive else "") + "opgate demo: interrupted\n")
        return INTERRUPTED
