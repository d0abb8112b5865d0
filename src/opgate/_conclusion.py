"""What a handler returned, checked: a finish, fail or unsupported-input outcome, or a prompt.

``conclude`` turns a finish outcome into ``Completed`` (its result checked against
the output schema and the result budgets), a fail outcome into ``Failed``
(``operation_failure``: the message bounded, the diagnostics kept if they convert,
validate and fit) and an unsupported-input outcome into a ``confirmation_required``
``Failed`` (its message bounded as a failure's). ``check_prompt`` holds a prompt a
handler asked for to its state and public budgets before the ledger commits it. What
breaks a rule raises an ``invalid_result`` ``Failure`` whose message states the rule
and names nothing from the data; the invoke sequence (``_invoke``) calls these. None
runs a callback or awaits.
"""

from __future__ import annotations

from ._catalog import Entry
from ._failures import Failure, FailureCode
from ._forms import FormInput, URLInput
from ._json import JSONError, JSONValue, from_python, parse, parsed_canonical_bytes
from ._limits import PROMPT_OVERHEAD_BYTES, Limits
from ._outcomes import Completed, Failed, Outcome
from ._results import Result, check_result_budget, is_constructed
from ._text import has_surrogate, json_string_size, utf8_size
from ._violations import ViolationDetail

__all__ = ["FAILURE_OVERHEAD_BYTES", "check_prompt", "conclude", "operation_failure"]

#: Bytes of framing charged for one failure message plus its diagnostics.
FAILURE_OVERHEAD_BYTES = 256


def conclude(entry: Entry, outcome: Outcome, limits: Limits) -> Completed | Failed:
    """Check a finish, fail or unsupported-input outcome against the output schema and
    result budgets."""
    if outcome.kind == "fail":
        return Failed(operation_failure(entry, outcome, limits))
    if outcome.kind == "unsupported_input":
        message = _failure_message(outcome, limits, "unsupported_input(...)")
        return Failed(Failure(FailureCode.CONFIRMATION_REQUIRED, message))
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
    message = _failure_message(outcome, limits, "fail(...)")
    budget = limits.result_bytes - FAILURE_OVERHEAD_BYTES
    encoded = json_string_size(message)  # as JSON will carry it, escapes included
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


def _failure_message(outcome: Outcome, limits: Limits, maker: str) -> str:
    """The outcome's public failure message: a ``str`` that fits the result budget."""
    message = outcome.message
    if not isinstance(message, str) or has_surrogate(message):
        raise Failure(FailureCode.INVALID_RESULT, f"{maker} needs a str message")
    if json_string_size(message) > limits.result_bytes - FAILURE_OVERHEAD_BYTES:
        raise Failure(FailureCode.INVALID_RESULT, "the failure message exceeds the result budget")
    return message


def check_prompt(prompt: FormInput | URLInput, limits: Limits) -> None:
    """The prompt's state and public part must fit their budgets (else ``invalid_result``).

    The public part is counted as JSON encodes it: the message's escapes count,
    like a result's text (the schema's canonical bytes and the URL are already JSON).
    """
    if isinstance(prompt, FormInput):
        public = json_string_size(prompt.message) + prompt.schema_size
    else:
        public = json_string_size(prompt.message) + utf8_size(prompt.url().url)
    state = len(prompt.state_bytes)
    if state > limits.state_bytes:
        raise Failure(
            FailureCode.INVALID_RESULT,
            f"the prompt's state is {state} bytes, over Limits.state_bytes ({limits.state_bytes})",
        )
    if public > limits.form_schema_bytes:
        raise Failure(
            FailureCode.INVALID_RESULT,
            f"the prompt's message and schema or URL are {public} bytes, over "
            f"Limits.form_schema_bytes ({limits.form_schema_bytes})",
        )
    if public + PROMPT_OVERHEAD_BYTES > limits.result_bytes:
        raise Failure(FailureCode.INVALID_RESULT, "the prompt does not fit the result budget")
