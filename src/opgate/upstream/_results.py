"""What crosses between opgate and an upstream's ``tools/call``, in both directions.

* ``sdk_arguments``: the registry's validated argument object (exact numbers:
  ``int`` and ``Decimal``) as values the SDK writes as JSON numbers — an integral
  number as ``int``, any other as the nearest ``float`` (the SDK's encoder writes a
  ``Decimal`` as a string). A number with more precision than a double reaches the
  upstream rounded; the registry has already validated the exact value.
* ``outcome``: an upstream's answer as a handler outcome, the inverse of what
  ``opgate.mcp`` does with a ``Result``. A ``CallToolResult`` becomes
  ``finish(Result(...))``: ``text`` → ``Text``, ``image`` → ``Image``, ``audio`` →
  ``Audio`` (base64 decoded), ``resource_link`` → ``ResourceLink``, ``resource`` →
  ``EmbeddedResource`` (text or decoded blob); ``structuredContent``, when present
  (JSON ``null`` included), is the structured result. Content annotations and the
  upstream's ``_meta`` are not carried. With ``isError`` it becomes ``fail(message,
  structuredContent)``: the message is the result's text blocks joined by newlines,
  controls and format (bidi) characters escaped (``_report.visible``; line feeds and
  tabs kept), cut at ``MAX_ERROR_CHARS``. Anything opgate's values refuse (data that is not
  base64, a MIME type or URI outside their rules, structured content outside the
  JSON profile, such as nesting deeper than 128) fails the call naming the block,
  never quoting the data. The registry then checks the result as for any
  operation: the output schema, and the result and inline-media budgets.
* ``redacted``: an SDK message from an upstream (a ``tools/call`` answer, a
  question) with every credential of the upstream's entry (``_session.redactor_for``)
  replaced by ``[redacted]`` in any of its strings: texts, structured values and
  member names, URIs, titles, base64 data (``opgate.redact`` finds each in any
  encoding it recognises). It runs before ``outcome``, so an ``isError`` text and the
  structured result are redacted too; a message the redaction leaves invalid (a URI
  broken by it) fails the call as a malformed answer.
* ``json_value``: what pydantic parsed from an upstream (a tool's schemas, an
  elicitation's form) as an exact JSON value, a ``float`` by its shortest repr.

An ``InputRequiredResult`` (an upstream asking for input) is the relay's
(``_relay``); one that reaches ``outcome`` fails the call.
"""

from __future__ import annotations

import base64
import binascii
import json
from decimal import Decimal
from typing import Any, Final, TypeVar

import mcp.types as types
import pydantic

from opgate import (
    NO_STRUCTURED,
    Audio,
    ConfigurationError,
    EmbeddedResource,
    Image,
    Outcome,
    ResourceLink,
    Result,
    Text,
    fail,
    finish,
)
from opgate.json import JSONValue, canonical_bytes, parse
from opgate.redact import Redactor

from ._report import visible

__all__ = ["MAX_ERROR_CHARS", "json_value", "outcome", "redacted", "sdk_arguments"]

#: Longest failure message taken from an upstream's ``isError`` text (it is the tool's
#: own output, shown to the agent; a whole page of it adds nothing the start does not).
MAX_ERROR_CHARS: Final = 8_000


_Message = TypeVar("_Message", bound=pydantic.BaseModel)


def redacted(message: _Message, redactor: Redactor) -> _Message:
    """``message`` with every secret ``redactor`` knows redacted from its strings, or
    ``message`` itself when it holds none; raises ``pydantic.ValidationError`` when the
    redacted message is no longer valid."""
    if not redactor:
        return message
    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    probe = json.dumps(data, ensure_ascii=False)
    if not redactor.found(probe):
        return message
    return type(message).model_validate(redactor.value(data, probe))


def json_value(value: Any) -> JSONValue:
    """A detached exact JSON value of what pydantic parsed (a ``float`` by its shortest
    repr); raises ``JSONError`` for what is not JSON."""
    return parse(canonical_bytes(_from_pydantic(value)))


def _from_pydantic(value: Any) -> JSONValue:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {key: _from_pydantic(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_from_pydantic(member) for member in value]
    return value  # type: ignore[no-any-return]


def sdk_arguments(value: object) -> Any:
    """``value`` with every ``Decimal`` as ``int`` (integral) or ``float``."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: sdk_arguments(member) for key, member in value.items()}
    if isinstance(value, list):
        return [sdk_arguments(member) for member in value]
    return value


class _Refused(ValueError):
    """A block opgate cannot carry; ``str()`` names it without its data."""


def _decoded(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _Refused(f"{what} data is not base64") from None


def _block(block: object, index: int) -> Any:
    what = f"content block {index}"
    try:
        if isinstance(block, types.TextContent):
            return Text(block.text)
        if isinstance(block, types.ImageContent):
            return Image(_decoded(block.data, what), block.mime_type)
        if isinstance(block, types.AudioContent):
            return Audio(_decoded(block.data, what), block.mime_type)
        if isinstance(block, types.ResourceLink):
            return ResourceLink(
                block.uri,
                block.name,
                title=block.title,
                description=block.description,
                mime_type=block.mime_type,
                size=block.size,
            )
        if isinstance(block, types.EmbeddedResource):
            contents = block.resource
            if isinstance(contents, types.BlobResourceContents):
                blob = _decoded(contents.blob, what)
                return EmbeddedResource(contents.uri, blob=blob, mime_type=contents.mime_type)
            return EmbeddedResource(contents.uri, text=contents.text, mime_type=contents.mime_type)
    except (ConfigurationError, TypeError):
        kind = getattr(block, "type", type(block).__name__)
        raise _Refused(f"{what} ({kind}) is outside what opgate's content values accept") from None
    raise _Refused(f"{what} is of a kind opgate does not carry")


def _error_text(result: types.CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    message = visible("\n".join(texts)).strip()
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "…"
    return message


def outcome(upstream: str, answer: types.CallToolResult | types.InputRequiredResult) -> Outcome:
    """The handler outcome for ``answer`` from ``upstream`` (see the module docstring)."""
    if isinstance(answer, types.InputRequiredResult):
        return fail(f"upstream {upstream!r} asked for input the gateway did not relay")
    has_structured = "structured_content" in answer.model_fields_set
    structured = answer.structured_content if has_structured else None
    if answer.is_error:
        message = _error_text(answer) or f"upstream {upstream!r} reported an error without text"
        return fail(message, structured)
    try:
        blocks = [_block(block, index) for index, block in enumerate(answer.content)]
    except _Refused as exc:
        return fail(f"upstream {upstream!r} answered with {exc}")
    try:
        result = Result(blocks, structured if has_structured else NO_STRUCTURED)
    except (ConfigurationError, TypeError, RecursionError):
        return fail(
            f"upstream {upstream!r} answered with structured content outside opgate's JSON profile"
        )
    return finish(result)
