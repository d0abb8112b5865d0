"""Execution safety, cancellation and deadlines, BaseException, closed lifetimes (issue 9).

Items 3 to 6 of the hardening issue, the rules of ``opgate._execution`` as invoke
applies them: one answer never runs a handler twice at once, asyncio deadlines and
pending cancellations are honoured before dispatch and before returning, callbacks
raising ``BaseException`` become sanitized failures, and a closed serving lifetime
refuses new calls before dispatch (forged outcomes, item 17, are
``test_outcomes.py``). Everything here is driven by events (or by waiting until a deadline has
surely passed), never by sleeping for a guessed duration.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from invoke_support import ARGS, FORM_SUPPORT, answer, code, registry, start
from opgate import (
    Completed,
    Discover,
    Execute,
    Failed,
    FailureCode,
    FormInput,
    Invocation,
    Result,
    Text,
    await_input,
    fail,
    finish,
)

from conftest import Ctx, TeamPolicy

pytestmark = pytest.mark.anyio

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SECRET = "SECRET123"


async def until(predicate: Callable[[], bool]) -> None:
    """Yield to the loop until ``predicate`` holds (bounded, never a guessed sleep)."""
    for _ in range(10_000):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


async def settle_loop() -> None:
    """Give a cancelled task every chance to finish (a handful of loop iterations)."""
    for _ in range(20):
        await asyncio.sleep(0)


def wait_past(deadline: float) -> None:
    """Block the event loop (as a slow sync callback does) until ``deadline`` has passed.

    It blocks for at least 2 ms even if the deadline passed earlier (a loaded machine),
    so the call always takes over ``YIELD_AFTER``: asyncio deadlines are honoured to
    within that much.
    """
    loop = asyncio.get_running_loop()
    until = max(deadline, loop.time()) + 0.002
    while loop.time() <= until:
        time.sleep(0.0005)


# --- item 3: one answer never runs a handler twice at once -----------------------------------


class SyncGate:
    """A sync handler: asks once, then blocks in its worker thread until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.runs: list[bool] = []

    def __call__(self, inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        self.runs.append(inv.resume.recovery_only)
        if not inv.resume.recovery_only:
            self.started.set()
            self.release.wait(30)
        return finish(Result([Text("refunded")]))


class AsyncGate:
    """An async handler that keeps working (cleanup) after it is cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.release = anyio.Event()
        self.runs: list[bool] = []

    async def __call__(self, inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        self.runs.append(inv.resume.recovery_only)
        if not inv.resume.recovery_only:
            self.started.set()
            try:
                await anyio.sleep(30)
            except BaseException:
                self.cancelled.set()
                with anyio.CancelScope(shield=True):
                    await self.release.wait()  # still running: the refund is in progress
                raise
        return finish(Result([Text("refunded")]))


async def _started(gate: Any) -> None:
    if isinstance(gate, SyncGate):
        await until(gate.started.is_set)
    else:
        await gate.started.wait()


async def _release(gate: Any) -> None:
    if isinstance(gate, SyncGate):
        gate.release.set()
    else:
        await gate.cancelled.wait()
        gate.release.set()


@pytest.mark.parametrize("gate_kind", ["sync", "async"])
@pytest.mark.parametrize("how", ["task.cancel", "asyncio.timeout", "anyio.CancelScope"])
async def test_a_cancelled_answer_stays_busy_until_its_handler_returns(
    gate_kind: str, how: str
) -> None:
    gate: Any = SyncGate() if gate_kind == "sync" else AsyncGate()
    reg = registry(gate)
    pending = await start(reg)
    timeouts: list[Any] = []
    scopes: list[anyio.CancelScope] = []

    async def first() -> Any:
        if how == "asyncio.timeout":
            async with asyncio.timeout(None) as timeout:
                timeouts.append(timeout)
                return await answer(reg, pending)
        if how == "anyio.CancelScope":
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                return await answer(reg, pending)
            return "cancelled"
        return await answer(reg, pending)

    task = asyncio.ensure_future(first())
    await _started(gate)
    used = reg._ledger.used
    if how == "asyncio.timeout":
        timeouts[0].reschedule(asyncio.get_running_loop().time())  # the deadline passes now
    elif how == "anyio.CancelScope":
        scopes[0].cancel()
    else:
        task.cancel()
    await settle_loop()
    # The first run is still going: the same answer must not start a second one.
    again = await answer(reg, pending)
    assert code(again) is FailureCode.BUSY
    assert gate.runs == [False]
    assert reg._ledger.used == used  # still charged
    await _release(gate)
    (ended,) = await asyncio.gather(task, return_exceptions=True)
    if how == "anyio.CancelScope":
        # either the call saw the cancelled scope (``cancelled``) or raised into it
        assert ended == "cancelled" or code(ended) is FailureCode.CANCELLED
    else:
        assert isinstance(ended, asyncio.CancelledError | TimeoutError)
    # Now the handler has returned: the answer is recoverable, once.
    recovered = await answer(reg, pending)
    assert isinstance(recovered, Completed), recovered
    assert gate.runs == [False, True]


async def test_a_cancelled_sync_call_waits_for_its_worker_thread() -> None:
    """Initial calls too: the reservation stays charged until the thread returns."""
    started = threading.Event()
    release = threading.Event()
    running = threading.Event()

    def slow(inv: Invocation) -> Any:
        running.set()
        started.set()
        release.wait(30)
        running.clear()
        return finish(Result([Text("done")]))

    reg = registry(slow)
    task = asyncio.ensure_future(
        reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    )
    await until(started.is_set)
    assert reg._ledger.used > 0
    task.cancel()
    await settle_loop()
    assert not task.done()  # the caller waits for the thread (anyio's default for threads)
    assert reg._ledger.used > 0
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not running.is_set()
    assert reg._ledger.used == 0


async def test_a_sync_call_cancelled_before_its_thread_started_never_runs() -> None:
    """Cancelled while waiting for a worker thread: no hang, and the handler never runs."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    blocker = threading.Event()
    ran: list[str] = []

    def handler(inv: Invocation) -> Any:
        ran.append(inv.name)
        return finish(Result([Text("done")]))

    reg = registry(handler)
    limiter.total_tokens = 1
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, blocker.wait)  # holds the only token
            await until(lambda: limiter.borrowed_tokens == 1)
            task = asyncio.ensure_future(reg.invoke(Ctx(), "orders.refund", ARGS))
            await until(lambda: limiter.statistics().tasks_waiting == 1)
            task.cancel()
            (ended,) = await asyncio.gather(task, return_exceptions=True)
            assert isinstance(ended, asyncio.CancelledError)
            blocker.set()
    finally:
        limiter.total_tokens = tokens
    assert ran == []


# --- item 4: asyncio deadlines and pending cancellations ---------------------------------------


class SlowExecutePolicy:
    """A sync policy whose execution check blocks the loop until a deadline has passed."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.cancel_task = False

    def scope_key(self, ctx: Any) -> str:
        return "alice"

    def authorize(self, ctx: Any, request: Any) -> None:
        if isinstance(request, Execute):
            if self.deadline is not None:
                wait_past(self.deadline)
            if self.cancel_task:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()  # another party asks for cancellation meanwhile


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, inv: Invocation) -> Any:
        self.calls += 1
        return finish(Result([Text("ok")]))


async def test_asyncio_timeout_passing_in_a_sync_policy_prevents_dispatch() -> None:
    policy = SlowExecutePolicy()
    handler = Counting()
    reg = registry(handler, policy)
    loop = asyncio.get_running_loop()
    policy.deadline = loop.time() + 0.01
    with pytest.raises(TimeoutError):
        async with asyncio.timeout_at(policy.deadline):
            await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert handler.calls == 0


async def test_asyncio_wait_for_passing_in_a_sync_policy_prevents_dispatch() -> None:
    policy = SlowExecutePolicy()
    handler = Counting()
    reg = registry(handler, policy)
    policy.deadline = asyncio.get_running_loop().time() + 0.01
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reg.invoke(Ctx(), "orders.refund", ARGS), timeout=0.01)
    assert handler.calls == 0


async def test_asyncio_timeout_passing_in_a_resumed_sync_policy_reverts_the_answer() -> None:
    policy = SlowExecutePolicy()
    runs: list[bool] = []

    async def handler(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        runs.append(inv.resume.recovery_only)
        return finish(Result([Text("refunded")]))

    reg = registry(handler, policy)
    pending = await start(reg)
    policy.deadline = asyncio.get_running_loop().time() + 0.01
    with pytest.raises(TimeoutError):
        async with asyncio.timeout_at(policy.deadline):
            await answer(reg, pending)
    assert runs == []  # never dispatched: the prompt is pending again, not "recovery"
    policy.deadline = None
    assert isinstance(await answer(reg, pending), Completed)
    assert runs == [False]


async def test_pending_cancellation_of_the_calling_task_prevents_dispatch() -> None:
    policy = SlowExecutePolicy()
    policy.cancel_task = True
    handler = Counting()
    reg = registry(handler, policy)
    with pytest.raises(asyncio.CancelledError):
        await reg.invoke(Ctx(), "orders.refund", ARGS)
    task = asyncio.current_task()
    assert task is not None
    task.uncancel()
    assert handler.calls == 0


async def test_asyncio_deadline_passing_in_a_handler_that_never_yields_is_not_success() -> None:
    deadline: list[float] = []

    async def busy(inv: Invocation) -> Any:
        wait_past(deadline[0])  # never awaits: the loop cannot fire the timer meanwhile
        return finish(Result([Text("late")]))

    reg = registry(busy)
    deadline.append(asyncio.get_running_loop().time() + 0.01)
    outcomes: list[Any] = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout_at(deadline[0]):
            outcomes.append(await reg.invoke(Ctx(), "orders.refund", ARGS))
    assert outcomes == []


async def test_validation_time_counts_toward_the_deadline(monkeypatch: Any) -> None:
    """The check before returning comes after output validation."""
    import opgate._invoke

    deadline: list[float] = []
    reg = registry(Counting())
    conclude = opgate._invoke.conclude

    def slow_conclude(*args: Any) -> Any:
        outcome = conclude(*args)
        wait_past(deadline[0])  # validation took until after the deadline
        return outcome

    monkeypatch.setattr(opgate._invoke, "conclude", slow_conclude)
    deadline.append(asyncio.get_running_loop().time() + 0.01)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout_at(deadline[0]):
            await reg.invoke(Ctx(), "orders.refund", ARGS)
    # anyio deadlines too (they are compared, not waited for): cancelled, never success
    with anyio.CancelScope(deadline=anyio.current_time() + 0.01) as scope:
        deadline[0] = scope.deadline
        outcome = await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert code(outcome) is FailureCode.CANCELLED


async def test_anyio_cancel_during_a_fast_sync_handler_is_not_success(monkeypatch: Any) -> None:
    """``scope.cancel()`` while the worker thread ran: the check before returning sees it.

    The 1 ms yield is disabled, so only the fresh look at anyio's scopes can catch it.
    """
    import opgate._execution

    monkeypatch.setattr(opgate._execution, "YIELD_AFTER", float("inf"))
    started = threading.Event()
    release = threading.Event()

    def handler(inv: Invocation) -> Any:
        started.set()
        release.wait(30)
        return finish(Result([Text("done")]))

    reg = registry(handler)
    outcomes: list[Any] = []

    async def call(scope: anyio.CancelScope) -> None:
        with scope:
            outcomes.append(await reg.invoke(Ctx(), "orders.refund", ARGS))

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(call, scope)
        await until(started.is_set)
        scope.cancel()
        release.set()
    assert all(not isinstance(outcome, Completed) for outcome in outcomes), outcomes


async def test_a_shielded_call_inside_a_cancelled_task_still_runs() -> None:
    """Shielded cleanup: an anyio shield keeps the call going while the task is cancelled."""
    handler = Counting()
    reg = registry(handler)
    outcomes: list[Any] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(1)
        finally:
            with anyio.CancelScope(shield=True):
                outcomes.append(await reg.invoke(Ctx(), "orders.refund", ARGS))
    assert isinstance(outcomes[0], Completed)
    assert handler.calls == 1


async def test_no_deadline_no_extra_failures() -> None:
    """A call that takes over a millisecond without any deadline still succeeds."""

    async def slowish(inv: Invocation) -> Any:
        time.sleep(0.003)
        return finish(Result([Text("ok")]))

    reg = registry(slowish)
    assert isinstance(await reg.invoke(Ctx(), "orders.refund", ARGS), Completed)


# --- item 5: BaseException from callbacks ------------------------------------------------------


class Boom(BaseException):
    pass


def _raisers() -> list[tuple[str, Callable[[], BaseException]]]:
    return [
        ("custom BaseException", lambda: Boom(SECRET)),
        ("BaseExceptionGroup", lambda: BaseExceptionGroup(SECRET, [Boom(SECRET)])),
        ("ExceptionGroup", lambda: ExceptionGroup(SECRET, [ValueError(SECRET)])),
        ("GeneratorExit", lambda: GeneratorExit(SECRET)),
        ("own CancelledError", lambda: asyncio.CancelledError(SECRET)),
    ]


RAISERS = _raisers()


def assert_sanitized(outcome: Any, raised: BaseException) -> None:
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.INTERNAL
    assert outcome.failure.message == "internal error"
    assert outcome.failure.cause is raised
    for text in (str(outcome), repr(outcome), str(outcome.failure), repr(outcome.failure)):
        assert SECRET not in text


@pytest.mark.parametrize(("label", "make_exc"), RAISERS, ids=[label for label, _ in RAISERS])
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_handler_base_exceptions_become_internal(
    label: str, make_exc: Callable[[], BaseException], kind: str
) -> None:
    raised: list[BaseException] = []

    async def async_handler(inv: Invocation) -> Any:
        raised.append(make_exc())
        raise raised[-1]

    def sync_handler(inv: Invocation) -> Any:
        raised.append(make_exc())
        raise raised[-1]

    reg = registry(async_handler if kind == "async" else sync_handler)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert_sanitized(outcome, raised[0])


@pytest.mark.parametrize(("label", "make_exc"), RAISERS, ids=[label for label, _ in RAISERS])
@pytest.mark.parametrize("where", ["scope_key", "discover", "execute"])
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_policy_base_exceptions_become_internal(
    label: str, make_exc: Callable[[], BaseException], where: str, kind: str
) -> None:
    raised: list[BaseException] = []

    def judge(method: str, request: Any = None) -> None:
        hit = method == where or (
            method == "authorize"
            and (
                (where == "discover" and isinstance(request, Discover))
                or (where == "execute" and isinstance(request, Execute))
            )
        )
        if hit:
            raised.append(make_exc())
            raise raised[-1]

    class SyncPolicy:
        def scope_key(self, ctx: Any) -> str:
            judge("scope_key")
            return "alice"

        def authorize(self, ctx: Any, request: Any) -> None:
            judge("authorize", request)

    class AsyncPolicy:
        async def scope_key(self, ctx: Any) -> str:
            judge("scope_key")
            return "alice"

        async def authorize(self, ctx: Any, request: Any) -> None:
            judge("authorize", request)

    reg = registry(Counting(), SyncPolicy() if kind == "sync" else AsyncPolicy())
    assert_sanitized(await reg.invoke(Ctx(), "orders.refund", ARGS), raised[-1])
    if where != "execute":
        assert_sanitized(await reg.search(Ctx(), ""), raised[-1])
        assert_sanitized(await reg.search(Ctx(), "orders.refund"), raised[-1])
        assert_sanitized(await reg.inspect(Ctx(), "orders.refund"), raised[-1])


async def test_progress_sink_base_exception_is_a_diagnostic() -> None:
    async def reports(inv: Invocation) -> Any:
        await inv.report_progress(1, 2)
        return finish(Result([Text("ok")]))

    def sink(update: Any) -> None:
        raise Boom(SECRET)

    outcome = await registry(reports).invoke(Ctx(), "orders.refund", ARGS, progress=sink)
    assert isinstance(outcome, Completed)
    assert any("Boom" in entry for entry in outcome.diagnostics)
    assert all(SECRET not in entry for entry in outcome.diagnostics)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("where", ["handler", "sync handler", "policy"])
async def test_keyboard_interrupt_and_system_exit_propagate(
    exc_type: type[BaseException], where: str
) -> None:
    async def handler(inv: Invocation) -> Any:
        raise exc_type

    def sync_handler(inv: Invocation) -> Any:
        raise exc_type

    class Policy(TeamPolicy):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                raise exc_type

    chosen = {"handler": handler, "sync handler": sync_handler, "policy": Counting()}[where]
    reg = registry(chosen, Policy() if where == "policy" else None)
    with pytest.raises(exc_type):
        await reg.invoke(Ctx(), "orders.refund", ARGS)


async def test_a_resume_whose_handler_raises_base_exception_needs_recovery() -> None:
    calls: list[bool] = []

    async def handler(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        calls.append(inv.resume.recovery_only)
        if not inv.resume.recovery_only:
            raise Boom(SECRET)
        return finish(Result([Text("recovered")]))

    reg = registry(handler)
    pending = await start(reg)
    assert code(await answer(reg, pending)) is FailureCode.INTERNAL
    assert isinstance(await answer(reg, pending), Completed)
    assert calls == [False, True]


async def test_real_cancellation_of_the_caller_still_propagates_from_handlers() -> None:
    started = anyio.Event()

    async def hangs(inv: Invocation) -> Any:
        started.set()
        await anyio.sleep(30)

    reg = registry(hangs)
    task = asyncio.ensure_future(reg.invoke(Ctx(), "orders.refund", ARGS))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class EvilGroup(BaseExceptionGroup):  # type: ignore[type-arg]
    """Overrides everything a careless classifier would call."""

    def subgroup(self, *args: Any) -> Any:
        raise Boom(SECRET)

    def split(self, *args: Any) -> Any:
        raise Boom(SECRET)

    def derive(self, *args: Any) -> Any:
        raise Boom(SECRET)

    @property  # type: ignore[misc]
    def exceptions(self) -> Any:
        raise Boom(SECRET)


class EvilAttributes(BaseException):
    @property
    def __traceback__(self) -> Any:  # type: ignore[override]
        raise Boom(SECRET)

    @property
    def __context__(self) -> Any:  # type: ignore[override]
        raise Boom(SECRET)

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise Boom(SECRET)


def _deep_group() -> BaseException:
    exc: BaseException = Boom(SECRET)
    for _ in range(5000):
        exc = BaseExceptionGroup("nested", [exc])
    return exc


HOSTILE = [
    ("group overriding its methods", lambda: EvilGroup(SECRET, [Boom(SECRET)])),
    ("attributes that raise", lambda: EvilAttributes(SECRET)),
    ("5,000 nested groups", _deep_group),
]


@pytest.mark.parametrize(("label", "make_exc"), HOSTILE, ids=[label for label, _ in HOSTILE])
@pytest.mark.parametrize("where", ["handler", "policy"])
async def test_hostile_exception_objects_never_escape(
    label: str, make_exc: Callable[[], BaseException], where: str
) -> None:
    async def handler(inv: Invocation) -> Any:
        raise make_exc()

    class Policy(TeamPolicy):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                raise make_exc()

    reg = registry(handler if where == "handler" else Counting(), Policy())
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert code(outcome) is FailureCode.INTERNAL
    assert outcome.failure.message == "internal error"


class EvilStr(str):
    def encode(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise Boom(SECRET)


class EvilDict(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise Boom(SECRET)

    def __iter__(self) -> Any:
        raise Boom(SECRET)


@pytest.mark.parametrize(
    "returned",
    [lambda: fail(EvilStr("no")), lambda: fail("no", EvilDict(a=1))],
    ids=["hostile message", "hostile diagnostics"],
)
async def test_a_returned_object_raising_base_exception_is_internal(
    returned: Callable[[], Any],
) -> None:
    async def handler(inv: Invocation) -> Any:
        return returned()

    outcome = await registry(handler).invoke(Ctx(), "orders.refund", ARGS)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code in {FailureCode.INTERNAL, FailureCode.OPERATION_FAILED}
    assert SECRET not in repr(outcome)


class EvilMapping(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise Boom(SECRET)

    def keys(self) -> Any:
        raise Boom(SECRET)

    def __iter__(self) -> Any:
        raise Boom(SECRET)


class EvilCollection:
    def __iter__(self) -> Any:
        raise Boom(SECRET)

    def __len__(self) -> int:
        return 1

    def __contains__(self, item: object) -> bool:
        raise Boom(SECRET)


class EvilQuery(str):
    def split(self, *args: Any) -> Any:  # type: ignore[override]
        raise Boom(SECRET)

    def casefold(self) -> Any:
        raise Boom(SECRET)


async def test_hostile_request_values_never_escape() -> None:
    """What the host passes (arguments, options, query) may raise too: never with its text."""
    reg = registry(Counting())
    outcomes = [
        await reg.invoke(Ctx(), "orders.refund", EvilMapping(order=7)),
        await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=EvilCollection()),
        await reg.search(Ctx(), EvilQuery("refund")),
    ]
    for outcome in outcomes:
        assert isinstance(outcome, Failed), outcome
        assert SECRET not in repr(outcome)
        assert outcome.failure.code in {FailureCode.INTERNAL, FailureCode.INVALID_REQUEST}


# --- item 6: closed lifetimes --------------------------------------------------------------------


@pytest.mark.parametrize("support", [FORM_SUPPORT, set()])
async def test_a_closed_lifetime_refuses_new_calls_before_dispatch(support: set[Any]) -> None:
    handler = Counting()
    reg = registry(handler)
    serving = reg.open_lifetime()
    await serving.close()
    outcome = await reg.invoke(
        Ctx(), "orders.refund", ARGS, input_support=support, lifetime=serving
    )
    assert code(outcome) is FailureCode.EXPIRED
    assert "serving lifetime" in outcome.failure.message
    assert "closed" in outcome.failure.message
    assert handler.calls == 0


async def test_a_lifetime_closed_during_authorization_refuses_dispatch() -> None:
    handler = Counting()
    lifetimes: list[Any] = []

    class ClosingPolicy(TeamPolicy):
        async def authorize(self, ctx: Any, request: Any) -> None:  # type: ignore[override]
            if isinstance(request, Execute):
                await lifetimes[0].close()

    reg = registry(handler, ClosingPolicy())
    lifetimes.append(reg.open_lifetime())
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, lifetime=lifetimes[0])
    assert code(outcome) is FailureCode.EXPIRED
    assert "serving lifetime" in outcome.failure.message
    assert handler.calls == 0


async def test_a_resume_on_a_closed_lifetime_says_so() -> None:
    gate = AsyncGate()
    reg = registry(gate)
    serving = reg.open_lifetime()
    pending = await start(reg, lifetime=serving)
    await serving.close()
    outcome = await answer(reg, pending, lifetime=serving)
    assert code(outcome) is FailureCode.EXPIRED
    assert "serving lifetime" in outcome.failure.message
    assert gate.runs == []
