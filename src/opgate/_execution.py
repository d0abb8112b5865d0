"""Running host callbacks safely: what propagates, cancellation checks, worker threads.

Three rules every request applies to the policy, handler and progress callbacks it calls:

* **What propagates.** ``must_propagate(exc)`` is true for ``KeyboardInterrupt`` and
  ``SystemExit`` (alone or inside an exception group) and for a *real* cancellation of
  the calling task: on asyncio an ``asyncio.CancelledError`` while the task is being
  cancelled (``Task.cancelling() > 0``, which covers ``task.cancel()``,
  ``asyncio.timeout``, ``asyncio.wait_for`` and anyio cancel scopes); on other anyio
  backends their cancellation exception (which user code cannot raise). Everything
  else a callback raises — a custom ``BaseException`` subclass, a
  ``BaseExceptionGroup``, ``GeneratorExit``, an ``asyncio.CancelledError`` of its own —
  becomes a sanitized ``internal`` failure with the original kept privately.
* **Honouring cancellation.** At the checks before dispatch and before returning,
  ``must_yield`` tells whether to call ``honour_cancellation``, which yields to the
  event loop: when a cancellation of the calling asyncio task was requested (the
  yield delivers it if it is still pending), and once the call has taken
  ``YIELD_AFTER`` seconds or more, so that asyncio timers that fell due meanwhile (an
  ``asyncio.timeout`` or ``asyncio.wait_for`` deadline that passed during a sync policy
  call, a handler that never awaits, or output validation) fire and cancel the task.
  A fast call does not yield, so an asyncio deadline is honoured to within that much.
  anyio deadlines need no yield: the registry compares them directly.
* **Worker threads.** ``run_sync_to_completion`` runs a sync handler in an anyio worker
  thread and waits for it to return even when the caller is cancelled meanwhile —
  by anyio (whose default for threads, ``abandon_on_cancel=False``, already waits)
  or natively by asyncio (``task.cancel()``, ``asyncio.timeout``, which would
  otherwise abandon the thread) — then lets the cancellation propagate. A thread
  cannot be interrupted, so the request that started it stays in flight (its
  continuation busy, its bytes charged) until the handler has really returned; and
  since a cancelled caller never leaves a thread behind, the threads in use stay
  bounded by anyio's thread limiter (a client cancelling calls cannot pile them up).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import anyio
import anyio.to_thread

__all__ = [
    "YIELD_AFTER",
    "honour_cancellation",
    "is_own_close",
    "must_propagate",
    "must_yield",
    "run_sync_to_completion",
]

T = TypeVar("T")

#: How long a call may run before the checks yield to the loop to let due timers fire.
YIELD_AFTER: Final = 0.001


def _asyncio_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop in this thread (another anyio backend)
        return None


def _is_real_cancellation(exc: BaseException) -> bool:
    kind = type(exc)
    if issubclass(kind, asyncio.CancelledError):
        task = _asyncio_task()
        return task is not None and task.cancelling() > 0
    try:
        cancelled = anyio.get_cancelled_exc_class()
    except Exception:  # no async library is running
        return False
    return cancelled is not asyncio.CancelledError and issubclass(kind, cancelled)


def _is_exit(exc: BaseException) -> bool:
    return issubclass(type(exc), KeyboardInterrupt | SystemExit)


#: Exceptions of one group examined (nested groups included); the rest count as not
#: propagating.
GROUP_LEAVES: Final = 1000

# The base class's own accessors: a callback's exception class may override the
# attributes (with properties that raise), and classification must never raise.
_GROUP_EXCEPTIONS: Any = BaseExceptionGroup.__dict__["exceptions"]
_TRACEBACK: Any = BaseException.__dict__["__traceback__"]


def _any_leaf(group: BaseExceptionGroup[BaseException], test: Callable[..., bool]) -> bool:
    todo: list[BaseException] = [group]
    seen = 0
    while todo and seen < GROUP_LEAVES:
        exc = todo.pop()
        seen += 1
        if issubclass(type(exc), BaseExceptionGroup):
            todo.extend(_GROUP_EXCEPTIONS.__get__(exc))
        elif test(exc):
            return True
    return False


def must_propagate(exc: BaseException) -> bool:
    """Whether ``exc`` leaves a request unchanged instead of becoming ``internal``.

    True for ``KeyboardInterrupt``, ``SystemExit`` and a real cancellation of the
    calling task, and for an exception group containing any of them. Never raises,
    whatever ``exc``'s class overrides (it looks at ``type(exc)`` and the base
    class's own accessors only).
    """
    if issubclass(type(exc), BaseExceptionGroup):
        return _any_leaf(exc, _is_exit) or _any_leaf(exc, _is_real_cancellation)  # type: ignore[arg-type]
    return _is_exit(exc) or _is_real_cancellation(exc)


def is_own_close(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``GeneratorExit`` closing the catching coroutine itself.

    When a suspended coroutine is closed, Python closes what it awaits and then
    raises ``GeneratorExit`` at its own ``await``: the traceback, seen where it is
    caught, has that one frame. A callback that raises ``GeneratorExit`` itself
    leaves deeper frames.
    """
    if not issubclass(type(exc), GeneratorExit):
        return False
    tb = _TRACEBACK.__get__(exc)
    return tb is None or tb.tb_next is None


def must_yield(started: float) -> bool:
    """Whether the check should yield to the event loop (see the module docstring).

    True on asyncio when a cancellation of the calling task was requested (it may be
    pending: the yield delivers it) or when the call began ``YIELD_AFTER`` seconds or
    more ago (``started`` is its ``time.monotonic()`` reading): asyncio timers that fell
    due meanwhile get to fire. Cheap and synchronous, so the usual fast call pays no
    coroutine for it.
    """
    task = _asyncio_task()
    if task is None:
        return False
    return task.cancelling() > 0 or time.monotonic() - started >= YIELD_AFTER


async def honour_cancellation() -> None:
    """Yield so that due timers fire and a pending cancellation reaches this task.

    Raises the calling task's cancellation if one is pending; otherwise returns.
    An anyio shield keeps anyio's own cancellations out, as anyio intends.
    """
    await _let_due_timers_fire()


async def _let_due_timers_fire() -> None:
    """Resume only after every loop timer that is already due has run.

    The wake-up is itself a timer for *now*, and the loop runs due timers in order of
    their time, so an ``asyncio.timeout`` callback that fell due earlier runs first and
    its cancellation reaches this task here.
    """
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    handle = loop.call_at(loop.time(), _wake, waiter)
    try:
        await waiter
    finally:
        handle.cancel()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _ThreadRun:
    """One function call in a worker thread, and whether it started and finished."""

    __slots__ = ("_lock", "_loop", "abandoned", "done", "started", "waiter")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started = False
        self.done = False
        self.abandoned = False
        self.waiter: asyncio.Future[None] | None = None

    def begin(self) -> bool:
        """In the thread: whether to run at all (not if the caller already left)."""
        with self._lock:
            if self.abandoned:
                return False
            self.started = True
            return True

    def end(self) -> None:
        """In the thread: the function returned; wake a caller waiting for that."""
        with self._lock:
            self.done = True
            waiter, loop = self.waiter, self._loop
        if waiter is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to wake
                loop.call_soon_threadsafe(_wake, waiter)

    def needs_wait(self, loop: asyncio.AbstractEventLoop | None) -> asyncio.Future[None] | None:
        """On the loop, after the call raised: a future to await until the thread ends.

        ``None`` when the function finished already or never started (it then never
        will: the thread sees ``abandoned`` and skips it).
        """
        with self._lock:
            if self.done:
                return None
            if not self.started:
                self.abandoned = True
                return None
            if loop is None:
                return None
            self._loop = loop
            self.waiter = loop.create_future()
            return self.waiter


async def run_sync_to_completion(function: Callable[[Any], T], argument: Any) -> T:
    """``function(argument)`` in a worker thread, waited for whatever the caller does.

    If the caller is cancelled while the thread runs, this waits until the function
    returns and then lets the cancellation propagate; otherwise the function's result
    is returned or its exception (any ``BaseException``) raised here. A function whose
    thread had not started when the caller was cancelled never runs.
    """
    run = _ThreadRun()

    def call() -> tuple[bool, Any]:
        # Exceptions travel as values: an asyncio future would mangle GeneratorExit.
        if not run.begin():
            return False, None
        try:
            return True, function(argument)
        except BaseException as exc:
            return False, exc
        finally:
            run.end()

    try:
        ok, value = await anyio.to_thread.run_sync(call)
    except BaseException:
        # Cancelled: anyio's shield holds against anyio cancellation, but asyncio's
        # own (task.cancel(), asyncio.timeout) abandons the thread. Wait for it.
        await _wait_for(run)
        raise
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


async def _wait_for(run: _ThreadRun) -> None:
    task = _asyncio_task()
    waiter = run.needs_wait(None if task is None else task.get_loop())
    if waiter is None:
        if run.started and not run.done:  # another backend: poll, shielded
            with anyio.CancelScope(shield=True):
                while not run.done:
                    await anyio.sleep(0.01)
        return
    # Shielded from anyio (whose delivery would retry every loop iteration) and,
    # through asyncio.shield, from further native cancellations.
    with anyio.CancelScope(shield=True):
        while not waiter.done():
            try:
                await asyncio.shield(waiter)
            except asyncio.CancelledError:
                continue
