"""Tests of ``opgate._invoke``: the invoke sequence (issue 4).

The order of the checks, and so which failure a request gets (options, scope key,
discovery, arguments, authorization); dispatch (a sync handler in a worker thread,
a raised exception a sanitized ``internal``); the deadline checked before dispatch
and before a result is returned, and real cancellation propagating. The rules the
sequence calls are tested by their modules: ``test_invoke_request.py``,
``test_policy.py``, ``test_outcomes.py``, ``test_conclusion.py``, ``test_answers.py``.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from invoke_support import code, invoke, make
from opgate import Completed, Execute, FailureCode, Invocation, Result, Text, finish

from conftest import Ctx, TeamPolicy

pytestmark = pytest.mark.anyio

# --- the order of the checks ----------------------------------------------------------------


async def test_each_check_runs_before_the_next_one_can_answer() -> None:
    class Broken(TeamPolicy):
        def scope_key(self, ctx: Any) -> str:
            raise RuntimeError("no key")

    # options before the scope key
    broken, _ = make(policy=Broken())
    assert code(await invoke(broken, input_support="form")) is FailureCode.INVALID_REQUEST
    # the scope key before discovery
    assert code(await invoke(broken, name="no.such")) is FailureCode.INTERNAL
    # discovery before the arguments
    policy = TeamPolicy()
    reg, handler = make(policy=policy)
    assert code(await invoke(reg, "[not json", name="no.such")) is FailureCode.UNAVAILABLE
    # the arguments before authorization: the policy is never asked to execute them
    assert code(await invoke(reg, '{"order": 0}')) is FailureCode.INVALID_ARGUMENTS
    assert not any(isinstance(request, Execute) for request in policy.calls)
    assert handler.calls == []


async def test_unknown_name_fails_before_argument_details() -> None:
    reg, _ = make()
    unknown = await reg.invoke(Ctx(), "no.such", "[not json")
    hidden = await reg.invoke(Ctx(), "admin.purge", "[not json")
    assert code(unknown) is FailureCode.UNAVAILABLE
    assert unknown == hidden


# --- dispatch -------------------------------------------------------------------------------


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
