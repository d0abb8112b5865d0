"""The conformance fixture catalog, driven in-process through ``Registry.invoke``.

Each test feeds the operation exactly what the conformance scenario sends (its
arguments, and the answers its client gives) and checks what the scenario checks,
so a failure in ``test_mcp_conformance.py`` points at the adapter, not the fixture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from opgate import (
    Audio,
    Completed,
    ConfigurationError,
    EmbeddedResource,
    Failed,
    FailureCode,
    FormInput,
    FormPrompt,
    Image,
    InputMode,
    InputResponse,
    Pending,
    ProgressUpdate,
    Text,
)

import mcp_conformance_app as app

pytestmark = pytest.mark.anyio

FORM = {InputMode.FORM}
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # the suite's tools-name-format rule


@dataclass
class Principal:
    scope_key: str = "conformance-client"


CTX = Principal()


async def invoke(name: str, arguments: Any = None, **kwargs: Any) -> Any:
    return await app.registry.invoke(CTX, name, {} if arguments is None else arguments, **kwargs)


async def completed(name: str, arguments: Any = None, **kwargs: Any) -> Completed:
    outcome = await invoke(name, arguments, **kwargs)
    assert isinstance(outcome, Completed), outcome
    return outcome


async def pending(name: str, arguments: Any = None, **kwargs: Any) -> Pending:
    outcome = await invoke(name, arguments, input_support=FORM, **kwargs)
    assert isinstance(outcome, Pending), outcome
    assert isinstance(outcome.prompt, FormPrompt)
    return outcome


async def answer(name: str, first: Pending, response: InputResponse, arguments: Any = None) -> Any:
    return await invoke(name, arguments, input_support=FORM, resume=(first.continuation, response))


def only_text(outcome: Completed) -> str:
    (block,) = outcome.result.content
    assert isinstance(block, Text)
    return block.text


# --- the catalog as a whole ---------------------------------------------------------------


async def test_every_operation_is_pinned_once_with_a_valid_tool_name() -> None:
    assert len(set(app.PINNED)) == len(app.PINNED) == len(app.OPERATIONS)
    assert all(TOOL_NAME.fullmatch(name) for name in app.PINNED)
    page = await app.registry.search(CTX, "", limit=20)
    assert page.next_cursor is None
    assert sorted(item.name for item in page.items) == sorted(app.PINNED)
    assert all(item.summary for item in page.items)  # tools-list: every tool has a description


def test_the_policy_uses_the_hosts_scope_key_else_anonymous() -> None:
    assert app.AllowAll().scope_key(Principal("alice")) == "alice"
    assert app.AllowAll().scope_key(object()) == "anonymous"
    assert app.AllowAll().scope_key(Principal("")) == "anonymous"


async def test_json_schema_2020_12_tool_keeps_every_keyword_the_suite_checks() -> None:
    spec = await app.registry.inspect(CTX, "json_schema_2020_12_tool")
    schema = spec.input_schema
    assert schema == app.JSON_SCHEMA_2020_12
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$defs"]["address"]["$anchor"] == "addressDef"
    assert schema["additionalProperties"] is False
    assert schema["allOf"][0]["anyOf"]
    assert {"if", "then", "else"} <= schema.keys()


async def test_json_schema_2020_12_tool_enforces_its_schema() -> None:
    ok = await completed("json_schema_2020_12_tool", {"name": "Ada", "email": "a@example.com"})
    assert ok.result.structured == {"name": "Ada", "email": "a@example.com"}
    for bad in (
        {"name": "Ada"},  # allOf/anyOf: phone or email
        {"contactMethod": "phone", "email": "a@example.com"},  # if/then: phone required
        {"email": "a@example.com", "extra": 1},  # additionalProperties: false
        {"email": "a@example.com", "address": {"city": 7}},  # $ref to $defs.address
    ):
        outcome = await invoke("json_schema_2020_12_tool", bad)
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_ARGUMENTS


# --- content (tools-call-*) ----------------------------------------------------------------


async def test_simple_text() -> None:
    text = only_text(await completed("test_simple_text"))
    assert text == "This is a simple text response for testing."


async def test_image_is_a_png() -> None:
    (block,) = (await completed("test_image_content")).result.content
    assert isinstance(block, Image)
    assert block.mime_type == "image/png"
    assert block.data.startswith(b"\x89PNG\r\n\x1a\n")


async def test_audio_is_a_wav_with_the_exact_mime_type() -> None:
    (block,) = (await completed("test_audio_content")).result.content
    assert isinstance(block, Audio)
    assert block.mime_type == "audio/wav"  # the suite compares it exactly
    assert block.data[:4] == b"RIFF"
    assert block.data[8:12] == b"WAVE"


async def test_embedded_resource_has_uri_mime_type_and_text() -> None:
    (block,) = (await completed("test_embedded_resource")).result.content
    assert isinstance(block, EmbeddedResource)
    assert (block.uri, block.mime_type) == ("test://embedded-resource", "text/plain")
    assert block.text == "This is an embedded resource content."


async def test_mixed_content_has_text_image_and_resource() -> None:
    content = (await completed("test_multiple_content_types")).result.content
    assert [type(block) for block in content] == [Text, Image, EmbeddedResource]
    resource = content[2]
    assert isinstance(resource, EmbeddedResource)
    assert resource.text is not None
    assert json.loads(resource.text) == {"test": "data", "value": 123}


async def test_error_tool_fails_with_its_message() -> None:
    outcome = await invoke("test_error_handling")
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert outcome.failure.message == "This tool intentionally returns an error for testing"


async def test_progress_delivers_all_three_updates_through_the_throttle() -> None:
    updates: list[ProgressUpdate] = []
    outcome = await completed("test_tool_with_progress", progress=updates.append)
    assert [(u.completed, u.total) for u in updates] == [(0, 100), (50, 100), (100, 100)]
    assert only_text(outcome)


async def test_progress_without_a_sink_still_completes() -> None:
    assert only_text(await completed("test_tool_with_progress"))


async def test_custom_header_tool_echoes_its_parameter() -> None:
    spec = await app.registry.inspect(CTX, app.CUSTOM_HEADER_TOOL)
    assert spec.input_schema["properties"]["region"]["x-mcp-header"] == "Region"
    outcome = await completed(app.CUSTOM_HEADER_TOOL, {"region": "=?base64?SGVsbG8="})
    assert outcome.result.structured == {"region": "=?base64?SGVsbG8="}


# --- 2025-11-25 elicitation tools -------------------------------------------------------------

ELICITATIONS = [
    # (tool, arguments, expected form, the answer the suite's client sends)
    (
        "test_elicitation",
        {"message": "Please provide your information"},
        app.USER_INFO_FORM,
        {"username": "testuser", "email": "test@example.com"},
    ),
    (
        "test_elicitation_sep1034_defaults",
        {},
        app.SEP1034_FORM,
        {"name": "Jane Smith", "age": 25, "score": 88, "status": "inactive", "verified": False},
    ),
    (
        "test_elicitation_sep1330_enums",
        {},
        app.SEP1330_FORM,
        {
            "untitledSingle": "option1",
            "titledSingle": "value1",
            "legacyEnum": "opt1",
            "untitledMulti": ["option1", "option2"],
            "titledMulti": ["value1", "value2"],
        },
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "form", "answers"), ELICITATIONS)
async def test_elicitation_asks_the_suites_form_and_reports_the_answer(
    tool: str, arguments: dict[str, Any], form: dict[str, Any], answers: dict[str, Any]
) -> None:
    first = await pending(tool, arguments)
    assert isinstance(first.prompt, FormPrompt)
    assert json.loads(first.prompt.schema_bytes) == json.loads(json.dumps(form))
    if tool == "test_elicitation":
        assert first.prompt.message == "Please provide your information"
    outcome = await answer(tool, first, InputResponse.accept(answers), arguments)
    assert isinstance(outcome, Completed)
    text = only_text(outcome)
    assert text.startswith("Elicitation completed: action=accept, content=")
    assert json.loads(text.split("content=", 1)[1]) == answers


@pytest.mark.parametrize(("tool", "arguments", "form", "answers"), ELICITATIONS)
async def test_elicitation_without_form_support_needs_confirmation(
    tool: str, arguments: dict[str, Any], form: dict[str, Any], answers: dict[str, Any]
) -> None:
    outcome = await invoke(tool, arguments)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED


@pytest.mark.parametrize("response", [InputResponse.decline(), InputResponse.cancel()])
async def test_elicitation_reports_a_decline_or_cancel(response: InputResponse) -> None:
    arguments = {"message": "hi"}
    first = await pending("test_elicitation", arguments)
    outcome = await answer("test_elicitation", first, response, arguments)
    assert isinstance(outcome, Completed)
    assert (
        only_text(outcome) == f"Elicitation completed: action={response.action.value}, content={{}}"
    )


def test_sep1034_defaults_are_sent_with_their_json_types() -> None:
    properties = app.SEP1034_FORM["properties"]
    assert [properties[k]["default"] for k in ("name", "age", "score", "status", "verified")] == [
        "John Doe",
        30,
        95.5,
        "active",
        True,
    ]


def test_the_suites_literal_sep1330_form_is_outside_opgates_profile() -> None:
    literal = json.loads(json.dumps(app.SEP1330_FORM))
    for name in ("untitledMulti", "titledMulti"):
        del literal["properties"][name]["maxItems"]
    with pytest.raises(ConfigurationError, match="maxItems"):
        FormInput("enums", literal, "null")


# --- 2026-07-28 InputRequiredResult tools -----------------------------------------------------


async def test_irr_basic_elicitation_greets_by_name() -> None:
    tool = "test_input_required_result_elicitation"
    first = await pending(tool)
    assert first.prompt.message == "What is your name?"
    assert isinstance(first.prompt, FormPrompt)
    assert first.prompt.schema == app.NAME_FORM
    outcome = await answer(tool, first, InputResponse.accept({"name": "Alice"}))
    assert isinstance(outcome, Completed)
    assert only_text(outcome) == "Hello, Alice!"


async def test_irr_request_state_round_trips() -> None:
    tool = "test_input_required_result_request_state"
    first = await pending(tool)
    assert isinstance(first.prompt, FormPrompt)
    assert first.prompt.schema == app.CONFIRM_FORM
    outcome = await answer(tool, first, InputResponse.accept({"ok": True}))
    assert isinstance(outcome, Completed)
    assert "state-ok" in only_text(outcome)


async def test_irr_multi_round_asks_twice_with_a_new_continuation() -> None:
    tool = "test_input_required_result_multi_round"
    first = await pending(tool)
    assert first.prompt.message == "Step 1: What is your name?"
    second = await answer(tool, first, InputResponse.accept({"name": "Alice"}))
    assert isinstance(second, Pending)
    assert second.prompt.message == "Step 2: What is your favorite color?"
    assert second.continuation != first.continuation  # the suite's round-2 check
    third = await answer(tool, second, InputResponse.accept({"color": "blue"}))
    assert isinstance(third, Completed)
    assert only_text(third) == "Alice likes blue"


async def test_irr_tampered_state_is_refused() -> None:
    tool = "test_input_required_result_tampered_state"
    first = await pending(tool)
    outcome = await invoke(
        tool,
        {},
        input_support=FORM,
        resume=(first.continuation + "-TAMPERED", InputResponse.accept({"ok": True})),
    )
    assert isinstance(outcome, Failed)  # the adapter must turn this into a JSON-RPC error
    assert outcome.failure.code is FailureCode.INVALID_REQUEST
    intact = await answer(tool, first, InputResponse.accept({"ok": True}))
    assert isinstance(intact, Completed)


@pytest.mark.parametrize("tool", app.INPUT_REQUIRED_TOOLS)
async def test_irr_tools_fail_on_decline(tool: str) -> None:
    first = await pending(tool)
    outcome = await answer(tool, first, InputResponse.decline())
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.OPERATION_FAILED


@pytest.mark.parametrize("tool", app.INPUT_REQUIRED_TOOLS)
async def test_irr_tools_reject_the_suites_wrong_answer_shapes(tool: str) -> None:
    first = await pending(tool)
    outcome = await answer(tool, first, InputResponse.accept({"data": "wrong"}))
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_REQUEST
