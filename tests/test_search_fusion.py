"""Tests of ``opgate._search._fusion``: the hybrid ranking, fused by reciprocal rank.

The fused order against one computed here from the two rankings' own orders; what
each side alone brings (a vector match no word shares); ``depth``; the policy, group
filter and discovery scope on every page; cursors that never repeat or skip across
pages of every size and the byte budget; determinism across registries; and an
embedder failing at query time (the lexical fallback on a first page, a failed search
on a later page of a fused chain); searches from several threads sharing the bounded
query cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opgate import DiscoveryScope, Failed, FailureCode, Hybrid, Ranking, Registry, SearchPage
from opgate._search._fusion import LEXICAL
from opgate._search._vectors import document_text
from search_support import HashedWords, all_pages, catalog, names, op

from conftest import AllowAll, Ctx, TeamPolicy


def _vector_order(embedder: HashedWords, operations: list[Any], query: str) -> list[str]:
    """The catalog by descending cosine similarity (above 0), shorter name, name."""
    ordered = sorted(operations, key=lambda o: o.name)
    texts = [document_text(o.name, o.summary, o.description, o.examples) for o in ordered]
    matrix = np.array([embedder.vector(text) for text in texts])
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-30)
    q = np.array(embedder.vector(query))
    q /= np.linalg.norm(q)
    similar = matrix @ q
    found = [(-float(s), len(o.name), o.name) for o, s in zip(ordered, similar, strict=True)]
    return [name for score, _, name in sorted(found) if score < -1e-9]


def _fuse(orders: list[list[str]], k: int, depth: int) -> list[str]:
    fused: dict[str, float] = {}
    for order in orders:
        for rank, name in enumerate(order[:depth], start=1):
            fused[name] = fused.get(name, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda name: (-fused[name], len(name), name))


def _fusion_catalog() -> list[Any]:
    return [
        op("files.upload", "Stores a file in a bucket."),
        op("files.put_object", "Writes an object."),
        op("files.delete", "Removes a file from a bucket."),
        op("files.list", "Lists the files of a bucket."),
        op("mail.send", "Sends an email to a person."),
        op("mail.draft", "Drafts a letter."),
        op("calendar.book", "Books a meeting room."),
        op("calendar.cancel", "Cancels a meeting."),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("k", "depth"), [(60, 100), (1, 100), (0, 3), (60, 2)])
@pytest.mark.parametrize("query", ["store a file", "send a letter", "meeting", "bucket files"])
async def test_the_fused_order_is_reciprocal_rank_fusion(k: int, depth: int, query: str) -> None:
    operations = _fusion_catalog()
    embedder = HashedWords(synonyms={"letter": "email"})
    lexical, _ = await all_pages(Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE), query)
    vectors = _vector_order(embedder, operations, query)
    expected = _fuse([lexical, vectors], k, depth)
    reg = Registry(operations, AllowAll(), ranking=Hybrid(embedder, k=k, depth=depth))
    found, _ = await all_pages(reg, query, limit=1)
    assert found == expected
    assert len(found) <= 2 * depth


@pytest.mark.anyio
async def test_a_vector_match_no_word_shares_is_found() -> None:
    # "letter" meets "email" only through the embedder: relevance alone misses mail.send
    operations = _fusion_catalog()
    relevance = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    assert "mail.send" not in await names(relevance, "letter")
    embedder = HashedWords(synonyms={"letter": "email"})
    reg = Registry(operations, AllowAll(), ranking=Hybrid(embedder))
    assert await names(reg, "letter", limit=2) == ["mail.draft", "mail.send"]


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [1, 3, 7, 20])
async def test_pages_never_repeat_or_skip_and_the_policy_judges_every_page(limit: int) -> None:
    # catalog(): long summaries make the byte budget cut pages short; admin.* is hidden
    operations = catalog(240)
    policy = TeamPolicy()
    reg = Registry(operations, policy, ranking=Hybrid(HashedWords(), depth=60))
    for query in ("alpha report", "instances user", "gamma"):
        found, pages = await all_pages(reg, query, limit=limit)
        assert len(found) == len(set(found))
        assert not any(name.startswith("admin.") for name in found)
        # an admin sees the same order with admin.* placed in it
        everything, _ = await all_pages(reg, query, Ctx(admin=True), limit=20)
        assert [name for name in everything if not name.startswith("admin.")] == found
        assert any(name.startswith("admin.") for name in everything)
        assert pages >= -(-len(found) // limit)
    for group in ("billing", "orders"):
        found, _ = await all_pages(reg, "alpha report", group=group, limit=limit)
        assert found
        assert all(name.startswith(group + ".") for name in found)


@pytest.mark.anyio
async def test_the_discovery_scope_narrows_before_ranking() -> None:
    class Scoped(AllowAll):
        def discovery_scope(self, ctx: Any) -> DiscoveryScope:
            return DiscoveryScope(groups=frozenset({"billing"}))

    operations = catalog(120)
    embedder = HashedWords()
    scoped = Registry(operations, Scoped(), ranking=Hybrid(embedder, depth=10))
    found, _ = await all_pages(scoped, "alpha report", limit=3)
    assert found
    assert all(name.startswith("billing.") for name in found)
    # ranks are counted inside the scope: the first 10 of each ranking are billing's
    # own, so the scope gets as many results as depth allows, not what is left of the
    # catalog's first 10
    everyone = Registry(operations, AllowAll(), ranking=Hybrid(embedder, depth=10))
    filtered, _ = await all_pages(everyone, "alpha report", limit=20)
    assert len(found) > len([n for n in filtered if n.startswith("billing.")])


@pytest.mark.anyio
async def test_a_page_after_the_last_placed_operation_left_the_scope() -> None:
    class Revocable(AllowAll):
        groups = frozenset({"a", "b"})

        def discovery_scope(self, ctx: Any) -> DiscoveryScope:
            return DiscoveryScope(groups=self.groups)

    ops = [
        op("a.ListThings", "Lists things.", group="a"),
        op("b.ListThingz", "Lists things.", group="b"),
        op("b.ListThingy", "Lists things.", group="b"),
        op("b.ListThingw", "Lists things too.", group="b"),
    ]
    policy = Revocable()
    reg = Registry(ops, policy, ranking=Hybrid(HashedWords()))
    first = await reg.search(Ctx(), "list things", limit=1)
    assert isinstance(first, SearchPage)
    assert [item.name for item in first.items] == ["a.ListThings"]
    policy.groups = frozenset({"b"})
    rest = await reg.search(Ctx(), "list things", limit=10, cursor=first.next_cursor)
    assert isinstance(rest, SearchPage)
    assert sorted(item.name for item in rest.items) == [
        "b.ListThingw",
        "b.ListThingy",
        "b.ListThingz",
    ]


@pytest.mark.anyio
async def test_the_fused_order_is_the_same_in_every_registry() -> None:
    operations = catalog(240)
    one = Registry(operations, AllowAll(), ranking=Hybrid(HashedWords()))
    two = Registry(list(reversed(operations)), AllowAll(), ranking=Hybrid(HashedWords()))
    for query in ("alpha report", "delta", "user instance beta"):
        first = await all_pages(one, query, limit=4)
        assert first == await all_pages(two, query, limit=4)
        assert first == await all_pages(one, query, limit=4)


@pytest.mark.anyio
async def test_exact_names_and_empty_queries_are_the_rules() -> None:
    operations = catalog(40)
    embedder = HashedWords()
    reg = Registry(operations, AllowAll(), ranking=Hybrid(embedder))
    rule = Registry(operations, AllowAll())
    embedder.calls.clear()
    assert await all_pages(reg, "", limit=7) == await all_pages(rule, "", limit=7)
    assert await names(reg, "billing.op004") == ["billing.op004"]
    assert embedder.calls == []  # neither reaches the embedder


class Flaky(HashedWords):
    """Embeds the catalog, then fails on queries while ``failing``."""

    failing = False

    def embed(self, texts: Any) -> list[list[float]]:
        if self.failing:
            raise RuntimeError("model unavailable")
        return super().embed(texts)


@pytest.mark.anyio
async def test_an_embedder_failing_on_a_first_page_falls_back_to_lexical() -> None:
    operations = catalog(120)
    embedder = Flaky()
    reg = Registry(operations, AllowAll(), ranking=Hybrid(embedder))
    relevance = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    embedder.failing = True
    first = await reg.search(Ctx(), "alpha report", limit=3)
    assert isinstance(first, SearchPage)
    assert first.next_cursor is not None
    assert reg._cursors.open(first.next_cursor, _binding(reg, "alpha report"))[0] == LEXICAL
    # the chain stays lexical when the embedder recovers: no repeat, no skip
    embedder.failing = False
    found = [item.name for item in first.items]
    cursor = first.next_cursor
    while cursor is not None:
        page = await reg.search(Ctx(), "alpha report", limit=3, cursor=cursor)
        assert isinstance(page, SearchPage)
        found += [item.name for item in page.items]
        cursor = page.next_cursor
    assert found == (await all_pages(relevance, "alpha report", limit=20))[0]
    # a new search with the embedder back is fused again
    fused = await all_pages(reg, "alpha report", limit=20)
    assert fused[0] != found


@pytest.mark.anyio
async def test_an_embedder_failing_on_a_later_fused_page_fails_that_search() -> None:
    embedder = Flaky()
    reg = Registry(catalog(120), AllowAll(), ranking=Hybrid(embedder))
    first = await reg.search(Ctx(), "alpha report", limit=3)
    assert isinstance(first, SearchPage)
    # remembered: the next page needs no embedder
    embedder.failing = True
    second = await reg.search(Ctx(), "alpha report", limit=3, cursor=first.next_cursor)
    assert isinstance(second, SearchPage)
    # forgotten and failing: continuing in another order could repeat or skip
    reg._ranker._vectors._cache.clear()  # type: ignore[attr-defined]
    failed = await reg.search(Ctx(), "alpha report", limit=3, cursor=second.next_cursor)
    assert isinstance(failed, Failed)
    assert failed.failure.code is FailureCode.INTERNAL
    embedder.failing = False
    again = await reg.search(Ctx(), "alpha report", limit=3, cursor=second.next_cursor)
    assert isinstance(again, SearchPage)


def _binding(reg: Registry, query: str) -> Any:
    from opgate._search import CursorBinding

    return CursorBinding(
        method=reg._search_method,
        revision=reg.revision,
        query=query,
        group="",
        scope_hash=reg._scope_hashes.of("everyone"),
    )


def test_searches_from_many_threads_agree_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # the query cache is shared and bounded: threads evicting each other's vectors
    # still get the one fused order
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from opgate._search import _vectors

    monkeypatch.setattr(_vectors, "QUERY_CACHE", 2)
    reg = Registry(catalog(120), AllowAll(), ranking=Hybrid(HashedWords()))
    queries = ["alpha report", "beta", "gamma user", "delta instances", "user", "report beta"]
    expected = {q: asyncio.run(all_pages(reg, q, limit=5)) for q in queries}

    def run(query: str) -> tuple[list[str], int]:
        return asyncio.run(all_pages(reg, query, limit=5))

    with ThreadPoolExecutor(4) as pool:
        for query, found in zip(queries * 5, pool.map(run, queries * 5), strict=True):
            assert found == expected[query]
