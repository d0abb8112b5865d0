"""``opgate.names``: names cut to the rule and made unique, for catalog sources."""

from __future__ import annotations

import hashlib

from opgate._operation import NAME_PATTERN
from opgate.names import MAX_NAME, UniqueNames, shorten


def test_a_name_within_the_rule_is_kept() -> None:
    assert shorten("a" * MAX_NAME) == "a" * MAX_NAME
    assert shorten("orders.refund") == "orders.refund"


def test_a_long_name_keeps_119_characters_and_a_hash_of_the_whole() -> None:
    long = "x" * 100 + "y" * 100
    cut = shorten(long)
    digest = hashlib.sha256(long.encode()).hexdigest()[:8]
    assert cut == long[:119] + "_" + digest
    assert len(cut) == MAX_NAME
    assert NAME_PATTERN.fullmatch(cut)
    assert shorten(long + "z") != cut  # the hash is of the whole name


def test_a_taken_name_gets_the_first_free_number_in_call_order() -> None:
    names = UniqueNames()
    assert [names.claim("a") for _ in range(3)] == ["a", "a_2", "a_3"]
    assert names.claim("a_2") == "a_2_2"  # taken by the suffixing above
    assert names.claim("b") == "b"


def test_a_suffix_is_cut_into_a_full_length_name() -> None:
    names = UniqueNames()
    full = "n" * MAX_NAME
    assert names.claim(full) == full
    second = names.claim(full)
    assert second == "n" * (MAX_NAME - 2) + "_2"
    assert len(second) == MAX_NAME


def test_the_suffix_search_resumes_where_it_stopped() -> None:
    names = UniqueNames()
    given = [names.claim("op") for _ in range(1000)]
    assert len(set(given)) == 1000
    assert given[-1] == "op_1000"
