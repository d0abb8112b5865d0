"""The ``opgate`` command line: ``opgate serve`` and ``opgate demo``.

``opgate serve MODULE:ATTR`` serves a registry over stdio, or over streamable
HTTP with ``--http [HOST:]PORT`` (127.0.0.1 unless a host is given). ``ATTR`` is
an ``opgate.Registry``, an ``opgate.mcp.GatewayServer``, or a callable taking no
arguments that returns one of them. Over stdio nothing but MCP messages is
written to stdout; logs go to stderr.

Several replicas serve one catalog when they share a secret (``OPGATE_SECRET``, or
``--secret-file PATH``; never a command-line value, which other users of the
machine could read) and a continuation ledger (``--ledger redis://HOST:PORT/DB``, or
the URL in ``OPGATE_LEDGER_URL``; Redis's password in ``OPGATE_LEDGER_PASSWORD`` or
``--ledger-password-file PATH``, never on the command line); see docs/deployment.md.

``opgate serve --openapi SPEC --base-url URL [--header NAME=ENVVAR ...]
[--confirm METHODS]`` serves every operation of an OpenAPI 3.0/3.1 file instead
(``opgate.openapi``): each ``--header`` sends the value of environment variable
``ENVVAR`` as header ``NAME`` on every call (credentials never appear on the command
line); ``--confirm`` lists the methods a person must confirm (default
``POST,PUT,PATCH,DELETE``; ``none`` for none). Every MCP principal is allowed every
operation, so over ``--http`` it needs ``--token-verifier`` (every authenticated caller
may call every operation); give the upstream credentials only the rights the agents may
use. The import report (each skipped operation and warning with its reason) goes to
stderr before serving; ``--check`` prints all of it and exits without serving.

``opgate serve --upstreams FILE`` serves the tools of the MCP servers listed in FILE
(the ``mcpServers`` file MCP clients use; ``opgate.upstream``) instead: every
upstream starts at once, each tool is an operation ``NAME.TOOL``, and every MCP
principal is allowed every operation, as with ``--openapi`` (so over ``--http`` it
needs ``--token-verifier`` too). The start report goes to stderr; ``--check`` starts
the upstreams, prints all of it and exits. ``--lock LOCKFILE`` pins every tool's
definition (written on the first run) and withholds a tool that changed or is new since,
until ``--check --accept NAME.TOOL`` (or ``--accept-all``) accepts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._parser import build_parser
from ._serve import serve
from ._usage import UsageError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "serve":
            return serve(arguments)
        if arguments.command == "demo":
            from ..demo import run
            from ..demo import serve as serve_demo

            return serve_demo(arguments.database) if arguments.serve else run(arguments.database)
    except UsageError as exc:
        parser.exit(2, f"opgate {arguments.command}: {exc}\n")
    return 2  # pragma: no cover - argparse rejects unknown commands
