"""The ``opgate`` command line: ``opgate demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="opgate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the bundled support-desk demo over MCP")
    demo.add_argument("--serve", action="store_true", help="only serve the demo on stdio")
    demo.add_argument("--database", metavar="PATH", help="the SQLite file (default: data dir)")
    arguments = parser.parse_args(argv)
    if arguments.command == "demo":
        from .demo import run, serve

        return serve(arguments.database) if arguments.serve else run(arguments.database)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
