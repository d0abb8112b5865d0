"""``opgate serve --upstreams FILE``: the tools of the MCP servers an ``mcpServers`` file
lists, served as one catalog (``opgate.upstream``), and ``--check``, which starts them,
prints the whole start report and serves nothing.

The upstreams' connections belong to the event loop that started them, so starting them,
building the gateway and serving run in one loop: ``serve_upstreams`` owns it and hands
the catalog's registry and the catalog to the caller, which serves it there and makes
the gateway follow the catalog's changes (``Catalog.follow``: restarted upstreams that
list other tools, late upstreams joining, ``list_changed``), each said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ._openapi import ServePolicy, print_report
from ._usage import UsageError

__all__ = ["follow_catalog", "serve_upstreams"]


def follow_catalog(catalog: Any, gateway: Any, stream: Any = None) -> None:
    """Make ``gateway`` serve each change of ``catalog`` (``Catalog.follow``), and say
    each one applied on ``stream`` (default stderr); a change the swap refuses is said
    by the ``opgate.upstream`` logger, and the gateway keeps serving what it served."""

    def said(change: Any) -> None:
        print(f"opgate: {change.summary()}", file=stream or sys.stderr, flush=True)

    catalog.follow(gateway)
    catalog.on_change(said)


def serve_upstreams(
    arguments: argparse.Namespace, serve_registry: Callable[[Any, Any], Awaitable[None]]
) -> int:
    """Start the upstreams of ``--upstreams FILE``, print their report (to stderr; every
    line of it to stdout with ``--check``), then await ``serve_registry`` with their
    catalog's registry, whose policy allows every principal every operation, and the
    catalog; returns the exit status once it returns, the upstreams closed.

    With ``--check`` nothing is served: 0 when some operation can be served, 1 when none
    can. Another source besides the file, or a file that is not a usable configuration,
    is a ``UsageError``.
    """
    from pathlib import Path

    import anyio

    from ..upstream import ConfigError, load_config, open_catalog

    if arguments.target or arguments.openapi:
        raise UsageError("give one of MODULE:ATTR, --openapi SPEC or --upstreams FILE")
    try:
        config = load_config(Path(arguments.upstreams))
    except ConfigError as exc:
        raise UsageError(f"{arguments.upstreams}: {exc}") from None

    async def run() -> int:
        async with open_catalog(config) as catalog:
            stream = sys.stdout if arguments.check else sys.stderr
            print_report(catalog.report, stream, every=arguments.check)
            if arguments.check:
                if not catalog.operations:
                    print(f"opgate: no tool of {arguments.upstreams} can be served", file=stream)
                    return 1
                return 0
            await serve_registry(catalog.registry(ServePolicy()), catalog)
            return 0

    result: int = anyio.run(run)
    return result
