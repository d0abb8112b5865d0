"""Tests of ``opgate._search._relevance``: the BM25F relevance ranking (issue 11).

Postings against a naive BM25F, the operation meant first, thesaurus verbs and
attested contractions in names, coverage and ties, resuming after a key; then the
registry in relevance mode: paging that never repeats or skips, and discovery scopes.
What every ranking shares (the fallbacks, cursor binding, the extra) is
``test_search_ranking.py``; words and stems are ``test_search_tokens.py``, the verb
groups ``test_search_thesaurus.py``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pytest

from opgate import Ranking, Registry, SearchPage
from opgate._search import _relevance as relevance
from opgate._search import _tokens as tokens
from opgate._search._index import IndexEntry, SearchIndex
from opgate._search._relevance import RelevanceEntry, RelevanceIndex
from opgate._search._tokens import STOP_WORDS, Stems, segment, words
from search_support import SECRET, all_pages, catalog, op, relevance_registry

from conftest import AllowAll, Ctx, TeamPolicy

# --- scores ---------------------------------------------------------------------------


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
    spellings = {w for texts in fields for text in texts for w in words(text)}
    occurrences = Counter(stem(w) for texts in fields for text in texts for w in words(text))

    def frequency(word: str) -> int:
        known = word in spellings and word not in STOP_WORDS
        return occurrences[stem(word)] if known else 0

    def pieces(word: str) -> list[str]:
        # a name or group word's pieces, each more frequent than the word
        own = occurrences[stem(word)]
        return segment(word, lambda piece: frequency(piece) - own) or []

    for field, texts in enumerate(fields):
        spelled = [[stem(w) for w in words(text)] for text in texts]
        average = max(sum(map(len, spelled)) / max(len(texts), 1), 1.0)
        for owner, stems_ in enumerate(spelled):
            norm = 1 - relevance.B + relevance.B * len(stems_) / average
            cut = [stem(p) for w in words(texts[owner]) for p in pieces(w)] if field <= 1 else []
            for term in stems_ + cut:
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
    pieces = [
        "DescribeDBInstances",
        "list",
        "Objects",
        "ñandú",
        "v2",
        "the",
        "bucket",
        "...",
        "Workspace",  # a compound of the two words after it
        "work",
        "space spaces",
    ]
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
    # giving access has several verbs on APIs: allow meets authorize
    access, access_names = index_of(
        [
            ("net.AuthorizeIngress", "net", "Adds an inbound rule.", ""),
            ("net.AllowList", "net", "Lists allow lists of inbound traffic.", ""),
        ]
    )
    assert ranked(access, access_names, "allow ingress")[0] == "net.AuthorizeIngress"
    monkeypatch.setattr(relevance, "THESAURUS", False)
    assert ranked(index, names_, "call") == []


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


def test_stop_words_do_not_decide_a_request_as_people_write_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [
        ("media.what_to_watch", "media", "What to watch tonight.", ""),
        ("people.man_of_many", "people", "Who is who.", ""),
        ("courses.search", "courses", "Search online classes by subject and quality.", ""),
    ]
    index, names_ = index_of(rows)
    request = "Is there a platform where I can find quality online classes?"
    assert ranked(index, names_, request) == ["courses.search"]
    # a short query is keywords: it keeps its function words, as names do
    assert index.terms("what to watch") == ["what", "to", "watch"]
    assert ranked(index, names_, "what to")[0] == "media.what_to_watch"
    long = "what is there to watch tonight for the family"
    assert index.terms(long) == ["watch", "tonight", "famili"]
    # a request of nothing but stop words still searches with them
    assert index.terms("what is there to do for me") == [
        "what",
        "is",
        "there",
        "to",
        "do",
        "for",
        "me",
    ]
    # without the list (and fillers counted as words), the function words alone make
    # the others candidates
    monkeypatch.setattr(relevance, "STOP_WORDS", False)
    monkeypatch.setattr(relevance, "FILLERS", False)
    assert set(ranked(index, names_, request)) == {"courses.search", "people.man_of_many"}


def test_a_request_of_five_words_is_a_request() -> None:
    # Five words of which two are function words: the locations listing that says
    # "this" twice outranked the operation that translates, on coverage alone.
    rows = [
        (
            "translate.locations.list",
            "translate",
            "Lists the locations for this service.",
            "This method can be called in two ways.",
        ),
        ("translate.translateText", "translate", "Translates input text.", ""),
    ]
    index, names_ = index_of(rows)
    assert index.terms("translate this paragraph into spanish") == [
        "translat",
        "paragraph",
        "spanish",
    ]
    assert ranked(index, names_, "translate this paragraph into spanish")[0] == (
        "translate.translateText"
    )
    # four words are still keywords
    assert index.terms("comment on an issue") == ["comment", "on", "an", "issu"]


def test_a_keyword_querys_fillers_do_not_count_towards_coverage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [
        (
            "translate.locations.list",
            "translate",
            "Lists the locations for this service.",
            "This method can be called in two ways.",
        ),
        ("translate.translateText", "translate", "Translates input text.", ""),
        ("ec2.CreateImage", "ec2", "Creates an AMI from an instance.", "This is one."),
        ("ec2.CreateInstance", "ec2", "Creates an instance.", "This is another."),
        ("identity.whoami", "identity", "Who am I.", "This account."),
    ]  # "this" as common as in a real catalog's documentation
    index, names_ = index_of(rows)
    # "this" in its documentation no longer covers a third of the query
    assert ranked(index, names_, "translate this paragraph")[0] == "translate.translateText"
    assert index.terms("translate this paragraph") == ["translat", "this", "paragraph"]
    # a preposition is no filler: it still relates the words around it
    assert ranked(index, names_, "create ami from instance")[0] == "ec2.CreateImage"
    # fillers alone make no candidate, unless they are the whole query
    assert ranked(index, names_, "this forecast") == []
    assert ranked(index, names_, "who am i")[0] == "identity.whoami"
    monkeypatch.setattr(relevance, "FILLERS", False)
    assert ranked(index, names_, "translate this paragraph")[0] == "translate.locations.list"


def test_a_request_drops_the_words_it_is_wrapped_in(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        ("feedback.give_feedback", "feedback", "Give feedback after a few days of use.", ""),
        ("weather.get_weather", "weather", "Current weather and forecast for a city.", ""),
        ("memory.recent_activity", "memory", "Recent activity of the last days.", ""),
    ]
    index, names_ = index_of(rows)
    request = "What's the weather like in Beijing these days? Give me some advice on what to wear"
    assert "give" not in index.terms(request)
    assert ranked(index, names_, request)[0] == "weather.get_weather"
    # a short query is keywords: it keeps them, as names do
    assert index.terms("give feedback") == ["give", "feedback"]
    # with NLTK's list alone, "give" in a name outweighs "weather"
    monkeypatch.setattr(tokens, "REQUEST_STOP_WORDS", STOP_WORDS)
    assert "give" in index.terms(request)
    assert ranked(index, names_, request)[0] != "weather.get_weather"


def test_name_matches_weigh_in_a_request_as_in_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        ("stocks.get_ticker_news", "stocks", "News of a stock ticker.", "Related finance content."),
        ("trends.get_bbc_news", "trends", "BBC headlines.", ""),
    ]
    index, names_ = index_of(rows)
    request = "Get today's bbc news, reserved for finance related content."
    # three of the request's terms name trends.get_bbc_news (get, bbc, news); five
    # reach the other, two of them by its name
    assert ranked(index, names_, request)[0] == "trends.get_bbc_news"
    # with a keyword query's name bonus, the words of the description outweigh them
    monkeypatch.setattr(relevance, "REQUEST_NAMING", relevance.NAMING)
    assert ranked(index, names_, request)[0] == "stocks.get_ticker_news"


def test_compounds_meet_their_words_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        ("tools.runpagespeed", "tools", "Analyzes a site.", ""),
        ("chart.generate_word_cloud_chart", "chart", "Draws a word cloud.", ""),
        ("jobs.run_job", "jobs", "Runs a job.", "Each page of results."),
        ("net.measure_speed", "net", "Measures network speed.", ""),
        ("docs.word_count", "docs", "Counts the words of a page.", ""),
    ]
    index, names_ = index_of(rows)
    # a name written as one word is cut into the catalog's words beside it
    assert ranked(index, names_, "run page speed")[0] == "tools.runpagespeed"
    # a query word the catalog never uses is cut into words it does
    assert ranked(index, names_, "wordcloud")[0] == "chart.generate_word_cloud_chart"
    assert index.terms("wordcloud") == ["word", "cloud"]
    # a word the catalog uses is never cut
    assert index.terms("runpagespeed") == ["runpagespe"]
    monkeypatch.setattr(relevance, "COMPOUNDS", False)
    assert index.terms("wordcloud") == ["wordcloud"]
    plain, plain_names = index_of(rows)
    assert ranked(plain, plain_names, "run page speed")[0] != "tools.runpagespeed"


def test_adjacent_words_the_catalog_writes_as_one_are_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [
        ("pubsub.topics.create", "pubsub", "Creates a pubsub topic.", "A pubsub topic."),
        ("classroom.topics.create", "classroom", "Creates a topic.", ""),
        ("clubs.pub.list", "clubs", "Lists a pub.", ""),
        ("mail.sub.get", "mail", "Gets a sub.", ""),
        ("run.jobs.run", "run", "Runs a job.", "Run it."),
        ("data.store.get", "data", "Gets data in a store.", "data store"),
        ("ds.datastore.get", "ds", "Gets a datastore.", ""),
    ]
    index, names_ = index_of(rows)
    # "pubsub" names operations and is used more often than "pub" or "sub"
    assert index.terms("create pub sub topic") == ["creat", "pubsub", "topic"]
    assert ranked(index, names_, "create a pub/sub topic")[0] == "pubsub.topics.create"
    # "data" and "store" are each used as often as "datastore" or more: left apart
    assert index.terms("data store") == ["data", "store"]
    # a stop word is never a piece, nor is a join the catalog does not write
    assert index.terms("a job") == ["a", "job"]
    assert index.terms("run job") == ["run", "job"]
    monkeypatch.setattr(relevance, "JOINS", False)
    assert index.terms("create pub sub topic") == ["creat", "pub", "sub", "topic"]


def name_terms(index: RelevanceIndex, position: int) -> set[str]:
    """The terms an entry's name and group hold, compound pieces included."""
    return {
        term
        for term, known in index._stem_ids.items()
        if position
        in index._name_entries[index._name_offsets[known] : index._name_offsets[known + 1]]
    }


def test_compounds_never_cut_into_stop_words_or_rarer_pieces() -> None:
    rows = [
        ("a.forget", "a", "Forgets.", "for get get"),
        ("b.datastore", "b", "A datastore.", "datastore datastore data store"),
        ("c.getthing", "c", "Thing.", "get thing thing"),
    ]
    index, names_ = index_of(rows)
    assert index.terms("forget") == ["forget"]
    # "for" is a stop word: never a piece
    assert name_terms(index, names_.index("a.forget")) == {"a", "forget"}
    # "datastore" is used more often than "data" and "store": not cut
    assert name_terms(index, names_.index("b.datastore")) == {"b", "datastor"}
    # "get" and "thing" are each used more often than "getthing": cut
    assert name_terms(index, names_.index("c.getthing")) == {"c", "getth", "get", "thing"}


def test_derivations_match_names_below_a_literal_match(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        ("pubsub.subscriptions.create", "pubsub", "Creates a subscription to a topic.", ""),
        ("pubsub.topics.create", "pubsub", "Creates a topic.", ""),
        ("pubsub.topics.list", "pubsub", "Lists the topics.", ""),
    ]
    index, names_ = index_of(rows)
    # subscribe meets subscription (Snowball keeps their stems apart) in a name
    assert ranked(index, names_, "subscribe topic")[0] == "pubsub.subscriptions.create"
    literal, literal_names = index_of(
        [*rows, ("pubsub.topics.subscribe", "pubsub", "Subscribes to a topic.", "")]
    )
    assert ranked(literal, literal_names, "subscribe topic")[0] == "pubsub.topics.subscribe"
    monkeypatch.setattr(relevance, "DERIVATIONS", False)
    assert ranked(index, names_, "subscribe topic")[0] != "pubsub.subscriptions.create"


def association_rows(extra: int, word: str = "Kubernetes") -> list[tuple[str, str, str, str]]:
    # six container operations, five of whose documentation explains them by a word no
    # name uses; the one that creates clusters does not say it
    rows = [
        (f"container.clusters.{verb}", "container", f"{verb.title()}s a cluster.", doc)
        for verb, doc in (
            ("create", ""),
            ("delete", f"Deletes the {word} endpoint and its nodes."),
            ("get", f"The {word} version of a cluster."),
            ("list", f"Every {word} cluster of a zone."),
            ("update", f"Updates the {word} master."),
            ("upgrade", f"Upgrades {word} on each node."),
        )
    ]
    rows += [("dataproc.clusters.create", "dataproc", "Creates a cluster.", "")]
    rows += [(f"misc.Op{i:03}", "misc", "Does a thing.", "Unrelated text.") for i in range(extra)]
    return rows


def test_associations_attested_by_the_catalog_match_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, names_ = index_of(association_rows(600))
    # kubernetes is in no name, and in the documentation of five of six container
    # operations: container (and cluster) name it, so container's create ranks first
    ids = index._stem_ids
    assert index._associations(ids["kubernet"]) == [ids["contain"], ids["cluster"]]
    assert ranked(index, names_, "create kubernetes cluster")[0] == "container.clusters.create"
    monkeypatch.setattr(relevance, "ASSOCIATIONS", False)
    # without it, both creates match two words of three: the shorter name wins
    assert ranked(index, names_, "create kubernetes cluster")[0] == "dataproc.clusters.create"


def test_associations_weigh_below_a_literal_match() -> None:
    rows = [*association_rows(600), ("kubernetes.clusters.create", "x", "Creates a cluster.", "")]
    index, names_ = index_of(rows)
    found = ranked(index, names_, "create kubernetes cluster")
    assert found[:2] == ["kubernetes.clusters.create", "container.clusters.create"]


def test_associations_need_a_rare_word_enough_holders_and_lift() -> None:
    # a word in more than ASSOCIATION_USE of the operations says little about any
    index, _ = index_of(association_rows(400))
    assert index._associations(index._stem_ids["kubernet"]) == []
    # a word that names operations already meets them literally
    rows = association_rows(600)
    rows += [(f"kubernetes.Op{i}", "kubernetes", "Does a thing.", "") for i in range(3)]
    index, _ = index_of(rows)
    assert index._associations(index._stem_ids["kubernet"]) == []
    # a stop word associates nothing, even where its operations share a name
    index, names_ = index_of(association_rows(600, word="those"))
    assert ranked(index, names_, "create those cluster")[0] == "dataproc.clusters.create"
    # too few operations use it
    index, _ = index_of([r for r in association_rows(600) if "upgrade" not in r[0]][1:])
    assert index._associations(index._stem_ids["kubernet"]) == []
    # misc, the holders' group now, is in nearly every name: no association
    rows = [(n, "misc" if g == "container" else g, s, d) for n, g, s, d in association_rows(600)]
    index, _ = index_of(rows)
    ids = index._stem_ids
    assert index._associations(ids["kubernet"]) == [ids["contain"], ids["cluster"]]


def test_associations_bounds_are_inclusive() -> None:
    # five holders of 500 operations are exactly ASSOCIATION_USE of them; of 499, more
    assert relevance.ASSOCIATED_NAMES == 5
    assert relevance.ASSOCIATION_USE * 500 == 5
    index, _ = index_of(association_rows(500 - 7))
    ids = index._stem_ids
    assert index._associations(ids["kubernet"]) == [ids["contain"], ids["cluster"]]
    index, _ = index_of(association_rows(499 - 7))
    assert index._associations(index._stem_ids["kubernet"]) == []
    # named exactly ASSOCIATION_NAMED times (seven holders then, of 807 operations)
    rows = association_rows(800)
    rows += [(f"kubernetes.Op{i}", "kubernetes", "Does a thing.", "") for i in range(2)]
    index, _ = index_of(rows)
    ids = index._stem_ids
    assert index._associations(ids["kubernet"]) == [ids["contain"], ids["cluster"]]


def reference_associations(
    entries: Sequence[RelevanceEntry], ids: dict[str, int]
) -> dict[str, list[int]]:
    """The documented rule (``relevance.ASSOCIATIONS``) over the naive postings, in
    exact fractions: term -> the ids of its associated name and group terms."""
    holding: dict[str, set[int]] = {}
    naming: dict[str, set[int]] = {}
    for (term, owner), (_, flag) in reference_postings(entries).items():
        holding.setdefault(term, set()).add(owner)
        if flag:
            naming.setdefault(term, set()).add(owner)
    count = len(entries)
    share = Fraction(str(relevance.ASSOCIATION_SHARE))
    lift = Fraction(str(relevance.ASSOCIATION_LIFT))
    found: dict[str, list[int]] = {}
    for term in ids:
        holders = holding.get(term, set())
        found[term] = []
        if len(naming.get(term, ())) > relevance.ASSOCIATION_NAMED or not (
            relevance.ASSOCIATED_NAMES
            <= len(holders)
            <= Fraction(str(relevance.ASSOCIATION_USE)) * count
        ):
            continue
        candidates = []
        for other, named in naming.items():
            shared = len(named & holders)
            if (
                other != term
                and shared >= relevance.ASSOCIATED_NAMES
                and Fraction(shared, len(holders)) >= share
                and Fraction(shared, len(holders)) >= lift * Fraction(len(named), count)
            ):
                candidates.append((-shared, ids[other]))
        found[term] = [known for _, known in sorted(candidates)][: relevance.ASSOCIATION_LIMIT]
    return found


def random_association_catalog(rng: random.Random, count: int) -> list[RelevanceEntry]:
    """Services whose operations' documentation shares rare words; names of every shape
    (none of their own terms, compounds, a word repeated)."""
    services = ["container", "sheets", "dataproc", "compute", "storage", "misc", "pub"]
    services += [f"svc{letter}" for letter in "abcdefghijklm"]  # each a few % of names
    rows = []
    for number in range(count):
        service = rng.choice(services)
        name = rng.choice(
            [
                f"{service}.res{rng.randint(0, 5)}.op{number}",
                f"{service}Sub.{service}{service.title()}{number}",  # repeats, compounds
                f"{'.' * (number % 7 + 1)}-{number}",  # no word of its own but the number
                "_" * (number % 5 + 1) + "-" * (number + 1),  # no word at all
            ]
        )
        group = rng.choice([service, "", f"{service}store", "pubsub"])
        summary = rng.choice(["", "Does a thing.", f"The {service} store."])
        rows.append([name, group, summary, " ".join(rng.choices(["the", "store"], k=2))])
    for word in range(rng.randint(1, 10)):  # rare words, mostly in one service
        service = rng.choice(services)
        pool = [row for row in rows if row[0].startswith(service)] or rows
        chosen = rng.sample(pool, min(len(pool), rng.randint(3, 11)))
        for row in chosen + rng.sample(rows, min(len(rows), rng.randint(0, 3))):
            row[3] += f" rare{word}word"
        for row in chosen:  # most of them share a second name term: ties, the limit
            if rng.random() < 0.8:
                row[0] += rng.choice([f".Tag{word}", f".Tag{word}Also", "-Tag"])
    rows.sort()
    return [
        RelevanceEntry(IndexEntry(name, group, summary, (doc,)))
        for name, group, summary, doc in rows
    ]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("small", [False, True])
def test_associations_equal_the_documented_rule(
    seed: int, small: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    if small:  # looser bounds, so small catalogs (an empty one among them) associate
        monkeypatch.setattr(relevance, "ASSOCIATION_USE", rng.choice([0.1, 0.3, 1.0]))
        monkeypatch.setattr(relevance, "ASSOCIATED_NAMES", rng.choice([1, 2, 3]))
        monkeypatch.setattr(relevance, "ASSOCIATION_NAMED", rng.choice([0, 2, 5]))
        monkeypatch.setattr(relevance, "ASSOCIATION_LIFT", rng.choice([1.0, 2.0, 8.0]))
        monkeypatch.setattr(relevance, "ASSOCIATION_LIMIT", rng.choice([1, 3]))
    count = rng.choice([0, 1, rng.randint(2, 60)]) if small else rng.randint(1000, 1400)
    entries = random_association_catalog(rng, count)
    index = RelevanceIndex(entries, SearchIndex([e.entry for e in entries]))
    expected = reference_associations(entries, index._stem_ids)
    found = {term: index._associations(known) for term, known in index._stem_ids.items()}
    assert found == expected
    # remembered: a second call, in another order, answers the same
    for term, known in reversed(index._stem_ids.items()):
        assert index._associations(known) == expected[term]
    assert count < 1000 or any(found.values())  # the planted words associate


def test_derivations_are_the_pure_functions_and_bounded() -> None:
    # the name terms _tokens.derivations finds over the whole vocabulary, looked up by
    # beginning instead of scanned; and a catalog of many names sharing a beginning
    # gives one query term at most DERIVATION_LIMIT of them, the most used first
    letters = "abcdefghijklmnopqrstuvwxyz"
    rows = [
        (f"svc.get_connector{a}{b}", "svc", f"Gets connector{a}{b}.", "")
        for a in letters
        for b in letters
    ]
    rows += [(f"hub.connectorzz_{n}", "hub", "Connects things.", "") for n in range(30)]
    rows += [("pubsub.subscriptions.create", "pubsub", "Creates a subscription.", "")]
    index, _ = index_of(rows)
    vocabulary, ids = index._vocabulary, index._stem_ids
    names = index._name_offsets
    for term in ["subscrib", "subscript", "connectorx", "connector", "connect", "connectorzzq"]:
        derived = [ids[s] for s in tokens.derivations(term, vocabulary)]
        expected = {t for t in derived if names[t + 1] > names[t]}
        found = index._derivations(term)
        assert len(found) == len(set(found)) == min(len(expected), relevance.DERIVATION_LIMIT)
        assert set(found) <= expected
    assert len(tokens.derivations("connectorx", vocabulary)) > 600
    # connectorzz is in 31 names, more than any other connector..
    assert index._derivations("connectorx")[0] == ids["connectorzz"]


def test_save_meets_write_in_names() -> None:
    rows = [
        ("fs.write_file", "fs", "Create or overwrite a file.", ""),
        ("slides.add_slide", "slides", "Adds a slide to the file.", ""),
    ]
    index, names_ = index_of(rows)
    assert ranked(index, names_, "save the report to a file")[0] == "fs.write_file"


def test_upload_meets_insert_in_names() -> None:
    rows = [
        ("videos.insert", "videos", "Adds a video to a channel.", ""),
        ("media.upload_image", "media", "Stores an image.", "Videos are not accepted."),
    ]
    index, names_ = index_of(rows)
    assert ranked(index, names_, "upload video")[0] == "videos.insert"


def test_rename_meets_update_and_search_meets_filter_in_names() -> None:
    rows = [
        ("files.update", "files", "Updates a file's metadata.", "Its name, its labels."),
        ("files.copy", "files", "Copies a file under a new name.", ""),
        ("logs.FilterLogEvents", "logs", "Lists log events matching a pattern.", ""),
        ("logs.DescribeLogGroups", "logs", "Lists the log groups.", "Search by prefix."),
    ]
    index, names_ = index_of(rows)
    assert ranked(index, names_, "rename a file")[0] == "files.update"
    assert ranked(index, names_, "search logs")[0] == "logs.FilterLogEvents"
    assert ranked(index, names_, "query logs")[0] == "logs.FilterLogEvents"


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
async def test_paging_across_replicas_with_associations_found_between_pages() -> None:
    # pages alternate between two fresh replicas, and another query works out
    # kubernetes' associations between pages: associations are the catalog's, found
    # the same on every replica and every call, so paging neither repeats nor skips
    operations = [op(n, s, group=g, description=d) for n, g, s, d in association_rows(600)]
    replicas = [
        Registry(operations, AllowAll(), secret=SECRET, ranking=Ranking.RELEVANCE) for _ in range(3)
    ]
    query = "create kubernetes cluster"
    expected, _ = await all_pages(replicas[2], query, limit=20)
    assert expected[0] == "container.clusters.create"  # by its association
    found: list[str] = []
    cursor = None
    for turn in itertools.count():
        page = await replicas[turn % 2].search(Ctx(), query, cursor=cursor, limit=2)
        assert isinstance(page, SearchPage)
        found += [item.name for item in page.items]
        await replicas[turn % 2].search(Ctx(), "kubernetes nodes", limit=1)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert found == expected


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
async def test_associations_reveal_what_hidden_operations_name_never_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # admin.* is hidden from users; only its operations use "falcon", and they name
    # "targets": a user searching falcon is shown the visible operation naming targets
    # (what docs/search.md and docs/security.md say associations can reveal), never
    # a hidden one
    rows = [
        (f"admin.targets.{verb}", "admin", f"{verb.title()}s targets.", "Project Falcon.")
        for verb in ("create", "delete", "get", "list", "update", "rank")
    ]
    rows += [("public.targets.report", "public", "Reports on targets.", "")]
    rows += [(f"misc.Op{i:03}", "misc", "Does a thing.", "Unrelated text.") for i in range(600)]
    operations = [op(n, s, group=g, description=d) for n, g, s, d in rows]
    reg = Registry(operations, TeamPolicy(), ranking=Ranking.RELEVANCE)
    found, _ = await all_pages(reg, "falcon")
    assert found == ["public.targets.report"]
    everything, _ = await all_pages(reg, "falcon", ctx=Ctx(admin=True))
    assert everything[-1] == "public.targets.report"
    assert {n for n in everything if n.startswith("admin.")} == {r[0] for r in rows[:6]}
    monkeypatch.setattr(relevance, "ASSOCIATIONS", False)
    assert (await all_pages(reg, "falcon"))[0] == []


def test_an_unknown_word_expands_to_the_most_used_terms_it_begins() -> None:
    """At most ``PREFIX_LIMIT`` terms, the most used first, then alphabetically: the
    operations holding the others are not reached through the prefix."""
    letters = "abcdefghijkl"  # twelve terms beginning "zet", more than PREFIX_LIMIT
    assert len(letters) > relevance.PREFIX_LIMIT
    terms = [f"zet{letter}ox" for letter in letters]
    # names run against the terms' order, so vocabulary order is not operation order
    rows = [
        (f"ops.Op{len(terms) - at:02d}", "ops", f"Holds {term}.", "")
        for at, term in enumerate(terms)
    ]
    rows += [(f"ops.More{at}", "ops", f"Also {terms[at]}.", "") for at in (10, 11)]
    index, names_ = index_of(rows)
    found = {names_[position] for _, position in index.ranked("zet")}
    holding = {term: {row[0] for row in rows if term in row[2]} for term in terms}
    chosen = terms[10:] + terms[: relevance.PREFIX_LIMIT - 2]  # twice used, then a to f
    assert found == set().union(*(holding[term] for term in chosen))
