"""The argument parser of ``opgate``: every option of ``serve`` and ``demo`` and its help.

The parser only reads the options; what they mean together (which one needs which) is
``_options``.
"""

from __future__ import annotations

import argparse
import os
import textwrap

from ._options import (
    DEFAULT_CONFIRM,
    DEFAULT_LEDGER_PREFIX,
    DEFAULT_NAME,
    HTTP_LIMIT_OPTIONS,
    LEDGER_PASSWORD_ENV,
    LEDGER_URL_ENV,
    SECRET_ENV,
    UPSTREAM_TIMEOUT_OPTIONS,
)

__all__ = ["DESCRIPTION", "build_parser"]

#: The first line of ``opgate --help``: the package docstring's opening sentence, plain.
DESCRIPTION = "The opgate command line: opgate serve and opgate demo."


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``opgate`` and its two commands, ``serve`` and ``demo``."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="opgate", description=DESCRIPTION, formatter_class=_Formatter
    )
    parser.add_argument("--version", action="version", version=f"opgate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        formatter_class=_Formatter,
        help="serve a registry over MCP (stdio, or streamable HTTP with --http)",
        description="Serve MODULE:ATTR (a Registry, a GatewayServer, or a factory of one), "
        "the operations of an OpenAPI document (--openapi SPEC --base-url URL), "
        "or the tools of existing MCP servers (--upstreams FILE).",
    )
    serve.add_argument("target", metavar="MODULE:ATTR", nargs="?")
    serve.add_argument(
        "--openapi",
        metavar="SPEC",
        help="serve the operations of this OpenAPI 3.0/3.1 file (JSON or YAML) instead",
    )
    serve.add_argument(
        "--upstreams",
        metavar="FILE",
        help="serve the tools of the MCP servers in this mcpServers file instead "
        "(see docs/gateway.md)",
    )
    for flag, text in UPSTREAM_TIMEOUT_OPTIONS:
        serve.add_argument(flag, type=float, default=None, metavar="SECONDS", help=text)
    serve.add_argument(
        "--lock",
        metavar="LOCKFILE",
        help="with --upstreams: pin each tool's definition to the digest accepted in this "
        "file, and withhold a tool whose definition changed or that is new since, with a "
        "warning naming it (written with every tool on first run, when missing; "
        "see docs/gateway.md)",
    )
    serve.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="NAME.TOOL",
        help="with --lock and --check: accept tool TOOL of upstream NAME as it is listed "
        "now (new or changed; named as in the report), write the lock file and exit "
        "(repeatable)",
    )
    serve.add_argument(
        "--accept-all",
        action="store_true",
        help="with --lock and --check: accept every tool as listed now, write the lock file "
        "and exit",
    )
    serve.add_argument("--base-url", metavar="URL", help="with --openapi: where calls go")
    serve.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=ENVVAR",
        help="with --openapi: send header NAME with the value of $ENVVAR (repeatable)",
    )
    serve.add_argument(
        "--confirm",
        metavar="METHODS",
        help="with --openapi: methods a person confirms before sending, or 'none' "
        f"(default {DEFAULT_CONFIRM})",
    )
    serve.add_argument(
        "--output-schemas",
        action="store_true",
        help="with --openapi: declare output schemas from the JSON success responses",
    )
    serve.add_argument(
        "--check",
        action="store_true",
        help="with --openapi or --upstreams: import the document (start the upstreams), "
        "print every skipped operation and warning with its reason, and exit without "
        "serving (status 0 if some operation can be served, 1 if none); with --lock it "
        "writes the lock file only to --accept",
    )
    serve.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp (HOST defaults to 127.0.0.1)",
    )
    serve.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME",
        help="also offer this operation as its own MCP tool (repeatable)",
    )
    serve.add_argument(
        "--ranking",
        choices=("rule", "relevance"),
        help="order search results by the substring rule or by relevance "
        "(default: the registry's own, which is the rule unless it chose otherwise)",
    )
    serve.add_argument(
        "--name", help=f"the server name clients see (default {DEFAULT_NAME}; for a Registry)"
    )
    serve.add_argument(
        "--token-verifier",
        metavar="MODULE:ATTR",
        help="HTTP bearer authentication: an mcp TokenVerifier (or a factory of one)",
    )
    serve.add_argument("--issuer-url", help="with --token-verifier: the authorization server's URL")
    serve.add_argument(
        "--resource-url", help="with --token-verifier: this server's public URL (RFC 9728)"
    )
    serve.add_argument(
        "--required-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="with --token-verifier: a scope every token must carry (repeatable)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="Host header values to accept (DNS-rebinding protection; repeatable)",
    )
    serve.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="Origin header values to accept (repeatable)",
    )
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="allow --http on a non-loopback address without --token-verifier "
        "(a proxy in front authenticates callers; not with --openapi or --upstreams, which "
        "need the verifier)",
    )
    for flag, kind, metavar, text in HTTP_LIMIT_OPTIONS:
        serve.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)
    serve.add_argument(
        "--secret-file",
        metavar="PATH",
        help=f"the shared secret (32+ bytes; one trailing newline ignored); default: ${SECRET_ENV}",
    )
    serve.add_argument(
        "--ledger",
        metavar="URL",
        help="a shared continuation ledger, redis://HOST:PORT/DB (needs the shared secret; "
        f"no password here: see --ledger-password-file); default: ${LEDGER_URL_ENV}",
    )
    serve.add_argument(
        "--ledger-password-file",
        metavar="PATH",
        help="with a ledger: Redis's password (one trailing newline ignored); "
        f"default: ${LEDGER_PASSWORD_ENV}",
    )
    serve.add_argument(
        "--ledger-prefix",
        metavar="NAME",
        help="with --ledger: the deployment's key prefix in Redis "
        f"(default {DEFAULT_LEDGER_PREFIX})",
    )
    serve.add_argument(
        "--ledger-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --ledger: how long a transition survives its replica (default 15)",
    )
    serve.add_argument(
        "--log-level",
        default=os.environ.get("OPGATE_LOG_LEVEL", "WARNING"),
        help="Python logging level of opgate's loggers on stderr (default WARNING)",
    )
    serve.add_argument(
        "--log-logger",
        action="append",
        default=[],
        metavar="NAME",
        help="also log this third-party logger (and its children) at --log-level "
        "(repeatable); the others stay at WARNING: at DEBUG some log message content",
    )
    demo = commands.add_parser(
        "demo",
        formatter_class=_Formatter,
        help="run the bundled support-desk demo over MCP",
        description="Run the support-desk demo: a server over stdio driven by the official "
        "MCP client, printing each step (or, with --serve, only the server).",
    )
    demo.add_argument("--serve", action="store_true", help="only serve the demo on stdio")
    demo.add_argument(
        "--database", metavar="PATH", help=_help_text(f"the SQLite file ({_demo_database()})")
    )
    return parser


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, never breaking a word (a path stays one piece to copy)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(
            " ".join(text.split()), width, break_long_words=False, break_on_hyphens=False
        )


def _help_text(text: str) -> str:
    """``text`` as an argparse help string (which formats ``%``)."""
    return text.replace("%", "%%")


def _demo_database() -> str:
    """Where ``opgate demo`` keeps its database when ``--database`` is not given."""
    from ..demo import DATABASE_ENV, resolve_database_path

    path = resolve_database_path().resolve()
    if os.environ.get(DATABASE_ENV):
        return f"default: {path}, from ${DATABASE_ENV}"
    return f"default: {path}; set ${DATABASE_ENV} for another"
