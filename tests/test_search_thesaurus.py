"""Tests of ``opgate._search._thesaurus``: the relevance ranking's one word list.

The verb groups are generic API vocabulary; ``alternatives`` gives each verb's stem the
stems of the other verbs of its groups, symmetric, sorted, never the stem itself, the
groups of a verb in two of them joined. How the relevance ranking weighs a thesaurus
match is ``test_search_relevance.py``.
"""

from __future__ import annotations

from opgate._search._thesaurus import SYNONYM, VERBS, alternatives
from opgate._search._tokens import Stems


def test_thesaurus_groups_are_generic_verbs() -> None:
    words_ = {word for group in VERBS for word in group}
    assert {"list", "describe", "get", "upload", "put", "invoke", "delete", "create"} <= words_
    stem = Stems()
    table = alternatives(stem)
    assert stem("describe") in table[stem("list")]
    assert stem("list") in table[stem("describe")]  # symmetric
    assert stem("delete") not in table[stem("list")]
    assert stem("insert") in table[stem("upload")]  # REST APIs insert what they store
    assert 0 < SYNONYM < 1


def same(word: str) -> str:
    return word


def test_alternatives_are_symmetric_sorted_and_never_the_verb_itself() -> None:
    table = alternatives(same)
    assert set(table) == {word for group in VERBS for word in group}
    for verb, others in table.items():
        assert verb not in others
        assert list(others) == sorted(others)
        for other in others:
            assert verb in table[other]


def test_a_verb_in_two_groups_matches_the_verbs_of_both() -> None:
    table = alternatives(same)
    assert {"upload", "update", "set"} <= set(table["put"])
    assert "upload" not in table["update"]  # the two groups share only "put"


def test_verbs_with_one_stem_share_one_entry() -> None:
    table = alternatives(lambda word: "get" if word in {"get", "list"} else word)
    assert "list" not in table
    assert set(table["get"]) == {"describe", "enumerate"}
