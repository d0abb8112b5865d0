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
    commands.add_parser("demo", help="run the bundled demo and print each step")
    arguments = parser.parse_args(argv)
    if arguments.command == "demo":
        from .demo import run

        return run()
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
