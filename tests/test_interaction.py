"""Human input: prompts, continuations, replay, recovery, expiry and capacity (issue 5).

This is the ledger contract suite: every test runs against the in-memory ledger and
against the shared Redis ledger (``opgate.redis``, on a real ``redis-server``), except
the few marked ``memory_only`` whose subject is the in-memory lifetime or threads. The
rules these flows rest on are tested on their own by their modules' files
(``test_answers.py``, ``test_conclusion.py``, ``test_invoke_request.py``,
``test_invocation.py``); here they must hold alike on every ledger.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from invoke_support import ARGS, FORM_SUPPORT, answer, code, start
from opgate import (
    Completed,
    Execute,
    Failed,
    FailureCode,
    FormInput,
    FormPrompt,
    InputAction,
    InputMode,
    InputResponse,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    URLInput,
    URLPrompt,
    await_input,
    fail,
    finish,
)

from conftest import (
    CURRENT_LEDGER,
    LEDGER_KINDS,
    Ctx,
    LedgerChoice,
    TeamPolicy,
    ledger_choice,
    ledger_stats,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, params=LEDGER_KINDS)
async def ledger(request: pytest.FixtureRequest) -> Any:
    """Runs each test against both ledgers; ``make`` builds registries on this one."""
    choice = ledger_choice(request)
    CURRENT_LEDGER.append(choice)
    try:
        yield choice
    finally:
        CURRENT_LEDGER.pop()
        await choice.close()


async def used(reg: Registry) -> int:
    return int((await ledger_stats(reg)).used)


async def live(reg: Registry) -> int:
    return int((await ledger_stats(reg)).live)


FORM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "note": {"type": "string", "maxLength": 10}},
    "required": ["ok"],
}


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Refund:
    """Asks for confirmation ``rounds`` times, then finishes; records every call."""

    def __init__(self, rounds: int = 1) -> None:
        self.rounds = rounds
        self.calls: list[Invocation] = []
        self.resumes: list[Any] = []

    async def __call__(self, inv: Invocation) -> Any:
        self.calls.append(inv)
        resume = inv.resume
        self.resumes.append(
            None
            if resume is None
            else (resume.action, resume.answers, resume.state, resume.recovery_only)
        )
        round_ = 0 if resume is None else resume.state["round"]
        if resume is not None and resume.action is not InputAction.ACCEPT:
            return fail(f"not confirmed: {resume.action.value}")
        if round_ < self.rounds:
            return await_input(
                FormInput(f"Confirm step {round_ + 1}?", FORM, {"round": round_ + 1, "job": "j-1"})
            )
        return finish(Result([Text("refunded")], structured={"refunded": 7}))


def make(
    handler: Any = None, policy: Any = None, clock: Clock | None = None, **limits: Any
) -> tuple[Registry, Any]:
    handler = handler or Refund()
    choice: LedgerChoice = CURRENT_LEDGER[-1]
    reg = Registry(
        [Operation("orders.refund", "Refund an order", handler)],
        policy or TeamPolicy(),
        limits=Limits(**limits) if limits else None,
        clock=clock,
        **choice.options(),
    )
    return choice.track(reg), handler


# --- the flow ----------------------------------------------------------------------------


async def test_plain_call_supports_no_interaction() -> None:
    reg, handler = make()
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert code(outcome) is FailureCode.CONFIRMATION_REQUIRED
    assert "authorized interface" in outcome.failure.message
    assert handler.calls[0].supports(InputMode.FORM) is False


async def test_form_prompt_and_resume() -> None:
    reg, handler = make()
    pending = await start(reg)
    assert isinstance(pending.prompt, FormPrompt)
    assert pending.prompt.message == "Confirm step 1?"
    assert pending.prompt.schema == FORM
    assert "j-1" not in repr(pending) + repr(pending.prompt)  # state stays private
    assert len(pending.continuation) == 43
    assert pending.continuation not in repr(pending)
    assert pending.expires_at.tzinfo is not None
    assert handler.calls[0].supports(InputMode.FORM)
    assert not handler.calls[0].supports(InputMode.URL)
    done = await answer(reg, pending, InputResponse.accept('{"ok": true, "note": "fine"}'))
    assert isinstance(done, Completed)
    assert handler.resumes[1] == (
        InputAction.ACCEPT,
        {"ok": True, "note": "fine"},
        {"round": 1, "job": "j-1"},
        False,
    )
    assert await live(reg) == 1  # completed record kept for recovery until it expires


async def test_resume_detaches_answers_and_state() -> None:
    seen: list[Any] = []

    async def mutating(inv: Invocation) -> Any:
        if inv.resume is None:
            state = {"job": "j-9", "items": [1, 2]}
            reply = await_input(FormInput("ok?", FORM, state))
            state["job"] = "mutated after returning"
            state["items"].append(3)
            return reply
        seen.append(inv.resume.state)
        state = inv.resume.state
        state["job"] = "mutated by handler"
        answers = inv.resume.answers
        answers["ok"] = False
        assert inv.resume.answers == {"ok": True}
        return fail("always fails, so the next call is a recovery")

    reg, _ = make(mutating)
    pending = await start(reg)
    assert code(await answer(reg, pending)) is FailureCode.OPERATION_FAILED
    assert code(await answer(reg, pending)) is FailureCode.OPERATION_FAILED
    assert seen == [{"job": "j-9", "items": [1, 2]}] * 2


@pytest.mark.parametrize(
    "answers",
    [
        '{"ok": "true"}',
        '{"ok": 1}',
        '{"ok": true, "extra": 1}',
        "{}",
        '{"ok": true, "note": "far too long for ten"}',
        "[true]",
        '{"ok": true, "ok": false}',
        '{"ok": true, "note": 1e99999}',
        "not json",
    ],
)
async def test_invalid_answers_rejected_before_authorization(answers: str) -> None:
    policy = TeamPolicy()
    reg, handler = make(policy=policy)
    pending = await start(reg)
    executes = len([r for r in policy.calls if isinstance(r, Execute)])
    outcome = await answer(reg, pending, InputResponse.accept(answers))
    assert code(outcome) is FailureCode.INVALID_REQUEST
    assert len(handler.calls) == 1
    assert len([r for r in policy.calls if isinstance(r, Execute)]) == executes
    # The prompt is still pending: a valid answer goes through afterwards.
    assert isinstance(await answer(reg, pending), Completed)


async def test_oversize_answers_rejected() -> None:
    reg, handler = make(answer_bytes=256)
    pending = await start(reg)
    outcome = await answer(reg, pending, InputResponse.accept('{"ok": true}' + " " * 300))
    assert code(outcome) is FailureCode.INVALID_REQUEST
    assert len(handler.calls) == 1


async def test_decline_and_cancel_reach_the_handler_explicitly() -> None:
    for response, action in (
        (InputResponse.decline(), InputAction.DECLINE),
        (InputResponse.cancel(), InputAction.CANCEL),
    ):
        reg, handler = make()
        pending = await start(reg)
        outcome = await answer(reg, pending, response)
        assert code(outcome) is FailureCode.OPERATION_FAILED
        assert handler.resumes[1][:2] == (action, None)


async def test_form_accept_without_object_answers_is_invalid() -> None:
    reg, _ = make()
    pending = await start(reg)
    assert code(await answer(reg, pending, InputResponse.accept())) is FailureCode.INVALID_REQUEST


async def test_url_prompt_flow() -> None:
    async def pay(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(URLInput("Pay on our site", "https://pay.example.com/s/1"))
        assert inv.resume.answers is None
        return finish(Result([Text(f"navigation {inv.resume.action.value}")]))

    reg, _ = make(pay)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support={InputMode.URL})
    assert isinstance(outcome, Pending)
    assert outcome.prompt == URLPrompt("Pay on our site", "https://pay.example.com/s/1")
    with_answers = await answer(
        reg, outcome, InputResponse.accept({"x": 1}), input_support={InputMode.URL}
    )
    assert code(with_answers) is FailureCode.INVALID_REQUEST
    done = await answer(reg, outcome, InputResponse.accept(), input_support={InputMode.URL})
    assert isinstance(done, Completed)


async def test_a_url_prompt_gives_its_state_back_on_resume() -> None:
    seen: list[Any] = []

    async def pay(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(URLInput("Pay", "https://pay.example.com/", state={"job": 3}))
        seen.append(inv.resume.state)
        return finish(Result([Text("paid")]))

    reg, _ = make(pay)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support={InputMode.URL})
    assert isinstance(outcome, Pending)
    done = await answer(reg, outcome, InputResponse.accept(), input_support={InputMode.URL})
    assert isinstance(done, Completed)
    assert seen == [{"job": 3}]


async def test_a_url_prompts_state_counts_against_the_state_budget() -> None:
    async def pay(inv: Invocation) -> Any:
        return await_input(URLInput("Pay", "https://pay.example.com/", state={"pad": "x" * 9000}))

    reg, _ = make(pay)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support={InputMode.URL})
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "Limits.state_bytes" in outcome.failure.message


async def test_unsupported_prompt_mode_needs_confirmation() -> None:
    async def pay(inv: Invocation) -> Any:
        return await_input(URLInput("Pay", "https://pay.example.com/"))

    reg, _ = make(pay)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert code(outcome) is FailureCode.CONFIRMATION_REQUIRED
    assert await used(reg) == 0


# --- binding -------------------------------------------------------------------------------


async def test_token_bound_to_principal_arguments_operation_and_registry() -> None:
    reg, handler = make()
    pending = await start(reg)
    other_principal = await answer(reg, pending, ctx=Ctx(principal="mallory"))
    other_arguments = await answer(reg, pending, arguments='{"order": 8}')
    other_registry, _ = make()
    foreign = await answer(other_registry, pending)
    failures = [other_principal, other_arguments, foreign]
    for outcome in failures:
        assert code(outcome) is FailureCode.EXPIRED
    # one identical answer for every mismatch: nothing says which part differed
    assert len({(o.failure.code, o.failure.message) for o in failures}) == 1
    assert len(handler.calls) == 1
    # the rightful owner is unaffected; whitespace and key order of arguments do not matter
    done = await answer(reg, pending, arguments='{ "order" : 7.0 }')
    assert isinstance(done, Completed)


async def test_malformed_continuations() -> None:
    reg, _ = make()
    for token in ("", "short", "x" * 43 + "y", "!" * 43, "a" * 5000):
        assert code(await answer(reg, token)) is FailureCode.INVALID_REQUEST
    assert code(await answer(reg, "A" * 43)) is FailureCode.EXPIRED  # well-formed, unknown
    bad_shape = await reg.invoke(
        Ctx(),
        "orders.refund",
        ARGS,
        input_support=FORM_SUPPORT,
        resume=("x",),  # type: ignore[arg-type]
    )
    assert code(bad_shape) is FailureCode.INVALID_REQUEST


# --- replay and recovery -----------------------------------------------------------------


async def test_identical_replay_returns_same_prompt_without_handler() -> None:
    policy = TeamPolicy()
    reg, handler = make(Refund(rounds=2), policy=policy)
    first = await start(reg)
    second = await answer(reg, first)
    assert isinstance(second, Pending)
    executes = len([r for r in policy.calls if isinstance(r, Execute)])
    replay = await answer(reg, first)
    assert isinstance(replay, Pending)
    assert (replay.continuation, replay.expires_at, replay.prompt) == (
        second.continuation,
        second.expires_at,
        second.prompt,
    )
    assert len(handler.calls) == 2
    assert len([r for r in policy.calls if isinstance(r, Execute)]) == executes + 1
    # re-authorization: a revoked principal gets unavailable on replay
    policy.deny_execute.add("orders.refund")
    assert code(await answer(reg, first)) is FailureCode.UNAVAILABLE


async def test_different_answer_cannot_fork() -> None:
    reg, handler = make(Refund(rounds=2))
    first = await start(reg)
    assert isinstance(await answer(reg, first), Pending)
    for response in (
        InputResponse.accept({"ok": True, "note": "other"}),
        InputResponse.decline(),
    ):
        assert code(await answer(reg, first, response)) is FailureCode.INVALID_REQUEST
    assert len(handler.calls) == 2
    # canonical equality counts as identical
    again = await answer(reg, first, InputResponse.accept('{ "ok" : true }'))
    assert isinstance(again, Pending)


async def test_replay_after_completion_is_recovery_only() -> None:
    reg, handler = make()
    pending = await start(reg)
    assert isinstance(await answer(reg, pending), Completed)
    recovered = await answer(reg, pending)
    assert isinstance(recovered, Completed)  # the handler ran again: results aren't cached
    assert len(handler.calls) == 3
    assert handler.resumes[2] == (
        InputAction.ACCEPT,
        {"ok": True},
        {"round": 1, "job": "j-1"},
        True,
    )
    assert code(await answer(reg, pending, InputResponse.decline())) is FailureCode.INVALID_REQUEST


@pytest.mark.parametrize("trouble", ["fail", "raise", "garbage", "bad_result"])
async def test_failures_after_acceptance_need_recovery(trouble: str) -> None:
    calls: list[bool] = []

    async def troubled(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        calls.append(inv.resume.recovery_only)
        if inv.resume.recovery_only:
            return finish(Result([Text("found existing outcome")]))
        if trouble == "fail":
            return fail("payment provider down")
        if trouble == "raise":
            raise RuntimeError("boom")
        if trouble == "garbage":
            return {"not": "an outcome"}
        return finish("not a Result")  # type: ignore[arg-type]

    reg, _ = make(troubled)
    pending = await start(reg)
    assert isinstance(await answer(reg, pending), Failed)
    assert isinstance(await answer(reg, pending), Completed)
    assert calls == [False, True]


async def test_cancellation_after_acceptance_needs_recovery() -> None:
    started = anyio.Event()
    recovery: list[bool] = []

    async def slow(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        recovery.append(inv.resume.recovery_only)
        if not inv.resume.recovery_only:
            started.set()
            await anyio.sleep(10)
        return finish(Result([Text("recovered")]))

    reg, _ = make(slow)
    pending = await start(reg)
    async with anyio.create_task_group() as group:
        group.start_soon(answer, reg, pending)
        await started.wait()
        group.cancel_scope.cancel()
    assert isinstance(await answer(reg, pending), Completed)
    assert recovery == [False, True]


async def test_recovery_may_only_finish() -> None:
    async def reprompts(inv: Invocation) -> Any:
        if inv.resume is not None and not inv.resume.recovery_only:
            return fail("first try failed")
        return await_input(FormInput("again?", FORM, {"job": 1}))

    reg, _ = make(reprompts)
    pending = await start(reg)
    assert code(await answer(reg, pending)) is FailureCode.OPERATION_FAILED
    assert code(await answer(reg, pending)) is FailureCode.INVALID_RESULT


# --- limits ----------------------------------------------------------------------------------


async def drive(reg: Registry, rounds: int) -> Any:
    outcome: Any = await start(reg)
    for _ in range(rounds):
        if not isinstance(outcome, Pending):
            break
        outcome = await answer(reg, outcome)
    return outcome


async def test_chain_of_exactly_ten_prompts_may_finish() -> None:
    reg, handler = make(Refund(rounds=10))
    outcome = await drive(reg, 10)
    assert isinstance(outcome, Completed)
    assert len(handler.calls) == 11


async def test_eleventh_prompt_fails_interaction_limit() -> None:
    reg, _ = make(Refund(rounds=11))
    outcome = await drive(reg, 10)
    assert code(outcome) is FailureCode.INTERACTION_LIMIT


async def test_max_prompts_is_configurable() -> None:
    reg, _ = make(Refund(rounds=2), max_prompts=1)
    assert code(await drive(reg, 1)) is FailureCode.INTERACTION_LIMIT


async def test_expiry_boundaries_default_lifetime() -> None:
    clock = Clock()
    reg, _ = make(clock=clock)
    pending = await start(reg)
    assert pending.expires_at.timestamp() == clock.now + 600
    clock.now += 600
    outcome = await answer(reg, pending)
    assert code(outcome) is FailureCode.EXPIRED
    assert "intent or job key" in outcome.failure.message
    assert await used(reg) == 0

    pending = await start(reg)
    clock.now += 599.999
    assert isinstance(await answer(reg, pending), Completed)


async def test_input_expiry_shortens_but_never_extends() -> None:
    clock = Clock()
    reg, _ = make(Refund(rounds=2), clock=clock)
    first = await start(reg, input_expiry=timedelta(seconds=60))
    assert first.expires_at.timestamp() == clock.now + 60
    clock.now += 30
    # a later prompt asking for more time is capped at the earlier deadline
    second = await answer(reg, first, input_expiry=timedelta(hours=1))
    assert isinstance(second, Pending)
    assert second.expires_at == first.expires_at
    longer = await start(reg, input_expiry=timedelta(hours=5))
    assert longer.expires_at.timestamp() == clock.now + 600


async def test_child_may_expire_before_parent_and_is_not_resurrected() -> None:
    clock = Clock()
    reg, handler = make(Refund(rounds=2), clock=clock)
    first = await start(reg)
    second = await answer(reg, first, input_expiry=timedelta(seconds=10))
    assert isinstance(second, Pending)
    clock.now += 11
    assert code(await answer(reg, second)) is FailureCode.EXPIRED
    assert code(await answer(reg, first)) is FailureCode.EXPIRED  # replaying the parent
    assert len(handler.calls) == 2


@pytest.mark.memory_only
async def test_lifetime_close_expires_only_its_continuations() -> None:
    reg, _ = make()
    serving = reg.open_lifetime()
    other = reg.open_lifetime()
    mine = await start(reg, lifetime=serving)
    theirs = await start(reg, lifetime=other)
    direct = await start(reg)
    await serving.close()
    assert code(await answer(reg, mine, lifetime=serving)) is FailureCode.EXPIRED
    assert isinstance(await answer(reg, theirs, lifetime=other), Completed)
    assert isinstance(await answer(reg, direct), Completed)
    # a pending reply cannot commit under a closed lifetime
    assert (
        code(
            await reg.invoke(
                Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, lifetime=serving
            )
        )
        is FailureCode.EXPIRED
    )
    # tokens are bound to their lifetime
    fresh = await start(reg, lifetime=other)
    assert code(await answer(reg, fresh)) is FailureCode.EXPIRED


async def test_foreign_lifetime_is_invalid_request() -> None:
    reg, _ = make()
    other, _ = make()
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, lifetime=other.open_lifetime())
    assert code(outcome) is FailureCode.INVALID_REQUEST


# --- capacity ----------------------------------------------------------------------------------


async def test_capacity_exhaustion_is_busy_and_keeps_live_prompts() -> None:
    from opgate.ledger import initial_charge

    small: dict[str, int] = {
        "argument_bytes": 256,
        "form_schema_bytes": 256,
        "state_bytes": 64,
        "answer_bytes": 256,
    }
    probe, _ = make(Refund(rounds=1), **small)
    await start(probe)
    retained = await used(probe)  # one live prompt
    answer_room = len(b'{"ok":true}') + probe.limits.max_prompt_charge()
    initial = initial_charge(len(b'{"order":7}'), probe.limits)
    assert answer_room < initial  # room to answer, no room for a second chain
    budget = max(retained + answer_room, Limits(**small).chain_floor())
    assert budget < retained + initial
    reg, handler = make(
        Refund(rounds=1), chain_bytes=budget, ledger_bytes=budget, principal_bytes=budget, **small
    )
    first = await start(reg)
    calls = len(handler.calls)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert code(outcome) is FailureCode.BUSY
    # another principal finds the whole ledger full, too
    outcome = await reg.invoke(
        Ctx(principal="bob"), "orders.refund", ARGS, input_support=FORM_SUPPORT
    )
    assert code(outcome) is FailureCode.BUSY
    assert len(handler.calls) == calls  # no handler effect
    # a plain call declares no input support and reserves nothing
    plain = await reg.invoke(Ctx(), "orders.refund", ARGS)
    assert code(plain) is FailureCode.CONFIRMATION_REQUIRED
    assert isinstance(await answer(reg, first), Completed)  # the live prompt was kept


async def test_reservations_released_and_accounting_returns_to_zero() -> None:
    clock = Clock()
    reg, _ = make(Refund(rounds=3), clock=clock)
    outcome = await drive(reg, 3)
    assert isinstance(outcome, Completed)
    assert await used(reg) > 0
    clock.now += 601
    assert await used(reg) == 0
    assert await live(reg) == 0


async def test_accounting_counts_schema_state_answer_and_arguments() -> None:
    reg, _ = make()
    pending = await start(reg)
    before = await used(reg)
    prompt = FormInput("Confirm step 1?", FORM, {"round": 1, "job": "j-1"})
    assert before >= len(ARGS) + len(prompt.form()) + len(prompt.state_bytes)
    assert isinstance(await answer(reg, pending, InputResponse.accept({"ok": True})), Completed)
    assert await used(reg) >= before + len(b'{"ok":true}')


# --- concurrency -----------------------------------------------------------------------------


async def test_fifty_concurrent_resumes_make_one_transition() -> None:
    gate = anyio.Event()

    class Gated(Refund):
        async def __call__(self, inv: Invocation) -> Any:
            if inv.resume is not None:
                await gate.wait()
            return await super().__call__(inv)

    handler = Gated(rounds=2)
    reg, _ = make(handler)
    first = await start(reg)
    outcomes: list[Any] = []

    async def one() -> None:
        outcomes.append(await answer(reg, first))

    async with anyio.create_task_group() as group:
        for _ in range(50):
            group.start_soon(one)
        await anyio.sleep(0.05)
        gate.set()
    pendings = [o for o in outcomes if isinstance(o, Pending)]
    busy = [o for o in outcomes if isinstance(o, Failed) and o.failure.code is FailureCode.BUSY]
    assert len(pendings) + len(busy) == 50
    assert len(handler.calls) == 2  # exactly one transition
    assert len({p.continuation for p in pendings}) == 1


async def test_request_during_a_running_transition_is_busy() -> None:
    gate = anyio.Event()
    running = anyio.Event()

    async def slow(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"job": 1}))
        running.set()
        await gate.wait()
        return finish(Result([Text("done")]))

    reg, _ = make(slow)
    pending = await start(reg)
    results: list[Any] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: _collect(results, answer(reg, pending)))
        await running.wait()
        assert code(await answer(reg, pending)) is FailureCode.BUSY
        gate.set()
    assert isinstance(results[0], Completed)


async def _collect(into: list[Any], coro: Any) -> None:
    into.append(await coro)


# --- prompt budgets --------------------------------------------------------------------------


async def test_prompt_state_and_public_size_are_bounded() -> None:
    async def big_state(inv: Invocation) -> Any:
        return await_input(FormInput("ok?", FORM, {"blob": "x" * 600}))

    reg, _ = make(big_state, state_bytes=512)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "state_bytes" in outcome.failure.message
    assert await used(reg) == 0

    async def big_message(inv: Invocation) -> Any:
        return await_input(FormInput("m" * 2000, FORM, "null"))

    reg, _ = make(big_message, form_schema_bytes=1024)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert await used(reg) == 0


async def test_private_state_counts_only_toward_the_ledger() -> None:
    async def state_heavy(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, {"blob": "y" * 7000}))
        return finish(Result([Text("done")]))

    reg, _ = make(state_heavy)
    pending = await start(reg)
    assert "yyyy" not in repr(pending)
    assert await used(reg) > 7000
    assert isinstance(await answer(reg, pending), Completed)


async def test_json_null_state_round_trips() -> None:
    states: list[Any] = []

    async def null_state(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", FORM, "null"))
        states.append(inv.resume.state)
        return finish(Result([Text("done")]))

    reg, _ = make(null_state)
    assert isinstance(await answer(reg, await start(reg)), Completed)
    assert states == [None]


@pytest.mark.memory_only
async def test_closing_a_lifetime_stops_a_running_handlers_prompt_from_committing() -> None:
    running = anyio.Event()
    release = anyio.Event()

    async def slow(inv: Invocation) -> Any:
        running.set()
        await release.wait()
        return await_input(FormInput("ok?", FORM, {"job": 1}))

    reg, _ = make(slow)
    serving = reg.open_lifetime()
    results: list[Any] = []
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: _collect(
                results,
                reg.invoke(
                    Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, lifetime=serving
                ),
            )
        )
        await running.wait()
        assert await used(reg) > 0  # the running handler stays charged
        await serving.close()
        release.set()
    assert code(results[0]) is FailureCode.EXPIRED
    assert await used(reg) == 0


@pytest.mark.memory_only
async def test_registry_is_shared_safely_between_threads() -> None:
    import threading

    clock = Clock()
    reg, handler = make(Refund(rounds=1), clock=clock)
    failures: list[BaseException] = []

    def worker(index: int) -> None:
        async def cycles() -> None:
            for round_ in range(25):
                arguments = f'{{"order": {index * 100 + round_}}}'
                pending = await reg.invoke(
                    Ctx(), "orders.refund", arguments, input_support=FORM_SUPPORT
                )
                assert isinstance(pending, Pending), pending
                done = await answer(reg, pending, arguments=arguments)
                assert isinstance(done, Completed), done
                page = await reg.search(Ctx(), "refund")
                assert not isinstance(page, Failed)

        try:
            anyio.run(cycles)
        except BaseException as exc:  # reported to the main thread below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]

    def run_all() -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    await anyio.to_thread.run_sync(run_all)
    assert failures == []
    assert len(handler.calls) == 4 * 25 * 2
    clock.now += 601
    reg._ledger.sweep()  # type: ignore[attr-defined]
    assert reg._ledger.used == 0  # type: ignore[attr-defined]
    assert reg._ledger.live == 0  # type: ignore[attr-defined]


async def test_no_registry_lock_is_held_while_callbacks_run() -> None:
    """Callbacks re-entering the registry (policy and handler) never deadlock."""
    holder: list[Registry] = []
    nested: list[Any] = []

    class Reentrant(TeamPolicy):
        async def authorize(self, ctx: Ctx, request: Any) -> None:  # type: ignore[override]
            if isinstance(request, Execute) and ctx.principal == "alice":
                reg = holder[0]
                nested.append(await reg.search(Ctx(principal="bob"), "refund"))
                nested.append(
                    await reg.invoke(
                        Ctx(principal="bob"), "orders.refund", ARGS, input_support=FORM_SUPPORT
                    )
                )

    class ReentrantHandler(Refund):
        async def __call__(self, inv: Invocation) -> Any:
            if inv.resume is not None:
                nested.append(await holder[0].inspect(Ctx(principal="bob"), "orders.refund"))
            return await super().__call__(inv)

    reg, _ = make(ReentrantHandler(rounds=1), policy=Reentrant())
    holder.append(reg)
    pending = await start(reg)
    with anyio.fail_after(5):
        done = await answer(reg, pending)
    assert isinstance(done, Completed)
    assert any(isinstance(n, Pending) for n in nested)
