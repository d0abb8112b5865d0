"""Tests of ``opgate._search._tokens``: words and stems.

``words`` and ``chunk_words`` split names and prose into folded words, ``Stems`` joins
inflections without growing on query words, ``content_words`` drops stop words and
``segment`` cuts a word written as one into known pieces, ``derivations`` finds the stems
spelled as derivations of the same word. The thesaurus's verb groups are
``test_search_thesaurus.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from opgate._search._tokens import (
    REQUEST_STOP_WORDS,
    STOP_WORDS,
    Stems,
    chunk_words,
    content_words,
    derivations,
    segment,
    words,
)

# --- words and stems ------------------------------------------------------------------


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
    # nor does pystemmer's own cache (10,000 words by default) keep them
    assert stem._stemmer.maxCacheSize == 0


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


# --- stop words and compounds ---------------------------------------------------------


def test_stop_words_are_function_words_of_a_standard_list() -> None:
    # NLTK's English list (as bm25s ships it), spellings with an apostrophe left out
    assert len(STOP_WORDS) == 153
    assert {"i", "can", "where", "of", "the", "me", "what", "don", "t"} <= STOP_WORDS
    assert not {"list", "get", "create", "delete", "find", "help", "show"} & STOP_WORDS
    assert all(word == word.lower() and word.isalpha() for word in STOP_WORDS)


def test_requests_also_drop_the_glasgow_list() -> None:
    # the Glasgow IR group's list (as scikit-learn ships it) beside NLTK's
    assert STOP_WORDS < REQUEST_STOP_WORDS
    assert len(REQUEST_STOP_WORDS) == 352
    assert {"please", "give", "show", "find", "get", "see", "bill"} <= REQUEST_STOP_WORDS
    assert not {"list", "create", "delete", "help", "weather", "search"} & REQUEST_STOP_WORDS
    assert all(word == word.lower() and word.isalpha() for word in REQUEST_STOP_WORDS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Is there a platform where I can find classes?", ["platform", "classes"]),
        ("Please give me the weather", ["weather"]),
        ("what's on", ["what", "s", "on"]),  # nothing but stop words: all of them
        ("", []),
        ("ListUsersInGroup", ["list", "users", "group"]),
    ],
)
def test_content_words_drop_stop_words_unless_nothing_is_left(
    text: str, expected: list[str]
) -> None:
    assert content_words(text) == expected


def frequencies(**counts: int) -> Callable[[str], int]:
    return lambda word: counts.get(word, 0)


def test_segment_cuts_into_the_fewest_known_pieces() -> None:
    known = frequencies(run=5, page=3, speed=2, pages=1, peed=1, home=3, stays=1, homes=9)
    assert segment("runpagespeed", known) == ["run", "page", "speed"]
    assert segment("homestays", known) == ["home", "stays"]
    # a word with no cut, a single piece, too short or not ASCII letters: none
    assert segment("runxspeed", known) is None
    assert segment("home", known) is None
    assert segment("runrun", frequencies(run=1)) == ["run", "run"]
    assert segment("ab", known) is None
    assert segment("run2page", known) is None
    assert segment("x" * 41, frequencies(**{"x" * 20: 1, "x" * 21: 1})) is None


def test_segment_prefers_the_cut_whose_rarest_piece_is_most_frequent() -> None:
    # "note" + "books" or "notes" + "book": both two pieces; the rarer one decides
    assert segment("notesbook", frequencies(note=1, sbook=1, notes=4, book=6)) == [
        "notes",
        "book",
    ]
    assert segment("notebooks", frequencies(note=5, books=2, noteb=9, ooks=1)) == [
        "note",
        "books",
    ]
    # pieces shorter than three letters are never cut
    assert segment("abcdef", frequencies(ab=9, cdef=9, abc=1, de=9)) is None


def test_derivations_share_a_long_beginning_and_short_endings() -> None:
    stems = Stems()
    vocabulary = sorted(
        {
            stems(word)
            for word in (
                "subscription",
                "subscriber",
                "subscribe",
                "transcript",
                "subscriptionmanager",
                "sub",
                "substitute",
                "instance",
                "instant",
            )
        }
    )
    # Snowball leaves subscribe and subscription apart; spelling joins them
    assert stems("subscribe") != stems("subscription")
    assert derivations(stems("subscribe"), vocabulary) == [stems("subscription")]
    assert derivations(stems("subscriptions"), vocabulary) == [stems("subscribe")]
    # a compound goes on too long, a shorter beginning is no derivation
    assert stems("subscriptionmanager") not in derivations(stems("subscription"), vocabulary)
    assert derivations(stems("substitution"), vocabulary) == []
    assert derivations(stems("instances"), vocabulary) == []
    # short stems and stems holding anything but ASCII letters have none
    assert derivations("subscri", ["subscri", "subscript"]) == ["subscript"]
    assert derivations("subscr", ["subscr", "subscrib"]) == []
    assert derivations("subscrib2", ["subscript"]) == []
    assert derivations("subscrib", ["subscript2", "subscrib"]) == []
