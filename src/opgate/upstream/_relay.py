"""The relay: an upstream's request for input as an opgate prompt, and the answer back.

``Relay.call(session, tool, inv)`` is the handler of every upstream tool. It sends
``tools/call`` and maps the answer (``_results``); when the upstream asks a person
for input during the call, the question becomes an opgate prompt
(``await_input(FormInput(...))`` for a form, ``await_input(URLInput(...))`` for a
URL hand-off) with the registry's continuation token, replay and expiry as for any
prompt. The prompt's message is ``upstream 'NAME' asks: `` and the upstream's message
on one line, and the form's field titles and descriptions are the upstream's, each
with its line breaks, controls and format (bidi) characters written as escapes
(``_report.visible``): the text is the upstream's and says so, and it cannot pass for
the gateway's or another upstream's. The form's schema otherwise and the URL are
the upstream's unchanged (``FormInput`` and ``URLInput`` check them). The resume
(``inv.resume``) carries the person's answer back upstream as an ``ElicitResult``
(``accept`` with the form's answers, or ``decline``/``cancel``), and the
upstream's final result is the call's. Its progress reaches the caller through
``inv.report_progress``, validated and throttled as any operation's.

The two eras
------------
* **2026-07-28**: the upstream answers with an ``InputRequiredResult``. Its
  elicitation requests are asked one after another (in key order), each a prompt
  whose private state holds the upstream's ``request_state``, the requests still to
  ask and the answers given so far; once all are answered, the same ``tools/call``
  is sent again with ``input_responses`` and ``request_state``. Nothing is kept in
  this process, so the resume may reach any gateway serving the same catalog. A
  result that asks for nothing but carries a ``request_state`` is sent again at
  once, at most ``MAX_EMPTY_ROUNDS`` times in a row.
* **2025-11-25**: the upstream sends ``elicitation/create`` while the call is open.
  The call is a ``HeldCall`` (``_held``): the handler follows it, and on a question
  returns the prompt with the call kept open in the session's ``held`` table under a
  random token that the prompt's private state carries. The resume takes the call
  back from the table, answers the question and follows the call again. The call
  exists in this process only, so the resume must reach it (sticky routing across
  replicas). A question nobody answers within ``hold_timeout`` is declined and the
  call is no longer held.

URL hand-offs an upstream requires first
----------------------------------------
An upstream that refuses a call with ``-32042`` ("URL elicitation required", a
``URLElicitationRequired`` from the session; either era) gets its hand-offs shown
one after another as URL prompts whose private state holds the ones still to show.
When the person has accepted the last, the same ``tools/call`` is sent again, as a
fresh call (the upstream refused the first, so nothing of it is repeated but its
arguments); if the upstream refuses again, its hand-offs are shown again, within the
chain's ``Limits.max_prompts``. A decline or cancel fails the call and nothing is
sent again. Nothing is kept in this process between the prompts.

An upstream's ``notifications/elicitation/complete`` is not passed on: it names the
upstream's elicitation id on a connection shared by every caller, the prompt the
person sees is opgate's own (with no id of the upstream's), and the core has no way to
tell a client that a prompt it showed is done; the SDK's client drops it.

What is not relayed
-------------------
* A form outside opgate's form profile (``FormInput`` refuses it), a URL that
  ``URLInput`` refuses (not ``https``, user information, ...), or a prompt over
  ``Limits.form_schema_bytes`` or whose private state would exceed
  ``Limits.state_bytes``: the upstream gets a decline and the caller
  ``confirmation_required`` saying why (``unsupported_input``).
* A prompt of a mode the caller cannot show: the upstream gets a decline and the
  caller ``confirmation_required`` (the registry's own answer to such a prompt).
* Sampling and roots requests inside an ``InputRequiredResult`` fail the call (the
  SDK's own client fails such a call too); as 2025-11-25 requests they are refused
  with a JSON-RPC error by the SDK (``_session``).

After a decline of that kind, the upstream's answer is not waited for: a 2025-11-25
call is abandoned (later questions declined, its result dropped); a 2026-07-28
upstream gets one more ``tools/call`` that declines every request of the round, those
the person already accepted too (an accept sent with the declines could let the
upstream act while the caller is told ``confirmation_required`` and calls again). Its
answer is dropped, and waited for ``DECLINE_TIMEOUT`` seconds at most before the
request is cancelled.

Recovery
--------
The registry calls the handler again with ``recovery_only`` for an answer it
already took (the caller lost the reply, say). The answer has reached the upstream
already, so it is never sent again: the outcome it led to is returned from a
bounded log of ``MAX_KEPT_OUTCOMES`` outcomes, or, once gone from it, a failure
says the answer was relayed and its outcome is not kept here.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import OrderedDict
from typing import Any, Final

import anyio
import mcp.types as types
import pydantic

from opgate import (
    ConfigurationError,
    FormInput,
    InputAction,
    Invocation,
    Limits,
    Outcome,
    Resume,
    URLInput,
    await_input,
    fail,
    unsupported_input,
)
from opgate.json import JSONError, JSONValue, canonical_bytes

from ._held import DECLINE, Ended, HeldCall, ProgressForward, Question
from ._report import bounded, visible
from ._results import json_value, outcome, sdk_arguments
from ._session import UpstreamError, UpstreamSession, URLElicitationRequired

__all__ = ["DECLINE_TIMEOUT", "MAX_EMPTY_ROUNDS", "MAX_KEPT_OUTCOMES", "Relay"]

#: ``InputRequiredResult``s in a row that ask nothing: an upstream that only ever says
#: "call again" must not keep one invoke busy forever (the SDK's own client stops at 10).
MAX_EMPTY_ROUNDS: Final = 10

#: Seconds the caller waits for a 2026-07-28 upstream's answer to the declines of a
#: round it cannot show (the answer is dropped; past this the request is cancelled).
DECLINE_TIMEOUT: Final = 5.0

#: Outcomes of relayed answers kept for recoveries; each is bounded by the result budget.
MAX_KEPT_OUTCOMES: Final = 64

#: The members of a prompt's private state that say which relay it belongs to.
_HELD: Final = "held"
_INPUT: Final = "input"
_RETRY: Final = "retry"

_REQUEST: Final = pydantic.TypeAdapter(types.ElicitRequest)
_RESULT: Final = pydantic.TypeAdapter(types.ElicitResult)
_URL: Final = pydantic.TypeAdapter(types.ElicitRequestURLParams)


class _Kept:
    """The outcomes relayed answers led to, by the key in their prompt's state (LRU)."""

    def __init__(self, capacity: int = MAX_KEPT_OUTCOMES) -> None:
        self._capacity = capacity
        self._outcomes: OrderedDict[str, Outcome] = OrderedDict()

    def record(self, key: str | None, result: Outcome) -> None:
        if key is None:
            return
        self._outcomes[key] = result
        self._outcomes.move_to_end(key)
        while len(self._outcomes) > self._capacity:
            self._outcomes.popitem(last=False)

    def get(self, key: object) -> Outcome | None:
        return self._outcomes.get(key) if isinstance(key, str) else None


def _forward(inv: Invocation) -> ProgressForward:
    """The upstream's progress, as this invocation's progress reports."""

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await inv.report_progress(progress, total, message or "")

    return forward


def _result_of(resume: Resume) -> types.ElicitResult:
    """The person's answer as the upstream reads it."""
    action = resume.action
    if action is InputAction.ACCEPT:
        answers = resume.answers
        content = sdk_arguments(answers) if isinstance(answers, dict) else None
        return types.ElicitResult(action="accept", content=content)
    return types.ElicitResult(action="decline" if action is InputAction.DECLINE else "cancel")


def _dumped(model: pydantic.BaseModel) -> JSONValue:
    return json_value(model.model_dump(mode="json", by_alias=True, exclude_none=True))


def _results(done: dict[str, JSONValue]) -> dict[str, types.ElicitResult]:
    """The answers kept in a relay's state, as the SDK sends them (the gateway wrote
    them, and the ledger kept them unaltered)."""
    return {key: _RESULT.validate_python(sdk_arguments(value)) for key, value in done.items()}


def _asked(upstream: str, message: str) -> str:
    """The message of a relayed question as the person sees it: the upstream named
    first, then its own message on the same line with every line break, control and
    format character escaped (``visible``), so it cannot pass for the gateway's or
    another upstream's."""
    return f"upstream {upstream!r} asks: {visible(message, lines=False)}"


def _shown(schema: JSONValue) -> JSONValue:
    """An upstream's form schema with every ``title`` and ``description`` string (the
    texts a client shows beside the fields) escaped as the message is; values
    (``const``, ``enum``, ``default``) are the upstream's and are kept."""
    if isinstance(schema, list):
        return [_shown(member) for member in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: visible(member, lines=False)
        if key in ("title", "description") and isinstance(member, str)
        else _shown(member)
        for key, member in schema.items()
    }


class _Refused(Exception):
    """A relay state the gateway cannot read back; ``str()`` is the public message."""


class Relay:
    """The handler logic every upstream tool of one catalog shares (see the module
    docstring): the limits prompts are checked against and how long a 2025-11-25
    call stays held for a person."""

    def __init__(self, *, limits: Limits, hold_timeout: float) -> None:
        self._limits = limits
        self._hold_timeout = hold_timeout
        self._kept = _Kept()

    def __repr__(self) -> str:
        return f"Relay(hold_timeout={self._hold_timeout:g})"

    async def call(self, session: UpstreamSession, tool: str, inv: Invocation) -> Outcome:
        """The outcome of ``tool`` of ``session`` for ``inv``, relaying its questions."""
        arguments = sdk_arguments(inv.arguments)
        resume = inv.resume
        if resume is not None:
            return await self._resume(session, tool, arguments, inv, resume)
        return await self._send(session, tool, arguments, inv, None)

    async def _send(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        key: str | None,
    ) -> Outcome:
        """Send the call (again, for ``key``'s answer) and relay what follows."""
        try:
            if session.holds_calls:
                call = session.start_call(tool, arguments)
                return await self._follow(session, tool, arguments, inv, call, key)
            answer = await session.call_tool(tool, arguments, progress=_forward(inv))
        except UpstreamError as exc:
            return self._failed(session.name, exc, key)
        return await self._answered(session, tool, arguments, inv, answer, key)

    def _failed(self, upstream: str, exc: UpstreamError, key: str | None) -> Outcome:
        """The outcome of a call that failed: a hand-off when the upstream asked for one."""
        if isinstance(exc, URLElicitationRequired):
            first, *rest = exc.elicitations
            return self._hand_off(upstream, first, [_dumped(params) for params in rest])
        result = fail(str(exc))
        self._kept.record(key, result)
        return result

    async def _resume(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        resume: Resume,
    ) -> Outcome:
        state = resume.state
        kind = state.get("relay") if isinstance(state, dict) else None
        name = session.name
        if not isinstance(state, dict) or kind not in (_HELD, _INPUT, _RETRY):
            return fail(f"upstream {name!r}: this answer is not one the gateway asked for")
        key = state.get("call") if kind == _HELD else state.get("id")
        if resume.recovery_only:
            kept = self._kept.get(key)
            if kept is not None:
                return kept
            return fail(
                f"this answer was already relayed to upstream {name!r}; the outcome it led "
                "to is not kept here: call the operation again if it is still needed"
            )
        if kind == _HELD:
            call = session.held.take(key) if isinstance(key, str) else None
            if call is None or not isinstance(key, str):
                return fail(
                    f"upstream {name!r} is no longer waiting for this answer: its call "
                    "expired, ended, or is held by another gateway process (a 2025-11-25 "
                    "upstream's call stays open only in the process that asked)"
                )
            call.reply(_result_of(resume))
            return await self._follow(session, tool, arguments, inv, call, key)
        if kind == _RETRY:
            return await self._handed_off(session, tool, arguments, inv, resume, state)
        try:
            return await self._answer_input(session, tool, arguments, inv, resume, state)
        except (_Refused, UpstreamError) as exc:
            return fail(str(exc))

    # -- 2025-11-25: a call held open -----------------------------------------------

    async def _follow(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        call: HeldCall,
        key: str | None,
    ) -> Outcome:
        """Read ``call``'s events until it ends or asks a question that is shown."""
        held = False
        try:
            event = await call.next_event(_forward(inv))
            if isinstance(event, Ended):
                if event.answer is not None:
                    return await self._answered(session, tool, arguments, inv, event.answer, key)
                error = event.error
                if error is None:
                    return fail(f"upstream {session.name!r} no longer waits for this answer")
                if not isinstance(error, UpstreamError):  # pragma: no cover - the session's
                    error = UpstreamError(str(error))
                return self._failed(session.name, error, key)
            token = secrets.token_urlsafe(32)
            prompt = self._prompt(session.name, event.params, {"relay": _HELD, "call": token})
            if isinstance(prompt, str):
                self._decline(call, event)
                return unsupported_input(prompt)
            if not inv.supports(prompt.mode):
                self._decline(call, event)
                return await_input(prompt)  # the registry's confirmation_required
            deadline = anyio.current_time() + self._hold_timeout
            if not session.held.hold(token, call, event, deadline):
                self._decline(call, event)
                return fail(
                    f"upstream {session.name!r} has too many calls waiting for a person; "
                    "try again later"
                )
            held = True
            return await_input(prompt)
        finally:
            if not held and not call.ended and not call.abandoned:
                call.cancel()  # the handler stops following: the upstream is told

    @staticmethod
    def _decline(call: HeldCall, question: Question) -> None:
        question.answer(DECLINE)
        call.abandon()

    # -- 2026-07-28: an InputRequiredResult ---------------------------------------

    async def _answered(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        answer: types.CallToolResult | types.InputRequiredResult,
        key: str | None,
    ) -> Outcome:
        """The outcome of ``answer``; an ``InputRequiredResult`` is relayed."""
        name = session.name
        empty = 0
        while isinstance(answer, types.InputRequiredResult):
            requests = answer.input_requests or {}
            if requests:
                refused = sorted(
                    {
                        "sampling" if isinstance(request, types.CreateMessageRequest) else "roots"
                        for request in requests.values()
                        if not isinstance(request, types.ElicitRequest)
                    }
                )
                if refused:
                    result = fail(
                        f"upstream {name!r} asked for {' and '.join(refused)}, which the "
                        "gateway does not relay"
                    )
                    self._kept.record(key, result)
                    return result
                todo = {k: _dumped(request) for k, request in requests.items()}
                return await self._ask(session, tool, arguments, inv, answer.request_state, todo)
            empty += 1
            if empty > MAX_EMPTY_ROUNDS:
                result = fail(
                    f"upstream {name!r} asked to be called again {MAX_EMPTY_ROUNDS} times "
                    "without a question"
                )
                self._kept.record(key, result)
                return result
            try:
                answer = await session.call_tool(
                    tool, arguments, progress=_forward(inv), request_state=answer.request_state
                )
            except UpstreamError as exc:
                return self._failed(name, exc, key)
        result = outcome(name, answer)
        self._kept.record(key, result)
        return result

    async def _ask(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        request_state: str | None,
        todo: dict[str, JSONValue],
        done: dict[str, JSONValue] | None = None,
    ) -> Outcome:
        """The prompt for the first request of ``todo`` (or the declines, if it cannot
        be shown)."""
        name = session.name
        done = done or {}
        key = min(todo)
        rest = {other: request for other, request in todo.items() if other != key}
        state: dict[str, JSONValue] = {
            "relay": _INPUT,
            "id": secrets.token_urlsafe(18),
            "key": key,
            "state": request_state,
            "todo": rest,
            "done": done,
        }
        try:
            request = _REQUEST.validate_python(sdk_arguments(todo[key]), by_name=False)
        except pydantic.ValidationError:  # pragma: no cover - it was validated on arrival
            return fail(f"upstream {name!r} asked for input in a shape the gateway cannot read")
        prompt = self._prompt(name, request.params, state)
        if isinstance(prompt, str) or not inv.supports(prompt.mode):
            # Every request is declined, the ones already accepted too: an accept sent
            # with the declines could let the upstream act while the caller is told
            # confirmation_required, and calls again. What the upstream answers is
            # nobody's, so the caller waits for it DECLINE_TIMEOUT at most.
            declines = dict.fromkeys([*done, *todo], DECLINE)
            with anyio.move_on_after(DECLINE_TIMEOUT), contextlib.suppress(UpstreamError):
                await session.call_tool(
                    tool, arguments, input_responses=declines, request_state=request_state
                )
            return unsupported_input(prompt) if isinstance(prompt, str) else await_input(prompt)
        return await_input(prompt)

    async def _answer_input(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        resume: Resume,
        state: dict[str, JSONValue],
    ) -> Outcome:
        """Record the answer to the current request; ask the next or send them all."""
        key, request_state = state.get("key"), state.get("state")
        todo, done = state.get("todo"), state.get("done")
        ident = state.get("id")
        if not (
            isinstance(key, str)
            and isinstance(ident, str)
            and (request_state is None or isinstance(request_state, str))
            and isinstance(todo, dict)
            and isinstance(done, dict)
        ):
            raise _Refused(
                f"upstream {session.name!r}: this answer is not one the gateway asked for"
            )
        done = {**done, key: _dumped(_result_of(resume))}
        if todo:
            return await self._ask(session, tool, arguments, inv, request_state, todo, done)
        try:
            answer = await session.call_tool(
                tool,
                arguments,
                progress=_forward(inv),
                input_responses=_results(done),
                request_state=request_state,
            )
        except UpstreamError as exc:
            return self._failed(session.name, exc, ident)
        return await self._answered(session, tool, arguments, inv, answer, ident)

    # -- -32042: URL hand-offs before the call is sent again ------------------------

    def _hand_off(
        self, upstream: str, params: types.ElicitRequestURLParams, rest: list[JSONValue]
    ) -> Outcome:
        """The prompt for the upstream's URL hand-off ``params``; ``rest`` are the ones
        still to show after it."""
        state: dict[str, JSONValue] = {
            "relay": _RETRY,
            "id": secrets.token_urlsafe(18),
            "todo": rest,
        }
        prompt = self._prompt(upstream, params, state)
        if isinstance(prompt, str):
            return unsupported_input(prompt)
        return await_input(prompt)  # the registry's confirmation_required without URL mode

    async def _handed_off(
        self,
        session: UpstreamSession,
        tool: str,
        arguments: dict[str, Any],
        inv: Invocation,
        resume: Resume,
        state: dict[str, JSONValue],
    ) -> Outcome:
        """The person's answer to a hand-off: the next one, or the call sent again."""
        name = session.name
        todo, ident = state.get("todo"), state.get("id")
        if not isinstance(todo, list) or not isinstance(ident, str):
            return fail(f"upstream {name!r}: this answer is not one the gateway asked for")
        if resume.action is not InputAction.ACCEPT:
            what = "declined" if resume.action is InputAction.DECLINE else "cancelled"
            result = fail(
                f"upstream {name!r} needs a URL hand-off completed before it takes this call; "
                f"the person {what} it, so the call was not sent again"
            )
            self._kept.record(ident, result)
            return result
        if todo:
            try:
                params = _URL.validate_python(sdk_arguments(todo[0]), by_name=False)
            except pydantic.ValidationError:  # pragma: no cover - it was validated on arrival
                return fail(f"upstream {name!r}: this answer is not one the gateway asked for")
            return self._hand_off(name, params, todo[1:])
        return await self._send(session, tool, arguments, inv, ident)

    # -- prompts ---------------------------------------------------------------------

    def _prompt(
        self, upstream: str, params: types.ElicitRequestParams, state: dict[str, JSONValue]
    ) -> FormInput | URLInput | str:
        """The prompt for an upstream's question, or why it cannot be shown."""
        limits = self._limits
        url = isinstance(params, types.ElicitRequestURLParams)
        what = "a URL hand-off" if url else "a form"
        message = _asked(upstream, params.message)
        try:
            if isinstance(params, types.ElicitRequestURLParams):
                prompt: FormInput | URLInput = URLInput(message, params.url, state=state)
                public = len(params.url.encode("utf-8"))
            else:
                schema = _shown(json_value(params.requested_schema))
                prompt = FormInput(message, schema, state)
                public = len(prompt.form())
            public += len(canonical_bytes(message))
        except (ConfigurationError, TypeError, JSONError) as exc:
            return (
                f"upstream {upstream!r} asked for {what} that opgate cannot show "
                f"({bounded(str(exc))}); complete it in the upstream's own client"
            )
        if public > limits.form_schema_bytes:
            return (
                f"upstream {upstream!r} asked for {what} of {public} bytes, more than a prompt "
                f"may carry (Limits.form_schema_bytes, {limits.form_schema_bytes})"
            )
        if len(prompt.state_bytes) > limits.state_bytes:
            return (
                f"upstream {upstream!r} asked for {what} whose request state is larger than a "
                f"prompt's private state may be (Limits.state_bytes, {limits.state_bytes})"
            )
        return prompt
