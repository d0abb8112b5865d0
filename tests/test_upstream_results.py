"""An upstream's ``tools/call`` answer as a handler outcome, and arguments for the SDK
(``opgate.upstream._results``)."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import mcp.types as types
import pytest

from opgate import (
    NO_STRUCTURED,
    Audio,
    EmbeddedResource,
    Image,
    Outcome,
    ResourceLink,
    Result,
    Text,
)
from opgate.upstream._results import MAX_ERROR_CHARS, outcome, sdk_arguments

PNG = b"\x89PNG\r\n\x1a\n"


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def answer(**fields: Any) -> types.CallToolResult:
    """A result as the SDK parses one from the wire (so absent members stay unset)."""
    return types.CallToolResult.model_validate(fields)


def result_of(done: Outcome) -> Result:
    assert done.kind == "finish"
    assert isinstance(done.payload, Result)
    return done.payload


def test_every_content_kind_maps_to_its_block() -> None:
    encoded = base64.b64encode(PNG).decode()
    done = outcome(
        "up",
        answer(
            content=[
                {"type": "text", "text": "hello"},
                {"type": "image", "data": encoded, "mimeType": "image/png"},
                {"type": "audio", "data": encoded, "mimeType": "audio/wav"},
                {
                    "type": "resource_link",
                    "uri": "file:///a.txt",
                    "name": "a",
                    "title": "A",
                    "description": "the a file",
                    "mimeType": "text/plain",
                    "size": 3,
                },
                {"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}},
                {
                    "type": "resource",
                    "resource": {"uri": "file:///c", "blob": encoded, "mimeType": "image/png"},
                },
            ]
        ),
    )
    assert result_of(done).content == (
        Text("hello"),
        Image(PNG, "image/png"),
        Audio(PNG, "audio/wav"),
        ResourceLink(
            "file:///a.txt",
            "a",
            title="A",
            description="the a file",
            mime_type="text/plain",
            size=3,
        ),
        EmbeddedResource("file:///b", text="bee"),
        EmbeddedResource("file:///c", blob=PNG, mime_type="image/png"),
    )


def test_structured_content_is_the_structured_result() -> None:
    done = outcome("up", answer(content=[text("{}")], structuredContent={"n": 1, "x": 0.5}))
    assert result_of(done).structured == {"n": 1, "x": Decimal("0.5")}


def test_absent_and_null_structured_content_differ() -> None:
    assert result_of(outcome("up", answer(content=[]))).structured is NO_STRUCTURED
    nulled = result_of(outcome("up", answer(content=[], structuredContent=None)))
    assert nulled.has_structured
    assert nulled.structured is None


def test_meta_and_annotations_are_not_carried() -> None:
    done = outcome(
        "up",
        answer(
            content=[{"type": "text", "text": "t", "annotations": {"priority": 1}}],
            _meta={"io.modelcontextprotocol/x": 1, "vendor/y": 2},
        ),
    )
    assert result_of(done) == Result([Text("t")])


def test_is_error_becomes_a_failure_with_the_texts_and_structured_diagnostics() -> None:
    done = outcome(
        "up",
        answer(
            content=[
                text("first"),
                {"type": "image", "data": "", "mimeType": "image/png"},
                text("second"),
            ],
            structuredContent={"code": 7},
            isError=True,
        ),
    )
    assert done.kind == "fail"
    assert done.message == "first\nsecond"
    assert done.payload == {"code": 7}


def test_is_error_without_text_says_so() -> None:
    done = outcome("up", answer(content=[], isError=True))
    assert done.kind == "fail"
    assert done.message == "upstream 'up' reported an error without text"


def test_is_error_text_is_cut() -> None:
    done = outcome("up", answer(content=[text("e" * (MAX_ERROR_CHARS * 2))], isError=True))
    assert len(done.message) == MAX_ERROR_CHARS
    assert done.message.endswith("…")


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ({"type": "image", "data": "not base64!", "mimeType": "image/png"}, "not base64"),
        ({"type": "audio", "data": "AAAA", "mimeType": "no-slash"}, "outside"),
        ({"type": "resource_link", "uri": "not a uri", "name": "n"}, "outside"),
        ({"type": "text", "text": "lone \ud800 surrogate"}, "outside"),
    ],
)
def test_blocks_opgate_refuses_fail_the_call_without_quoting_them(
    block: dict[str, Any], words: str
) -> None:
    done = outcome("up", answer(content=[text("ok"), block]))
    assert done.kind == "fail"
    assert done.message.startswith("upstream 'up' answered with content block 1")
    assert words in done.message
    for data in ("not base64!", "no-slash", "not a uri", "surrogate"):
        assert data not in done.message


def test_structured_content_outside_the_profile_fails_the_call() -> None:
    deep: Any = []
    for _ in range(140):
        deep = [deep]
    done = outcome("up", answer(content=[], structuredContent={"v": deep}))
    assert done.kind == "fail"
    assert "outside opgate's JSON profile" in done.message


def test_an_input_request_the_relay_did_not_take_fails_the_call() -> None:
    asked = types.InputRequiredResult(input_requests={}, request_state="s")
    done = outcome("up", asked)
    assert done.kind == "fail"
    assert "asked for input the gateway did not relay" in done.message


def test_sdk_arguments_turn_exact_numbers_into_json_numbers() -> None:
    converted = sdk_arguments(
        {"i": 3, "d": Decimal("2"), "f": Decimal("0.25"), "l": [Decimal("1E+2"), "s", None, True]}
    )
    assert converted == {"i": 3, "d": 2, "f": 0.25, "l": [100, "s", None, True]}
    assert type(converted["d"]) is int
    assert type(converted["l"][0]) is int
    assert type(converted["f"]) is float


def test_is_error_text_shows_its_controls_and_bidi_characters() -> None:
    hostile = "bad\n\x1b[31mred\x1b]0;title\x07 \u202eevil\u202c\u200b\ttab\r"
    done = outcome("up", answer(content=[text(hostile)], isError=True))
    assert done.kind == "fail"
    assert done.message == (
        "bad\n\\u001b[31mred\\u001b]0;title\\u0007 \\u202eevil\\u202c\\u200b\ttab\\u000d"
    )
