"""``opgate serve``'s logs on stderr: which loggers follow ``--log-level``, and the
failure hook that writes a failure's private cause there (never to the client)."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from ._escapes import visible
from ._usage import UsageError

__all__ = [
    "CAUSE_LOG_CHARACTERS",
    "OWN_LOGGERS",
    "configure_logging",
    "log_cause",
    "serve_logger",
    "with_cause_log",
]


#: Loggers that follow ``--log-level``; every other logger stays at WARNING or above.
OWN_LOGGERS = ("opgate",)

#: The logger of ``opgate serve``'s own lines, private causes among them.
serve_logger = logging.getLogger("opgate.serve")


def configure_logging(level_name: str, opened: Sequence[str]) -> int:
    """Log to stderr: opgate's loggers and ``opened`` at ``level_name``, the rest at WARNING.

    Third-party loggers at DEBUG write message content (``sse_starlette`` logs every
    SSE chunk: results, prompt text, cursors), so they are opened only by name.
    Returns the level.
    """
    level = logging.getLevelName(level_name.upper())
    if not isinstance(level, int):
        raise UsageError(f"--log-level {level_name!r} is not a logging level (DEBUG, INFO, ...)")
    logging.basicConfig(
        stream=sys.stderr,
        level=max(level, logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in (*OWN_LOGGERS, *opened):
        logging.getLogger(name).setLevel(level)
    return level


def log_cause(ctx: Any, tool: str, failure: Any) -> None:
    """``opgate serve``'s failure hook: the private cause, with its traceback, to the log.

    An ``internal`` failure's cause is a bug in a handler, a policy or the server: it
    is logged at ERROR on ``opgate.serve`` (stderr), never sent to the client. Other
    failures' causes (a schema violation, an upstream error) are logged at DEBUG.
    """
    cause = failure.cause
    if cause is None:
        return
    level = logging.ERROR if failure.code.value == "internal" else logging.DEBUG
    if not serve_logger.isEnabledFor(level):
        return
    try:
        text = "".join(traceback.format_exception(cause)).rstrip()
    except Exception:  # a hostile exception's __str__; its class still says a lot
        text = f"{type(cause).__name__} (its text could not be formatted)"
    serve_logger.log(
        level,
        "%s: %s; private cause (not sent to the client):\n%s",
        tool,
        failure.code.value,
        _continuation_lines(text),
    )


#: Characters of a private cause written to the log; the rest is counted.
CAUSE_LOG_CHARACTERS = 32_768


def _continuation_lines(text: str) -> str:
    """``text`` as indented log lines with every unprintable character escaped.

    A cause's text may carry an agent's argument: indentation and escapes keep it
    from forging a log line of its own or sending terminal control sequences.
    """
    shown = text[:CAUSE_LOG_CHARACTERS]
    lines = ["    " + "".join(map(visible, line)) for line in shown.splitlines()]
    if len(text) > len(shown):
        lines.append(f"    … [{len(text) - len(shown)} more characters]")
    return "\n".join(lines)


def with_cause_log(hook: Any) -> Any:
    """``hook`` (a host's own ``on_failure``, or None) followed by ``log_cause``."""
    if hook is None:
        return log_cause

    def both(ctx: Any, tool: str, failure: Any) -> None:
        try:
            hook(ctx, tool, failure)
        finally:
            log_cause(ctx, tool, failure)

    return both
