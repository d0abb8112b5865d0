"""Tests of ``opgate._search._scorer``: a host's own ``Scorer`` and its ``ScorerRanker``.

Ordering by score then shorter name, scores as any ordered collection (a numpy array),
cursors bound to the scorer's name, a broken scorer failing the search as ``internal``,
and the ``Candidate`` a scorer sees (never schema text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from opgate import Candidate, Failed, FailureCode, Registry, SearchPage
from search_support import SECRET, Overlap, all_pages, names, schema_catalog, scorer_catalog

from conftest import AllowAll, Ctx, TeamPolicy


@pytest.mark.anyio
async def test_scorer_orders_by_score_then_shorter_name() -> None:
    scorer = Overlap()
    reg = Registry(scorer_catalog(), TeamPolicy(), ranking=scorer)
    found, _ = await all_pages(reg, "red green", limit=1)
    # admin.x scores 2 but the policy hides it; d.x matches through its example
    assert found == ["b.x", "a.long_name", "c.x", "d.x"]
    assert scorer.calls[0] == ("red green", 5)
    assert await names(reg, "red", group="h") == ["c.x"]
    assert await names(reg, "c.x") == ["c.x"]  # the exact name never reaches the scorer
    calls = len(scorer.calls)
    assert await names(reg, "", limit=2) == ["a.long_name", "b.x"]
    assert len(scorer.calls) == calls


class ArrayOverlap(Overlap):
    """The same scores as a numpy array (``Scorer.score`` returns a ``Collection``)."""

    def score(self, query: str, candidates: Sequence[Candidate]) -> Any:
        import numpy

        return numpy.array(super().score(query, candidates), dtype=numpy.float32)


@pytest.mark.anyio
async def test_a_scorer_may_return_a_numpy_array() -> None:
    reg = Registry(scorer_catalog(), TeamPolicy(), ranking=ArrayOverlap())
    found, _ = await all_pages(reg, "red green", limit=1)
    assert found == ["b.x", "a.long_name", "c.x", "d.x"]


@pytest.mark.anyio
async def test_scorer_cursors_bind_its_name() -> None:
    one = Registry(scorer_catalog(), AllowAll(), secret=SECRET, ranking=Overlap("one"))
    two = Registry(scorer_catalog(), AllowAll(), secret=SECRET, ranking=Overlap("two"))
    page = await one.search(Ctx(), "red", limit=1)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    assert isinstance(await one.search(Ctx(), "red", limit=1, cursor=page.next_cursor), SearchPage)
    refused = await two.search(Ctx(), "red", limit=1, cursor=page.next_cursor)
    assert isinstance(refused, Failed)
    assert refused.failure.code is FailureCode.INVALID_CURSOR


@pytest.mark.anyio
async def test_a_broken_scorer_fails_the_search_internally() -> None:
    class Short(Overlap):
        def score(self, query: str, candidates: Sequence[Candidate]) -> Sequence[float]:
            return [1.0]

    class NotFinite(Overlap):
        def score(self, query: str, candidates: Sequence[Candidate]) -> Sequence[float]:
            return [float("nan")] * len(candidates)

    class Unordered(Overlap):
        def score(self, query: str, candidates: Sequence[Candidate]) -> Any:
            return {float(i) for i in range(len(candidates))}  # as many, but no order

    for scorer in (Short(), NotFinite(), Unordered()):
        reg = Registry(scorer_catalog(), AllowAll(), ranking=scorer)
        failed = await reg.search(Ctx(), "red")
        assert isinstance(failed, Failed)
        assert failed.failure.code is FailureCode.INTERNAL


@pytest.mark.anyio
async def test_a_scorer_sees_no_schema_text() -> None:
    seen: list[Candidate] = []

    class Recorder(Overlap):
        def score(self, query: str, candidates: Sequence[Candidate]) -> Sequence[float]:
            seen.extend(candidates)
            return super().score(query, candidates)

    reg = Registry(schema_catalog(), AllowAll(), ranking=Recorder())
    await names(reg, "zanzibar")
    upload = next(c for c in seen if c.name == "s.upload")
    assert "zanzibar" not in repr(upload)
    assert "quokka" not in repr(upload)
    other = next(c for c in seen if c.name == "s.other")
    assert other.examples == ("zanzibar quokka",)
