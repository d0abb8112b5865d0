"""Tests of ``opgate._search._ranking``: the host's choice of ranking, made once per registry.

``ranked_by``'s one fallback (an empty query, or one without a word under relevance,
goes to the rule) and the exact name, as in rule mode; the ranking bound into cursors;
``build_ranker`` refusing anything but a ``Ranking`` or ``Scorer`` and keeping the
``relevance`` extra optional; what every ranking indexes (never a schema) and how it
resumes; and the choice as served (the MCP search tool, ``opgate serve --ranking``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from mcp import Client

from opgate import Failed, FailureCode, Ranking, Registry, SearchPage
from opgate._search._relevance import RelevanceIndex
from opgate.mcp import GatewayServer
from search_support import (
    SECRET,
    Overlap,
    all_pages,
    catalog,
    names,
    op,
    relevance_registry,
    schema_catalog,
    scorer_catalog,
)

from conftest import AllowAll, Ctx, TeamPolicy

# --- the fallback to the rule (ranked_by) ---------------------------------------------


@pytest.mark.anyio
async def test_exact_name_and_empty_query_behave_as_in_rule_mode() -> None:
    reg = relevance_registry()
    rule = Registry(catalog(), TeamPolicy())
    assert await names(reg, "orders.op001") == ["orders.op001"]
    # a denied exact name is not revealed; the query is then ranked as words
    assert "admin.op002" not in await names(reg, "admin.op002", limit=20)
    assert await all_pages(reg, "", limit=7) == await all_pages(rule, "", limit=7)
    assert await all_pages(reg, "", group="billing") == await all_pages(rule, "", group="billing")


@pytest.mark.anyio
async def test_a_query_without_a_word_is_ranked_by_the_rule() -> None:
    # Punctuation alone holds no word to score: the rule ranks it (substrings), as an
    # empty query is browsed by the rule.
    operations = [op("a.x", "Dots... here."), op("b.y", "No dots"), op("c.z", "A - dash.")]
    relevance = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    rule = Registry(operations, AllowAll())
    for query in ["...", ".", "-", "  "]:
        assert await all_pages(relevance, query) == await all_pages(rule, query), query
    assert await names(relevance, "...") == ["a.x"]
    assert not relevance._ranker.ranks("...")
    assert relevance._ranker.ranks("dots")


# --- the ranking is bound into cursors ------------------------------------------------


@pytest.mark.anyio
async def test_cursor_is_bound_to_the_ranking() -> None:
    operations = catalog()
    rule = Registry(operations, AllowAll(), secret=SECRET)
    relevance = Registry(operations, AllowAll(), secret=SECRET, ranking=Ranking.RELEVANCE)
    assert rule.revision == relevance.revision
    for source, target in ((rule, relevance), (relevance, rule)):
        page = await source.search(Ctx(), "alpha", limit=2)
        assert isinstance(page, SearchPage)
        assert page.next_cursor is not None
        refused = await target.search(Ctx(), "alpha", limit=2, cursor=page.next_cursor)
        assert isinstance(refused, Failed)
        assert refused.failure.code is FailureCode.INVALID_CURSOR
        # the same registry kind (another replica) accepts it
        twin = Registry(
            operations,
            AllowAll(),
            secret=SECRET,
            ranking=Ranking.RELEVANCE if source is relevance else Ranking.RULE,
        )
        assert isinstance(
            await twin.search(Ctx(), "alpha", limit=2, cursor=page.next_cursor), SearchPage
        )
    # and a cursor from an empty query too: browsing is bound as well
    page = await rule.search(Ctx(), "", limit=2)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    refused = await relevance.search(Ctx(), "", limit=2, cursor=page.next_cursor)
    assert isinstance(refused, Failed)


# --- building a ranker (build_ranker) -------------------------------------------------


def test_ranking_must_be_a_ranking_or_scorer() -> None:
    with pytest.raises(TypeError, match="ranking"):
        Registry(catalog(4), AllowAll(), ranking="relevance")  # type: ignore[arg-type]


@pytest.mark.parametrize("missing", ["Stemmer", "numpy"])
@pytest.mark.anyio
async def test_relevance_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    # as if pystemmer or numpy were not installed: a None entry makes import fail
    for module in ("opgate._search._relevance", "opgate._search._tokens"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError, match=re.escape("pip install 'opgate[relevance]'")):
        Registry(catalog(4), AllowAll(), ranking=Ranking.RELEVANCE)
    # the rule and a host's scorer need neither package
    ruled = await names(Registry(scorer_catalog(), AllowAll()), "red")
    assert sorted(ruled) == ["a.long_name", "admin.x", "b.x", "c.x"]
    scored = Registry(scorer_catalog(), AllowAll(), ranking=Overlap())
    assert await names(scored, "red green") == ["b.x", "admin.x", "a.long_name", "c.x", "d.x"]


def test_importing_opgate_imports_neither_numpy_nor_pystemmer() -> None:
    code = (
        "import sys, opgate, opgate.mcp, opgate.cli\n"
        "loaded = {'numpy', 'Stemmer', 'opgate._search._relevance'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- every ranking --------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("ranking", [Ranking.RULE, Ranking.RELEVANCE])
async def test_a_page_after_the_last_placed_operation_left_the_scope(ranking: Ranking) -> None:
    # A grant revoked between pages (same scope key): the last placed operation is no
    # longer discoverable, and paging must still resume after it rather than end.
    from opgate import DiscoveryScope

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
    reg = Registry(ops, policy, ranking=ranking)
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


# --- schemas are not indexed (issue 20, item 7) ---------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("ranking", [Ranking.RULE, Ranking.RELEVANCE])
async def test_no_ranking_finds_an_operation_by_its_input_schema(ranking: Ranking) -> None:
    """The seed: "Schemas are excluded from the index and pages". A property name and
    its description find only the operation whose examples say them."""
    reg = Registry(schema_catalog(), AllowAll(), ranking=ranking)
    assert await names(reg, "zanzibar") == ["s.other"]
    assert await names(reg, "quokka") == ["s.other"]


# --- MCP ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_search_tool_uses_the_relevance_ranking() -> None:
    operations = [
        op("dms.RebootReplicationInstance", "Reboots a replication instance.", group="dms"),
        op("docdb.RebootDBInstance", "Reboots a database instance.", group="docdb"),
        op("ec2.RebootInstances", "Requests a reboot of the specified instances.", group="ec2"),
        op("ec2.StopInstances", "Stops an instance.", group="ec2"),
    ]
    rule = Registry(operations, AllowAll())
    relevance = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    seen = {}
    described = {}
    for label, reg in (("rule", rule), ("relevance", relevance)):
        async with Client(GatewayServer(reg).sdk_server) as client:
            listed = await client.list_tools()
            described[label] = next(t for t in listed.tools if t.name == "search").description
            result = await client.call_tool("search", {"query": "reboot ec2 instance"})
            assert not result.is_error
            seen[label] = [item["name"] for item in result.structured_content["items"]]
    assert seen["rule"] == ["ec2.RebootInstances"]  # every term must match under the rule
    assert seen["relevance"][0] == "ec2.RebootInstances"
    assert set(seen["relevance"]) == {o.name for o in operations}
    # the tool tells agents how keywords are treated
    assert "all must match" in described["rule"]
    assert "not every keyword has to match" in described["relevance"]


# --- opgate serve --ranking -----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["build_registry", "build_gateway"])
async def test_serve_ranking_option_applies_to_the_served_registry(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.mcp_catalog as served

    from opgate.cli._parser import build_parser
    from opgate.cli._serve import build_gateway

    gateway = lambda: GatewayServer(served.build_registry())  # noqa: E731
    monkeypatch.setattr(served, "build_gateway", gateway, raising=False)
    parser = build_parser()
    default = build_gateway(parser.parse_args(["serve", f"tests.mcp_catalog:{target}"]))
    chosen = build_gateway(
        parser.parse_args(["serve", f"tests.mcp_catalog:{target}", "--ranking", "relevance"])
    )
    assert default.registry._search_method == "search"
    assert chosen.registry._search_method == "search/relevance"
    assert isinstance(chosen.registry._ranker, RelevanceIndex)
    back = build_gateway(
        parser.parse_args(["serve", f"tests.mcp_catalog:{target}", "--ranking", "rule"])
    )
    assert back.registry._search_method == "search"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "tests.mcp_catalog:build_registry", "--ranking", "best"])


def test_serve_ranking_relevance_without_the_extra_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opgate import cli

    for module in ("opgate._search._relevance", "opgate._search._tokens"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, "Stemmer", None)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "tests.mcp_catalog:build_registry", "--ranking", "relevance"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "pip install 'opgate[relevance]'" in error
    assert "Traceback" not in error
