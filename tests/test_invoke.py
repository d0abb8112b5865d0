"""Invoke: the pipeline order, argument checks, handlers, results, deadlines (issue 4)."""

from __future__ import annotations

import contextlib
import threading
from decimal import Decimal
from typing import Any

import anyio
import pytest

from invoke_support import Recorder, code, invoke, make
from opgate import (
    Completed,
    ConfigurationError,
    Discover,
    Execute,
    Failure,
    FailureCode,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    finish,
)

from conftest import AllowAll, Ctx, TeamPolicy

pytestmark = pytest.mark.anyio

# --- success --------------------------------------------------------------------------------


async def test_completed_with_validated_detached_arguments() -> None:
    reg, handler = make()
    outcome = await invoke(reg, '{"order": 7, "amount": 1.10, "note": "hi"}')
    assert isinstance(outcome, Completed)
    assert outcome.result.structured == {"refunded": 7}
    assert handler.arguments == [{"order": 7, "amount": Decimal("1.10"), "note": "hi"}]
    assert isinstance(handler.arguments[0]["amount"], Decimal)
    first = handler.calls[0].arguments
    first["order"] = 99
    assert handler.calls[0].arguments["order"] == 7


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


async def test_execute_denial_is_unavailable_and_sees_detached_validated_arguments() -> None:
    policy = TeamPolicy(deny_execute={"orders.refund"})
    reg, handler = make(policy=policy)
    outcome = await invoke(reg, '{"order": 7}')
    assert code(outcome) is FailureCode.UNAVAILABLE
    assert outcome.failure.message == Failure(FailureCode.UNAVAILABLE).message
    assert handler.calls == []
    executes = [r for r in policy.calls if isinstance(r, Execute)]
    assert executes == [Execute("orders.refund", {"order": 7})]
    assert isinstance(policy.calls[0], Discover)


async def test_policy_mutating_execute_arguments_changes_nothing() -> None:
    class Mutating(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                request.arguments["order"] = 1000

    reg, handler = make(policy=Mutating())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]


async def test_execute_request_is_a_frozen_value_whose_arguments_are_one_detached_copy() -> None:
    seen: list[Execute] = []

    class Reading(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                seen.append(request)
                request.arguments["order"] = 1000  # the policy's own copy
                assert request.arguments["order"] == 1000  # read again: the same copy

    reg, handler = make(policy=Reading())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]
    request = seen[0]
    assert request == Execute("orders.refund", {"order": 1000})
    assert request != Execute("orders.refund", {"order": 7})
    assert repr(request) == "Execute(name='orders.refund', arguments={'order': 1000})"
    match request:
        case Execute(name, arguments):
            assert (name, arguments) == ("orders.refund", {"order": 1000})
    with pytest.raises(AttributeError):
        request.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        request.arguments = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(request)


async def test_execute_arguments_are_copied_only_when_the_policy_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 64 KiB of small containers cost milliseconds to copy (issue 9): a policy that
    # never reads them must not pay for it. Counted with the copy function itself,
    # wherever the request is built.
    from opgate import _invoke, _json, _policy

    copies: list[object] = []

    def counting(value: Any) -> Any:
        copies.append(value)
        return _json.detach(value)

    for module in (_policy, _invoke):
        monkeypatch.setattr(module, "detach", counting, raising=False)
    reg, _ = make()
    assert isinstance(await invoke(reg), Completed)
    assert copies == []
    reg, _ = make(policy=TeamPolicy(deny_execute={"orders.refund"}))
    await invoke(reg)
    assert copies == []  # TeamPolicy reads only the name


async def test_execute_requests_pickle_and_copy_like_the_frozen_dataclass_they_were() -> None:
    # The hand-written request kept the dataclass's slots but not its __getstate__ /
    # __setstate__: pickle, copy.copy and copy.deepcopy restored the slots through
    # __setattr__, which raises FrozenInstanceError (a policy that logs, queues or
    # copies its requests failed as internal).
    import copy
    import pickle

    seen: list[Execute] = []

    class Keeping(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                seen.append(request)
                seen.append(copy.copy(request))  # before the arguments are first read

    reg, handler = make(policy=Keeping())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]
    for request in (*seen, Execute("orders.refund", {"order": 7})):
        for twin in (
            pickle.loads(pickle.dumps(request)),
            copy.copy(request),
            copy.deepcopy(request),
        ):
            assert type(twin) is Execute
            assert twin == request
            assert repr(twin) == "Execute(name='orders.refund', arguments={'order': 7})"
    request = Execute("x", {"a": [1]})
    assert copy.copy(request).arguments is request.arguments  # shallow, as a dataclass
    assert copy.deepcopy(request).arguments["a"] is not request.arguments["a"]


def test_execute_arguments_read_first_by_two_threads_at_once_are_one_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A sync policy runs inline, but may hand the request to threads: two first reads
    # at once each made a copy (the policy's changes through one were lost to the
    # other), and a read that came after the other's copy but saw no copy yet failed
    # its assertion (AssertionError; under -O the arguments were None).
    from opgate import _json, _policy

    both_inside = threading.Barrier(2)

    def slow_detach(value: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            both_inside.wait(timeout=0.5)  # a second first read joins here, if it can
        return _json.detach(value)

    monkeypatch.setattr(_policy, "detach", slow_detach)
    request = Execute._of_validated("orders.refund", {"order": 7})
    read: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: read.append(request.arguments)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(read) == 2
    assert read[0] is read[1] is request.arguments
    assert request.arguments == {"order": 7}


async def test_policy_failure_at_execute_is_internal() -> None:
    class Exploding(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                raise ValueError("password=hunter2")

    reg, handler = make(policy=Exploding())
    outcome = await invoke(reg)
    assert code(outcome) is FailureCode.INTERNAL
    assert "hunter2" not in str(outcome.failure)
    assert handler.calls == []


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
