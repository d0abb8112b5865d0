"""``opgate.mcp._wire``: opgate's values as MCP wire values, and the client's answers back.

Results (content blocks, the text copy of structured content, structured content per
era, ``_meta``), failures (code and public message, never the cause), sizes as the
transport writes them, prompts as ``elicitation/create`` parameters, and the client's
``ElicitResult`` as an ``InputResponse``. Numbers go out as ``int`` and ``float``
in process, and as placeholders written as their canonical text over an exact
transport. Measured on the real wire in ``test_mcp_exact_wire.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import mcp.types as types
import pytest
from tests.mcp_catalog import build_registry

from opgate import (
    Failure,
    FailureCode,
    FormPrompt,
    Image,
    InputAction,
    InputMode,
    Result,
    Text,
    URLPrompt,
)
from opgate._json import number_text
from opgate._responses import decode_answers
from opgate.mcp import GatewayServer, _exact
from opgate.mcp._wire import (
    ENVELOPE_BYTES,
    elicitation_params,
    failure_result,
    input_response,
    tool_result,
    wire_size,
    wire_value,
)

from mcp_client import ERAS, Answer, connect, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def exact_transport(*, ascii_only: bool = False) -> Iterator[None]:
    """As while an exact transport (``_exact``) serves a message."""
    message, ascii = _exact._MESSAGE.set(b"{}"), _exact._ASCII_ONLY.set(ascii_only)
    try:
        yield
    finally:
        _exact._ASCII_ONLY.reset(ascii)
        _exact._MESSAGE.reset(message)


def answers(response: Any) -> Any:
    return decode_answers(response, max_bytes=65_536)


# -- numbers ---------------------------------------------------------------------------


def test_in_process_numbers_are_ints_and_nearest_floats() -> None:
    value = {"whole": Decimal("2.000"), "part": [Decimal("0.1"), 10**30], "t": True, "s": "1"}
    out = wire_value(value)
    assert out == {"whole": 2, "part": [0.1, 10**30], "t": True, "s": "1"}
    assert type(out["whole"]) is int
    assert type(out["part"][0]) is float


def test_over_an_exact_transport_numbers_travel_as_their_canonical_text() -> None:
    big, plain = 10**21, 10**21 - 1
    value = {"d": Decimal("0.10"), "big": big, "neg": -big, "plain": plain, "t": True}
    with exact_transport():
        out = wire_value(value)
    assert out["d"] == _exact.placeholder(number_text(Decimal("0.10")))
    assert out["big"] == _exact.placeholder(number_text(big))
    assert out["neg"] == _exact.placeholder(number_text(-big))
    assert (out["plain"], out["t"]) == (plain, True)  # every encoder writes these exactly
    written = _exact.restore(json.dumps(out, separators=(",", ":")).encode())
    assert json.loads(written, parse_float=Decimal) == {
        "d": Decimal(number_text(Decimal("0.10"))),
        "big": big,
        "neg": -big,
        "plain": plain,
        "t": True,
    }


# -- results ---------------------------------------------------------------------------


def test_structured_content_without_text_gets_its_canonical_text_copy() -> None:
    result = tool_result(Result(structured={"b": Decimal("1.50"), "a": 1}), objects_only=True)
    [copy] = result.content
    assert isinstance(copy, types.TextContent)
    assert copy.text == '{"a":1,"b":1.5}'  # opgate's canonical JSON
    assert result.structured_content == {"a": 1, "b": 1.5}
    assert not result.is_error


def test_a_result_with_text_gets_no_copy_and_keeps_its_blocks_in_order() -> None:
    result = tool_result(
        Result([Image(b"\x89PNG", "image/png"), Text("done")], structured={"n": 1}),
        objects_only=True,
    )
    assert [block.type for block in result.content] == ["image", "text"]
    assert result.content[0].data == "iVBORw=="  # type: ignore[union-attr]
    assert text_of(types.CallToolResult(content=result.content[1:])) == "done"
    assert result.structured_content == {"n": 1}


def test_structured_content_that_is_not_an_object_is_sent_only_where_the_era_allows() -> None:
    legacy = tool_result(Result(structured=[1, 2]), objects_only=True)
    modern = tool_result(Result(structured=[1, 2]), objects_only=False)
    assert legacy.structured_content is None
    assert modern.structured_content == [1, 2]
    assert text_of(legacy) == text_of(modern) == "[1,2]"
    assert tool_result(Result(structured=None), objects_only=False).content[0].text == "null"  # type: ignore[union-attr]


def test_meta_goes_to_the_results_meta() -> None:
    result = tool_result(Result([Text("x")], meta={"example/k": Decimal("3")}), objects_only=True)
    assert result.meta == {"example/k": 3}
    assert tool_result(Result([Text("x")]), objects_only=True).meta is None


def test_a_failure_carries_its_code_and_public_message_never_its_cause() -> None:
    failure = Failure(FailureCode.OPERATION_FAILED, "the order is closed", diagnostics={"n": 7})
    failure.__cause__ = RuntimeError("private database detail")
    result = failure_result(failure)
    assert result.is_error
    assert text_of(result) == "operation_failed: the order is closed"
    assert result.structured_content == {
        "error": {
            "code": "operation_failed",
            "message": "the order is closed",
            "diagnostics": {"n": 7},
        }
    }
    assert "private" not in result.model_dump_json()
    plain = failure_result(Failure(FailureCode.EXPIRED))
    assert plain.structured_content["error"].keys() == {"code", "message"}  # type: ignore[index]


def test_a_size_is_the_encoded_result_plus_the_envelope() -> None:
    result = tool_result(Result([Text("café ☕")]), objects_only=True)
    encoded = result.model_dump_json(by_alias=True, exclude_none=True).encode()
    assert wire_size(result) == len(encoded) + ENVELOPE_BYTES
    with exact_transport(ascii_only=True):  # the 2026-07-28 HTTP encoder writes \\uXXXX
        escaped = wire_size(result)
    assert escaped == len(encoded) - len("é☕".encode()) + 12 + ENVELOPE_BYTES


def test_a_size_counts_numbers_as_written_not_as_placeholders() -> None:
    with exact_transport():
        result = tool_result(Result(structured={"n": Decimal("1e400")}), objects_only=True)
        size = wire_size(result)
    restored = _exact.restore(result.model_dump_json(by_alias=True, exclude_none=True).encode())
    written = number_text(Decimal("1e400")).encode()
    assert b'"structuredContent":{"n":' + written + b"}" in restored
    assert size == len(restored) + ENVELOPE_BYTES


# -- prompts and answers -----------------------------------------------------------------


def test_a_form_prompt_is_sent_as_its_schema() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    prompt = FormPrompt("Really?", json.dumps(schema).encode())
    for modern in (False, True):
        params = elicitation_params(prompt, modern=modern)
        assert isinstance(params, types.ElicitRequestFormParams)
        assert (params.mode, params.message, params.requested_schema) == ("form", "Really?", schema)


def test_a_url_prompt_has_a_fresh_elicitation_id_only_before_2026() -> None:
    prompt = URLPrompt("Pay here", "https://pay.example.com/checkout/42")
    legacy = [elicitation_params(prompt, modern=False) for _ in range(2)]
    for params in legacy:
        assert isinstance(params, types.ElicitRequestURLParams)
        assert (params.message, params.url) == ("Pay here", "https://pay.example.com/checkout/42")
        assert params.elicitation_id is not None
        assert len(params.elicitation_id) == 36
    assert legacy[0].elicitation_id != legacy[1].elicitation_id  # type: ignore[union-attr]
    assert elicitation_params(prompt, modern=True).elicitation_id is None  # type: ignore[union-attr]


def test_the_clients_answer_becomes_an_input_response() -> None:
    accepted = types.ElicitResult(action="accept", content={"ok": True})
    form = input_response(InputMode.FORM, accepted)
    assert (form.action, answers(form)) == (InputAction.ACCEPT, {"ok": True})
    empty = input_response(InputMode.FORM, types.ElicitResult(action="accept"))
    assert answers(empty) == {}  # the form's own checks then decide
    url = input_response(InputMode.URL, accepted)
    assert (url.action, url.has_answers) == (InputAction.ACCEPT, False)  # a URL carries none
    for action, expected in (("decline", InputAction.DECLINE), ("cancel", InputAction.CANCEL)):
        response = input_response(InputMode.FORM, types.ElicitResult(action=action))
        assert (response.action, response.has_answers) == (expected, False)


def test_the_answer_as_the_client_wrote_it_is_what_the_registry_reads() -> None:
    accepted = types.ElicitResult(action="accept", content={"n": 0.1})
    exact = input_response(InputMode.FORM, accepted, b'{"n":0.10000000000000000001}')
    assert answers(exact) == {"n": Decimal("0.10000000000000000001")}
    absent = input_response(InputMode.FORM, types.ElicitResult(action="accept"), b"{}")
    assert answers(absent) == {}


def test_an_answer_that_is_not_json_is_an_invalid_request() -> None:
    result = types.ElicitResult(action="accept", content={"n": math.nan})
    with pytest.raises(Failure) as raised:
        input_response(InputMode.FORM, result)
    assert raised.value.code is FailureCode.INVALID_REQUEST
    assert raised.value.message.startswith("the client's answer is not usable")


# -- through the official client ------------------------------------------------------------


async def test_non_object_structured_content_per_era(era: str) -> None:
    async with connect(GatewayServer(build_registry()), era) as client:
        result = await client.call_tool("invoke", {"name": "util.numbers"})
    assert text_of(result) == "[1,2,3]"  # the exact text copy in every era
    if era == "legacy":
        assert result.structured_content is None  # 2025-11-25 allows only objects
    else:
        assert result.structured_content == [1, 2, 3]


@pytest.mark.parametrize(
    ("action", "expected"), [("accept", "payment accept"), ("decline", "payment decline")]
)
async def test_url_elicitation(era: str, action: str, expected: str) -> None:
    seen: list[types.ElicitRequestParams] = []
    answer: Answer = lambda params: types.ElicitResult(action=action)  # noqa: E731
    async with connect(GatewayServer(build_registry()), era, answer, seen=seen) as client:
        result = await client.call_tool("invoke", {"name": "orders.pay"})
    assert text_of(result) == expected
    [params] = seen
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url == "https://pay.example.com/checkout/42"
    assert params.message == "Pay here"
    if era == "legacy":
        assert params.elicitation_id  # required at 2025-11-25, and never the continuation
        assert len(params.elicitation_id) == 36
    else:
        assert params.elicitation_id is None
