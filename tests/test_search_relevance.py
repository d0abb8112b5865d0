"""The relevance ranking and the scorer hook (issue 11): words, stems, scores, paging."""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from mcp import Client

from opgate import (
    Candidate,
    Failed,
    FailureCode,
    Operation,
    Ranking,
    Registry,
    SearchPage,
    finish,
)
from opgate._search import _relevance as relevance
from opgate._search._index import IndexEntry, SearchIndex
from opgate._search._relevance import RelevanceEntry, RelevanceIndex
from opgate._search._thesaurus import SYNONYM, VERBS, alternatives
from opgate._search._tokens import Stems, chunk_words, words
from opgate.mcp import GatewayServer

from conftest import AllowAll, Ctx, TeamPolicy

SECRET = b"relevance-test-secret-32-bytes!!"


def handler(invocation: Any) -> Any:
    return finish(None)  # type: ignore[arg-type]


def op(name: str, summary: str = "Does a thing.", **kwargs: Any) -> Operation:
    return Operation(name, summary, handler, **kwargs)


async def names(reg: Registry, query: str = "", ctx: Any = None, **kwargs: Any) -> list[str]:
    page = await reg.search(ctx or Ctx(), query, **kwargs)
    assert isinstance(page, SearchPage), page
    return [item.name for item in page.items]


async def all_pages(
    reg: Registry, query: str = "", ctx: Any = None, **kwargs: Any
) -> tuple[list[str], int]:
    found: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await reg.search(ctx or Ctx(), query, cursor=cursor, **kwargs)
        assert isinstance(page, SearchPage), page
        pages += 1
        found += [item.name for item in page.items]
        if page.next_cursor is None:
            return found, pages
        cursor = page.next_cursor


# --- words and stems -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DescribeDBInstances", ["describe", "db", "instances"]),
        ("describe_db_instances", ["describe", "db", "instances"]),
        ("describe-db-instances", ["describe", "db", "instances"]),
        ("rds.DescribeDBInstances", ["rds", "describe", "db", "instances"]),
        ("s3.ListObjectsV2", ["s3", "list", "objects", "v2"]),
        ("EC2 instance", ["ec2", "instance"]),
        (
            "repos/create-for-authenticated-user",
            ["repos", "create", "for", "authenticated", "user"],
        ),
        ("HTTPServer 404", ["http", "server", "404"]),
        ("Ñandú café", ["ñandú", "café"]),
        # ASCII words of a text holding other letters are folded too
        ("This Café lists DBInstances", ["this", "café", "lists", "db", "instances"]),
        ("a.b", ["a", "b"]),
        ("", []),
        ("... --- ___", []),
    ],
)
def test_words_split_names_and_prose(text: str, expected: list[str]) -> None:
    assert words(text) == expected


@pytest.mark.parametrize(
    "chunks",
    [
        [],
        [""],
        ["DescribeDBInstances", "s3.ListObjectsV2", "...", "EC2"],
        ["Ñandú-Foo", "DBInstance", "", "İstanbul", "x,y", "Café"],
    ],
)
def test_chunk_words_equals_words_of_each_chunk(chunks: list[str]) -> None:
    found, sizes = chunk_words(chunks)
    expected = [words(chunk) for chunk in chunks]
    assert sizes == [len(spelled) for spelled in expected]
    assert found == [word for spelled in expected for word in spelled]


def test_query_words_do_not_grow_the_stem_map() -> None:
    stem = Stems()
    stem.many(["instances"])
    learned = len(stem._known)
    fresh = Stems()
    for i in range(100):
        word = "unseen" + "".join(chr(97 + (i >> shift) % 26) for shift in (0, 2, 4)) + "s"
        assert stem(word) == fresh.many([word])[0]
    assert stem("instances") == stem("instance")
    assert len(stem._known) == learned


def test_stems_join_inflections() -> None:
    stem = Stems()
    assert stem("instances") == stem("instance")
    assert stem("invalidate") == stem("invalidation")
    assert stem("policies") == stem("policy")
    assert stem("listing") == stem("list")
    assert stem("reboot") != stem("restart")
    # words with digits or other letters are kept as they are
    assert stem("ec2") == "ec2"
    assert stem("ñandú") == "ñandú"


# --- scores ------------------------------------------------------------------------


def index_of(rows: Sequence[tuple[str, str, str, str]]) -> tuple[RelevanceIndex, list[str]]:
    ordered = sorted(rows)
    entries = [IndexEntry(name, group, summary, (doc,)) for name, group, summary, doc in ordered]
    rule = SearchIndex(entries)
    return RelevanceIndex([RelevanceEntry(e) for e in entries], rule), [r[0] for r in ordered]


def ranked(index: RelevanceIndex, names_: list[str], query: str, **kwargs: Any) -> list[str]:
    return [names_[position] for _, position in index.ranked(query, **kwargs)]


CLOUD = [
    ("dms.RebootReplicationInstance", "dms", "Reboots a replication instance.", ""),
    ("docdb.RebootDBInstance", "docdb", "Restarts a database instance.", ""),
    ("ec2.RebootInstances", "ec2", "Requests a reboot of the specified instances.", ""),
    ("ec2.DescribeInstances", "ec2", "Describes the specified instances.", "Lists them."),
    ("ec2.StopInstances", "ec2", "Stops an Amazon EBS-backed instance.", ""),
    ("chime.ListAppInstanceUsers", "chime", "Lists all app instance users.", ""),
    ("iam.ListUsers", "iam", "Lists the IAM users.", ""),
    ("cloudfront.CreateInvalidation", "cloudfront", "Create a new invalidation.", ""),
    ("rds.CreateDBInstance", "rds", "Creates a new DB instance.", "Engines: PostgreSQL, MySQL."),
]


def reference_postings(
    entries: Sequence[RelevanceEntry],
) -> dict[tuple[str, int], tuple[float, bool]]:
    """BM25F computed naively, text by text, word by word: (stem, entry) -> (weight,
    found in the name or group)."""
    stem = Stems()
    fields = [
        [e.entry.name for e in entries],
        [e.entry.group for e in entries],
        [e.entry.summary for e in entries],
        [" ".join(e.entry.documents) for e in entries],
    ]
    tf: dict[tuple[str, int], float] = {}
    named: dict[tuple[str, int], bool] = {}
    for field, texts in enumerate(fields):
        spelled = [[stem(w) for w in words(text)] for text in texts]
        average = max(sum(map(len, spelled)) / max(len(texts), 1), 1.0)
        for owner, stems_ in enumerate(spelled):
            norm = 1 - relevance.B + relevance.B * len(stems_) / average
            for term in stems_:
                key = (term, owner)
                tf[key] = tf.get(key, 0.0) + float(relevance._WEIGHTS[field]) / norm
                named[key] = named.get(key, False) or field <= 1
    count = len(entries)
    df: dict[str, int] = {}
    for term, _ in tf:
        df[term] = df.get(term, 0) + 1
    return {
        (term, owner): (
            math.log(1 + (count - df[term] + 0.5) / (df[term] + 0.5))
            * value
            / (relevance.K1 + value),
            named[(term, owner)],
        )
        for (term, owner), value in tf.items()
    }


@pytest.mark.parametrize("seed", range(12))
def test_index_postings_equal_a_naive_bm25f(seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["DescribeDBInstances", "list", "Objects", "ñandú", "v2", "the", "bucket", "..."]
    shared = [" ".join(rng.choices(pieces, k=rng.randint(0, 6))) for _ in range(4)]
    entries = []
    for i in range(rng.randint(1, 30)):
        doc = rng.choice([*shared, "", " ".join(rng.choices(pieces, k=rng.randint(0, 12)))])
        entries.append(
            RelevanceEntry(
                IndexEntry(
                    f"svc.Op{rng.choice(pieces)}{i}",
                    rng.choice(["team", "bucket", "Objects"]),  # also words of other fields
                    rng.choice(shared),
                    (doc, rng.choice(["", "Café Instances", doc])),
                )
            )
        )
    entries.sort(key=lambda e: e.entry.name)
    index = RelevanceIndex(entries, SearchIndex([e.entry for e in entries]))
    expected = reference_postings(entries)
    got = {}
    for term, known in index._stem_ids.items():
        first, end = index._offsets[known], index._offsets[known + 1]
        for owner, weight, flag in zip(
            index._entries[first:end].tolist(),
            index._weights[first:end].tolist(),
            index._named[first:end].tolist(),
            strict=True,
        ):
            got[(term, owner)] = (weight, flag)
    assert got.keys() == expected.keys()
    for key, (weight, flag) in expected.items():
        assert got[key][0] == pytest.approx(weight, rel=1e-12)
        assert got[key][1] == flag


def test_relevance_puts_the_meant_operation_first() -> None:
    index, names_ = index_of(CLOUD)
    assert ranked(index, names_, "reboot ec2 instance")[0] == "ec2.RebootInstances"
    assert ranked(index, names_, "list iam users")[0] == "iam.ListUsers"
    # stemming: invalidate meets invalidation
    assert ranked(index, names_, "invalidate cloudfront")[0] == "cloudfront.CreateInvalidation"
    # a word the catalog never uses does not stop the others matching
    assert ranked(index, names_, "reboot vm instance")[0] in {
        "ec2.RebootInstances",
        "docdb.RebootDBInstance",
        "dms.RebootReplicationInstance",
    }
    # prefix expansion of an unknown word: postgres meets postgresql
    assert ranked(index, names_, "postgres")[0] == "rds.CreateDBInstance"
    assert ranked(index, names_, "zzzz qqqq") == []


def test_thesaurus_verbs_match_names_below_a_literal_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [
        ("svc.DescribeWidgets", "svc", "Returns the widgets.", ""),
        ("svc.DeleteWidget", "svc", "Deletes a widget.", "You can describe widgets first."),
        ("other.ListGadgets", "other", "Lists gadgets.", ""),
        ("fn.Invoke", "fn", "Runs a function.", ""),
    ]
    index, names_ = index_of(rows)
    # list meets describe in a name
    assert ranked(index, names_, "list widgets")[0] == "svc.DescribeWidgets"
    # call meets invoke
    assert ranked(index, names_, "call fn")[0] == "fn.Invoke"
    # only in names: "describe" in DeleteWidget's documentation does not answer "list"
    listed, _ = index.scores("list")
    assert "svc.DeleteWidget" not in [names_[i] for i in listed.tolist()]
    # a literal verb outweighs its alternative
    both, both_names = index_of([*rows, ("svc.ListWidgets", "svc", "Returns the widgets.", "")])
    assert ranked(both, both_names, "list widgets")[:2] == [
        "svc.ListWidgets",
        "svc.DescribeWidgets",
    ]
    assert ranked(index, names_, "call") == ["fn.Invoke"]
    monkeypatch.setattr(relevance, "THESAURUS", False)
    assert ranked(index, names_, "call") == []


def test_thesaurus_groups_are_generic_verbs() -> None:
    words_ = {word for group in VERBS for word in group}
    assert {"list", "describe", "get", "upload", "put", "invoke", "delete", "create"} <= words_
    stem = Stems()
    table = alternatives(stem)
    assert stem("describe") in table[stem("list")]
    assert stem("list") in table[stem("describe")]  # symmetric
    assert stem("delete") not in table[stem("list")]
    assert 0 < SYNONYM < 1


def contraction_rows(extra: int) -> list[tuple[str, str, str, str]]:
    rows = [
        (f"db.DescribeDBThing{i}", "db", "Describes a thing.", "A database thing.")
        for i in range(6)
    ]
    rows += [(f"misc.Op{i}", "misc", "Does a thing.", "Unrelated text.") for i in range(extra)]
    rows += [("store.ListDatabases", "store", "Lists the stores.", "")]
    return rows


def test_contractions_attested_by_the_catalog_match_names() -> None:
    index, names_ = index_of(contraction_rows(60))
    # "db" in six names whose documentation says "database": an attested contraction
    found = ranked(index, names_, "describe database thing3")
    assert found[0] == "db.DescribeDBThing3"
    assert index._contractions(index.terms("database")[0]) == [index._stem_ids["db"]]
    # "debug" is spelled by d-b too, but no operation named "db" mentions it
    assert index._contractions(index.terms("debug")[0]) == []


def test_contractions_need_enough_names_and_lift() -> None:
    # the short term in too few names
    rows = contraction_rows(60)[relevance.ATTESTED_NAMES - 1 :]
    index, _ = index_of(rows)
    assert index._contractions(index.terms("database")[0]) == []
    # "database" everywhere: its use by the db operations is no evidence
    common = [(n, g, s, d + " database") for n, g, s, d in contraction_rows(60)]
    index, _ = index_of(common)
    assert index._contractions(index.terms("database")[0]) == []


def test_coverage_ranks_all_terms_above_most() -> None:
    index, names_ = index_of(
        [
            ("a.alpha", "g", "alpha beta alpha beta", ""),
            ("b.both", "g", "alpha beta gamma", ""),
        ]
    )
    assert ranked(index, names_, "alpha beta gamma") == ["b.both", "a.alpha"]


def test_ties_break_by_shorter_name_then_name() -> None:
    rows = [(name, "", "same words here", "") for name in ("bb", "a", "ab", "c", "aaa")]
    index, names_ = index_of(rows)
    scores = dict(zip(*index.scores("same words"), strict=True))
    assert len(set(scores.values())) == 1  # the names hold no query word: all tie
    assert ranked(index, names_, "same words") == ["a", "c", "ab", "bb", "aaa"]


def test_after_resumes_exactly_after_its_key() -> None:
    rows = [(f"op{n:02d}", "", "word " * (1 + n % 4), "") for n in range(30)]
    index, names_ = index_of(rows)
    full = ranked(index, names_, "word")
    assert sorted(full) == sorted(names_)
    for cut in range(len(full)):
        rest = ranked(index, names_, "word", after=(0, full[cut]))
        assert rest == full[cut + 1 :]


# --- the registry in relevance mode ---------------------------------------------------


def catalog(count: int = 240, seed: int = 7) -> list[Operation]:
    rng = random.Random(seed)
    vocabulary = ["alpha", "beta", "gamma", "delta", "instances", "instance", "report", "user"]
    operations = []
    for number in range(count):
        group = ["billing", "Orders", "admin", "misc"][number % 4]
        prefix = "admin" if group == "admin" else group.lower()
        summary = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 6)))
        if number % 5 == 0:  # long summaries make the page's byte budget bind
            summary += " " + "padding " * 180
        operations.append(
            op(
                f"{prefix}.op{number:03d}",
                summary.strip() + ".",
                group=group,
                description=" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 8))),
            )
        )
    return operations


def relevance_registry(operations: list[Operation] | None = None, **kwargs: Any) -> Registry:
    kwargs.setdefault("ranking", Ranking.RELEVANCE)
    return Registry(catalog() if operations is None else operations, TeamPolicy(), **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [1, 3, 20])
@pytest.mark.parametrize("group", ["", "orders", "ADMIN"])
async def test_paging_never_repeats_or_skips(limit: int, group: str) -> None:
    reg = relevance_registry()
    assert isinstance(reg._ranker, RelevanceIndex)
    order = sorted(o.name for o in catalog())
    expected = [
        order[position]
        for _, position in reg._ranker.ranked("instance alpha report", group)
        if not order[position].startswith("admin.")  # TeamPolicy denies admin.* to users
    ]
    assert expected or group.casefold() == "admin"  # users never see admin.*
    found, pages = await all_pages(reg, "instance alpha report", group=group, limit=limit)
    assert found == expected
    assert len(found) == len(set(found))
    if group.casefold() == "admin":
        assert found == []
        assert pages == 1
    elif limit == 20:
        assert pages > len(found) / 20  # the byte budget cut some pages short
    admin = Ctx(admin=True)
    everything, _ = await all_pages(reg, "instance alpha report", ctx=admin, group=group)
    assert set(found) <= set(everything)
    if group.casefold() == "admin":
        assert everything


@pytest.mark.anyio
async def test_scope_narrows_relevance_results() -> None:
    from opgate import DiscoveryScope

    class Scoped(TeamPolicy):
        def discovery_scope(self, ctx: Any) -> DiscoveryScope:
            return DiscoveryScope(groups=frozenset({"billing"}), prefixes=("orders.op00",))

    reg = Registry(catalog(), Scoped(), ranking=Ranking.RELEVANCE)
    found, _ = await all_pages(reg, "alpha beta", limit=4)
    assert found
    assert all(n.startswith(("billing.", "orders.op00")) for n in found)
    unscoped, _ = await all_pages(relevance_registry(), "alpha beta")
    assert found == [n for n in unscoped if n.startswith(("billing.", "orders.op00"))]


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


# --- the scorer hook ---------------------------------------------------------------


class Overlap:
    """A deterministic scorer: the number of query words in the candidate's summary
    and examples, counted by a plain split."""

    def __init__(self, name: str = "overlap-v1") -> None:
        self._name = name
        self.calls: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, candidates: Sequence[Candidate]) -> Sequence[float]:
        self.calls.append((query, len(candidates)))
        wanted = set(query.lower().split())
        texts = [" ".join((c.summary, *c.examples)).lower().replace(".", "") for c in candidates]
        return [float(len(wanted & set(text.split()))) for text in texts]


def scorer_catalog() -> list[Operation]:
    return [
        op("a.long_name", "red green.", group="g"),
        op("b.x", "red green.", group="g"),
        op("c.x", "red.", group="h"),
        op("d.x", "blue.", group="g", examples=("green",)),
        op("admin.x", "red green blue.", group="g"),
    ]


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


# --- MCP --------------------------------------------------------------------------


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


# --- opgate serve --ranking ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["build_registry", "build_gateway"])
async def test_serve_ranking_option_applies_to_the_served_registry(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.mcp_catalog as served

    from opgate import cli

    gateway = lambda: GatewayServer(served.build_registry())  # noqa: E731
    monkeypatch.setattr(served, "build_gateway", gateway, raising=False)
    parser = cli._parser()
    default = cli._gateway(parser.parse_args(["serve", f"tests.mcp_catalog:{target}"]))
    chosen = cli._gateway(
        parser.parse_args(["serve", f"tests.mcp_catalog:{target}", "--ranking", "relevance"])
    )
    assert default.registry._search_method == "search"
    assert chosen.registry._search_method == "search/relevance"
    assert isinstance(chosen.registry._ranker, RelevanceIndex)
    back = cli._gateway(
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


# --- schemas are not indexed (issue 20, item 7) ------------------------------------


def schema_catalog() -> list[Operation]:
    return [
        op(
            "s.upload",
            "Stores a file.",
            input_schema={
                "type": "object",
                "properties": {"zanzibar": {"type": "string", "description": "quokka"}},
            },
        ),
        op("s.other", "Removes a file.", examples=("zanzibar quokka",)),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("ranking", [Ranking.RULE, Ranking.RELEVANCE])
async def test_no_ranking_finds_an_operation_by_its_input_schema(ranking: Ranking) -> None:
    """The seed: "Schemas are excluded from the index and pages". A property name and
    its description find only the operation whose examples say them."""
    reg = Registry(schema_catalog(), AllowAll(), ranking=ranking)
    assert await names(reg, "zanzibar") == ["s.other"]
    assert await names(reg, "quokka") == ["s.other"]


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
