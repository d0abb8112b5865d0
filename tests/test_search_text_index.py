"""Tests of ``opgate._search._text_index``: the summary and documentation fields over
one vocabulary of pieces.

Pieces keep the property the lookup relies on (a term's pieces lie inside the pieces
of any text holding it); the vocabulary finds every piece containing a piece, under
tunings that force each search path; a term's field is a superset of the texts holding
it, the match set itself when exact, and the kept fields of common pieces are exact.
How the index ranks with them is ``test_search_index.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._search import _postings, _text_index
from opgate._search._bitsets import ones_from
from opgate._search._text_index import TextIndex, pieces

FAST = settings(max_examples=120, deadline=None)
CHARS = list("abAßẞ ﬁ\u03c3é_.-/(17\t\u3000\n")
texts = st.text(alphabet=st.sampled_from(CHARS), max_size=14).map(str.casefold)
folded_terms = st.text(alphabet=st.sampled_from([c for c in CHARS if not c.isspace()]), min_size=1)
catalogs = st.lists(st.tuples(texts, texts), max_size=25)

TUNINGS: list[dict[str, object]] = [
    {},
    {"_VOCABULARY_BLOCK": 1, "_DENSE_MIN": 0, "_DENSE_FRACTION": 1 << 30},
    {"_VOCABULARY_BLOCK": 2, "_INTERSECT_FROM": 0, "_FILTER_LIMIT": 0, "_DENSE_MIN": 1},
    {"_SPLIT_FROM": 0, "_POSITIONS_LIMIT": 1, "_VOCABULARY_SCAN_LIMIT": 0, "SPARSE_LIMIT": 0},
]


@contextmanager
def tuned(tuning: dict[str, object]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in tuning.items():
            for module in (_postings, _text_index):
                if hasattr(module, name):
                    patch.setattr(module, name, value)
        yield


def members(bits: int) -> list[int]:
    return list(ones_from(bits, 0))


@FAST
@given(text=texts, start=st.integers(0, 14), end=st.integers(0, 14))
def test_the_pieces_of_a_term_lie_inside_the_pieces_of_a_text_holding_it(
    text: str, start: int, end: int
) -> None:
    found = pieces(text)
    assert all(piece in text and not piece.isspace() for piece in found)
    for term in text[start:end].split():
        assert all(any(piece in whole for whole in found) for piece in pieces(term))


@pytest.mark.parametrize("tuning", TUNINGS)
@FAST
@given(catalog=catalogs, piece=folded_terms)
def test_the_vocabulary_finds_every_piece_containing_a_piece(
    tuning: dict[str, object], catalog: list[tuple[str, str]], piece: str
) -> None:
    with tuned(tuning):
        index = TextIndex([s for s, _ in catalog], [d for _, d in catalog])
        unlimited = index.positions(piece, limited=False)
        limited = index.positions(piece)
    vocabulary = index.vocabulary
    assert vocabulary == sorted(set(vocabulary))
    assert all(any(word in s or word in d for s, d in catalog) for word in vocabulary)
    expected = [k for k, word in enumerate(vocabulary) if piece in word]
    assert unlimited is not None
    assert sorted(unlimited) == expected
    assert limited is None or sorted(limited) == expected


@pytest.mark.parametrize("tuning", TUNINGS)
@FAST
@given(catalog=catalogs, term=folded_terms)
def test_a_terms_field_holds_every_text_holding_it_and_only_those_when_exact(
    tuning: dict[str, object], catalog: list[tuple[str, str]], term: str
) -> None:
    with tuned(tuning):
        index = TextIndex([s for s, _ in catalog], [d for _, d in catalog])
        found = pieces(term)
        exact = term in found
        wanted = [term] if exact else sorted(found)
        positions = [index.positions(piece) for piece in wanted]
        fields = [index.field(field, positions, exact) for field in (0, 1)]
        kept = index.kept(term)
    for field, result in enumerate(fields):
        holding = [k for k, texts_ in enumerate(catalog) if term in texts_[field]]
        if result.bits is None:
            assert not result.exact
            continue
        assert set(holding) <= set(members(result.bits))
        if result.exact:
            assert members(result.bits) == holding
        if kept is not None:
            assert members(kept[field]) == holding
