"""The text fields of the search index, summary and documentation, over one
vocabulary of pieces.

A text's *pieces* are the runs of two per-character views of it (one keeps
letters, digits and underscores, the other ASCII punctuation and symbols; see
``pieces``), so every piece of a term occurring in a text is a substring of one of
the text's pieces. The sorted vocabulary of pieces has a trigram index over blocks
of pieces: a term's piece finds the vocabulary pieces containing it with a gram
lookup and a substring search of a few vocabulary blocks (``TextIndex.positions``),
and the field's bitset is the union of their postings. The union is exact when the
term is one piece; otherwise it is the intersection, over the term's pieces, of
such unions (a superset). A piece found in too many vocabulary pieces is broad: its
field is unknown.

Text fields are numbered ``0`` (summary) and ``1`` (documentation).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import partial
from itertools import accumulate, repeat

from ._bitsets import bitset_of, id_count
from ._postings import (
    GRAM,
    SEPARATOR,
    SPARSE_LIMIT,
    Blocks,
    Field,
    GramIndex,
    Postings,
    block_texts,
    consume,
    dense_positions,
    restore_slots,
)

__all__ = ["TextIndex", "pieces"]

#: Vocabulary pieces per block of the vocabulary gram index.
_VOCABULARY_BLOCK = 32

#: At most this many vocabulary blocks are searched for one piece (well under a
#: microsecond each); a piece found in more is broad and constrains nothing.
_VOCABULARY_SCAN_LIMIT = 128

#: A piece contained in more vocabulary pieces than this is broad: listing them
#: would cost more than testing the piece on the other terms' candidates.
_POSITIONS_LIMIT = 384

#: A piece whose gram lookup leaves more vocabulary blocks than this is searched for
#: in the whole vocabulary at once (``TextIndex._containing``).
_SPLIT_FROM = 64

#: A piece's trigram lists are intersected once its rarest trigram is in more than
#: this many vocabulary blocks.
_INTERSECT_FROM = 32

#: A short piece whose trigram lists hold more blocks than this in all is broad.
_FILTER_LIMIT = 4096

# A text's pieces are the runs of its two *views*: in the word view, ASCII characters
# other than letters, digits and the underscore become spaces (so ``create_invoice``
# stays one piece); in the symbol view, those and whitespace do; other characters
# stay in both. A view maps each character alone, so when a term occurs in a text,
# each run of the term's view lies inside a run of the text's view: every piece of
# the term is a substring of a piece of the text.
_WORD = frozenset(c for c in range(128) if chr(c).isalnum() or chr(c) == "_")
_WORD_VIEW = {c: " " for c in range(128) if c not in _WORD}
_SYMBOL_VIEW = {c: " " for c in range(128) if c in _WORD or chr(c).isspace()}


def pieces(text: str) -> set[str]:
    """The pieces of a folded text: the runs of its two views."""
    found = set(text.translate(_WORD_VIEW).split())
    found.update(text.translate(_SYMBOL_VIEW).split())
    return found


# The views over UTF-8 bytes, for building: bytes of non-ASCII characters stay in both,
# and only ASCII whitespace splits, so a text's piece may hold non-ASCII whitespace.
# That keeps both properties that matter: a piece is a substring of its text, and a
# term's piece (never whitespace) that occurs in a text lies inside one of its pieces.
_WORD_BYTES = bytes(32 if c in _WORD_VIEW else c for c in range(256))
_SYMBOL_BYTES = bytes(32 if c in _SYMBOL_VIEW else c for c in range(256))


def _piece_entries(texts: Sequence[str]) -> dict[bytes, list[int]]:
    """Map each piece of the folded texts (one per entry id), UTF-8 encoded, to the
    ascending ids of the texts holding it."""
    # Lists, not arrays: an append to a list stores a reference (to the one int of
    # the entry's id, shared by its pieces' lists), an array's parses the int.
    lists: defaultdict[bytes, list[int]] = defaultdict(list)
    # A text that occurs more than once (catalogs repeat descriptions) is split once:
    # its pieces are kept until the build ends, the others' dropped at once.
    repeated = {text for text, count in Counter(texts).items() if count > 1}
    known: dict[str, set[bytes]] = {}
    for entry_id, text in enumerate(texts):
        found = known.get(text)
        if found is None:
            encoded = text.encode()
            found = set(encoded.translate(_WORD_BYTES).split())
            found.update(encoded.translate(_SYMBOL_BYTES).split())
            if text in repeated:
                known[text] = found
        consume(map(list.append, map(lists.__getitem__, found), repeat(entry_id)))
    return dict(lists)


def _add_occurrence(length: int, total: int, before: int) -> int:
    """``accumulate`` step over the text between occurrences: where the next one starts."""
    return total + length + before


class TextIndex:
    """The summary and documentation fields of a catalog, built once from its folded
    texts (one per entry id): the vocabulary of their pieces, per field the postings
    of each piece, and the kept fields of common pieces."""

    __slots__ = (
        "_blocks",
        "_closures",
        "_dense",
        "_grams",
        "_joined",
        "_postings",
        "_size",
        "_starts",
        "vocabulary",
    )
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(self, summaries: Sequence[str], documents: Sequence[str]) -> None:
        size = len(summaries)
        self._size = size
        summary_lists = _piece_entries(summaries)
        document_lists = _piece_entries(documents)
        # UTF-8 byte order is code point order: the vocabulary is sorted either way.
        encoded = sorted(summary_lists.keys() | document_lists.keys())
        #: Every piece of a text, sorted.
        self.vocabulary: list[str] = [piece.decode() for piece in encoded]
        self._blocks = block_texts(self.vocabulary, _VOCABULARY_BLOCK)
        self._grams = GramIndex(self._blocks)
        self._joined = SEPARATOR.join(self.vocabulary)
        self._starts = array(
            "i", accumulate((len(piece) + 1 for piece in self.vocabulary), initial=0)
        )
        self._dense: tuple[dict[int, int], dict[int, int]] = (
            dense_positions(encoded, summary_lists, size),
            dense_positions(encoded, document_lists, size),
        )
        self._postings = (
            Postings(encoded, summary_lists, self._dense[0]),
            Postings(encoded, document_lists, self._dense[1]),
        )
        del summary_lists, document_lists  # the lists, before the kept fields' bitsets
        # A common piece is a common query term: its fields (the union over every
        # piece containing it) are kept, so such a term costs one lookup. A broad one
        # of one or two characters (``on``, ``to``) is left out: it is so common that
        # testing it on the other terms' candidates costs less than its fields.
        self._closures: dict[int, tuple[int, int]] = {}
        for position in sorted(self._dense[0].keys() | self._dense[1].keys()):
            piece = self.vocabulary[position]
            positions = self.positions(piece, limited=len(piece) < GRAM)
            if positions is None:
                continue
            self._closures[position] = (
                self.field_bits(0, positions),
                self.field_bits(1, positions),
            )

    def kept(self, term: str) -> tuple[int, int] | None:
        """The kept fields (summary, documentation bitsets) of a term that is a common
        vocabulary piece, else ``None``."""
        position = bisect_left(self.vocabulary, term)
        closure = self._closures.get(position)
        if closure is not None and self.vocabulary[position] == term:
            return closure
        return None

    def field(self, field: int, positions: Iterable[list[int] | None], exact: bool) -> Field:
        """A term's ``field`` from the vocabulary positions of its pieces (``None``:
        broad), ``exact`` when the term is one piece."""
        postings, dense = self._postings[field], self._dense[field]
        found: int | None = None
        for piece_positions in positions:
            if piece_positions is None:
                exact = False
                continue
            if not piece_positions:  # a piece in no text: the term is in no text either
                return Field(0, True)
            sparse = sum(postings.count(p) for p in piece_positions if p not in dense)
            if sparse > SPARSE_LIMIT:
                exact = False
                continue
            bits = self.field_bits(field, piece_positions)
            found = bits if found is None else found & bits
        return Field(found, exact)

    def field_bits(self, field: int, positions: Iterable[int]) -> int:
        """The union of the postings of ``positions`` in a text field (0: summary)."""
        postings, dense = self._postings[field], self._dense[field]
        bits = 0
        lists = []
        for position in positions:
            found = dense.get(position)
            if found is None:
                lists.append(postings.get(position))
            else:
                bits |= found
        return bits | bitset_of(lists, self._size)

    def positions(self, piece: str, *, limited: bool = True) -> list[int] | None:
        """Vocabulary positions of the pieces containing ``piece``; ``None`` if broad
        (unless not ``limited``)."""
        lists = self._grams.all(piece)
        if not lists:
            return []
        blocks: Blocks
        if len(piece) < GRAM:  # the piece is in one of these lists: their union
            if len(lists) > 1 and id_count(lists) > _FILTER_LIMIT:
                return self._containing(piece) if not limited else None
            blocks = lists[0] if len(lists) == 1 else sorted(set().union(*lists))
        else:  # the piece is in all of these lists: intersect, rarest first
            lists.sort(key=len)
            blocks = lists[0]
            if len(blocks) > _INTERSECT_FROM:
                common = set(blocks)
                for numbers in lists[1:]:
                    common.intersection_update(numbers)
                    if len(common) <= _INTERSECT_FROM:
                        break
                blocks = sorted(common)
        if limited and len(blocks) > _VOCABULARY_SCAN_LIMIT:
            return None
        positions: list[int]
        if len(blocks) > _SPLIT_FROM:
            positions = self._containing(piece)
            return positions if len(positions) <= _POSITIONS_LIMIT or not limited else None
        texts = self._blocks
        positions = []
        for number in blocks:
            text = texts[number]
            at = text.find(piece)
            # The text is padded and joined with the separator, so the separators
            # before a match number one more than the pieces before it.
            position = number * _VOCABULARY_BLOCK - 1
            counted = 0
            while at >= 0:
                position += text.count(SEPARATOR, counted, at)
                positions.append(position)
                if len(positions) > _POSITIONS_LIMIT and limited:
                    return None
                counted = text.find(SEPARATOR, at)
                at = text.find(piece, counted)
        return positions

    def _containing(self, piece: str) -> list[int]:
        """Vocabulary positions of the pieces containing ``piece``, by one pass over the
        whole vocabulary at C speed (splitting it at each occurrence)."""
        parts = self._joined.split(piece)
        parts.pop()
        # Where each occurrence starts; the piece holding it starts at or before.
        ends = accumulate(map(len, parts), partial(_add_occurrence, len(piece)))
        found = map(bisect_right, repeat(self._starts), ends)
        return [position - 1 for position in dict.fromkeys(found)]
