"""Differential test of search through the Registry (issue 10, item 2).

A naive implementation of DESIGN.md's ranking rule — test every field of every
operation, sort by (tier, name) — must agree with the registry's index on random
catalogs, queries, group filters, deny policies (sync and async), discovery scopes
and page sizes (changing between pages), following every cursor to the end. The
default suite runs a short, bounded version; ``pytest -m slow`` a long one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgate import (
    DiscoveryScope,
    Failed,
    Failure,
    FailureCode,
    Operation,
    Registry,
    Result,
    SearchPage,
    Text,
    finish,
)

pytestmark = pytest.mark.anyio

_DENIED = Failure(FailureCode.UNAVAILABLE)


def handler(invocation: Any) -> Any:
    return finish(Result([Text("done")]))


@dataclass(frozen=True)
class Spec:
    """One operation of a drawn catalog (the texts the rule looks at)."""

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]
    source: str


def naive(
    specs: list[Spec],
    query: str,
    group: str,
    denied: frozenset[str],
    scope: DiscoveryScope | None,
) -> list[str]:
    """The rule, plainly: what every page, cursor followed to the end, must list."""
    wanted = group.casefold()

    def visible(spec: Spec) -> bool:
        if wanted and spec.group.casefold() != wanted:
            return False
        if scope is not None and not scope.admits(spec.name, spec.group):
            return False
        return spec.name not in denied

    normalized = " ".join(query.split())
    for spec in specs:  # a query equal to an authorized name returns it alone
        if spec.name == normalized and visible(spec):
            return [spec.name]
    terms = list(dict.fromkeys(term.casefold() for term in query.split()))
    found: list[tuple[int, str]] = []
    for spec in specs:
        if not visible(spec):
            continue
        fields = [(0, spec.name), (1, spec.group), (2, spec.summary)]
        fields += [(3, text) for text in (spec.description, *spec.examples, spec.source)]
        tier = 0
        for term in terms:
            best = min((t for t, text in fields if term in text.casefold()), default=None)
            if best is None:
                break
            tier = max(tier, best)
        else:
            found.append((tier, spec.name))
    return [name for _, name in sorted(found)]


class Policy:
    """Denies a drawn set of names, sync or async, with an optional discovery scope."""

    def __init__(
        self, denied: frozenset[str], scope: DiscoveryScope | None, *, is_async: bool
    ) -> None:
        self.denied = denied
        self.scope = scope
        self.is_async = is_async
        self.calls = 0

    def scope_key(self, ctx: Any) -> str:
        return "principal"

    def discovery_scope(self, ctx: Any) -> DiscoveryScope | None:
        return self.scope

    def _decide(self, name: str) -> Failure | None:
        self.calls += 1
        return _DENIED if name in self.denied else None

    def authorize(self, ctx: Any, request: Any) -> Any:
        if self.is_async:

            async def later() -> Failure | None:
                return self._decide(request.name)

            return later()
        return self._decide(request.name)


NAME_CHARS = "abcAB_.-01"
TEXT_WORDS = ["get", "Get", "list", "object", "Bucket", "ß", "SS", "ﬁle", "é", "a.b", "x-1", "_"]

names = st.text(alphabet=st.sampled_from(NAME_CHARS), min_size=1, max_size=8)
groups = st.sampled_from(["", "s3", "S3", "ec2", "bucket", "ß", "ss"])
texts = st.lists(st.sampled_from(TEXT_WORDS), max_size=5).map(" ".join)
specs = st.builds(
    Spec,
    name=names,
    group=groups,
    summary=st.lists(st.sampled_from(TEXT_WORDS), min_size=1, max_size=4).map(" ".join),
    description=texts,
    examples=st.lists(texts, max_size=2).map(tuple),
    source=texts,
)
catalogs = st.lists(specs, min_size=0, max_size=30, unique_by=lambda spec: spec.name)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    catalog = draw(catalogs)
    names_in = [spec.name for spec in catalog]
    pool = [*TEXT_WORDS, *NAME_CHARS, *names_in]
    words = draw(st.lists(st.sampled_from(pool), max_size=3))
    if names_in and draw(st.integers(0, 4)) == 0:  # sometimes an exact name
        words = [draw(st.sampled_from(names_in))]
    query = draw(st.sampled_from([" ", "  ", "\t"])).join(words)
    group = draw(st.one_of(st.just(""), st.just(""), groups))  # mostly no filter
    denied = frozenset(draw(st.lists(st.sampled_from(names_in or ["none"]), max_size=10)))
    scope = None
    if draw(st.integers(0, 2)) == 0:
        scope = DiscoveryScope(
            groups=frozenset(draw(st.lists(groups, max_size=2))),
            prefixes=tuple(draw(st.lists(st.sampled_from(["a", "b", "A", "0", "ab"]), max_size=2))),
        )
    limits = draw(st.lists(st.integers(1, 20), min_size=1, max_size=4))
    return {
        "catalog": catalog,
        "query": query,
        "group": group,
        "denied": denied,
        "scope": scope,
        "limits": limits,
        "is_async": draw(st.booleans()),
    }


async def _all_pages(registry: Registry, case: dict[str, Any]) -> list[str]:
    listed: list[str] = []
    cursor: str | None = None
    limits: list[int] = case["limits"]
    for page_number in range(len(case["catalog"]) + 2):
        limit = limits[page_number % len(limits)]
        page = await registry.search(
            None, case["query"], group=case["group"], limit=limit, cursor=cursor
        )
        assert isinstance(page, SearchPage), page
        assert len(page.items) <= limit
        listed += [item.name for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return listed
    raise AssertionError(f"more pages than operations: {listed}")


async def _check(case: dict[str, Any]) -> None:
    catalog: list[Spec] = case["catalog"]
    policy = Policy(case["denied"], case["scope"], is_async=case["is_async"])
    registry = Registry(
        [
            Operation(
                spec.name,
                spec.summary,
                handler,
                group=spec.group,
                description=spec.description,
                examples=spec.examples,
                source=spec.source,
            )
            for spec in catalog
        ],
        policy,
    )
    expected = naive(catalog, case["query"], case["group"], case["denied"], case["scope"])
    assert await _all_pages(registry, case) == expected


def _run(case: dict[str, Any]) -> None:
    import anyio

    anyio.run(_check, case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_search_through_the_registry_matches_the_naive_rule(case: dict[str, Any]) -> None:
    _run(case)


@pytest.mark.slow
@settings(max_examples=3_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_search_through_the_registry_matches_the_naive_rule_long(case: dict[str, Any]) -> None:
    _run(case)


async def test_a_failed_search_is_never_an_empty_page() -> None:
    registry = Registry(
        [Operation("a", "does a", handler)], Policy(frozenset(), None, is_async=False)
    )
    assert isinstance(await registry.search(None, "a", cursor="garbage"), Failed)
