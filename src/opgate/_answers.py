"""The checks of an invoke request that answers a prompt: its resume pair and its answers.

``resume_parts`` takes the ``resume`` a host passed apart into a continuation token
and a genuine ``InputResponse``; ``checked_answers`` decodes and bounds the answers
and checks them against the protected original prompt (for a form, its schema).
Each raises an ``invalid_request`` ``Failure`` whose message states the rule; the
invoke sequence (``_invoke._resume``) calls them. Neither runs a callback or awaits.
"""

from __future__ import annotations

from ._failures import Failure, FailureCode
from ._forms import FormChecks, InputMode, StoredPrompt
from ._json import JSONValue
from ._responses import (
    AnswerError,
    InputAction,
    InputResponse,
    check_response_shape,
    decode_answers_canonical,
    is_genuine_response,
)
from .ledger import is_token_shaped

__all__ = ["checked_answers", "resume_parts"]


def resume_parts(resume: object, token_bytes: int) -> tuple[str, InputResponse]:
    """The continuation token and genuine ``InputResponse`` of a ``resume`` pair."""
    if not (isinstance(resume, tuple) and len(resume) == 2):
        raise Failure(FailureCode.INVALID_REQUEST, "resume must be (continuation, InputResponse)")
    token, response = resume
    if not is_genuine_response(response):  # final class, completed constructor only
        raise Failure(FailureCode.INVALID_REQUEST, "resume must carry an InputResponse")
    if not isinstance(token, str) or len(token) > token_bytes:
        raise Failure(FailureCode.INVALID_REQUEST, "malformed continuation")
    if not is_token_shaped(token):
        raise Failure(FailureCode.INVALID_REQUEST, "malformed continuation")
    return token, response


def checked_answers(
    prompt: StoredPrompt, response: InputResponse, answer_bytes: int, form_checks: FormChecks
) -> tuple[JSONValue, bytes]:
    """Decode, bound and check the answers against the protected original prompt."""
    try:
        answers, canonical = decode_answers_canonical(response, max_bytes=answer_bytes)
    except AnswerError as exc:
        raise Failure(FailureCode.INVALID_REQUEST, f"answers: {exc}") from None
    problem = check_response_shape(prompt.mode, response, answers)
    if problem is not None:
        raise Failure(FailureCode.INVALID_REQUEST, problem)
    if prompt.mode is InputMode.FORM and response.action is InputAction.ACCEPT:
        problem = form_checks.validate(prompt.schema_bytes, answers)
        if problem is not None:
            raise Failure(FailureCode.INVALID_REQUEST, f"answers: {problem}")
    return answers, canonical
