"""Tests of ``opgate._search._request``: a search request's parameters, checked first.

The query and the group are strings of valid UTF-8 of at most 256 bytes, the limit an
integer from 1 to 20 (5 when omitted), the cursor a string within the token budget;
anything else is ``invalid_request`` with a message that states the rule.
"""

from __future__ import annotations

import pytest

from opgate import Failed, FailureCode, SearchPage
from opgate._search._request import search_problem
from registry_support import names, op, registry

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


async def test_default_and_maximum_page_sizes() -> None:
    reg = registry([op(f"op{i:02}") for i in range(30)], policy=AllowAll())
    assert len(await names(reg, Ctx())) == 5
    assert len(await names(reg, Ctx(), limit=20)) == 20
    for bad in (0, 21, -1, True, 2.0, "5"):
        outcome = await reg.search(Ctx(), "", limit=bad)  # type: ignore[arg-type]
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_REQUEST


async def test_query_and_group_byte_limits() -> None:
    reg = registry()
    assert isinstance(await reg.search(Ctx(), "a" * 256), SearchPage)
    assert isinstance(await reg.search(Ctx(), "", group="g" * 256), SearchPage)
    for kwargs in ({"query": "a" * 257}, {"query": "", "group": "g" * 257}):
        outcome = await reg.search(Ctx(), **kwargs)
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INVALID_REQUEST
    # 300 bytes of UTF-8 with a multi-byte character straddling the 256-byte boundary.
    query = "a" * 255 + "é" + "b" * 43
    assert len(query.encode()) == 300
    outcome = await reg.search(Ctx(), query)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INVALID_REQUEST
    exactly = "a" * 254 + "é"
    assert len(exactly.encode()) == 256
    assert isinstance(await reg.search(Ctx(), exactly), SearchPage)
    over = "a" * 255 + "é"
    assert isinstance(await reg.search(Ctx(), over), Failed)


def test_query_and_group_must_be_strings_of_valid_utf8() -> None:
    assert search_problem(7, "", None, None, 256) == "query must be a string"
    assert search_problem("", None, None, None, 256) == "group must be a string"
    assert search_problem("a\ud800", "", None, None, 256) == "query must be valid UTF-8"
    assert search_problem("", "g\udc00", None, None, 256) == "group must be valid UTF-8"
    assert search_problem("a" * 256, "é" * 128, None, None, 256) is None
    too_long = "group must be at most 256 UTF-8 bytes"
    assert search_problem("", "é" * 128 + "g", None, None, 256) == too_long


@pytest.mark.parametrize("limit", [0, 21, -1, True, 2.0, "5"])
def test_a_limit_is_an_integer_from_one_to_twenty(limit: object) -> None:
    assert search_problem("", "", limit, None, 256) == "limit must be an integer from 1 to 20"


def test_a_cursor_is_a_string_within_the_token_budget() -> None:
    malformed = "malformed cursor: start the search again without a cursor"
    assert search_problem("", "", None, 7, 256) == malformed
    assert search_problem("", "", None, "x" * 257, 256) == malformed
    assert search_problem("", "", None, "x" * 256, 256) is None  # opening it is _cursor's
