"""``opgate.cli._logging``: ``opgate serve``'s logs on stderr.

A failure's private cause is logged with its traceback (at ERROR for ``internal``, at
DEBUG otherwise), never sent to the client, indented and with every unprintable
character escaped so that it cannot forge a log line or drive the terminal, and cut
at ``CAUSE_LOG_CHARACTERS``. Only opgate's loggers, and those named with
``--log-logger``, follow ``--log-level``; the rest stay at WARNING.

The first tests run ``opgate serve --http`` as a subprocess (tests/cli_serving.py)
and call it with the official client; the others call the hook directly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from opgate import Failure, FailureCode
from opgate.cli._logging import (
    CAUSE_LOG_CHARACTERS,
    configure_logging,
    log_cause,
    with_cause_log,
)
from opgate.cli._usage import UsageError

from cli_serving import client, serving
from serving_catalog import FORGED_LINE, INSECURE_URL

pytestmark = pytest.mark.anyio
# -- what stderr shows (a subprocess) --------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_serve_logs_a_handlers_private_cause_with_its_traceback(
    tmp_path: Path, era: str
) -> None:
    with serving(tmp_path) as s:
        with anyio.fail_after(60):
            async with client(s.url, era=era) as session:
                result = await session.call_tool(
                    "invoke", {"name": "orders.checkout", "arguments": {}}
                )
        await anyio.sleep(0.3)  # let the log line reach the file
        stderr = s.stderr()
    assert result.is_error
    assert result.structured_content["error"] == {"code": "internal", "message": "internal error"}
    reply = result.model_dump_json()
    for private in ("https", INSECURE_URL, "ConfigurationError", "Traceback", "checkout"):
        assert private not in reply
    # The cause, at ERROR, with where it was raised.
    assert "ERROR opgate.serve: invoke: internal; private cause" in stderr
    assert "ConfigurationError: URLInput url" in stderr
    assert "the URL must use https (plain http is never accepted)" in stderr
    assert "Traceback (most recent call last):" in stderr
    assert "serving_catalog.py" in stderr
    assert "in checkout" in stderr


async def test_a_cause_cannot_forge_log_lines_or_drive_the_terminal(tmp_path: Path) -> None:
    text = f"boom\n{FORGED_LINE}\r{FORGED_LINE}\u2028{FORGED_LINE}\x1b[2J\u202egnp.exe"
    with serving(tmp_path) as s:
        with anyio.fail_after(60):
            async with client(s.url) as session:
                result = await session.call_tool(
                    "invoke", {"name": "util.forge", "arguments": {"text": text}}
                )
        await anyio.sleep(0.3)
        stderr = s.stderr()
    assert result.is_error
    assert "RuntimeError: boom" in stderr
    lines = stderr.split("\n")
    assert not [line for line in lines if line.startswith(FORGED_LINE)]
    assert f"    {FORGED_LINE}" in lines
    assert "\x1b" not in stderr
    assert "\u202e" not in stderr
    assert "\\x1b[2J\\u202egnp.exe" in stderr


async def test_third_party_loggers_stay_at_warning_at_debug(tmp_path: Path) -> None:
    async def calls(url: str) -> str:
        async with client(url) as session:
            page = await session.call_tool("search", {"query": "item", "limit": 2})
            cursor = page.structured_content["next_cursor"]
            assert cursor
            await session.call_tool("search", {"query": "item", "limit": 2, "cursor": cursor})
            result = await session.call_tool(
                "invoke", {"name": "util.echo", "arguments": {"text": "private-echo-text"}}
            )
            assert not result.is_error
        return str(cursor)

    with anyio.fail_after(90):
        with serving(tmp_path, "--log-level", "DEBUG") as s:
            cursor = await calls(s.url)
            await anyio.sleep(0.3)
            closed = s.stderr()
        with serving(tmp_path, "--log-level", "DEBUG", "--log-logger", "sse_starlette") as s:
            await calls(s.url)
            await anyio.sleep(0.3)
            opened = s.stderr()
    assert "sse_starlette" not in closed
    assert cursor not in closed
    assert "private-echo-text" not in closed
    assert " DEBUG mcp" not in closed
    assert " INFO mcp" not in closed
    # Named, the logger is open: what it writes at DEBUG is why it stays closed.
    assert "DEBUG sse_starlette" in opened
    assert "private-echo-text" in opened


# -- the failure hook, called directly ---------------------------------------------------


def failure(code: FailureCode, cause: BaseException | None) -> Failure:
    made = Failure(code)
    made.cause = cause
    return made


def raised(exc: BaseException) -> BaseException:
    """``exc`` with a traceback, as the library hands causes over."""
    try:
        raise exc
    except BaseException as caught:
        return caught


@pytest.fixture
def serve_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """``caplog`` with ``opgate.serve`` at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="opgate.serve")
    return caplog


def test_an_internal_cause_is_logged_at_error_and_others_at_debug(
    serve_log: pytest.LogCaptureFixture,
) -> None:
    log_cause(None, "invoke", failure(FailureCode.INTERNAL, raised(RuntimeError("bug here"))))
    log_cause(None, "invoke", failure(FailureCode.INVALID_ARGUMENTS, raised(ValueError("bad"))))
    log_cause(None, "invoke", failure(FailureCode.INTERNAL, None))  # no cause: no line
    [internal, other] = serve_log.records
    assert (internal.name, internal.levelno) == ("opgate.serve", logging.ERROR)
    assert internal.getMessage().startswith("invoke: internal; private cause")
    assert "RuntimeError: bug here" in internal.getMessage()
    assert "Traceback (most recent call last):" in internal.getMessage()
    assert other.levelno == logging.DEBUG
    assert "ValueError: bad" in other.getMessage()


def test_a_cause_below_the_level_is_not_formatted(caplog: pytest.LogCaptureFixture) -> None:
    formatted: list[bool] = []

    class Loud(Exception):
        def __str__(self) -> str:
            formatted.append(True)
            return "loud"

    caplog.set_level(logging.INFO, logger="opgate.serve")
    log_cause(None, "invoke", failure(FailureCode.INVALID_ARGUMENTS, Loud()))
    assert not formatted
    log_cause(None, "invoke", failure(FailureCode.INTERNAL, Loud()))
    assert formatted
    assert "Loud: loud" in caplog.records[0].getMessage()


def test_every_line_of_a_cause_is_indented_and_escaped(serve_log: pytest.LogCaptureFixture) -> None:
    text = f"first\n{FORGED_LINE}\x1b[31m\u2028\u202e\U000e0041\tkept"
    log_cause(None, "invoke", failure(FailureCode.INTERNAL, RuntimeError(text)))
    message = serve_log.records[0].getMessage()
    head, *lines = message.split("\n")
    assert head == "invoke: internal; private cause (not sent to the client):"
    assert all(line.startswith("    ") for line in lines), lines
    assert f"    {FORGED_LINE}\\x1b[31m" in lines
    assert "\\u202e\\U000e0041\tkept" in message
    for raw in ("\x1b", "\u2028", "\u202e", "\U000e0041"):
        assert raw not in message


def test_a_long_cause_is_cut_and_the_rest_counted(serve_log: pytest.LogCaptureFixture) -> None:
    log_cause(None, "invoke", failure(FailureCode.INTERNAL, RuntimeError("x" * 40_000)))
    message = serve_log.records[0].getMessage()
    shown = CAUSE_LOG_CHARACTERS - len("RuntimeError: ")
    assert message.count("x") == shown
    assert message.split("\n")[-1] == f"    … [{40_000 - shown} more characters]"


def test_a_cause_whose_text_raises_is_named_by_its_class(
    serve_log: pytest.LogCaptureFixture,
) -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    log_cause(None, "invoke", failure(FailureCode.INTERNAL, Hostile()))
    [record] = serve_log.records
    assert ".Hostile: " in record.getMessage()
    assert "no text for you" not in record.getMessage()


def test_a_hosts_hook_runs_first_and_cannot_keep_the_cause_out_of_the_log(
    serve_log: pytest.LogCaptureFixture,
) -> None:
    assert with_cause_log(None) is log_cause
    seen: list[str] = []

    def host(ctx: Any, tool: str, failure: Any) -> None:
        seen.append(tool)
        raise KeyError("the host's own bug")

    both = with_cause_log(host)
    with pytest.raises(KeyError):
        both(None, "invoke", failure(FailureCode.INTERNAL, RuntimeError("cause")))
    assert seen == ["invoke"]
    assert "RuntimeError: cause" in serve_log.records[0].getMessage()


# -- which loggers follow --log-level -------------------------------------------------------


@contextmanager
def fresh_logging() -> Iterator[None]:
    """No handler on the root logger (as in a fresh ``opgate serve``); every level put back.

    Entered in the test's body: pytest adds its handlers to the root at each phase.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    names = ("opgate", "opgate-test-opened", "opgate-test-closed")
    saved = {name: logging.getLogger(name).level for name in names}
    root.handlers.clear()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in saved.items():
            logging.getLogger(name).setLevel(was)


def test_only_opgate_and_opened_loggers_follow_the_level() -> None:
    with fresh_logging():
        assert configure_logging("debug", ["opgate-test-opened"]) == logging.DEBUG
        assert logging.getLogger("opgate.serve").getEffectiveLevel() == logging.DEBUG
        assert logging.getLogger("opgate-test-opened").getEffectiveLevel() == logging.DEBUG
        assert logging.getLogger("opgate-test-closed").getEffectiveLevel() == logging.WARNING


def test_a_level_above_warning_holds_for_every_logger() -> None:
    with fresh_logging():
        assert configure_logging("ERROR", []) == logging.ERROR
        assert logging.getLogger("opgate").getEffectiveLevel() == logging.ERROR
        assert logging.getLogger("opgate-test-closed").getEffectiveLevel() == logging.ERROR


def test_a_level_that_is_no_level_is_a_usage_error() -> None:
    for name in ("LOUD", "Level 5", "5", ""):
        with pytest.raises(UsageError, match="is not a logging level"):
            configure_logging(name, [])
