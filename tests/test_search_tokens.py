"""Tests of ``opgate._search._tokens``: words and stems.

``words`` and ``chunk_words`` split names and prose into folded words, ``Stems`` joins
inflections without growing on query words. The thesaurus's verb groups are
``test_search_thesaurus.py``.
"""

from __future__ import annotations

import pytest

from opgate._search._tokens import Stems, chunk_words, words

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
