"""The name field of the search index: a trigram index over the folded names.

A name shorter than a trigram is padded with the separator, so every substring of
one to three characters of a name lies inside one of its trigrams. A term of one or
two characters is the union of the trigrams containing it; three characters, its
trigram; a longer term the intersection of its trigrams, made exact by testing the
names of its rarest sparse trigram (or, when every trigram is dense, the
intersection's few members).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import reduce
from itertools import compress, repeat
from operator import and_

from ._bitsets import Ids, bitset_of, id_count, ones_from, union
from ._postings import GRAM, SEPARATOR, SPARSE_LIMIT, Field, append_all, restore_slots, split_dense

__all__ = ["NameIndex"]

#: A one- or two-character name part whose sparse trigrams list more ids than this
#: gets its own bitset at construction.
_SHORT_PRECOMPUTE = 128

#: A name intersection of at most this many entries is tested name by name, so that
#: it becomes exact.
_VERIFY_LIMIT = 64


class NameIndex:
    """Where a term may match among the folded names (one per entry id), built once."""

    __slots__ = ("_dense", "_names", "_short", "_shorter", "_size", "_sparse")
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(self, names: Sequence[str]) -> None:
        size = len(names)
        self._names = names
        self._size = size
        grams: defaultdict[str, list[int]] = defaultdict(list)
        for entry_id, name in enumerate(names):
            # Every substring of one to three characters of a name of three or more lies
            # inside one of its own trigrams; only a shorter name needs the padding.
            if len(name) < GRAM:
                name = SEPARATOR + name + SEPARATOR
            append_all(grams, {name[k : k + GRAM] for k in range(len(name) - 2)}, entry_id)
        self._dense, self._sparse = split_dense(grams, size)
        shorter: defaultdict[str, list[str]] = defaultdict(list)
        for gram in grams:
            for part in {gram[0], gram[1], gram[2], gram[:2], gram[1:]}:
                shorter[part].append(gram)
        self._shorter: dict[str, list[str]] = dict(shorter)
        del grams  # the lists: freed before the short parts' bitsets are made
        # A one- or two-character part whose sparse trigrams list many ids (``on`` in
        # ``json``, ``configuration``, ...) is kept as a bitset, so that a query never
        # sets that many bits.
        name_sparse, name_dense = self._sparse, self._dense
        kept = [
            part
            for part, containing in shorter.items()
            if sum(len(name_sparse[gram]) for gram in containing if gram in name_sparse)
            > _SHORT_PRECOMPUTE
        ]
        # Every two-character part's bitset, the OR of its trigrams'. A one-character
        # part's is then the OR of the two-character parts holding it: a trigram holds
        # a character exactly when its first two or last two characters do.
        pairs: dict[str, int] = {}
        for part, containing in shorter.items():
            if len(part) == 2:
                pairs[part] = union(
                    name_dense[gram] for gram in containing if gram in name_dense
                ) | bitset_of(
                    [name_sparse[gram] for gram in containing if gram in name_sparse], size
                )
        in_pairs: defaultdict[str, list[int]] = defaultdict(list)
        for pair, bits in pairs.items():
            in_pairs[pair[0]].append(bits)
            if pair[1] != pair[0]:
                in_pairs[pair[1]].append(bits)
        self._short: dict[str, int] = {
            part: pairs[part] if len(part) == 2 else union(in_pairs[part]) for part in kept
        }

    def field(self, term: str) -> Field:
        """The name field of a folded term."""
        dense, sparse, size = self._dense, self._sparse, self._size
        if len(term) < GRAM:
            known = self._short.get(term)
            if known is not None:
                return Field(known, True)
            containing = self._shorter.get(term, ())
            lists = [sparse[gram] for gram in containing if gram in sparse]
            if id_count(lists) > SPARSE_LIMIT:
                return Field(None, False)
            bits = union(dense[gram] for gram in containing if gram in dense)
            return Field(bits | bitset_of(lists, size), True)
        grams = {term[k : k + GRAM] for k in range(len(term) - GRAM + 1)}
        if not all(gram in dense or gram in sparse for gram in grams):
            return Field(0, True)
        lists = [sparse[gram] for gram in grams if gram in sparse]
        if lists:  # test the names of the rarest trigram
            ids: Ids = min(lists, key=len)
            if len(term) > GRAM:
                tested = map(str.__contains__, map(self._names.__getitem__, ids), repeat(term))
                ids = list(compress(ids, tested))
            return Field(bitset_of([ids], size), True)
        bits = reduce(and_, (dense[gram] for gram in grams))
        if len(term) == GRAM:
            return Field(bits, True)
        if bits.bit_count() <= _VERIFY_LIMIT:
            names = self._names
            found = [entry_id for entry_id in ones_from(bits, 0) if term in names[entry_id]]
            return Field(bitset_of([found], size), True)
        return Field(bits, False)
