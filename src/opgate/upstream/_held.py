"""Held calls: a 2025-11-25 upstream's ``tools/call`` kept open while a person answers.

A 2025-11-25 upstream asks for input with an ``elicitation/create`` request in the
middle of a call and waits for the answer; the call cannot end while the gateway's
client is asked, so it runs apart from the handler that started it:

* ``HeldCall`` is one such call, run by its session in the session's task group.
  The handler that started it reads its events (``next_event``): a ``Question``
  (the upstream's elicitation, waiting for ``Question.answer``) or ``Ended`` (the
  upstream's answer to the call, or the ``UpstreamError`` of its failure). Between
  the handler's return of a prompt and the resume that answers it, the call is in
  ``HeldCalls``, the session's table, under a random token that the prompt's private
  state carries.
* The call's own deadline (``call_timeout``) bounds each stretch in which the gateway
  waits for the upstream; it is lifted while the upstream waits for the person,
  whose wait the table's deadline bounds instead. A question whose deadline passes
  is declined, the call leaves the table and is *abandoned*.
* An abandoned call has no reader: a question it asks is declined at once, and its
  answer, when it comes, is dropped. A handler abandons its call when it stops
  reading without holding it (the call's question could not be shown);
  ``cancel`` also cancels the request, so the upstream is told (the SDK sends
  ``notifications/cancelled``), as for a handler whose caller is cancelled.
* The call asks one question at a time: a second ``elicitation/create`` while one is
  unanswered is refused with a JSON-RPC error.

``HeldCalls`` holds at most ``MAX_HELD_CALLS`` calls; an expired or abandoned call
leaves it at once, so nothing stays behind a call nobody resumes. (The session relays
a question only while one call is in flight, so it holds one call at a time; the
bound is the table's own, whatever its users.)
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Final, TypeAlias

import anyio
import mcp.types as types
from mcp.shared.dispatcher import ProgressFnT

__all__ = [
    "DECLINE",
    "MAX_HELD_CALLS",
    "Ended",
    "HeldCall",
    "HeldCalls",
    "ProgressForward",
    "Question",
]

#: Calls of one upstream held open for a person at most; a further one is refused.
MAX_HELD_CALLS: Final = 64

#: What the upstream gets for a question nobody can or will answer.
DECLINE: Final = types.ElicitResult(action="decline")

#: Events a call can have unread: its one open question and its end.
_EVENTS: Final = 2

#: Where a call's progress goes while a handler follows it (the SDK's callback shape:
#: ``async (progress, total, message) -> None``).
ProgressForward: TypeAlias = ProgressFnT


class Question:
    """One ``elicitation/create`` of a held call; ``params`` is what the upstream sent.

    ``answer(result)`` gives the upstream its answer (the first one counts);
    ``expire_at(deadline)`` bounds the wait on anyio's clock.
    """

    __slots__ = ("_answer", "_answered", "_wait", "params")

    def __init__(self, params: types.ElicitRequestParams) -> None:
        self.params = params
        self._answer: types.ElicitResult | None = None
        self._answered = anyio.Event()
        self._wait = anyio.CancelScope()

    def __repr__(self) -> str:
        return f"Question(mode={self.params.mode!r}, answered={self._answered.is_set()})"

    def answer(self, result: types.ElicitResult) -> None:
        """Answer the upstream (a later answer is ignored)."""
        if not self._answered.is_set():
            self._answer = result
            self._answered.set()

    def expire_at(self, deadline: float) -> None:
        """The wait for the answer ends at ``deadline`` (``anyio.current_time()`` scale)."""
        self._wait.deadline = deadline

    async def wait(self) -> types.ElicitResult | None:
        """The answer, or ``None`` when the deadline passed first."""
        with self._wait:
            await self._answered.wait()
        return self._answer


@dataclass(frozen=True, slots=True)
class Ended:
    """A held call's end: the upstream's ``answer``, or the ``error`` that ended it
    (neither: the call was abandoned while its reader came back, as when a question's
    deadline passes just as its answer arrives)."""

    answer: types.CallToolResult | types.InputRequiredResult | None = None
    error: Exception | None = None


class HeldCall:
    """One 2025-11-25 ``tools/call`` run apart from its handler (see the module docstring).

    * ``scope``: the cancel scope the session runs the request in (its deadline is the
      call's timeout, lifted while a question waits for the person);
    * ``token``: the call's key in its session's ``HeldCalls`` while held, else ``None``;
    * ``abandoned``: whether nobody will read its events any more.
    """

    def __init__(self, upstream: str, *, call_timeout: float) -> None:
        self.upstream = upstream
        self._call_timeout = call_timeout
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + call_timeout)
        self._send, self._events = anyio.create_memory_object_stream[Question | Ended](_EVENTS)
        self._question: Question | None = None
        self._forward: ProgressForward | None = None
        self._table: HeldCalls | None = None
        self.token: str | None = None
        self.abandoned = False
        self.cancelled = False
        self.ended = False

    def __repr__(self) -> str:
        return (
            f"HeldCall({self.upstream!r}, held={self.token is not None}, "
            f"abandoned={self.abandoned}, ended={self.ended})"
        )

    # -- the session's side --------------------------------------------------------

    async def ask(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        """The upstream's question: wait for its answer (the elicitation callback)."""
        if self.abandoned or self.ended:
            return DECLINE
        if self._question is not None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="the gateway relays one question of a call at a time",
            )
        question = self._question = Question(params)
        self.scope.deadline = math.inf  # the upstream waits for the person now
        try:
            try:
                self._send.send_nowait(question)
            except anyio.WouldBlock:  # an unread question and end: cannot happen
                return DECLINE
            answer = await question.wait()
        finally:
            self._question = None
            self.scope.deadline = anyio.current_time() + self._call_timeout
        if answer is None:  # the person's time is up
            self.abandon()
            return DECLINE
        return answer

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The request's progress callback: forwarded while a handler follows the call."""
        forward = self._forward
        if forward is not None:
            await forward(progress, total, message)

    def end(self, ended: Ended) -> None:
        """The request is over: the end is the last event."""
        self.ended = True
        held = self.token is not None
        self._release()
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError):
            self._send.send_nowait(ended)
        self._send.close()
        if held or self.abandoned:  # no reader now, and none can come
            self._events.close()

    # -- the handler's side --------------------------------------------------------

    async def next_event(self, forward: ProgressForward | None) -> Question | Ended:
        """The call's next event; its progress goes to ``forward`` meanwhile."""
        self._forward = forward
        try:
            event = await self._events.receive()
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            return Ended()  # abandoned meanwhile
        finally:
            self._forward = None
        if isinstance(event, Ended):
            self._events.close()
        return event

    def reply(self, result: types.ElicitResult) -> bool:
        """Answer the open question (on a resume); ``False`` when the upstream withdrew it."""
        question = self._question
        if question is None:
            return False
        question.answer(result)
        return True

    def abandon(self) -> None:
        """Nobody reads this call any more: its open question is declined, later ones
        too, and its answer is dropped."""
        self.abandoned = True
        self._release()
        question = self._question
        if question is not None:
            question.answer(DECLINE)
        self._events.close()

    def cancel(self) -> None:
        """Abandon the call and cancel its request (the upstream is told)."""
        self.cancelled = True
        self.abandon()
        self.scope.cancel()

    def _release(self) -> None:
        table = self._table
        if table is not None:
            table._drop(self)


class HeldCalls:
    """A session's held calls by token, at most ``capacity`` (see the module docstring)."""

    def __init__(self, capacity: int = MAX_HELD_CALLS) -> None:
        self._capacity = capacity
        self._calls: dict[str, HeldCall] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def __repr__(self) -> str:
        return f"HeldCalls({len(self._calls)} of {self._capacity})"

    def hold(self, token: str, call: HeldCall, question: Question, deadline: float) -> bool:
        """Keep ``call``, whose ``question`` waits, under ``token`` until ``deadline``;
        ``False`` (nothing kept) when the table is full or the call already ended."""
        if len(self._calls) >= self._capacity or call.ended or call.abandoned:
            return False
        self._calls[token] = call
        call.token = token
        call._table = self
        question.expire_at(deadline)
        return True

    def take(self, token: str) -> HeldCall | None:
        """The call held under ``token``, out of the table, or ``None``."""
        call = self._calls.get(token)
        if call is None:
            return None
        self._drop(call)
        question = call._question
        if question is not None:
            question.expire_at(math.inf)  # it is answered now, not declined
        return call

    def abandon_all(self) -> None:
        """Abandon every held call (their questions are declined)."""
        for call in list(self._calls.values()):
            call.abandon()

    def _drop(self, call: HeldCall) -> None:
        token = call.token
        if token is not None and self._calls.get(token) is call:
            del self._calls[token]
        call.token = None
        call._table = None
