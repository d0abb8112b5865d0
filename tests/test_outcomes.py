"""Tests of ``opgate._outcomes``: what handlers return and what ``invoke`` returns.

Only an outcome minted by ``finish``, ``fail``, ``await_input`` or ``unsupported_input``
(``confirmation_required`` with the handler's message) and left unaltered counts:
anything else a handler returns (``None``, a bare value, a ``Result``, a forged or
replaced ``Outcome``) is ``invalid_result``, never a success. Outcomes copy
as themselves and pickle back through their constructors; a ``Pending`` never shows or
pickles its continuation.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from invoke_support import (
    ARGS,
    EMPTY_FORM,
    FORM_SUPPORT,
    Recorder,
    answer,
    code,
    invoke,
    make,
    registry,
    start,
)
from opgate import (
    Completed,
    Failed,
    Failure,
    FailureCode,
    FormInput,
    InputResponse,
    Invocation,
    Outcome,
    Pending,
    Result,
    Text,
    URLInput,
    URLPrompt,
    await_input,
    fail,
    finish,
    unsupported_input,
)

from conftest import Ctx

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "reply",
    [
        {"refunded": 7},
        Result([Text("bare result")], structured={"refunded": 7}),
        "finish",
        42,
    ],
)
async def test_handler_returning_garbage_is_invalid_result(reply: Any) -> None:
    reg, _ = make(Recorder(reply))
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT


async def test_handler_returning_none_is_never_success() -> None:
    async def returns_none(invocation: Invocation) -> None:
        return None

    reg, _ = make(returns_none)
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT


async def test_forged_outcome_and_result_are_rejected() -> None:
    from opgate._outcomes import Outcome

    forged_outcome = Outcome("finish", Result([Text("x")], structured={"refunded": 1}))
    reg, _ = make(Recorder(forged_outcome))
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT
    forged_result = object.__new__(Result)
    reg, _ = make(Recorder(finish(forged_result)))
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT


def _forgeries() -> list[tuple[str, Callable[[], Any]]]:
    result = Result([Text("ok")])

    def mutated() -> Any:
        outcome = finish(result)
        object.__setattr__(outcome, "kind", "weird")
        return outcome

    return [
        ("replace kind", lambda: dataclasses.replace(finish(result), kind="weird")),
        ("fail as finish", lambda: dataclasses.replace(fail("no"), kind="finish")),
        ("prompt as finish", lambda: dataclasses.replace(finish(result), kind="await_input")),
        ("same kind, replaced", lambda: dataclasses.replace(finish(result))),
        ("mutated kind", mutated),
    ]


FORGERIES = _forgeries()


@pytest.mark.parametrize(("label", "forge"), FORGERIES, ids=[label for label, _ in FORGERIES])
async def test_forged_outcomes_are_invalid_results(label: str, forge: Callable[[], Any]) -> None:
    async def handler(inv: Invocation) -> Any:
        return forge()

    outcome = await registry(handler).invoke(
        Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT
    )
    assert code(outcome) is FailureCode.INVALID_RESULT


async def test_genuine_outcomes_still_work() -> None:
    import copy

    async def handler(inv: Invocation) -> Any:
        return copy.copy(finish(Result([Text("ok")])))

    assert isinstance(await registry(handler).invoke(Ctx(), "orders.refund", ARGS), Completed)


def test_outcome_cannot_be_subclassed() -> None:
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("Sneaky", (Outcome,), {"__slots__": ()})


def test_only_the_constructor_functions_mint_a_genuine_outcome() -> None:
    result = Result([Text("ok")])
    assert finish(result).is_genuine()
    assert fail("no").is_genuine()
    assert await_input(URLInput("pay", "https://example.com/pay")).is_genuine()
    assert unsupported_input("cannot ask").is_genuine()
    assert not Outcome("finish", result).is_genuine()


@pytest.mark.parametrize(
    "make_outcome",
    [
        lambda: finish(Result([Text("ok")], structured={"n": 1})),
        lambda: fail("no", {"reason": "closed"}),
        lambda: await_input(FormInput("ok?", EMPTY_FORM, {"job": 1})),
        lambda: unsupported_input("cannot ask"),
    ],
    ids=["finish", "fail", "await_input", "unsupported_input"],
)
def test_outcomes_copy_as_themselves_and_pickle_back_genuine(make_outcome: Any) -> None:
    outcome = make_outcome()
    assert copy.copy(outcome) is outcome
    assert copy.deepcopy(outcome) is outcome
    again = pickle.loads(pickle.dumps(outcome))
    assert again.is_genuine()
    assert (again.kind, again.message) == (outcome.kind, outcome.message)
    assert type(again.payload) is type(outcome.payload)


def test_a_pending_never_shows_or_pickles_its_continuation() -> None:
    pending = Pending(
        URLPrompt("pay", "https://example.com/pay"), "bearer-token", datetime.now(UTC)
    )
    assert "bearer-token" not in repr(pending)
    with pytest.raises(TypeError, match="bearer continuation"):
        pickle.dumps(pending)
    assert copy.copy(pending) is pending
    assert copy.deepcopy(pending) is pending


async def test_unsupported_input_is_confirmation_required_with_its_message() -> None:
    async def handler(inv: Invocation) -> Any:
        return unsupported_input("the form has a nested object; use the upstream's own client")

    reg = registry(handler)
    outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED
    assert outcome.failure.message == "the form has a nested object; use the upstream's own client"


async def test_unsupported_input_without_a_message_takes_the_codes_guidance() -> None:
    async def handler(inv: Invocation) -> Any:
        return unsupported_input()

    outcome = await registry(handler).invoke(Ctx(), "orders.refund", ARGS)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure == Failure(FailureCode.CONFIRMATION_REQUIRED)
    assert "authorized interface" in outcome.failure.message


async def test_unsupported_input_after_an_answer_ends_the_chain() -> None:
    async def handler(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", EMPTY_FORM, {"job": 1}))
        return unsupported_input("the next question cannot be shown")

    reg = registry(handler)
    pending = await start(reg)
    outcome = await answer(reg, pending, InputResponse.accept({}))
    assert code(outcome) is FailureCode.CONFIRMATION_REQUIRED
    # The same answer again is a recovery, which gets the same refusal.
    again = await answer(reg, pending, InputResponse.accept({}))
    assert code(again) is FailureCode.CONFIRMATION_REQUIRED


@pytest.mark.parametrize(
    ("message", "words"),
    [("\ud800", "needs a str message"), ("x" * 70_000, "exceeds the result budget")],
)
async def test_an_unsupported_input_message_must_fit(message: str, words: str) -> None:
    async def handler(inv: Invocation) -> Any:
        return unsupported_input(message)

    outcome = await registry(handler).invoke(Ctx(), "orders.refund", ARGS)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert words in outcome.failure.message
