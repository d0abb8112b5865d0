"""``opgate.upstream._held``: a 2025-11-25 call's questions, held, answered, expired.

No upstream runs here: the session's side (``ask``, ``end``) and the handler's side
(``next_event``, ``reply``, ``abandon``) are driven directly. A question reaches the
handler and its answer the upstream; the call's timeout is lifted while the upstream
waits for the person; one question at a time; an abandoned call declines; a held
question whose deadline passes is declined and leaves the table; the table is
bounded, and a call that ends leaves it.
"""

from __future__ import annotations

import math

import anyio
import mcp.types as types
import pytest

from opgate.upstream._held import DECLINE, Ended, HeldCall, HeldCalls, Question

pytestmark = pytest.mark.anyio

FORM = types.ElicitRequestFormParams(message="Who?", requested_schema={"type": "object"})
ACCEPT = types.ElicitResult(action="accept", content={"name": "Ada"})


async def asked(call: HeldCall, into: list[object]) -> None:
    into.append(await call.ask(FORM))


async def test_a_question_reaches_the_handler_and_its_answer_the_upstream() -> None:
    call = HeldCall("up", call_timeout=30)
    answers: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asked, call, answers)
        event = await call.next_event(None)
        assert isinstance(event, Question)
        assert event.params is FORM
        assert call.scope.deadline == math.inf  # the upstream waits for the person
        event.answer(ACCEPT)
    assert answers == [ACCEPT]
    assert call.scope.deadline != math.inf
    call.end(Ended(answer=types.CallToolResult(content=[])))
    ended = await call.next_event(None)
    assert isinstance(ended, Ended)
    assert ended.answer is not None


async def test_one_question_at_a_time() -> None:
    call = HeldCall("up", call_timeout=30)
    answers: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asked, call, answers)
        await call.next_event(None)
        second = await call.ask(FORM)
        assert isinstance(second, types.ErrorData)
        assert "one question of a call at a time" in second.message
        assert call.reply(ACCEPT)
    assert answers == [ACCEPT]
    assert not call.reply(ACCEPT)  # no question open
    call.end(Ended(error=RuntimeError("over")))
    assert isinstance(await call.next_event(None), Ended)


async def test_an_abandoned_call_declines() -> None:
    call = HeldCall("up", call_timeout=30)
    answers: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asked, call, answers)
        await call.next_event(None)
        call.abandon()
    assert answers == [DECLINE]
    assert await call.ask(FORM) == DECLINE
    call.end(Ended(error=RuntimeError("dropped")))  # nobody reads it, nothing raises


async def test_a_held_question_past_its_deadline_is_declined_and_leaves_the_table() -> None:
    table = HeldCalls()
    call = HeldCall("up", call_timeout=30)
    answers: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asked, call, answers)
        question = await call.next_event(None)
        assert isinstance(question, Question)
        assert table.hold("t", call, question, anyio.current_time() + 0.05)
        assert len(table) == 1
    assert answers == [DECLINE]
    assert call.abandoned
    assert len(table) == 0
    assert table.take("t") is None
    call.end(Ended(error=RuntimeError("dropped")))


async def test_the_table_is_bounded_and_take_removes() -> None:
    table = HeldCalls(capacity=1)
    first, second = HeldCall("up", call_timeout=30), HeldCall("up", call_timeout=30)
    question = Question(FORM)
    assert table.hold("a", first, question, math.inf)
    assert not table.hold("b", second, Question(FORM), math.inf)
    assert table.take("a") is first
    assert first.token is None
    assert len(table) == 0
    assert table.hold("b", second, Question(FORM), math.inf)
    table.abandon_all()
    assert second.abandoned
    assert len(table) == 0
    second.end(Ended(error=RuntimeError("dropped")))
    first.end(Ended(error=RuntimeError("over")))
    assert isinstance(await first.next_event(None), Ended)  # taken: its reader gets the end


async def test_a_call_that_ends_while_held_leaves_the_table() -> None:
    table = HeldCalls()
    call = HeldCall("up", call_timeout=30)
    assert table.hold("t", call, Question(FORM), math.inf)
    call.end(Ended(answer=types.CallToolResult(content=[])))
    assert len(table) == 0
    assert not table.hold("u", call, Question(FORM), math.inf)  # an ended call is not held


async def test_a_call_abandoned_while_its_reader_returns_ends_without_an_answer() -> None:
    call = HeldCall("up", call_timeout=30)
    call.abandon()
    ended = await call.next_event(None)
    assert ended == Ended()
    call.end(Ended(error=RuntimeError("dropped")))


async def test_taking_a_held_call_lifts_its_questions_deadline() -> None:
    table = HeldCalls()
    call = HeldCall("up", call_timeout=30)
    answers: list[object] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asked, call, answers)
        question = await call.next_event(None)
        assert isinstance(question, Question)
        assert table.hold("t", call, question, anyio.current_time() + 0.2)
        assert table.take("t") is call
        await anyio.sleep(0.4)  # past the deadline the table had set
        assert call.reply(ACCEPT)
    assert answers == [ACCEPT]
    call.end(Ended(error=RuntimeError("over")))
    assert isinstance(await call.next_event(None), Ended)
