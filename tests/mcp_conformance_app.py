"""The fixture catalog for the official MCP conformance suite (0.2.0-alpha.12).

Every tool the applicable server scenarios call, by its fixed name, as an opgate
``Operation`` built with the public API only. ``PINNED`` names them all, so a
``GatewayServer(registry, pinned=PINNED)`` lists them as first-class MCP tools beside
``search``, ``inspect`` and ``invoke``. ``/work/notes/conformance-findings.md`` (the
research behind this file) and ``docs/mcp.md`` give each scenario's exact
expectations; the comments here name the scenario each operation serves.

Deviations from the suite's reference texts, each forced by opgate and harmless to
the checks:

* ``test_elicitation_sep1330_enums``: the two multiselects carry ``maxItems`` (3 and
  2); opgate's form profile requires it and the suite checks only ``type``,
  ``items.enum`` / ``items.anyOf`` (the scenario's literal schema, without
  ``maxItems``, is rejected by ``FormInput``).
* ``test_tool_with_progress``: the three updates are 150 ms apart, not ~50 ms,
  because the registry delivers at most one update per 100 ms (the suite needs all
  three).
* Elicitation answers are validated against the form before the handler sees them,
  so the text the 2025-11-25 tools return always describes a checked answer.

Serve it with ``opgate serve mcp_conformance_app:server --http 127.0.0.1:PORT`` from
``tests/`` (``server()`` builds the ``GatewayServer``; see ``tests/test_mcp_conformance.py``).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import anyio

from opgate import (
    Audio,
    Discover,
    EmbeddedResource,
    Execute,
    FormInput,
    Image,
    InputAction,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    await_input,
    fail,
    finish,
)

__all__ = [
    "CUSTOM_HEADER_TOOL",
    "ELICITATION_2025_TOOLS",
    "INPUT_REQUIRED_TOOLS",
    "JSON_SCHEMA_2020_12",
    "PINNED",
    "AllowAll",
    "registry",
    "server",
]

# --- fixed payloads -------------------------------------------------------------------

#: A 1x1 red PNG (tools-call-image, tools-call-mixed-content).
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def _wav_silence(samples: int = 8, rate: int = 8000) -> bytes:
    """A minimal PCM WAV file: mono, 8-bit, ``samples`` frames of silence."""
    data = b"\x80" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


#: A tiny silent WAV (tools-call-audio requires mimeType exactly "audio/wav").
WAV_SILENCE = _wav_silence()

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

#: json-schema-2020-12: the suite's own input schema, verbatim (SEP-1613 and SEP-2106
#: keywords: $schema, $defs with $anchor, $ref, allOf/anyOf, if/then/else,
#: additionalProperties false). It is checked in tools/list only; never called.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

#: tools-call-elicitation: the form the scenario expects, verbatim.
USER_INFO_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

#: elicitation-sep1034-defaults: a default for every primitive type.
SEP1034_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}

#: elicitation-sep1330-enums: the five enum shapes (multiselects with maxItems, see above).
SEP1330_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "maxItems": 2,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                ]
            },
        },
    },
}


def _one_field_form(name: str, kind: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind}}, "required": [name]}


NAME_FORM = _one_field_form("name", "string")
CONFIRM_FORM = _one_field_form("ok", "boolean")
COLOR_FORM = _one_field_form("color", "string")

#: http-custom-header-server-validation: the suite picks the first listed tool with an
#: ``x-mcp-header`` string property and checks the SDK's Mcp-Param-* validation.
CUSTOM_HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "x-mcp-header": "Region",
            "description": "Sent both in the body and as the Mcp-Param-Region header",
        }
    },
    "required": ["region"],
    "additionalProperties": False,
}


# --- the policy -------------------------------------------------------------------------


class AllowAll:
    """Allows every request; the scope key is the host's principal key when it has one."""

    def scope_key(self, ctx: Any) -> str:
        key = getattr(ctx, "scope_key", None)
        return key if isinstance(key, str) and key else "anonymous"

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        return None


# --- handlers ---------------------------------------------------------------------------


def _text(text: str, structured: dict[str, Any] | None = None) -> object:
    return finish(Result([Text(text)], structured=structured))


def _answers(inv: Invocation) -> dict[str, Any]:
    assert inv.resume is not None
    answers = inv.resume.answers
    return answers if isinstance(answers, dict) else {}


async def simple_text(inv: Invocation) -> object:
    return _text("This is a simple text response for testing.")


async def image_content(inv: Invocation) -> object:
    return finish(Result([Image(PNG_1X1, "image/png")]))


async def audio_content(inv: Invocation) -> object:
    return finish(Result([Audio(WAV_SILENCE, "audio/wav")]))


async def embedded_resource(inv: Invocation) -> object:
    resource = EmbeddedResource(
        "test://embedded-resource",
        text="This is an embedded resource content.",
        mime_type="text/plain",
    )
    return finish(Result([resource]))


async def multiple_content_types(inv: Invocation) -> object:
    return finish(
        Result(
            [
                Text("Multiple content types test:"),
                Image(PNG_1X1, "image/png"),
                EmbeddedResource(
                    "test://mixed-content-resource",
                    text='{"test":"data","value":123}',
                    mime_type="application/json",
                ),
            ]
        )
    )


async def error_handling(inv: Invocation) -> object:
    return fail("This tool intentionally returns an error for testing")


#: The registry delivers at most one progress update per 100 ms; 150 ms keeps all three.
PROGRESS_STEP_SECONDS = 0.15


async def tool_with_progress(inv: Invocation) -> object:
    for index, completed in enumerate((0, 50, 100)):
        if index:
            await anyio.sleep(PROGRESS_STEP_SECONDS)
        await inv.report_progress(completed, 100)
    return _text("Progress test completed: 0/100, 50/100, 100/100")


def _elicitation_outcome(inv: Invocation, message: str, form: dict[str, Any]) -> object:
    """The 2025-11-25 elicitation tools: ask once, then report what came back."""
    if inv.resume is None:
        return await_input(FormInput(message, form, {"asked": inv.name}))
    action = inv.resume.action.value
    content = json.dumps(_answers(inv), sort_keys=True)
    return _text(f"Elicitation completed: action={action}, content={content}")


async def elicitation(inv: Invocation) -> object:
    message = inv.arguments["message"]
    assert isinstance(message, str)
    return _elicitation_outcome(inv, message, USER_INFO_FORM)


async def elicitation_sep1034_defaults(inv: Invocation) -> object:
    return _elicitation_outcome(
        inv, "Please review and update the form fields with defaults", SEP1034_FORM
    )


async def elicitation_sep1330_enums(inv: Invocation) -> object:
    return _elicitation_outcome(inv, "Please select options from the enum fields", SEP1330_FORM)


async def json_schema_2020_12(inv: Invocation) -> object:
    arguments = inv.arguments
    return _text(f"Received: {json.dumps(arguments, sort_keys=True)}", structured=arguments)


def _declined(inv: Invocation) -> object | None:
    assert inv.resume is not None
    if inv.resume.action is InputAction.ACCEPT:
        return None
    return fail(f"input {inv.resume.action.value}: nothing was done")


async def irr_elicitation(inv: Invocation) -> object:
    if inv.resume is None:
        return await_input(FormInput("What is your name?", NAME_FORM, {"step": "user_name"}))
    declined = _declined(inv)
    if declined is not None:
        return declined
    return _text(f"Hello, {_answers(inv)['name']}!")


async def irr_request_state(inv: Invocation) -> object:
    if inv.resume is None:
        return await_input(FormInput("Please confirm", CONFIRM_FORM, {"intent": "confirm-1"}))
    declined = _declined(inv)
    if declined is not None:
        return declined
    state = inv.resume.state
    if state != {"intent": "confirm-1"}:  # the registry returns exactly what was stored
        return fail("request state did not round-trip")
    return _text(f"state-ok: confirmed={json.dumps(_answers(inv)['ok'])}")


async def irr_multi_round(inv: Invocation) -> object:
    if inv.resume is None:
        return await_input(FormInput("Step 1: What is your name?", NAME_FORM, {"step": 1}))
    declined = _declined(inv)
    if declined is not None:
        return declined
    state = inv.resume.state
    assert isinstance(state, dict)
    if state.get("step") == 1:
        name = _answers(inv)["name"]
        return await_input(
            FormInput("Step 2: What is your favorite color?", COLOR_FORM, {"step": 2, "name": name})
        )
    return _text(f"{state['name']} likes {_answers(inv)['color']}")


async def irr_tampered_state(inv: Invocation) -> object:
    if inv.resume is None:
        return await_input(FormInput("Please confirm", CONFIRM_FORM, {"intent": "tamper-probe"}))
    declined = _declined(inv)
    if declined is not None:
        return declined
    return _text("confirmed with an intact request state")


async def streaming_elicitation(inv: Invocation) -> object:
    """server-stateless: at 2026-07-28 the question must come back as an
    InputRequiredResult, never as an independent request on the response stream."""
    if inv.resume is None:
        return await_input(FormInput("Continue?", CONFIRM_FORM, {"intent": "stream-probe"}))
    declined = _declined(inv)
    return declined if declined is not None else _text("streaming elicitation answered")


async def logging_tool(inv: Invocation) -> object:
    """server-stateless: no notifications/message may reach a request without a logLevel."""
    return _text("logging tool ran; operations have no MCP log channel")


async def custom_header(inv: Invocation) -> object:
    region = inv.arguments["region"]
    return _text(f"region={region}", structured={"region": region})


# --- the catalog ------------------------------------------------------------------------

#: The tool name of the x-mcp-header probe (any name works; the suite finds it by schema).
CUSTOM_HEADER_TOOL = "test_custom_header_param"

#: The 2025-11-25 elicitation tools (a form inside tools/call).
ELICITATION_2025_TOOLS = (
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
)

#: The 2026-07-28 InputRequiredResult tools (a form per round, request_state = continuation).
INPUT_REQUIRED_TOOLS = (
    "test_input_required_result_elicitation",
    "test_input_required_result_request_state",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
)


def _operation(
    name: str,
    summary: str,
    handler: Any,
    *,
    group: str,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    description: str = "",
) -> Operation:
    return Operation(
        name,
        summary,
        handler,
        group=group,
        description=description,
        input_schema=NO_ARGUMENTS if input_schema is None else input_schema,
        output_schema=output_schema,
        source="MCP conformance suite 0.2.0-alpha.12",
    )


OPERATIONS = (
    _operation(
        "test_simple_text",
        "Returns a fixed text (tools-call-simple-text)",
        simple_text,
        group="content",
    ),
    _operation(
        "test_image_content",
        "Returns a 1x1 PNG image (tools-call-image)",
        image_content,
        group="content",
    ),
    _operation(
        "test_audio_content",
        "Returns a tiny WAV clip (tools-call-audio)",
        audio_content,
        group="content",
    ),
    _operation(
        "test_embedded_resource",
        "Returns an embedded text resource (tools-call-embedded-resource)",
        embedded_resource,
        group="content",
    ),
    _operation(
        "test_multiple_content_types",
        "Returns text, an image and a resource (tools-call-mixed-content)",
        multiple_content_types,
        group="content",
    ),
    _operation(
        "test_error_handling",
        "Always fails (tools-call-error)",
        error_handling,
        group="errors",
    ),
    _operation(
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100 (tools-call-with-progress)",
        tool_with_progress,
        group="progress",
    ),
    _operation(
        "test_elicitation",
        "Asks the user for a username and an email (tools-call-elicitation)",
        elicitation,
        group="elicitation",
        input_schema={
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "The message to show the user"}
            },
            "required": ["message"],
            "additionalProperties": False,
        },
    ),
    _operation(
        "test_elicitation_sep1034_defaults",
        "Asks a form with a default for every primitive type (elicitation-sep1034-defaults)",
        elicitation_sep1034_defaults,
        group="elicitation",
    ),
    _operation(
        "test_elicitation_sep1330_enums",
        "Asks a form with the five enum shapes (elicitation-sep1330-enums)",
        elicitation_sep1330_enums,
        group="elicitation",
    ),
    _operation(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        json_schema_2020_12,
        group="schemas",
        input_schema=JSON_SCHEMA_2020_12,
    ),
    _operation(
        "test_input_required_result_elicitation",
        "Asks the user's name, then greets them (input-required-result-basic-elicitation)",
        irr_elicitation,
        group="input-required",
    ),
    _operation(
        "test_input_required_result_request_state",
        "Asks a confirmation; state round-trips (input-required-result-request-state)",
        irr_request_state,
        group="input-required",
    ),
    _operation(
        "test_input_required_result_multi_round",
        "Asks a name, then a colour, then answers (input-required-result-multi-round)",
        irr_multi_round,
        group="input-required",
    ),
    _operation(
        "test_input_required_result_tampered_state",
        "Asks a confirmation; tampered state fails (input-required-result-tampered-state)",
        irr_tampered_state,
        group="input-required",
    ),
    _operation(
        "test_streaming_elicitation",
        "Asks a confirmation; the stream carries no request (server-stateless)",
        streaming_elicitation,
        group="stateless",
    ),
    _operation(
        "test_logging_tool",
        "Runs without logging (server-stateless: no log without a logLevel)",
        logging_tool,
        group="stateless",
    ),
    _operation(
        CUSTOM_HEADER_TOOL,
        "Echoes a parameter mirrored in an Mcp-Param header (http-custom-header-server-validation)",
        custom_header,
        group="http",
        input_schema=CUSTOM_HEADER_SCHEMA,
        output_schema={
            "type": "object",
            "properties": {"region": {"type": "string"}},
            "required": ["region"],
        },
    ),
)

#: Every operation is pinned: the suite calls them as MCP tools by these names.
PINNED: tuple[str, ...] = tuple(operation.name for operation in OPERATIONS)

registry = Registry(list(OPERATIONS), AllowAll())


def server() -> Any:
    """``GatewayServer(registry, pinned=PINNED)``: ``opgate serve mcp_conformance_app:server``."""
    from opgate.mcp import GatewayServer

    return GatewayServer(
        registry,
        name="opgate-conformance",
        pinned=PINNED,
        # The suite's basic scenario looks for its prompt under this key.
        input_request_keys={"test_input_required_result_elicitation": "user_name"},
    )
