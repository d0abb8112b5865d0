"""Tests of ``opgate._registry``'s construction: what ``Registry(...)`` and ``replace``
check of their own, and what ``replace`` keeps.

The policy must provide ``scope_key`` and ``authorize``; ``replace`` shares the compiled
catalog and keeps what it is not given (secret, ledger, ranking), checking what it is
given as the constructor does; ``spec`` reads a definition without the policy. What
construction checks of the definitions is
``test_catalog.py`` and ``test_operation.py``; of the schemas, ``test_schema_batch.py``;
the collector it pauses, ``test_collector.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from opgate import ConfigurationError, Failed, Failure, FailureCode, Operation, Registry
from registry_support import handler, op

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


# --- what the constructor checks of its own ----------------------------------------------


def test_policy_methods_required() -> None:
    class Half:
        def scope_key(self, ctx: Any) -> str:
            return "k"

    with pytest.raises(TypeError, match="authorize"):
        Registry([op("a")], Half())  # type: ignore[arg-type]


# --- Registry.replace: the same compiled catalog under another secret, ledger or ranking ---


class _Names:
    """A host's ``Scorer``: an operation scores when its name holds the query."""

    name = "names/v1"

    def score(self, query: str, candidates: Any) -> list[float]:
        return [1.0 if query in candidate.name else 0.0 for candidate in candidates]


class _SharedStore:
    """A ``LedgerFactory`` that must never be bound (it needs a shared secret)."""

    def bind(self, **options: Any) -> Any:
        raise AssertionError("bound without a shared secret")


def _two() -> Registry:
    return Registry(
        [Operation("alpha", "does a", handler), Operation("beta", "does b", handler)], AllowAll()
    )


async def test_replace_keeps_the_compiled_catalog_and_what_is_left_out() -> None:
    from opgate import Ranking

    registry = _two()
    assert registry.ranking is Ranking.RULE
    same = registry.replace()
    assert same is not registry
    assert same._entries is registry._entries  # shared, not compiled again
    assert (same.revision, len(same), same.limits) == (registry.revision, 2, registry.limits)
    assert same.ledger is registry.ledger  # secret and ledger kept: one continuation store
    assert same.ranking is Ranking.RULE
    scorer = _Names()
    ranked = registry.replace(ranking=scorer)
    assert ranked.ranking is scorer
    assert ranked.ledger is registry.ledger
    assert registry.ranking is Ranking.RULE  # the original is untouched
    page = await ranked.search(Ctx(), "bet")
    assert [item.name for item in page.items] == ["beta"]  # type: ignore[union-attr]
    secret = b"s" * 32
    rebound = ranked.replace(secret=secret)
    assert rebound.ranking is scorer
    assert rebound.ledger is not registry.ledger  # its own keys, its own continuations
    assert rebound._entries is registry._entries
    assert rebound.replace(ledger=None).ledger is not rebound.ledger


def test_the_policy_is_the_one_given_and_replace_keeps_it() -> None:
    policy = AllowAll()
    registry = Registry([Operation("alpha", "does a", handler)], policy)
    assert registry.policy is policy
    assert registry.replace(secret=b"s" * 32).policy is policy


def test_replace_checks_its_arguments_as_the_constructor_does() -> None:
    registry = _two()
    with pytest.raises(TypeError):
        registry.replace(b"s" * 32)  # type: ignore[misc]
    with pytest.raises(ConfigurationError, match="secret must be 32"):
        registry.replace(secret=b"short")
    with pytest.raises(ConfigurationError, match="a shared ledger needs a shared secret"):
        registry.replace(ledger=_SharedStore())
    with pytest.raises(TypeError, match="ranking must be"):
        registry.replace(ranking="best")  # type: ignore[arg-type]


# --- Registry.spec: a definition without the policy ----------------------------------------


async def test_spec_is_inspect_without_the_policy() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    asked: list[Any] = []

    class Denying:
        def scope_key(self, ctx: Any) -> str:
            asked.append("scope_key")
            return "k"

        def authorize(self, ctx: Any, request: Any) -> Failure:
            asked.append(request)
            return Failure(FailureCode.UNAVAILABLE)

    reg = Registry([op("a", "sum", description="d", input_schema=schema)], Denying())
    spec = reg.spec("a")
    assert asked == []
    assert (spec.name, spec.summary, spec.description) == ("a", "sum", "d")
    assert spec.input_schema == schema
    assert spec.output_schema is None
    assert isinstance(await reg.inspect(Ctx(), "a"), Failed)  # a principal is still refused
    for unknown in ("b", "A", 3):
        with pytest.raises(KeyError):
            reg.spec(unknown)  # type: ignore[arg-type]
