"""Private causes never travel (issue 9, item 16).

A failure's private ``cause`` is dropped by pickling and copying, and a failure a
request returns holds no traceback frames (frames keep the call's locals, argument
values among them): not its own, not its chained exceptions', not its cause's, whose
stack survives only as a text note.
"""

from __future__ import annotations

import copy
import gc
import pickle
import types
from typing import Any

import pytest

from opgate import (
    Discover,
    Failed,
    Failure,
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

SECRET = "SECRET-4111111111111111"
ARGUMENT = "ARGUMENT-VALUE-31337"


_NOT_FOLLOWED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def reachable_frames(root: object, limit: int = 20_000) -> list[object]:
    """Frames and tracebacks reachable from ``root`` through instance data.

    Classes, modules and functions are not followed (they reach everything).
    """
    found: list[object] = []
    seen: set[int] = set()
    todo = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.FrameType | types.TracebackType):
            found.append(obj)
            continue
        if isinstance(obj, _NOT_FOLLOWED):
            continue
        todo.extend(gc.get_referents(obj))
    return found


def raising_registry(sync: bool = False) -> Registry:
    async def handler(inv: Invocation) -> Any:
        value = inv.arguments["card"]
        raise ValueError(f"{SECRET} while handling {value}")

    def sync_handler(inv: Invocation) -> Any:
        value = inv.arguments["card"]
        raise ValueError(f"{SECRET} while handling {value}")

    return Registry([Operation("pay", "Pay", sync_handler if sync else handler)], AllowAll())


@pytest.mark.parametrize("sync", [False, True])
async def test_a_pickled_or_copied_failure_drops_the_cause(sync: bool) -> None:
    outcome = await raising_registry(sync).invoke(Ctx(), "pay", {"card": ARGUMENT})
    assert isinstance(outcome, Failed)
    assert outcome.failure.cause is not None  # kept privately for the host
    for data in (pickle.dumps(outcome), pickle.dumps(outcome.failure)):
        assert SECRET.encode() not in data
        assert ARGUMENT.encode() not in data
    restored = pickle.loads(pickle.dumps(outcome))
    assert restored == outcome
    assert restored.failure.cause is None
    for duplicate in (copy.copy(outcome.failure), copy.deepcopy(outcome.failure)):
        assert duplicate == outcome.failure
        assert duplicate.cause is None
    assert copy.deepcopy(outcome).failure.cause is None


async def test_pickling_keeps_code_message_and_diagnostics() -> None:
    failure = Failure(FailureCode.OPERATION_FAILED, "no stock", diagnostics={"left": 0})
    failure.cause = RuntimeError(SECRET)
    restored = pickle.loads(pickle.dumps(failure))
    assert (restored.code, restored.message, restored.diagnostics) == (
        FailureCode.OPERATION_FAILED,
        "no stock",
        {"left": 0},
    )
    assert restored.cause is None
    assert SECRET.encode() not in pickle.dumps(failure)


@pytest.mark.parametrize("sync", [False, True])
async def test_returned_failures_hold_no_frames(sync: bool) -> None:
    outcome = await raising_registry(sync).invoke(Ctx(), "pay", {"card": ARGUMENT})
    assert isinstance(outcome, Failed)
    failure = outcome.failure
    assert failure.__traceback__ is None
    assert failure.__context__ is None
    assert failure.__cause__ is None
    assert failure.cause is not None
    assert failure.cause.__traceback__ is None
    assert reachable_frames(outcome) == []
    # the stack survives as text for the host's log: where, never the locals
    notes = "\n".join(getattr(failure.cause, "__notes__", []))
    assert "handler" in notes
    assert ARGUMENT not in notes


async def test_failures_raised_inside_the_registry_hold_no_frames() -> None:
    """invalid_arguments, invalid_result and policy failures are raised internally."""

    async def bad_result(inv: Invocation) -> Any:
        return finish(Result([Text("x")], structured={"n": "not a number"}))

    class BrokenPolicy(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if not isinstance(request, Discover):
                raise RuntimeError(SECRET)

    reg = Registry(
        [
            Operation(
                "typed",
                "Typed",
                bad_result,
                input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            )
        ],
        BrokenPolicy(),
    )
    for arguments in ('{"n": "x"}', "{bad json"):
        outcome = await reg.invoke(Ctx(), "typed", arguments)
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_ARGUMENTS
        assert reachable_frames(outcome) == []
    outcome = await reg.invoke(Ctx(), "typed", '{"n": 1}')
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INTERNAL
    assert reachable_frames(outcome) == []
    assert SECRET.encode() not in pickle.dumps(outcome)


async def test_a_chained_cause_loses_its_frames_too() -> None:
    async def handler(inv: Invocation) -> Any:
        try:
            raise KeyError(SECRET)
        except KeyError as inner:
            raise ExceptionGroup("wrapped", [ValueError(SECRET)]) from inner

    reg = Registry([Operation("chain", "Chain", handler)], AllowAll())
    outcome = await reg.invoke(Ctx(), "chain", "{}")
    assert isinstance(outcome, Failed)
    assert reachable_frames(outcome) == []
    assert outcome.failure.cause is not None
    assert isinstance(outcome.failure.cause.__cause__, KeyError)
