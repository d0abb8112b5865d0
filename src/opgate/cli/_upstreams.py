"""``opgate serve --upstreams FILE``: the tools of the MCP servers an ``mcpServers`` file
lists, served as one catalog (``opgate.upstream``), and ``--check``, which starts them,
prints the whole start report and serves nothing.

The upstreams' connections belong to the event loop that started them, so starting them,
building the gateway and serving run in one loop: ``serve_upstreams`` owns it and hands
the catalog's registry to the caller, which serves it there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ._escapes import visible
from ._openapi import ServePolicy, print_report
from ._usage import UsageError

__all__ = ["serve_upstreams"]


def serve_upstreams(
    arguments: argparse.Namespace, serve_registry: Callable[[Any], Awaitable[None]]
) -> int:
    """Start the upstreams of ``--upstreams FILE``, print their report (to stderr; every
    line of it to stdout with ``--check``), then await ``serve_registry`` with their
    catalog's registry, whose policy allows every principal every operation; returns the
    exit status once it returns, the upstreams closed.

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

    stream = sys.stdout if arguments.check else sys.stderr
    for warning in config.warnings:
        shown = "".join(map(visible, warning))
        print(f"opgate: warning: {arguments.upstreams}: {shown}", file=stream, flush=True)

    async def run() -> int:
        async with open_catalog(config) as catalog:
            print_report(catalog.report, stream, every=arguments.check)
            if arguments.check:
                if not catalog.operations:
                    print(f"opgate: no tool of {arguments.upstreams} can be served", file=stream)
                    return 1
                return 0
            await serve_registry(catalog.registry(ServePolicy()))
            return 0

    result: int = anyio.run(run)
    return result
