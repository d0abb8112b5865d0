"""``UsageError``: a command-line mistake, which ``main`` reports as
``opgate COMMAND: message`` with exit status 2."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """A command-line mistake; the message says what to do."""
