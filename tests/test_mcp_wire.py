"""``opgate.mcp._wire``: opgate's values as MCP wire values, and the client's answers back.

Results (content blocks, the text copy of structured content, structured content per
era, ``_meta``), failures (code and public message, never the cause), sizes as the
transport writes them, prompts as ``elicitation/create`` parameters, and the client's
``ElicitResult`` as an ``InputResponse``. Numbers go out as ``int`` and ``float``
in process, and as placeholders written as their canonical text over an exact
transport. Measured on the real wire in ``test_mcp_exact_wire.py``.
"""

from __future__ import annotations

import mcp.types as types
import pytest
from tests.mcp_catalog import build_registry

from opgate.mcp import GatewayServer

from mcp_client import ERAS, Answer, connect, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
