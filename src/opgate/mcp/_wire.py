"""Translation between opgate's values and MCP wire values, in one place.

* ``tool_result`` turns a ``Result`` into a ``CallToolResult`` (content blocks, a
  text copy of structured content when the operation gave no text, structured
  content, ``_meta``); ``failure_result`` turns a ``Failure`` into an ``isError``
  result carrying the code and public message in text and in structured content.
* ``wire_size`` measures a complete result exactly as the transport writes it
  (``model_dump_json``, placeholders restored, ``\\uXXXX`` escapes where the SDK's
  encoder writes ASCII only) plus the JSON-RPC envelope, so budgets hold on the wire.
* ``elicitation_params`` turns a prompt into ``elicitation/create`` parameters;
  ``input_response`` turns the client's ``ElicitResult`` back into an
  ``InputResponse``.

Numbers (``wire_value``): over opgate's exact transports (``_exact``) every number
the SDK's encoders cannot write in its canonical spelling travels as a placeholder
that the transport writes as that spelling, so structured content, metadata, form
schemas and pinned schemas are exactly the values opgate validated. Without them (an
in-process client) integral numbers go out as ``int`` and others as the nearest
``float``. The text copy of structured content is opgate's canonical JSON either way.
"""

from __future__ import annotations

import base64
import uuid
from decimal import Decimal
from typing import Any, Literal

import mcp.types as types
import pydantic

from .. import (
    Audio,
    ConfigurationError,
    EmbeddedResource,
    Failure,
    FailureCode,
    FormPrompt,
    Image,
    InputMode,
    InputResponse,
    NoStructured,
    ResourceLink,
    Result,
    Text,
    URLPrompt,
)
from ..json import JSONValue, number_text, parse
from ._exact import current_message, placeholder, sent_size

__all__ = [
    "ENVELOPE_BYTES",
    "INPUT_KEY",
    "elicitation_params",
    "failure_result",
    "input_response",
    "tool_result",
    "wire_size",
    "wire_value",
]

#: Bytes charged for the JSON-RPC envelope around a result:
#: ``{"jsonrpc":"2.0","id":<id>,"result":…}`` with an id of up to 64 characters.
ENVELOPE_BYTES = 128

#: The key of opgate's one input request inside an ``InputRequiredResult``.
INPUT_KEY = "opgate"


#: ints inside this bound are written by every encoder as their canonical text.
_PLAIN_INT = 10**21


def wire_value(value: JSONValue) -> Any:
    """A JSON value as the SDK's encoders should write it (see the module docstring).

    Over an exact transport a ``Decimal``, or an ``int`` of 22 digits or more, becomes
    a placeholder for its canonical text; otherwise a ``Decimal`` becomes an ``int``
    (integral) or the nearest ``float``.
    """
    return _exact_value(value) if current_message() is not None else _sdk_value(value)


def _exact_value(value: JSONValue) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _exact_value(member) for key, member in value.items()}  # type: ignore[union-attr]
    if kind is list:
        return [_exact_value(member) for member in value]  # type: ignore[union-attr]
    if kind is Decimal or (kind is int and not -_PLAIN_INT < value < _PLAIN_INT):  # type: ignore[operator]
        return placeholder(number_text(value))  # type: ignore[arg-type]
    return value


def _sdk_value(value: JSONValue) -> Any:
    if isinstance(value, Decimal):
        if value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, dict):
        return {key: _sdk_value(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_sdk_value(member) for member in value]
    return value


def _block(block: object) -> types.ContentBlock:
    if isinstance(block, Text):
        return types.TextContent(type="text", text=block.text)
    if isinstance(block, Image):
        data = base64.b64encode(block.data).decode("ascii")
        return types.ImageContent(type="image", data=data, mime_type=block.mime_type)
    if isinstance(block, Audio):
        data = base64.b64encode(block.data).decode("ascii")
        return types.AudioContent(type="audio", data=data, mime_type=block.mime_type)
    if isinstance(block, ResourceLink):
        return types.ResourceLink(
            type="resource_link",
            uri=block.uri,
            name=block.name,
            title=block.title,
            description=block.description,
            mime_type=block.mime_type,
            size=block.size,
        )
    if isinstance(block, EmbeddedResource):
        contents: types.TextResourceContents | types.BlobResourceContents
        if block.blob is not None:
            blob = base64.b64encode(block.blob).decode("ascii")
            contents = types.BlobResourceContents(
                uri=block.uri, blob=blob, mime_type=block.mime_type
            )
        else:
            contents = types.TextResourceContents(
                uri=block.uri, text=block.text or "", mime_type=block.mime_type
            )
        return types.EmbeddedResource(type="resource", resource=contents)
    raise TypeError(f"unknown content block {type(block).__name__}")  # pragma: no cover


def tool_result(result: Result, *, objects_only: bool) -> types.CallToolResult:
    """The ``CallToolResult`` for a completed operation.

    When the result has structured content and no text block, a text block with
    its exact canonical JSON is added (clients that read only text still see it).
    ``objects_only`` (protocol eras before 2026-07-28) sends structured content
    only when it is a JSON object; other values then travel in the text copy only.
    """
    content = [_block(block) for block in result.content]
    structured_json = result.structured_json
    structured: Any = None
    if structured_json is not None:
        value = result.structured
        assert not isinstance(value, NoStructured)  # present: JSON (None is JSON null)
        if not any(isinstance(block, Text) for block in result.content):
            content.append(types.TextContent(type="text", text=structured_json.decode("utf-8")))
        if isinstance(value, dict) or not objects_only:
            structured = wire_value(value)
    meta = result.meta
    return types.CallToolResult(
        content=content,
        structured_content=structured,
        _meta=None if meta is None else wire_value(meta),
    )


def structured_result(value: Any, text: str) -> types.CallToolResult:
    """A gateway tool's own result: ``text`` and the structured ``value``."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=wire_value(value),
    )


def failure_result(failure: Failure) -> types.CallToolResult:
    """An ``isError`` result with the failure's code and public message, never its cause."""
    error: dict[str, Any] = {"code": failure.code.value, "message": failure.message}
    if failure.diagnostics is not None:
        error["diagnostics"] = wire_value(failure.diagnostics)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{failure.code.value}: {failure.message}")],
        structured_content={"error": error},
        is_error=True,
    )


def wire_size(message: pydantic.BaseModel) -> int:
    """Bytes of a result or request's parameters as the transport sends them (numbers
    restored, non-ASCII escaped where the encoder escapes it), plus the JSON-RPC
    envelope."""
    encoded = message.model_dump_json(by_alias=True, exclude_none=True)
    return sent_size(encoded.encode("utf-8", "surrogatepass")) + ENVELOPE_BYTES


def elicitation_params(
    prompt: FormPrompt | URLPrompt, *, modern: bool
) -> types.ElicitRequestFormParams | types.ElicitRequestURLParams:
    """The ``elicitation/create`` parameters that show ``prompt`` to the person.

    A URL prompt gets a fresh random ``elicitationId`` in eras that require one;
    the continuation token never leaves in an elicitation.
    """
    if isinstance(prompt, FormPrompt):
        schema = wire_value(parse(prompt.schema_bytes))
        return types.ElicitRequestFormParams(
            mode="form", message=prompt.message, requested_schema=schema
        )
    return types.ElicitRequestURLParams(
        mode="url",
        message=prompt.message,
        url=prompt.url,
        elicitation_id=None if modern else str(uuid.uuid4()),
    )


ElicitAction = Literal["accept", "decline", "cancel"]


def input_response(
    mode: InputMode, result: types.ElicitResult, exact: bytes | None = None
) -> InputResponse:
    """The ``InputResponse`` for the client's answer; ``Failure`` when it is not one.

    ``exact`` is the answer's ``content`` as the client wrote it, when the transport
    kept it: the registry then parses that text itself. A form acceptance without
    content means an empty answer object (the form's own checks then decide); a URL
    acceptance carries no answers.
    """
    try:
        if result.action == "accept":
            if mode is InputMode.URL:
                return InputResponse.accept()
            if exact is not None and result.content is not None:
                return InputResponse.accept(exact)
            return InputResponse.accept({} if result.content is None else result.content)
        if result.action == "decline":
            return InputResponse.decline()
        return InputResponse.cancel()
    except (ConfigurationError, TypeError) as exc:
        raise Failure(
            FailureCode.INVALID_REQUEST, f"the client's answer is not usable: {exc}"
        ) from None
