"""Tests of ``opgate._answers``: the checks of an invoke request that answers a prompt.

``resume_parts`` takes a ``resume`` apart into a token-shaped continuation and a
genuine ``InputResponse``; ``checked_answers`` decodes and bounds the answers and
checks them against the protected original prompt: a form acceptance needs object
answers that pass the form's schema, a URL acceptance and a decline or cancel carry
none. Each refusal is ``invalid_request``. Through the pipeline, on both ledgers, the
same rules are in ``test_interaction.py``.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from invoke_support import EMPTY_FORM, PROMPT_SUPPORT, ask_registry, code
from opgate import (
    Failed,
    Failure,
    FailureCode,
    FormInput,
    InputResponse,
    Invocation,
    Pending,
    Result,
    Text,
    URLInput,
    await_input,
    finish,
)
from opgate._answers import checked_answers, resume_parts
from opgate._forms import FormChecks, StoredPrompt

from conftest import Ctx

pytestmark = pytest.mark.anyio

TOKEN = "A" * 43  # the shape of a continuation token
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def refusal(check: Any, *args: Any) -> str:
    """The message of the ``invalid_request`` failure ``check(*args)`` raises."""
    with pytest.raises(Failure) as refused:
        check(*args)
    assert refused.value.code is FailureCode.INVALID_REQUEST
    return refused.value.message


# --- resume_parts ---------------------------------------------------------------------------


def test_a_resume_is_a_token_and_a_genuine_response() -> None:
    response = InputResponse.accept({"ok": True})
    assert resume_parts((TOKEN, response), 256) == (TOKEN, response)
    shape = "resume must be (continuation, InputResponse)"
    for resume in (None, (TOKEN,), [TOKEN, response], (TOKEN, response, None)):
        assert refusal(resume_parts, resume, 256) == shape
    forged = InputResponse.__new__(InputResponse)
    for impostor in ("accept", {"ok": True}, forged):
        assert refusal(resume_parts, (TOKEN, impostor), 256) == "resume must carry an InputResponse"


@pytest.mark.parametrize("token", [7, b"A" * 43, "", "short", "!" * 43, "A" * 43 + "=", "A" * 300])
def test_a_continuation_must_be_token_shaped_and_within_the_budget(token: object) -> None:
    response = InputResponse.accept({"ok": True})
    assert refusal(resume_parts, (token, response), 256) == "malformed continuation"


# --- checked_answers ------------------------------------------------------------------------


def check(prompt: Any, response: InputResponse, answer_bytes: int = 1024) -> Any:
    return checked_answers(StoredPrompt.of(prompt), response, answer_bytes, FormChecks())


def test_form_answers_come_back_decoded_with_their_canonical_bytes() -> None:
    form = FormInput("ok?", CONFIRM, "null")
    expected = ({"ok": True}, b'{"ok":true}')
    assert check(form, InputResponse.accept({"ok": True})) == expected
    assert check(form, InputResponse.accept('{ "ok" : true }')) == expected


def test_form_answers_must_be_an_object_that_passes_the_form() -> None:
    form = FormInput("ok?", CONFIRM, "null")
    assert "needs object answers" in refusal(check, form, InputResponse.accept())
    assert refusal(check, form, InputResponse.accept("[true]")).startswith("answers: ")
    wrong = refusal(check, form, InputResponse.accept({"ok": 1}))
    assert wrong.startswith("answers: ")
    assert "'ok'" in wrong


def test_answers_are_bounded_once_encoded() -> None:
    form = FormInput("ok?", CONFIRM, "null")
    message = refusal(check, form, InputResponse.accept({"ok": True}), 10)
    assert message == "answers: answers exceed 10 bytes once encoded"
    assert check(form, InputResponse.accept({"ok": True}), 11)[1] == b'{"ok":true}'


def test_a_decline_a_cancel_and_a_url_acceptance_carry_no_answers() -> None:
    form = FormInput("ok?", CONFIRM, "null")
    url = URLInput("pay", "https://example.com/pay")
    for prompt, response in (
        (form, InputResponse.decline()),
        (form, InputResponse.cancel()),
        (url, InputResponse.accept()),
    ):
        assert check(prompt, response) == (None, b"")
    refused = refusal(check, url, InputResponse.accept({"x": 1}))
    assert refused == "a URL acceptance carries no answers"


async def test_an_unconstructed_or_subclassed_response_is_an_invalid_request() -> None:
    async def handler(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("ok?", EMPTY_FORM, "null"))
        return finish(Result([Text("ok")]))

    reg = ask_registry(handler)
    pending = await reg.invoke(Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT)
    assert isinstance(pending, Pending)
    forged = InputResponse.__new__(InputResponse)
    outcome = await reg.invoke(
        Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT, resume=(pending.continuation, forged)
    )
    assert code(outcome) is FailureCode.INVALID_REQUEST
    with pytest.raises(TypeError, match="subclass"):
        type("Sneaky", (InputResponse,), {"__slots__": ()})
    # the prompt is still pending and answerable
    response = InputResponse.accept({})
    assert copy.copy(response) is response
    assert repr(pickle.loads(pickle.dumps(response))) == repr(response)
    outcome = await reg.invoke(
        Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT, resume=(pending.continuation, response)
    )
    assert not isinstance(outcome, Failed), outcome
