"""Invoke: the pipeline order, argument checks, handlers, results, deadlines (issue 4)."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import anyio
import pytest

from invoke_support import Recorder, code, invoke, make
from opgate import (
    Completed,
    ConfigurationError,
    FailureCode,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    finish,
)

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio

# --- success --------------------------------------------------------------------------------


async def test_sync_handler_runs_in_worker_thread() -> None:
    seen: list[int] = []

    def sync_handler(invocation: Invocation) -> Any:
        seen.append(threading.get_ident())
        return finish(Result([Text("sync")], structured={"refunded": 1}))

    reg, _ = make(sync_handler)
    outcome = await invoke(reg)
    assert isinstance(outcome, Completed)
    assert seen
    assert seen[0] != threading.get_ident()


# --- argument failures -----------------------------------------------------------------------


async def test_unknown_name_fails_before_argument_details() -> None:
    reg, _ = make()
    unknown = await reg.invoke(Ctx(), "no.such", "[not json")
    hidden = await reg.invoke(Ctx(), "admin.purge", "[not json")
    assert code(unknown) is FailureCode.UNAVAILABLE
    assert unknown == hidden


# --- handler outcomes ------------------------------------------------------------------------


async def test_handler_exception_is_sanitized_internal() -> None:
    async def explodes(invocation: Invocation) -> Any:
        raise RuntimeError("api_key=abc123 leaked")

    reg, _ = make(explodes)
    outcome = await invoke(reg)
    assert code(outcome) is FailureCode.INTERNAL
    assert "abc123" not in str(outcome.failure)
    assert "abc123" not in repr(outcome)
    assert isinstance(outcome.failure.cause, RuntimeError)


# --- deadlines and cancellation ---------------------------------------------------------------


async def test_deadline_passed_before_dispatch_never_calls_handler() -> None:
    reg, handler = make()
    outcomes: list[Any] = []
    with anyio.CancelScope(deadline=anyio.current_time() - 1):
        outcomes.append(await invoke(reg))
    assert handler.calls == []
    assert len(outcomes) == 1
    assert code(outcomes[0]) is FailureCode.CANCELLED
    assert "deadline" in outcomes[0].failure.message


async def test_result_after_deadline_is_not_success() -> None:
    def slow(invocation: Invocation) -> Any:
        import time

        time.sleep(0.3)
        return finish(Result([Text("late")], structured={"refunded": 1}))

    reg, _ = make(slow)
    outcomes: list[Any] = []
    with anyio.move_on_after(0.05):
        outcomes.append(await invoke(reg))
    assert all(not isinstance(o, Completed) for o in outcomes)


async def test_cancellation_propagates() -> None:
    started = anyio.Event()

    async def hangs(invocation: Invocation) -> Any:
        started.set()
        await anyio.sleep(10)

    reg, _ = make(hangs)
    async with anyio.create_task_group() as group:
        group.start_soon(invoke, reg)
        await started.wait()
        group.cancel_scope.cancel()
    assert group.cancel_scope.cancelled_caught


# --- issue 9: numbers, public messages, regular expressions -------------------------------------


async def test_structured_int_reads_back_as_int() -> None:
    result = Result([Text("x")], structured={"big": 10**21, "n": Decimal("4.0")})
    assert result.structured == {"big": 10**21, "n": 4}
    assert type(result.structured["big"]) is int
    assert type(result.structured["n"]) is int


def test_registry_names_the_operation_and_pattern_and_allows_an_opt_in() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"(a+)+\1b"}}}
    operation = Operation("text.match", "Match", Recorder(), input_schema=schema)
    with pytest.raises(ConfigurationError) as info:
        Registry([operation], AllowAll())
    message = str(info.value)
    assert "'text.match'" in message
    assert r"'(a+)+\\1b'" in message
    assert "regex_backtrack_limit" in message
    Registry([operation], AllowAll(), regex_backtrack_limit=10_000)
    for bad in (0, -5, 10**9):
        with pytest.raises(ConfigurationError, match="regex_backtrack_limit"):
            Registry([operation], AllowAll(), regex_backtrack_limit=bad)
    with pytest.raises(TypeError, match="regex_backtrack_limit"):
        Registry([operation], AllowAll(), regex_backtrack_limit=True)


# --- large in-profile numbers (issue 20, item 6) ----------------------------------------
