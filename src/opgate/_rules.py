"""The rules search and invoke apply, as small functions that run no callback and never await.

Before anything runs: a search request's query, group, limit and cursor
(``search_problem``); an invoke request's options (``call_options``), arguments
(``validated_arguments``), resume (``resume_parts``) and answers
(``checked_answers``). After the handler returned: a finish or fail outcome
(``conclude``, ``operation_failure``) and a prompt (``check_prompt``).

Each raises (or returns) a ``Failure`` whose message states the rule; the
sequences that call them are ``Registry`` (search, inspect) and ``_invoke``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta
from itertools import repeat
from typing import TYPE_CHECKING, Any

from ._failures import Failure, FailureCode
from ._forms import FormChecks, FormInput, InputMode, StoredPrompt, URLInput
from ._json import (
    WRITTEN_PER_CANONICAL,
    JSONError,
    JSONValue,
    from_python,
    parse,
    parsed_canonical_bytes,
    written_size,
)
from ._ledger import LedgerBackend, Lifetime, is_token_shaped
from ._limits import PROMPT_OVERHEAD_BYTES, QUERY_BYTES, SEARCH_MAX_LIMIT, Limits
from ._outcomes import Completed, Failed, Outcome
from ._responses import (
    AnswerError,
    InputAction,
    InputResponse,
    check_response_shape,
    decode_answers_canonical,
    is_genuine_response,
)
from ._results import Result, check_result_budget, is_constructed
from ._schema import ViolationDetail
from ._text import has_surrogate, json_string_size, utf8_size

if TYPE_CHECKING:
    from ._catalog import Entry

__all__ = [
    "FAILURE_OVERHEAD_BYTES",
    "LIFETIME_CLOSED",
    "call_options",
    "check_prompt",
    "checked_answers",
    "conclude",
    "operation_failure",
    "resume_parts",
    "search_problem",
    "validated_arguments",
]

#: Collection types accepted for ``input_support`` without the slower ABC check.
_PLAIN_COLLECTIONS = (frozenset, set, tuple, list)
_NO_TIME = timedelta(0)


#: Bytes of framing charged for one failure message plus its diagnostics.
FAILURE_OVERHEAD_BYTES = 256

#: The public message for a call on a closed serving lifetime.
LIFETIME_CLOSED = (
    "the serving lifetime is closed: this server no longer accepts calls; "
    "use the application's own intent or job key to find the outcome of earlier requests"
)


# -- search ----------------------------------------------------------------------


def search_problem(
    query: object, group: object, limit: object, cursor: object, token_bytes: int
) -> str | None:
    """What is wrong with a search request's parameters, or ``None``."""
    for label, value in (("query", query), ("group", group)):
        if not isinstance(value, str):
            return f"{label} must be a string"
        if has_surrogate(value):
            return f"{label} must be valid UTF-8"
        if len(value) > QUERY_BYTES or utf8_size(value) > QUERY_BYTES:
            return f"{label} must be at most {QUERY_BYTES} UTF-8 bytes"
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX_LIMIT
    ):
        return f"limit must be an integer from 1 to {SEARCH_MAX_LIMIT}"
    if cursor is not None and (not isinstance(cursor, str) or len(cursor) > token_bytes):
        return "malformed cursor: start the search again without a cursor"
    return None


# -- an invoke request -----------------------------------------------------------


def call_options(
    limits: Limits,
    ledger: LedgerBackend[Any, Any],
    input_support: object,
    progress: object,
    input_expiry: object,
    lifetime: object,
) -> tuple[frozenset[InputMode], float, Lifetime]:
    """The input modes, prompt lifetime in seconds and serving lifetime of a call."""
    if type(input_support) not in _PLAIN_COLLECTIONS and (
        isinstance(input_support, str | bytes) or not isinstance(input_support, Collection)
    ):
        raise Failure(FailureCode.INVALID_REQUEST, "input_support must be a set of InputMode")
    modes = frozenset(input_support)  # type: ignore[call-overload]  # a Collection, checked
    if modes and not all(map(isinstance, modes, repeat(InputMode))):
        raise Failure(FailureCode.INVALID_REQUEST, "input_support must contain InputMode values")
    if progress is not None and not callable(progress):
        raise Failure(FailureCode.INVALID_REQUEST, "progress must be a callable sink")
    seconds = limits.input_lifetime.total_seconds()
    if input_expiry is not None:
        if not isinstance(input_expiry, timedelta) or input_expiry <= _NO_TIME:
            raise Failure(FailureCode.INVALID_REQUEST, "input_expiry must be a positive timedelta")
        seconds = min(seconds, input_expiry.total_seconds())
    if lifetime is None:
        serving = ledger.default_lifetime
    elif isinstance(lifetime, Lifetime) and lifetime._ledger is ledger:
        serving = lifetime
    else:
        raise Failure(
            FailureCode.INVALID_REQUEST,
            "lifetime must come from this registry's open_lifetime()",
        )
    if serving.closed:
        raise Failure(FailureCode.EXPIRED, LIFETIME_CLOSED)
    return modes, seconds, serving


def validated_arguments(
    entry: Entry, arguments: object, limit: int
) -> tuple[dict[str, JSONValue], bytes | None]:
    """Budget, strict parse, object check, schema validation: the validated arguments.

    Also returns their canonical bytes when the budget check had to compute them
    (mapping arguments), so they are not computed twice.
    """
    canonical: bytes | None = None
    try:
        # Sizes are measured in C (str.encode, the buffer), never by a subclass's own
        # encode or __len__, and parse reads the characters the same way.
        if isinstance(arguments, str):
            raw = str.encode(arguments, "utf-8", "surrogatepass")
            if len(raw) > limit:
                raise _too_large(len(raw), limit)
            values = parse(arguments, profile=True)
        elif isinstance(arguments, bytes | bytearray):
            size = len(arguments) if type(arguments) is bytes else memoryview(arguments).nbytes
            if size > limit:
                raise _too_large(size, limit)
            values = parse(arguments, profile=True)
        elif isinstance(arguments, Mapping):
            written = written_size(arguments)  # a bound in C before converting
            if written is not None and written > WRITTEN_PER_CANONICAL * limit:
                raise _too_large(written, limit)
            values = from_python(arguments, profile=True)
            canonical = parsed_canonical_bytes(values)  # the C encoder, mostly
            size = len(canonical)
            if size > limit:
                raise _too_large(size, limit)
        else:
            raise Failure(
                FailureCode.INVALID_ARGUMENTS,
                "arguments must be a JSON object (JSON text or a mapping)",
            )
    except JSONError as exc:
        raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {exc}") from None
    if not isinstance(values, dict):
        raise Failure(
            FailureCode.INVALID_ARGUMENTS,
            f"arguments must be a JSON object, not {_json_kind(values)}",
        )
    violation = entry.input_schema.first_violation(values)
    if violation is not None:
        raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {violation}")
    return values, canonical


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


def _too_large(size: int, limit: int) -> Failure:
    return Failure(
        FailureCode.INVALID_ARGUMENTS,
        f"arguments are {size} bytes, over the limit of {limit} bytes",
    )


def _json_kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a number"


# -- what the handler returned ---------------------------------------------------


def conclude(entry: Entry, outcome: Outcome, limits: Limits) -> Completed | Failed:
    """Check a finish or fail outcome against the output schema and result budgets."""
    if outcome.kind == "fail":
        return Failed(operation_failure(entry, outcome, limits))
    assert outcome.kind == "finish"  # genuine outcomes only (_invoke._dispatch)
    result = outcome.payload
    if not isinstance(result, Result) or not is_constructed(result):
        raise Failure(
            FailureCode.INVALID_RESULT, "finish(...) needs a Result built with Result(...)"
        )
    if entry.output_schema is not None:
        encoded = result.structured_json
        if encoded is None:
            raise Failure(
                FailureCode.INVALID_RESULT,
                "the operation declares an output schema but returned no structured result",
            )
        try:  # one strict parse of the canonical bytes applies the numeric profile
            structured = parse(encoded, profile=True)
        except JSONError as exc:  # the rule only: the pointer holds the data's names
            failure = Failure(FailureCode.INVALID_RESULT, f"structured result: {exc.reason}")
            failure.cause = exc
            raise failure from None
        violation = entry.output_schema.first_violation(structured)
        if violation is not None:  # the public message names nothing from the data
            failure = Failure(
                FailureCode.INVALID_RESULT, f"structured result: {violation.public()}"
            )
            failure.cause = ViolationDetail(violation)
            raise failure
    problem = check_result_budget(
        result,
        result_bytes=limits.result_bytes,
        inline_bytes=limits.inline_bytes,
    )
    if problem is not None:
        raise Failure(FailureCode.INVALID_RESULT, problem)
    return Completed(result)


def operation_failure(entry: Entry, outcome: Outcome, limits: Limits) -> Failure:
    """The ``operation_failed`` failure of a fail outcome, diagnostics kept if they fit."""
    message = outcome.message
    if not isinstance(message, str) or has_surrogate(message):
        raise Failure(FailureCode.INVALID_RESULT, "fail(...) needs a str message")
    budget = limits.result_bytes - FAILURE_OVERHEAD_BYTES
    encoded = json_string_size(message)  # as JSON will carry it, escapes included
    if encoded > budget:
        raise Failure(FailureCode.INVALID_RESULT, "the failure message exceeds the result budget")
    diagnostics: JSONValue = None
    if outcome.payload is not None:
        try:
            diagnostics = from_python(outcome.payload, profile=entry.output_schema is not None)
        except JSONError:
            diagnostics = None
        if (
            diagnostics is not None
            and entry.output_schema is not None
            and not entry.output_schema.is_valid(diagnostics)
        ):
            diagnostics = None
        if diagnostics is not None and encoded + len(parsed_canonical_bytes(diagnostics)) > budget:
            diagnostics = None
    return Failure(FailureCode.OPERATION_FAILED, message, diagnostics=diagnostics)


def check_prompt(prompt: FormInput | URLInput, limits: Limits) -> None:
    """The prompt's state and public part must fit their budgets (else ``invalid_result``).

    The public part is counted as JSON encodes it: the message's escapes count,
    like a result's text (the schema's canonical bytes and the URL are already JSON).
    """
    if isinstance(prompt, FormInput):
        public = json_string_size(prompt.message) + prompt.schema_size
        state = len(prompt.state_bytes)
        if state > limits.state_bytes:
            raise Failure(
                FailureCode.INVALID_RESULT,
                f"the prompt's state is {state} bytes, over Limits.state_bytes "
                f"({limits.state_bytes})",
            )
    else:
        public = json_string_size(prompt.message) + utf8_size(prompt.url().url)
        state = 0
    if public > limits.form_schema_bytes:
        raise Failure(
            FailureCode.INVALID_RESULT,
            f"the prompt's message and schema or URL are {public} bytes, over "
            f"Limits.form_schema_bytes ({limits.form_schema_bytes})",
        )
    if public + PROMPT_OVERHEAD_BYTES > limits.result_bytes:
        raise Failure(FailureCode.INVALID_RESULT, "the prompt does not fit the result budget")
