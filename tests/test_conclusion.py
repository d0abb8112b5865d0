"""Tests of ``opgate._conclusion``: what a handler returned, checked.

A finish outcome against the output schema and the result budgets (each content block
counted as encoded), a fail outcome's message and diagnostics (kept only if they
convert, validate and fit), a prompt against its budgets counted as JSON encodes it;
and public ``invalid_result`` messages that never quote the handler's data.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoke_support import (
    EMPTY_FORM,
    PROMPT_SUPPORT,
    Recorder,
    ask,
    ask_registry,
    code,
    invoke,
    make,
)
from opgate import (
    Completed,
    EmbeddedResource,
    FailureCode,
    FormInput,
    Image,
    Invocation,
    Limits,
    Pending,
    ResourceLink,
    Result,
    Text,
    URLInput,
    await_input,
    fail,
    finish,
)
from opgate._limits import PROMPT_OVERHEAD_BYTES

from conftest import Ctx

pytestmark = pytest.mark.anyio


async def test_fail_with_valid_and_invalid_diagnostics() -> None:
    reg, _ = make(Recorder(fail("nope", {"refunded": 0, "reason": "closed"})))
    outcome = await invoke(reg)
    assert code(outcome) is FailureCode.OPERATION_FAILED
    assert outcome.failure.message == "nope"
    assert outcome.failure.diagnostics == {"refunded": 0, "reason": "closed"}
    reg, _ = make(Recorder(fail("nope", {"reason": "missing required field"})))
    withheld = await invoke(reg)
    assert code(withheld) is FailureCode.OPERATION_FAILED
    assert withheld.failure.message == "nope"
    assert withheld.failure.diagnostics is None


async def test_output_schema_requires_matching_structured_data() -> None:
    for result in (
        Result([Text("no structured")]),
        Result([Text("x")], structured={"refunded": "seven"}),
        Result([Text("x")], structured={"refunded": Decimal("1e5000")}),
    ):
        reg, _ = make(Recorder(finish(result)))
        assert code(await invoke(reg)) is FailureCode.INVALID_RESULT


async def test_without_output_schema_any_structured_json_is_accepted() -> None:
    result = Result([Text("x")], structured={"huge": Decimal("1e5000")})
    reg, _ = make(Recorder(finish(result)), output_schema=None)
    outcome = await invoke(reg)
    assert isinstance(outcome, Completed)


async def test_result_budgets() -> None:
    limits = Limits(result_bytes=16 * 1024, inline_bytes=4 * 1024)
    image = Image(b"\x89PNG" + b"\0" * 2000, "image/png")
    reg, _ = make(Recorder(finish(Result([image]))), output_schema=None, limits=limits)
    assert isinstance(await invoke(reg), Completed)
    reg, _ = make(Recorder(finish(Result([image, image]))), output_schema=None, limits=limits)
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT  # each occurrence counts
    text = Text("t" * 17000)
    reg, _ = make(Recorder(finish(Result([text]))), output_schema=None, limits=limits)
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT
    embedded = EmbeddedResource("file:///x.txt", text="é" * 9000)  # 18,000 UTF-8 bytes
    reg, _ = make(Recorder(finish(Result([embedded]))), output_schema=None, limits=limits)
    assert code(await invoke(reg)) is FailureCode.INVALID_RESULT
    link = ResourceLink("https://example.com/huge.bin", "huge", size=10**12)  # never fetched
    reg, _ = make(Recorder(finish(Result([link]))), output_schema=None, limits=limits)
    assert isinstance(await invoke(reg), Completed)


async def test_invalid_result_message_never_quotes_handler_data() -> None:
    output = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "additionalProperties": False,
    }
    leaks = [
        {"ok": True, "card 4111111111111111": 1},
        {"ok": "4111111111111111"},
        {"ok": True, "nested": {"4111111111111111": 1}},
    ]
    for structured in leaks:
        reg, _ = make(
            Recorder(finish(Result([Text("x")], structured=structured))), output_schema=output
        )
        outcome = await invoke(reg)
        assert code(outcome) is FailureCode.INVALID_RESULT
        failure = outcome.failure
        assert "4111" not in failure.message
        assert "4111" not in str(failure)
        assert "4111" not in repr(failure)
        assert "structured result" in failure.message
        assert "schema" in failure.message
        assert failure.cause is not None  # the private detail
    # The profile rule, too, without the pointer into the handler's data.
    reg, _ = make(
        Recorder(finish(Result([Text("x")], structured={"4111111111111111": Decimal("1e5000")}))),
        output_schema={"type": "object"},
    )
    outcome = await invoke(reg)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "4111" not in outcome.failure.message
    assert "numeric work profile" in outcome.failure.message


async def test_a_prompt_message_counts_its_json_escapes() -> None:
    message = "\x01" * 16_000  # 16,000 raw bytes, 96,000 once JSON-escaped

    async def handler(inv: Invocation) -> Any:
        return await_input(FormInput(message, EMPTY_FORM, "null"))

    outcome = await ask(handler)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "form_schema_bytes" in outcome.failure.message

    async def url(inv: Invocation) -> Any:
        return await_input(URLInput(message, "https://example.com/pay"))

    assert code(await ask(url)) is FailureCode.INVALID_RESULT


async def test_a_failure_message_counts_its_json_escapes() -> None:
    async def handler(inv: Invocation) -> Any:
        return fail('"' * 40_000)  # 80,000 bytes once escaped, 64 KiB result budget

    outcome = await ask(handler)
    assert code(outcome) is FailureCode.INVALID_RESULT


@settings(max_examples=60, deadline=None)
@given(
    message=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=400
    ).filter(lambda text: text.strip() != ""),
    repeat=st.integers(1, 60),
)
def test_every_accepted_prompt_fits_the_result_budget_once_encoded(
    message: str, repeat: int
) -> None:
    import anyio

    text = message * repeat

    async def handler(inv: Invocation) -> Any:
        return await_input(FormInput(text, EMPTY_FORM, "null"))

    limits = Limits(result_bytes=16 * 1024)
    outcome = anyio.run(
        lambda: ask_registry(handler, result_bytes=16 * 1024).invoke(
            Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT
        )
    )
    encoded = len(json.dumps(text, ensure_ascii=False).encode()) - 2
    public = encoded + len(b'{"properties":{},"type":"object"}')
    if isinstance(outcome, Pending):
        assert public <= limits.form_schema_bytes
        assert public + PROMPT_OVERHEAD_BYTES <= limits.result_bytes
    else:
        assert code(outcome) is FailureCode.INVALID_RESULT
        assert public > limits.form_schema_bytes
