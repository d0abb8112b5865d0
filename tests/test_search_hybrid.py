"""Tests of ``opgate._search._hybrid``: the public ``Hybrid`` choice and ``Embedder``.

Its parameters checked at construction, the embedder's shape, the cursor method that
binds them, the ``relevance`` extra it needs (and the default install that never
imports numpy for it), and ``Registry.replace`` onto it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from opgate import (
    ConfigurationError,
    Embedder,
    Failed,
    FailureCode,
    Hybrid,
    Ranking,
    Registry,
    SearchPage,
)
from search_support import SECRET, HashedWords, catalog, names, scorer_catalog

from conftest import AllowAll, Ctx


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"k": -1}, "k must be an int of at least 0"),
        ({"k": 1.5}, "k must be an int"),
        ({"k": True}, "k must be an int"),
        ({"depth": 0}, "depth must be an int"),
        ({"depth": 100_001}, "depth must be an int from 1 to 100000"),
        ({"batch": 0}, "batch must be an int from 1"),
        ({"batch": "8"}, "batch must be an int"),
    ],
)
def test_hybrid_parameters_are_checked(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        Hybrid(HashedWords(), **arguments)


def test_an_embedder_needs_a_name_and_an_embed_method() -> None:
    class Nameless:
        name = ""

        def embed(self, texts: Any) -> Any:
            return []

    class Mute:
        name = "mute"

    with pytest.raises(ConfigurationError, match="name must be a non-empty str"):
        Hybrid(Nameless())
    with pytest.raises(ConfigurationError, match=r"'mute' must have an embed\(texts\) method"):
        Hybrid(Mute())  # type: ignore[arg-type]
    assert isinstance(HashedWords(), Embedder)
    assert not isinstance(Mute(), Embedder)


def test_the_cursor_method_binds_the_embedder_and_the_fusion() -> None:
    assert Hybrid(HashedWords("m-v1")).method == "search/hybrid/m-v1/k=60/depth=100"
    assert Hybrid(HashedWords("m-v2"), k=10, depth=5).method == "search/hybrid/m-v2/k=10/depth=5"
    # the batch size changes no order, so it is not bound
    assert Hybrid(HashedWords("m"), batch=3).method == Hybrid(HashedWords("m")).method


@pytest.mark.anyio
async def test_cursors_are_refused_under_another_embedder_or_fusion() -> None:
    def registry(hybrid: Hybrid) -> Registry:
        return Registry(catalog(40), AllowAll(), secret=SECRET, ranking=hybrid)

    one = registry(Hybrid(HashedWords("one")))
    page = await one.search(Ctx(), "alpha report", limit=2)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    # a replica with the same secret and the same hybrid continues it
    same = await registry(Hybrid(HashedWords("one"))).search(
        Ctx(), "alpha report", limit=2, cursor=page.next_cursor
    )
    assert isinstance(same, SearchPage)
    for other in (
        registry(Hybrid(HashedWords("two"))),
        registry(Hybrid(HashedWords("one"), k=1)),
        registry(Hybrid(HashedWords("one"), depth=7)),
        Registry(catalog(40), AllowAll(), secret=SECRET, ranking=Ranking.RELEVANCE),
    ):
        refused = await other.search(Ctx(), "alpha report", limit=2, cursor=page.next_cursor)
        assert isinstance(refused, Failed)
        assert refused.failure.code is FailureCode.INVALID_CURSOR


@pytest.mark.anyio
async def test_replace_serves_the_same_catalog_under_a_hybrid() -> None:
    rule = Registry(scorer_catalog(), AllowAll())
    hybrid = Hybrid(HashedWords())
    fused = rule.replace(ranking=hybrid)
    assert fused.ranking is hybrid
    assert rule.ranking is Ranking.RULE
    assert fused.revision == rule.revision
    assert await names(fused, "red green")
    assert await names(fused, "c.x") == ["c.x"]  # the exact name, as under every ranking


@pytest.mark.anyio
async def test_a_hybrid_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in ("opgate._search._fusion", "opgate._search._vectors"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'opgate[relevance]'")):
        Registry(catalog(4), AllowAll(), ranking=Hybrid(HashedWords()))


def test_naming_a_hybrid_imports_no_numpy() -> None:
    # the default install: Hybrid and Embedder are importable without the extra
    code = (
        "import sys, opgate\n"
        "from opgate import Embedder, Hybrid\n"
        "class E:\n"
        "    name = 'e'\n"
        "    def embed(self, texts): return [[1.0] for _ in texts]\n"
        "Hybrid(E())\n"
        "loaded = {'numpy', 'Stemmer', 'opgate._search._vectors'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
