"""Ledger capacity (issue 9, items 7-9): memory follows the accounting, per-principal
shares, and chain budgets that can carry what they promise."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

from opgate import (
    Completed,
    ConfigurationError,
    Failed,
    FailureCode,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate._limits import CHAIN_FIXED_BYTES, RECORD_FIXED_BYTES
from opgate.ledger import LEDGER_FULL, initial_charge

from conftest import (
    CURRENT_LEDGER,
    LEDGER_KINDS,
    Ctx,
    TeamPolicy,
    ledger_choice,
    ledger_stats,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, params=LEDGER_KINDS)
async def ledger(request: pytest.FixtureRequest) -> Any:
    """Part of the ledger contract suite: each test runs on both ledgers unless
    ``memory_only`` (in-memory internals: heaps, lifetimes, tracemalloc)."""
    choice = ledger_choice(request)
    CURRENT_LEDGER.append(choice)
    try:
        yield choice
    finally:
        CURRENT_LEDGER.pop()
        await choice.close()


def registry(operations: list[Operation], **kwargs: Any) -> Registry:
    """A registry on the ledger under test."""
    choice = CURRENT_LEDGER[-1]
    return choice.track(Registry(operations, TeamPolicy(), **kwargs, **choice.options()))


FORM_SUPPORT = {InputMode.FORM}
KIB = 1024
MIB = 1024 * KIB


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def padded_object(size: int, key: str = "p") -> str:
    """A JSON object ``{"key": "xxx…"}`` whose canonical (and raw) encoding is ``size`` bytes."""
    text = json.dumps({key: "x" * (size - len(key) - 7)}, separators=(",", ":"))
    assert len(text) == size
    return text


def maximal_form(public_bytes: int) -> tuple[str, dict[str, Any]]:
    """A message and form whose public part (message + canonical schema) is exactly the budget."""
    schema = {"type": "object", "properties": {"n": {"type": "string", "maxLength": 1 << 20}}}
    from opgate._json import canonical_bytes, from_python

    schema_size = len(canonical_bytes(from_python(schema)))
    return "m" * (public_bytes - schema_size), schema


class MaxPrompts:
    """Issues ``rounds`` prompts whose message+schema, state and answers are maximal."""

    def __init__(self, limits: Limits, rounds: int) -> None:
        self.limits = limits
        self.rounds = rounds
        self.calls = 0

    async def __call__(self, inv: Invocation) -> Any:
        self.calls += 1
        round_ = 0 if inv.resume is None else inv.resume.state["p"].count("r")
        if round_ >= self.rounds:
            return finish(Result([Text("done")]))
        message, schema = maximal_form(self.limits.form_schema_bytes)
        # state: a canonical object of exactly state_bytes; its "r"s count the rounds
        state_size = self.limits.state_bytes
        body = "r" * (round_ + 1)
        state = json.dumps({"p": body + "x" * (state_size - 8 - len(body))}, separators=(",", ":"))
        assert len(state) == state_size
        return await_input(FormInput(message, schema, state))


def max_answer(limits: Limits) -> InputResponse:
    return InputResponse.accept(padded_object(limits.answer_bytes, "n"))


async def drive_max_chain(limits: Limits, rounds: int) -> tuple[Any, MaxPrompts]:
    handler = MaxPrompts(limits, rounds)
    reg = registry([Operation("long.chain", "A long chain", handler)], limits=limits)
    arguments = padded_object(limits.argument_bytes)
    outcome: Any = await reg.invoke(Ctx(), "long.chain", arguments, input_support=FORM_SUPPORT)
    prompts = 0
    while isinstance(outcome, Pending):
        prompts += 1
        outcome = await reg.invoke(
            Ctx(),
            "long.chain",
            arguments,
            input_support=FORM_SUPPORT,
            resume=(outcome.continuation, max_answer(limits)),
        )
    assert prompts == rounds or not isinstance(outcome, Completed)
    return outcome, handler


# --- item 9: the chain budget ------------------------------------------------------------


SMALL = {"argument_bytes": 256, "form_schema_bytes": 256, "state_bytes": 64, "answer_bytes": 256}


async def test_the_smallest_accepted_chain_budget_completes_a_maximum_transition() -> None:
    floor = Limits(**SMALL).chain_floor()
    with pytest.raises(ConfigurationError, match="chain_bytes"):
        Limits(**SMALL, chain_bytes=floor - 1)
    limits = Limits(**SMALL, chain_bytes=floor, max_prompts=2)
    # answer the first maximal prompt with a maximal answer: the handler prompts again
    outcome, handler = await drive_max_chain(limits, rounds=1)
    assert isinstance(outcome, Completed), outcome
    # ... and the answer that leads to a second maximal prompt commits it too
    handler = MaxPrompts(limits, rounds=2)
    reg = registry([Operation("long.chain", "A long chain", handler)], limits=limits)
    arguments = padded_object(limits.argument_bytes)
    first = await reg.invoke(Ctx(), "long.chain", arguments, input_support=FORM_SUPPORT)
    assert isinstance(first, Pending)
    second = await reg.invoke(
        Ctx(),
        "long.chain",
        arguments,
        input_support=FORM_SUPPORT,
        resume=(first.continuation, max_answer(limits)),
    )
    assert isinstance(second, Pending), second


async def test_the_chain_floor_counts_everything_a_transition_reserves() -> None:
    limits = Limits(**SMALL, chain_bytes=64 * KIB)
    prompt = RECORD_FIXED_BYTES + 256 + 64
    # the chain, its arguments and first prompt, the answer, and the next maximum prompt
    assert limits.chain_floor() == CHAIN_FIXED_BYTES + 256 + prompt + 256 + prompt


async def test_default_limits_carry_ten_maximum_prompts_and_the_tenth_answer_finishes() -> None:
    limits = Limits()
    outcome, handler = await drive_max_chain(limits, rounds=10)
    assert isinstance(outcome, Completed), outcome
    assert handler.calls == 11
    # an eleventh prompt still fails interaction_limit
    outcome, _ = await drive_max_chain(limits, rounds=11)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INTERACTION_LIMIT


# --- item 7: memory follows the accounting ---------------------------------------------------


@pytest.mark.memory_only
async def test_closed_lifetimes_free_their_memory_not_only_their_accounting() -> None:
    ledger_bytes = MIB
    limits = Limits(
        ledger_bytes=ledger_bytes, principal_bytes=MIB // 2
    )  # seven principals can fill it
    counter = iter(range(10**9))

    async def prompt(inv: Invocation) -> Any:
        # a distinct 7 KiB state per prompt, so nothing is shared or interned
        n = next(counter)
        return await_input(
            FormInput("ok?", {"type": "object", "properties": {}}, [f"{n:07d}" * 1000])
        )

    clock = Clock()
    reg = Registry(
        [Operation("fill", "Fill the ledger", prompt)], TeamPolicy(), limits=limits, clock=clock
    )
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for _ in range(8):
            serving = reg.open_lifetime()
            for index in range(10_000):
                outcome = await reg.invoke(
                    Ctx(principal=f"p{index % 7}"),
                    "fill",
                    "{}",
                    input_support=FORM_SUPPORT,
                    lifetime=serving,
                )
                if isinstance(outcome, Failed):
                    assert outcome.failure.code is FailureCode.BUSY
                    break
            # the ledger really filled (less the seven principals' answer rooms)
            assert index > 70
            filled = reg._ledger.used + reg._ledger.rooms
            assert filled > ledger_bytes - initial_charge(2, limits)
            await serving.close()
            assert reg._ledger.used == 0
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert retained < ledger_bytes // 2, retained  # nothing live: far under one ledger


@pytest.mark.memory_only
async def test_an_expired_child_is_not_kept_alive_by_its_answered_parent() -> None:
    from datetime import timedelta

    clock = Clock()

    async def twice(inv: Invocation) -> Any:
        if inv.resume is not None and inv.resume.state == 2:
            return finish(Result([Text("done")]))
        round_ = 1 if inv.resume is None else 2
        return await_input(FormInput("ok?", {"type": "object", "properties": {}}, round_))

    reg = Registry([Operation("two", "Two prompts", twice)], TeamPolicy(), clock=clock)
    first = await reg.invoke(Ctx(), "two", "{}", input_support=FORM_SUPPORT)
    assert isinstance(first, Pending)
    second = await reg.invoke(
        Ctx(),
        "two",
        "{}",
        input_support=FORM_SUPPORT,
        resume=(first.continuation, InputResponse.accept({})),
        input_expiry=timedelta(seconds=5),
    )
    assert isinstance(second, Pending)
    parent = next(r for r in reg._ledger._records.values() if r.round == 1)
    clock.now += 6
    reg._ledger.sweep()
    assert parent.child is None
    assert parent.child_token is None
    replay = await reg.invoke(
        Ctx(),
        "two",
        "{}",
        input_support=FORM_SUPPORT,
        resume=(first.continuation, InputResponse.accept({})),
    )
    assert isinstance(replay, Failed)
    assert replay.failure.code is FailureCode.EXPIRED


@pytest.mark.memory_only
async def test_the_expiry_heap_never_outgrows_the_live_records() -> None:
    clock = Clock()

    async def prompt(inv: Invocation) -> Any:
        return await_input(FormInput("ok?", {"type": "object", "properties": {}}, 1))

    reg = Registry([Operation("p", "Prompt", prompt)], TeamPolicy(), clock=clock)
    keep = await reg.invoke(Ctx(), "p", "{}", input_support=FORM_SUPPORT)
    assert isinstance(keep, Pending)
    for _ in range(50):
        serving = reg.open_lifetime()
        for _ in range(20):
            await reg.invoke(Ctx(), "p", "{}", input_support=FORM_SUPPORT, lifetime=serving)
        await serving.close()
        assert len(reg._ledger._expiry) <= 2 * reg._ledger.live + 64
    assert reg._ledger.live == 1


# --- item 8: per-principal share -----------------------------------------------------------


async def flood(reg: Registry, principal: str, limit: int = 100_000) -> int:
    """Prompts made by ``principal`` until it gets ``busy``."""
    for made in range(limit):
        outcome = await reg.invoke(Ctx(principal=principal), "p", "{}", input_support=FORM_SUPPORT)
        if isinstance(outcome, Failed):
            assert outcome.failure.code is FailureCode.BUSY, outcome
            assert principal not in outcome.failure.message
            return made
    raise AssertionError("never busy")


def tiny_prompts(limits: Limits) -> Registry:
    async def prompt(inv: Invocation) -> Any:
        return await_input(FormInput("ok?", {"type": "object", "properties": {}}, 1))

    return registry([Operation("p", "Prompt", prompt)], limits=limits)


async def test_one_principal_cannot_fill_the_ledger_for_everyone() -> None:
    limits = Limits(ledger_bytes=2 * MIB, principal_bytes=MIB // 2)  # a quarter of the ledger
    reg = tiny_prompts(limits)
    flooded = await flood(reg, "mallory")
    assert flooded > 0
    assert (await ledger_stats(reg)).used <= limits.principal_bytes
    # the flooder is busy, everybody else is not
    for other in ("alice", "bob", "carol"):
        outcome = await reg.invoke(Ctx(principal=other), "p", "{}", input_support=FORM_SUPPORT)
        assert isinstance(outcome, Pending), outcome
    # three more flooders still cannot push out a fourth principal entirely
    for principal in ("m2", "m3"):
        await flood(reg, principal)
    outcome = await reg.invoke(Ctx(principal="dave"), "p", "{}", input_support=FORM_SUPPORT)
    assert isinstance(outcome, Pending), outcome


async def test_a_principal_at_its_share_can_still_answer_its_own_prompts() -> None:
    # A principal whose pending prompts fill its share must be able to answer them
    # (new calls keep one maximum answer free for that), or it is stuck until they
    # expire.
    async def prompt(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", {"type": "object", "properties": {}}, 1))
        return finish(Result([Text("answered")]))

    limits = Limits(ledger_bytes=2 * MIB, principal_bytes=MIB // 2)
    reg = registry([Operation("p", "Prompt", prompt)], limits=limits)
    pending: list[Pending] = []
    while True:
        outcome = await reg.invoke(Ctx(principal="mallory"), "p", "{}", input_support=FORM_SUPPORT)
        if isinstance(outcome, Failed):
            assert outcome.failure.code is FailureCode.BUSY
            break
        assert isinstance(outcome, Pending)
        pending.append(outcome)
    for waiting in pending[:3]:
        answered = await reg.invoke(
            Ctx(principal="mallory"),
            "p",
            "{}",
            input_support=FORM_SUPPORT,
            resume=(waiting.continuation, InputResponse.accept({})),
        )
        assert isinstance(answered, Completed), answered
    assert (await ledger_stats(reg)).used <= limits.principal_bytes


async def test_principals_that_fill_the_ledger_together_can_still_answer() -> None:
    # Eight principals, none at its share, fill the whole ledger: new calls are then
    # busy for everyone, but each principal keeps a maximum answer's room in the ledger
    # (as in its share), so its pending prompts stay answerable, next prompt included.
    note = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 20000}}}

    async def twice(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("first?", note, 1))
        if inv.resume.state == 1:
            return await_input(FormInput("second?", note, 2))
        return finish(Result([Text("done")]))

    limits = Limits(ledger_bytes=2 * MIB, principal_bytes=MIB // 2)
    clock = Clock()
    reg = registry([Operation("p", "Prompt", twice)], limits=limits, clock=clock)
    principals = [f"p{index}" for index in range(8)]
    pending: dict[str, list[Pending]] = {principal: [] for principal in principals}
    refused: dict[str, str] = {}
    for _ in range(1000):  # each round adds prompts; the ledger fills well before
        for principal in principals:
            if principal in refused:
                continue
            ctx = Ctx(principal=principal)
            outcome = await reg.invoke(ctx, "p", "{}", input_support=FORM_SUPPORT)
            if isinstance(outcome, Failed):
                assert outcome.failure.code is FailureCode.BUSY, outcome
                refused[principal] = outcome.failure.message
            else:
                assert isinstance(outcome, Pending), outcome
                pending[principal].append(outcome)
        if len(refused) == len(principals):
            break
    assert set(refused.values()) == {LEDGER_FULL}  # the ledger filled, no share did
    late = await reg.invoke(Ctx(principal="late"), "p", "{}", input_support=FORM_SUPPORT)
    assert isinstance(late, Failed)
    assert late.failure.message == LEDGER_FULL

    async def answer(principal: str, waiting: Pending, text: str) -> Any:
        return await reg.invoke(
            Ctx(principal=principal),
            "p",
            "{}",
            input_support=FORM_SUPPORT,
            resume=(waiting.continuation, InputResponse.accept({"note": text})),
        )

    largest = "x" * (limits.answer_bytes - 16)  # a maximum answer: {"note": "..."}
    for index, principal in enumerate(principals):
        assert len(pending[principal]) > 1
        if index % 2:  # one maximum answer, and the next prompt it asks for
            assert isinstance(await answer(principal, pending[principal][0], largest), Pending)
            continue
        for waiting in pending[principal][:2]:  # small answers: whole chains
            second = await answer(principal, waiting, "ok")
            assert isinstance(second, Pending), second
            assert isinstance(await answer(principal, second, "ok"), Completed)
    assert (await ledger_stats(reg)).used <= limits.ledger_bytes
    # once every prompt expired nothing is charged, and no room is kept for anyone
    clock.now += limits.input_lifetime.total_seconds() + 1
    for _ in range(100):  # Redis sweeps a batch per call
        if (await ledger_stats(reg)).used == 0:
            break
    assert (await ledger_stats(reg)).used == 0
    assert await answer_rooms(reg) == 0


async def test_an_answer_refused_by_policy_gives_its_room_back() -> None:
    # An answer the policy refuses (nothing ran, the prompt is pending again) must not
    # cost its principal the room it reserved: with the ledger full, a maximum answer to
    # the same prompt still goes through.
    note = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 20000}}}

    async def ask(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("note?", note, 1))
        return await_input(FormInput("again?", note, 2))

    limits = Limits(ledger_bytes=2 * MIB, principal_bytes=MIB // 2)
    reg = registry([Operation("p", "Prompt", ask)], limits=limits)
    pending: list[Pending] = []
    for index in range(10_000):  # eight principals fill the ledger
        outcome = await reg.invoke(
            Ctx(principal=f"p{index % 8}"), "p", "{}", input_support=FORM_SUPPORT
        )
        if isinstance(outcome, Failed):
            assert outcome.failure.message == LEDGER_FULL, outcome
            break
        assert isinstance(outcome, Pending)
        if index % 8 == 0:
            pending.append(outcome)
    largest = "x" * (limits.answer_bytes - 16)
    answer = (pending[0].continuation, InputResponse.accept({"note": largest}))
    policy: Any = reg._policy
    policy.deny_execute.add("p")
    rooms = await answer_rooms(reg)
    for _ in range(3):
        denied = await reg.invoke(
            Ctx(principal="p0"), "p", "{}", input_support=FORM_SUPPORT, resume=answer
        )
        assert isinstance(denied, Failed)
        assert denied.failure.code is FailureCode.UNAVAILABLE, denied
    assert await answer_rooms(reg) == rooms  # every refused answer gave all of it back
    policy.deny_execute.clear()
    for index in range(1, 100):  # the others take whatever the refusals freed
        refill = await reg.invoke(
            Ctx(principal=f"p{index % 7 + 1}"), "p", "{}", input_support=FORM_SUPPORT
        )
        if isinstance(refill, Failed):
            break
    again = await reg.invoke(
        Ctx(principal="p0"), "p", "{}", input_support=FORM_SUPPORT, resume=answer
    )
    assert isinstance(again, Pending), again


async def answer_rooms(reg: Registry) -> int:
    """The sum of the answer rooms the ledger keeps (either backend)."""
    from opgate._ledger import Ledger

    ledger: Any = reg._ledger
    if isinstance(ledger, Ledger):
        assert sum(ledger._rooms.values()) == ledger.rooms
        return ledger.rooms
    import redis.asyncio as redis_client

    store = redis_client.Redis.from_url(ledger._url)
    try:
        head = ledger._key_prefix
        rooms = await store.hgetall(head + "rooms")
        total = int(await store.get(head + "roomsum") or 0)
        assert sum(int(v) for v in rooms.values()) == total
        assert await store.hlen(head + "credits") == 0
        return total
    finally:
        await store.aclose()


async def test_the_principal_busy_message_gives_advice_that_works() -> None:
    # Answering never frees the share (an answered prompt stays for replay and
    # recovery until it expires): a principal that answered every prompt it holds is
    # still busy, so the message must not send it to answer them; expiry frees it.
    async def prompt(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", {"type": "object", "properties": {}}, 1))
        return finish(Result([Text("answered")]))

    clock = Clock()
    limits = Limits(**SMALL, chain_bytes=8 * KIB, ledger_bytes=64 * KIB, principal_bytes=16 * KIB)
    reg = registry([Operation("p", "Prompt", prompt)], limits=limits, clock=clock)
    pending: list[Pending] = []
    while isinstance(
        outcome := await reg.invoke(Ctx(principal="m"), "p", "{}", input_support=FORM_SUPPORT),
        Pending,
    ):
        pending.append(outcome)
    assert len(pending) > 1
    for waiting in pending:
        answer = (waiting.continuation, InputResponse.accept({}))
        answered = await reg.invoke(
            Ctx(principal="m"), "p", "{}", input_support=FORM_SUPPORT, resume=answer
        )
        assert isinstance(answered, Completed), answered
    refused = await reg.invoke(Ctx(principal="m"), "p", "{}", input_support=FORM_SUPPORT)
    assert isinstance(refused, Failed)
    assert refused.failure.code is FailureCode.BUSY
    assert "answer" not in refused.failure.message
    assert "expire" in refused.failure.message
    clock.now += limits.input_lifetime.total_seconds() + 1
    again = await reg.invoke(Ctx(principal="m"), "p", "{}", input_support=FORM_SUPPORT)
    assert isinstance(again, Pending), again


@pytest.mark.memory_only
async def test_the_principal_share_frees_with_its_prompts() -> None:
    reg = tiny_prompts(Limits(ledger_bytes=2 * MIB, principal_bytes=MIB // 2))
    made = await flood(reg, "mallory")
    serving_used = reg._ledger.used
    assert serving_used > 0
    await reg._ledger.default_lifetime.close()
    assert reg._ledger.used == 0
    assert reg._ledger._by_scope == {}  # no bookkeeping left for principals without data
    assert (reg._ledger._rooms, reg._ledger.rooms) == ({}, 0)
    assert made > 0


async def test_the_share_is_configurable_and_can_cover_the_whole_ledger() -> None:
    limits = Limits(ledger_bytes=MIB, principal_bytes=MIB)
    reg = tiny_prompts(limits)
    await flood(reg, "mallory")
    # One principal may fill the whole ledger but its answers' headroom.
    used = (await ledger_stats(reg)).used
    room = MIB - limits.answer_headroom()
    assert room - limits.max_prompt_charge() - 4 * KIB < used <= room
    # What is left is mallory's answer room: the others are busy (see the answer tests).
    assert await flood(reg, "alice") == 0
    assert (await ledger_stats(reg)).used <= MIB


async def test_principal_share_floor_and_ceiling() -> None:
    chain = Limits().chain_bytes
    with pytest.raises(ConfigurationError, match="principal_bytes"):
        Limits(principal_bytes=chain - 1)
    with pytest.raises(ConfigurationError, match="principal_bytes"):
        Limits(ledger_bytes=4 * MIB, principal_bytes=4 * MIB + 1)
    assert Limits(principal_bytes=chain).principal_bytes == chain
    # the default share does not shrink to fit a small ledger: it must be given
    with pytest.raises(ConfigurationError, match="set principal_bytes"):
        Limits(ledger_bytes=chain)
    assert Limits(ledger_bytes=chain, principal_bytes=chain).principal_bytes == chain
