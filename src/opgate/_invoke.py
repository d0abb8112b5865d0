"""The invoke sequence: the one place that orders an invoke's rules, callbacks and ledger steps.

``Invoker.invoke`` checks the request's options, asks ``scope_key`` and whether the
operation is discoverable, validates the arguments (``_request``), then either runs a
first call (``_initial``: authorize, reserve a prompt chain if the host can show
prompts — while a shared store is down, run as for a host that cannot — dispatch,
conclude or commit a prompt) or answers a prompt (``_resume``:
find and claim the record, then ``_answer`` a new answer, ``_replay`` an identical
one, or ``_recover`` after completion or breakage). The deadline and the serving
lifetime are checked before every dispatch and before a result is returned
(``Call.checkpoint``); every ledger record claimed and every reservation taken is
settled or released, whatever is raised.

No lock is held while a policy, handler or progress callback runs. What this raises
reaches ``Registry.invoke``, which returns it as a ``Failed`` (real cancellation,
``KeyboardInterrupt`` and ``SystemExit`` propagate).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio

from ._answers import checked_answers, resume_parts
from ._catalog import Entry
from ._conclusion import check_prompt, conclude
from ._execution import (
    honour_cancellation,
    is_own_close,
    must_propagate,
    must_yield,
    run_sync_to_completion,
)
from ._failures import Failure, FailureCode, internal_failure
from ._forms import FormChecks, InputMode, StoredPrompt, is_genuine_prompt
from ._invocation import Resume, new_invocation, new_resume
from ._invoke_request import LIFETIME_CLOSED, call_options, validated_arguments
from ._json import JSONValue, parsed_canonical_bytes
from ._keys import ScopeHashes
from ._limits import RECORD_FIXED_BYTES, Limits
from ._outcomes import Completed, Failed, InvokeOutcome, Outcome, Pending
from ._policy import Execute, Policy, authorize, scope_key, unavailable
from ._progress import Diagnostics, ProgressChannel
from ._search import discoverable
from .ledger import Binding, Event, LedgerBackend, LedgerRecord, LedgerUnavailable, Lifetime

__all__ = ["Call", "Invoker"]

#: ``confirmation_required`` for a call that would prompt while the shared store is down.
PROMPTS_DOWN = (
    "this operation needs confirmation from a person, and prompts are unavailable "
    "while the continuation store cannot be reached; try again shortly"
)


@dataclass(slots=True, eq=False)  # internal and never mutated
class Call:
    """One invoke request whose arguments passed: what every later phase needs."""

    ctx: Any
    entry: Entry
    values: dict[str, JSONValue]  # validated; handed out only as detached copies
    modes: frozenset[InputMode]
    lifetime_seconds: float
    serving: Lifetime
    channel: ProgressChannel
    deadline: float  # the host's effective anyio deadline, read once per call
    started: float  # time.monotonic() when the call began

    async def checkpoint(self, when: str, *, fresh: bool = False) -> None:
        """The check before dispatch and before returning a result.

        Fails ``cancelled`` if the anyio deadline has passed (or the scope was
        cancelled), delivers a pending cancellation of the calling task (asyncio
        deadlines included: see ``_execution.honour_cancellation``), and refuses a
        closed serving lifetime. ``fresh`` reads anyio's scopes again instead of the
        deadline read at the start: after a sync handler, whose worker thread
        kept anyio from delivering a cancellation of the caller's scope. (An async
        handler's awaits deliver it; what a shielded section held back is delivered
        by the yield once the call has taken ``YIELD_AFTER``.)
        """
        deadline = anyio.current_effective_deadline() if fresh else self.deadline
        if deadline != math.inf and deadline <= anyio.current_time():
            raise Failure(FailureCode.CANCELLED, f"the deadline passed {when}")
        if must_yield(self.started):
            await honour_cancellation()
        if self.serving.closed:
            raise Failure(FailureCode.EXPIRED, LIFETIME_CLOSED)


class Invoker:
    """Runs invoke requests against one registry's catalog, policy and ledger.

    Built by the registry whenever it binds its secret and ledger; holds only what
    the registry holds (nothing per call).
    """

    __slots__ = (
        "_entries",
        "_form_checks",
        "_ledger",
        "_limits",
        "_max_prompt_charge",
        "_monotonic",
        "_policy",
        "_positions",
        "_scope_hashes",
    )

    def __init__(
        self,
        *,
        entries: tuple[Entry, ...],
        positions: Mapping[str, int],
        policy: Policy,
        limits: Limits,
        ledger: LedgerBackend[Any, Any],
        monotonic: Callable[[], float],
        form_checks: FormChecks,
        scope_hashes: ScopeHashes,
    ) -> None:
        self._entries = entries
        self._positions = positions
        self._policy = policy
        self._limits = limits
        self._max_prompt_charge = limits.max_prompt_charge()  # Limits are frozen
        self._ledger = ledger
        self._monotonic = monotonic
        self._form_checks = form_checks
        self._scope_hashes = scope_hashes

    async def invoke(
        self,
        ctx: Any,
        name: str,
        arguments: object,
        input_support: object,
        resume: object,
        progress: object,
        input_expiry: object,
        lifetime: object,
        diagnostics: Diagnostics,
    ) -> InvokeOutcome:
        """The whole invoke pipeline (``Registry.invoke`` turns what it raises into ``Failed``)."""
        started = time.monotonic()
        modes, lifetime_seconds, serving = call_options(
            self._limits, self._ledger, input_support, progress, input_expiry, lifetime
        )
        key = await scope_key(self._policy, ctx)
        entry = await discoverable(self._policy, self._entries, self._positions, ctx, name)
        if entry is None:
            raise unavailable()
        values, canonical = validated_arguments(entry, arguments, self._limits.argument_bytes)
        # Only calls that may prompt or that resume need the continuation binding.
        bound: tuple[Binding, int] | None = None
        if resume is not None or modes:
            if canonical is None:
                canonical = parsed_canonical_bytes(values)
            binding = Binding(
                operation=entry.name,
                arguments_hash=hashlib.sha256(canonical).digest(),
                scope_hash=self._scope_hashes.of(key),
                lifetime=serving,
            )
            bound = (binding, len(canonical))
        channel = ProgressChannel(progress, diagnostics, clock=self._monotonic)  # type: ignore[arg-type]
        # The effective deadline of the host's cancel scopes, read once: it is
        # checked before dispatch and before a result is returned.
        deadline = anyio.current_effective_deadline()
        call = Call(
            ctx, entry, values, modes, lifetime_seconds, serving, channel, deadline, started
        )
        try:
            if resume is not None:
                assert bound is not None
                outcome = await self._resume(call, bound[0], resume)
            else:
                outcome = await self._initial(call, bound)
        finally:
            await channel.close()
        return _with_diagnostics(outcome, diagnostics)

    async def _may_execute(self, call: Call) -> bool:
        """Execution authorization, with a detached copy of the validated arguments."""
        return await authorize(
            self._policy, call.ctx, Execute._of_validated(call.entry.name, call.values)
        )

    # -- a first call ------------------------------------------------------------

    async def _initial(self, call: Call, bound: tuple[Binding, int] | None) -> InvokeOutcome:
        """A call that answers no prompt; with input support it reserves a chain first."""
        if not await self._may_execute(call):
            return Failed(unavailable())
        reservation: Any = None
        refusal = ""  # the default confirmation_required message
        if bound is not None:
            try:
                reservation = await self._ledger.begin(*bound)
            except LedgerUnavailable:
                # Prompts need the store, the call itself does not: it runs as for a
                # host that cannot show prompts, and a request for input is refused.
                call = dataclasses.replace(call, modes=frozenset())
                refusal = PROMPTS_DOWN
        try:
            await call.checkpoint("before the operation started")
            outcome = await _dispatch(call, None)
            if outcome.kind == "await_input":
                if reservation is None:
                    return Failed(Failure(FailureCode.CONFIRMATION_REQUIRED, refusal))
                return await self._commit(call, None, outcome, reservation)
            result = conclude(call.entry, outcome, self._limits)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            return result
        finally:
            if reservation is not None:
                await self._ledger.release(reservation)

    # -- answering a prompt ------------------------------------------------------

    async def _resume(self, call: Call, binding: Binding, resume: object) -> InvokeOutcome:
        """A call answering a prompt: find, check and claim its record, then act on it."""
        token, response = resume_parts(resume, self._limits.token_bytes)
        record = await self._ledger.find(token, binding)
        if record is None:
            return Failed(Failure(FailureCode.EXPIRED))
        prompt = record.prompt
        assert isinstance(prompt, StoredPrompt)
        answers, answer_bytes = checked_answers(
            prompt, response, self._limits.answer_bytes, self._form_checks
        )
        # A StrEnum member is the str of its value: encoded without the enum's property.
        answer_key = str.encode(response.action, "ascii") + b"\0" + answer_bytes
        charge = len(answer_bytes) + self._max_prompt_charge
        # Only a new answer needs room; replays and recoveries reuse the record.
        claim = await self._ledger.claim(record, answer_key, len(answer_bytes), charge)
        if isinstance(claim, Failure):
            return Failed(claim)
        claimed, reservation = claim
        try:
            # From here the record is in flight: whatever happens before the handler
            # takes it over (an exception of any kind) gives it back, so it can never
            # stay busy.
            try:
                state = prompt.state_value()
                verified = new_resume(response.action, answers, state, claimed is Event.RECOVER)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._ledger.settle(record, _GIVE_BACK[claimed])
                raise
            if claimed is Event.REPLAY:
                return await self._replay(call, record)
            if claimed is Event.RECOVER:
                return await self._recover(call, record, verified)
            assert reservation is not None
            return await self._answer(call, record, verified, reservation)
        finally:
            if reservation is not None:
                await self._ledger.release(reservation)

    async def _answer(
        self, call: Call, record: LedgerRecord, verified: Resume, reservation: Any
    ) -> InvokeOutcome:
        """A new answer: authorize, dispatch, then record what became of it."""
        try:
            allowed = await self._may_execute(call)
            await call.checkpoint("before the operation started")
        except BaseException:
            await self._ledger.settle(record, Event.REVERT)
            raise
        if not allowed:
            await self._ledger.settle(record, Event.REVERT)
            return Failed(unavailable())
        settled = False
        try:
            outcome = await _dispatch(call, verified)
            if outcome.kind == "await_input":
                if record.round >= self._limits.max_prompts:
                    return Failed(Failure(FailureCode.INTERACTION_LIMIT))
                reply = await self._commit(call, record, outcome, reservation)
                settled = isinstance(reply, Pending)
                return reply
            result = conclude(call.entry, outcome, self._limits)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            if isinstance(result, Completed):
                await self._ledger.settle(record, Event.FINISHED, reservation)
                settled = True
            return result
        finally:
            if not settled:
                await self._ledger.settle(record, Event.BROKEN, reservation)

    async def _replay(self, call: Call, record: LedgerRecord) -> InvokeOutcome:
        """An identical answer to an answered prompt: the same next prompt, re-authorized."""
        try:
            if not await self._may_execute(call):
                return Failed(unavailable())
            child = await self._ledger.child_of(record)
            if child is None:
                return Failed(Failure(FailureCode.EXPIRED))
            child_record, token = child
            prompt = child_record.prompt
            assert isinstance(prompt, StoredPrompt)
            return Pending(prompt.public(), token, _utc(child_record.expires_at))
        finally:
            await self._ledger.settle(record, Event.REPLAYED)

    async def _recover(self, call: Call, record: LedgerRecord, verified: Resume) -> InvokeOutcome:
        """An identical answer after completion or breakage: a recovery-only call."""
        recovered = False
        try:
            if not await self._may_execute(call):
                return Failed(unavailable())
            await call.checkpoint("before the operation started")
            outcome = await _dispatch(call, verified)
            if outcome.kind == "await_input":
                return Failed(
                    Failure(
                        FailureCode.INVALID_RESULT,
                        "a recovery call may only finish; it cannot ask for more input",
                    )
                )
            result = conclude(call.entry, outcome, self._limits)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            recovered = isinstance(result, Completed)
            return result
        finally:
            await self._ledger.settle(record, Event.RECOVERED if recovered else Event.BROKEN)

    # -- a prompt the handler asked for ------------------------------------------

    async def _commit(
        self,
        call: Call,
        parent: LedgerRecord | None,
        outcome: Outcome,
        reservation: Any,
    ) -> Pending | Failed:
        """Check a prompt against the host's support and the budgets, then commit it."""
        prompt = outcome.payload
        if not is_genuine_prompt(prompt):  # final classes, completed constructors only
            raise Failure(
                FailureCode.INVALID_RESULT, "await_input(...) needs a FormInput or URLInput"
            )
        if prompt.mode not in call.modes:
            return Failed(Failure(FailureCode.CONFIRMATION_REQUIRED))
        check_prompt(prompt, self._limits)
        stored = StoredPrompt.of(prompt)
        charge = RECORD_FIXED_BYTES + stored.size
        committed = await self._ledger.commit(
            reservation, parent, stored, charge, call.lifetime_seconds
        )
        if isinstance(committed, Failure):
            return Failed(committed)
        record, token = committed
        return Pending(stored.public(), token, _utc(record.expires_at))


async def _dispatch(call: Call, verified: Resume | None) -> Outcome:
    """Call the handler and return its genuine outcome.

    Anything it raises (``BaseException`` included) becomes a sanitized
    ``internal`` failure, except what ``must_propagate``. A sync handler runs in
    a worker thread that is waited for even if the caller is cancelled, so this
    returns (or raises) only once the handler has really returned.
    """
    entry = call.entry
    # The handler is the validated arguments' last user (each call dispatches once;
    # the policy had its own copy), so it gets them without a copy: a copy of 64 KiB
    # of small items costs milliseconds (issue 9, item 1).
    invocation = new_invocation(entry.name, call.values, call.modes, verified, call.channel)
    try:
        if entry.is_async:
            outcome = await entry.handler(invocation)
        else:
            outcome = await run_sync_to_completion(entry.handler, invocation)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except BaseException as exc:
        if must_propagate(exc) or is_own_close(exc):
            raise
        raise internal_failure(exc) from None
    if not isinstance(outcome, Outcome) or not outcome.is_genuine():
        raise Failure(
            FailureCode.INVALID_RESULT,
            "the operation returned none of finish(...), fail(...), await_input(...) "
            "and unsupported_input(...)",
        )
    return outcome


#: How a claimed record is given back when its request stops before the hand-over.
_GIVE_BACK = {Event.ANSWER: Event.REVERT, Event.REPLAY: Event.REPLAYED, Event.RECOVER: Event.BROKEN}


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _with_diagnostics(outcome: InvokeOutcome, diagnostics: Diagnostics) -> InvokeOutcome:
    entries = diagnostics.entries
    if not entries:
        return outcome
    if isinstance(outcome, Completed):
        return Completed(outcome.result, entries)
    if isinstance(outcome, Failed):
        return Failed(outcome.failure, entries)
    return Pending(outcome.prompt, outcome.continuation, outcome.expires_at, entries)
