"""The search index and the ranking rule.

The rule (DESIGN.md, "Search matching and ranking"):

* the query is split on whitespace into terms; a term matches a field when its
  case-folded text (``str.casefold``) is a substring of the case-folded field;
* every term must match somewhere in the indexed fields: name (tier 0), group
  (tier 1), summary (tier 2), other documentation — description, examples,
  source — (tier 3); schemas are never indexed;
* an entry's tier is the worst (max), over its terms, of the best (min) tier in
  which that term matches; results sort by ``(tier, name)`` with names compared
  case-sensitively (Python ``str`` order);
* an empty query browses every entry at tier 0, by name;
* a group filter keeps entries whose case-folded group equals the case-folded
  filter.

The exact-name shortcut is the registry's, through ``SearchIndex.exact``.

How it stays fast
-----------------

Entries get ids in name order, so id order is name order, and a keyset position
``(tier, name)`` becomes ``(tier, first id after name)`` by bisection. Ids are
grouped in *blocks* of ``_BLOCK`` consecutive ids; name postings are ascending
arrays of block numbers (indexing per block instead of per entry is several times
faster and smaller, and a candidate block is cheap to check), text postings are
per entry (see "The entry path" below).

For each tier ``t``, ``ranked`` walks candidate blocks in ascending order — a
superset of the blocks holding an entry of tier ``t`` — and checks each with the
rule itself: the block's fields of tiers ``0..t`` are folded and joined once, each
term's occurrences are found field by field, and each entry's tier follows. The
candidate streams only need to be supersets, and they are lazy: a page of five
over a broad query stops after a few blocks. The cost grows with the candidate
blocks, not with the catalog.

Where a term may match, per tier (each a union of block lists):

* name: a trigram index over blocks of folded names. A term of three or more
  characters is looked up by its rarest trigram, a shorter one by every trigram
  containing it (each block's names are padded with a separator, so even a
  one-letter name has a trigram);
* group: the few distinct folded groups are tested directly;
* summary and documentation: a text's *pieces* are the runs of two per-character
  views of it (one keeps letters, digits and underscores, the other ASCII
  punctuation and symbols; see ``_pieces``), so every piece of a term occurring
  in a text is a substring of one of the text's pieces. Each distinct piece has an
  ascending list of entry ids per tier (turned into blocks on this path, per
  query), and the sorted piece vocabulary has its own trigram index over blocks of
  pieces: a term's piece finds the vocabulary pieces containing it with a gram
  lookup and a substring search of a few vocabulary blocks. A piece contained in
  too many vocabulary pieces (a digit, say), or listed for too many entries, is
  *broad*: it constrains nothing.

A *constraint* for tier ``t`` is a union of block lists holding every block with
an entry of tier ``t``: the group filter's blocks, and for each term (and each of
its pieces) the blocks where it matches at or below ``t``; the union over terms
of each term's tier-``t`` blocks (some term's best tier is exactly ``t``) is one
more candidate driver. The smallest drives the walk; single sorted lists are
intersected by leapfrogging (bisecting to the next common block), small unions
eagerly as sets, and large ones only test the driver's blocks.

The entry path (tiers 1 to 3)
-----------------------------

Checking blocks costs microseconds per candidate; a restrictive policy asks for
hundreds of candidates per page. So when every term is one piece (it then occurs
in a text exactly when one of the text's pieces contains it), not broad, and its
name blocks are few enough to list, tiers 1 to 3 skip the block path: a term's
exact matches per tier are unions of entry id lists (its groups' ids, and the ids
of the vocabulary pieces containing it), plus its name matches, checked in its
listed name blocks. ``_entry_matches`` walks growing windows of ids, skipping to
the next id that could match, and computes each window's tier-``t`` entries with
set operations: those every term matches at or below ``t`` minus those every term
matches below ``t``. Tier 0 stays on the block path, whose name checks are cheap.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, compress, islice, repeat

__all__ = [
    "TIER_DOCUMENTATION",
    "TIER_GROUP",
    "TIER_NAME",
    "TIER_SUMMARY",
    "IndexEntry",
    "Scope",
    "SearchIndex",
    "fold_group",
    "normalize_query",
    "query_terms",
]

#: Field tiers, best first: name matches outrank group, summary, then documentation.
TIER_NAME = 0
TIER_GROUP = 1
TIER_SUMMARY = 2
TIER_DOCUMENTATION = 3
_TIERS = (TIER_NAME, TIER_GROUP, TIER_SUMMARY, TIER_DOCUMENTATION)

#: Ids per block: about a sixth of the per-entry build work and memory, for the price
#: of checking up to eight entries per candidate block.
_BLOCK = 8

#: Vocabulary pieces per block of the vocabulary gram index.
_VOCABULARY_BLOCK = 32

#: At most this many vocabulary blocks are searched for one piece (well under a
#: microsecond each); a piece found in more is broad and constrains nothing.
_VOCABULARY_SCAN_LIMIT = 512

#: A piece's trigram lists are intersected once its rarest trigram is in more than
#: this many vocabulary blocks (an intersection costs about 50 ns a block).
_INTERSECT_FROM = 32

#: A driving union of more block lists than this is materialized, not heap-merged.
_MERGE_FANOUT = 32

#: A driving union of at most this many blocks is intersected eagerly, at C speed.
_MATERIALIZE_LIMIT = 2048

#: A constraint of more blocks than this never becomes a set: building it would cost
#: more than the candidate blocks it could skip.
_FILTER_LIMIT = 4096

#: A union of at most this many block lists is tested by bisecting each of them
#: (about 0.3 µs a list) instead of becoming a set.
_BISECT_LISTS = 4

#: Largest chunk of candidate name blocks tested at once; chunks grow from one, so a
#: page found in the first blocks reads no more.
_CHUNK = 32

#: The first window of the entry-level walk, in ids; each next window is twice as wide,
#: so a first page over a dense tier reads one small window, and a sparse walk few.
_WINDOW = 128

#: A term piece whose entry postings (summary and documentation together) exceed this
#: is broad on the block path: converting them to blocks would cost more than it saves.
_CONVERT_LIMIT = 16384

#: The gram length: trigrams make a term's rarest gram selective.
_GRAM = 3

# Joins an entry's documents, a block's fields and the texts of a gram block. It is
# whitespace, so no term (which never holds whitespace) matches across two texts
# and no gram of a term spans two texts.
_SEPARATOR = "\n"

_Blocks = Sequence[int]

_NO_TIER = len(_TIERS)  # worse than any tier: "no match"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One operation as the index sees it.

    ``name`` (unique, compared case-sensitively), ``group`` (may be empty),
    ``summary``, and ``documents``: the description, each example and the source
    text, all indexed as tier-3 documentation. Schemas are never indexed.
    """

    name: str
    group: str
    summary: str
    documents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Scope:
    """A discovery scope resolved against one index: ``ids`` (ascending, in name
    order) and ``members`` (the same entries as entry indexes)."""

    ids: list[int]
    members: frozenset[int]


def normalize_query(query: str) -> str:
    """The query with whitespace runs collapsed to one space and no edge whitespace.

    Casing is kept: it binds cursors, because exact names are case-sensitive.
    """
    return " ".join(query.split())


def query_terms(query: str) -> tuple[str, ...]:
    """The query's case-folded terms, without duplicates, in first-seen order.

    Terms are split on whitespace (``str.split``), then folded with ``str.casefold``;
    folding never produces whitespace, so a folded term is always one term.
    """
    return tuple(dict.fromkeys(term.casefold() for term in query.split()))


def fold_group(group: str) -> str:
    """The case-folded group (``str.casefold``), used for filtering and cursor binding.

    Whitespace is not stripped: a group is an identifier compared exactly after
    folding, so ``" billing"`` filters only a group spelled with that space.
    """
    return group.casefold()


# --- building -------------------------------------------------------------------------

_new_blocks: Callable[[], array[int]] = partial(array, "i")
_NO_BLOCKS: array[int] = array("i")


def _consume(iterator: Iterable[object]) -> None:
    """Run an iterator of side effects at C speed."""
    deque(iterator, maxlen=0)


def _append_all(lists: defaultdict[str, array[int]], keys: Iterable[str], number: int) -> None:
    """Append ``number`` to the list of every key."""
    _consume(map(array.append, map(lists.__getitem__, keys), repeat(number)))


def _block_texts(texts: Sequence[str], size: int) -> list[str]:
    """The texts joined by blocks of ``size``, each block padded with the separator."""
    return [
        _SEPARATOR + _SEPARATOR.join(texts[first : first + size]) + _SEPARATOR
        for first in range(0, len(texts), size)
    ]


class _GramIndex:
    """Which blocks hold each trigram, over padded block texts.

    Padding makes every substring of one to three characters of any text lie
    inside some trigram of its block; a longer substring's trigrams all occur in
    its block.
    """

    __slots__ = ("_shorter", "_trigrams")

    def __init__(self, blocks: Iterable[str]) -> None:
        lists: defaultdict[str, array[int]] = defaultdict(_new_blocks)
        for number, text in enumerate(blocks):
            _append_all(lists, {text[k : k + _GRAM] for k in range(len(text) - _GRAM + 1)}, number)
        self._trigrams: dict[str, array[int]] = dict(lists)
        shorter: defaultdict[str, list[array[int]]] = defaultdict(list)
        for gram, numbers in self._trigrams.items():
            for part in {gram[0], gram[1], gram[2], gram[:2], gram[1:]}:
                shorter[part].append(numbers)
        self._shorter: dict[str, list[array[int]]] = dict(shorter)

    def rarest(self, term: str) -> list[_Blocks]:
        """Block lists whose union holds every block with a text containing ``term``:
        every trigram containing a short term, or the rarest trigram of a longer one."""
        lists = self.all(term)
        if len(term) < _GRAM or not lists:
            return lists
        return [min(lists, key=len)]

    def all(self, term: str) -> list[_Blocks]:
        """Every trigram list containing a short term (a block holding the term is in
        one of them), or every trigram list of a longer term (it is in all of them;
        none if some trigram occurs nowhere)."""
        if len(term) < _GRAM:
            return list(self._shorter.get(term, ()))
        lists: list[_Blocks] = []
        for k in range(len(term) - _GRAM + 1):
            numbers = self._trigrams.get(term[k : k + _GRAM])
            if numbers is None:
                return []
            lists.append(numbers)
        return lists


# A text's pieces are the runs of its two *views*: in the word view, ASCII characters
# other than letters, digits and the underscore become spaces (so ``create_invoice``
# stays one piece); in the symbol view, those and whitespace do; other characters
# stay in both. A view maps each character alone, so when a term occurs in a text,
# each run of the term's view lies inside a run of the text's view: every piece of
# the term is a substring of a piece of the text.
_WORD = frozenset(c for c in range(128) if chr(c).isalnum() or chr(c) == "_")
_WORD_VIEW = {c: " " for c in range(128) if c not in _WORD}
_SYMBOL_VIEW = {c: " " for c in range(128) if c in _WORD or chr(c).isspace()}


def _pieces(text: str) -> set[str]:
    """The pieces of a folded text: the runs of its two views."""
    pieces = set(text.translate(_WORD_VIEW).split())
    pieces.update(text.translate(_SYMBOL_VIEW).split())
    return pieces


# The views over UTF-8 bytes, for building: bytes of non-ASCII characters stay in both,
# and only ASCII whitespace splits, so a text's piece may hold non-ASCII whitespace.
# That keeps both properties that matter: a piece is a substring of its text, and a
# term's piece (never whitespace) that occurs in a text lies inside one of its pieces.
_WORD_BYTES = bytes(32 if c in _WORD_VIEW else c for c in range(256))
_SYMBOL_BYTES = bytes(32 if c in _SYMBOL_VIEW else c for c in range(256))


def _piece_entries(texts: Iterable[str]) -> dict[bytes, array[int]]:
    """Map each piece of the folded texts (one per entry id), UTF-8 encoded, to the
    ascending ids of the texts holding it."""
    lists: defaultdict[bytes, array[int]] = defaultdict(_new_blocks)
    for entry_id, text in enumerate(texts):
        encoded = text.encode()
        pieces = set(encoded.translate(_WORD_BYTES).split())
        pieces.update(encoded.translate(_SYMBOL_BYTES).split())
        _consume(map(array.append, map(lists.__getitem__, pieces), repeat(entry_id)))
    return dict(lists)


def _to_blocks(ids: _Blocks) -> array[int]:
    """The ascending distinct blocks of ascending entry ids."""
    return array("i", dict.fromkeys(map(_BLOCK.__rfloordiv__, ids)))


class _Postings:
    """Per vocabulary position, the ascending entry ids whose field holds that piece."""

    __slots__ = ("_flat", "_offsets")

    def __init__(self, vocabulary: Sequence[bytes], lists: dict[bytes, array[int]]) -> None:
        in_order = list(map(lists.get, vocabulary, repeat(_NO_BLOCKS)))
        flat = array("i")
        flat.frombytes(b"".join(map(array.tobytes, in_order)))
        self._flat = memoryview(flat)
        self._offsets = array("i", accumulate(map(len, in_order), initial=0))

    def get(self, position: int) -> _Blocks:
        return self._flat[self._offsets[position] : self._offsets[position + 1]]

    def count(self, position: int) -> int:
        return self._offsets[position + 1] - self._offsets[position]


# --- walking ----------------------------------------------------------------------------


def _size(lists: Iterable[_Blocks]) -> int:
    return sum(map(len, lists))


def _tail(ascending: _Blocks, start: int) -> Iterator[int]:
    """The items ``>= start`` of an ascending sequence, lazily."""
    return map(ascending.__getitem__, range(bisect_left(ascending, start), len(ascending)))


def _member(lists: list[_Blocks]) -> Callable[[int], bool]:
    """A membership test for a union of a few ascending block lists, by bisection."""

    def member(block: int) -> bool:
        for numbers in lists:
            k = bisect_left(numbers, block)
            if k < len(numbers) and numbers[k] == block:
                return True
        return False

    return member


def _leapfrog(lists: list[_Blocks], first: int) -> Iterator[int]:
    """The ascending blocks ``>= first`` present in every one of the ascending lists."""
    lists = sorted(lists, key=len)
    candidate = first
    while True:
        for numbers in lists:
            k = bisect_left(numbers, candidate)
            if k == len(numbers):
                return
            if numbers[k] != candidate:
                candidate = numbers[k]
                break
        else:
            yield candidate
            candidate += 1


def _filtered(blocks: Iterator[int], members: list[Callable[[int], bool]]) -> Iterator[int]:
    """The distinct blocks of an ascending stream that pass every membership test."""
    previous = -1
    for number in blocks:
        if number != previous:
            previous = number
            if all(member(number) for member in members):
                yield number


class _Term:
    """Where one folded term may match, per tier; computed on first use within one query.

    ``None`` stands for "too broad to list" (it constrains nothing).
    """

    __slots__ = ("_groups", "_index", "_names", "_names_exact", "_per_piece", "_positions", "text")

    def __init__(self, index: SearchIndex, text: str) -> None:
        self._index = index
        self._names: list[_Blocks] | None = None
        self._names_exact: list[_Blocks] | None = None
        self._groups: list[_Blocks] | None = None
        self._per_piece: dict[int, list[list[_Blocks]]] = {}
        self._positions: list[list[int]] | None = None
        self.text = text

    def tier_blocks(self, tier: int) -> list[_Blocks] | None:
        """Block lists whose union holds every block where the term matches the
        tier's field (on text tiers, those of the term's rarest piece)."""
        if tier == TIER_NAME:
            return self.names()
        if tier == TIER_GROUP:
            return self.groups()
        choices = self.pieces(tier)
        return min(choices, key=_size) if choices else None

    def constraints(self, tier: int) -> list[list[_Blocks]]:
        """Unions of block lists, each holding every block where the term matches at
        or below ``tier`` (on text tiers, one per piece of the term)."""
        if tier == TIER_NAME:
            return [self.names()]
        names = self.names_exact()
        if names is None:
            return []
        fixed = [*names, *self.groups()]
        if tier == TIER_GROUP:
            return [fixed]
        summaries = self.pieces(TIER_SUMMARY)
        if tier == TIER_SUMMARY:
            return [fixed + lists for lists in summaries]
        documents = self.pieces(TIER_DOCUMENTATION)
        return [fixed + a + b for a, b in zip(summaries, documents, strict=True)]

    def names(self) -> list[_Blocks]:
        """Name blocks holding the term's trigrams: a superset of its name matches."""
        if self._names is None:
            self._names = self._index._name_grams.rarest(self.text)
        return self._names

    def names_exact(self) -> list[_Blocks] | None:
        """The name blocks whose joined folded names contain the term; ``None`` if the
        term's trigram blocks are too many to test."""
        if self._names_exact is None:
            lists = [numbers for numbers in self.names() if numbers]
            if _size(lists) > _FILTER_LIMIT:
                return None
            numbers = lists[0] if len(lists) == 1 else sorted(set().union(*lists))
            texts = self._index._name_blocks
            found = map(str.__contains__, map(texts.__getitem__, numbers), repeat(self.text))
            self._names_exact = [array("i", compress(numbers, found))]
        return self._names_exact

    def groups(self) -> list[_Blocks]:
        """The blocks of the groups containing the term (exact, at block level)."""
        if self._groups is None:
            groups = self._index._group_blocks.items()
            self._groups = [blocks for group, blocks in groups if self.text in group]
        return self._groups

    def pieces(self, tier: int) -> list[list[_Blocks]]:
        """For each piece of the term that is not broad, the blocks of a text tier
        whose field holds a piece containing it."""
        per_piece = self._per_piece.get(tier)
        if per_piece is None:
            postings = self._index._postings[tier - TIER_SUMMARY]
            per_piece = [
                [_to_blocks(postings.get(position)) for position in positions]
                for positions in self.positions()
            ]
            self._per_piece[tier] = per_piece
        return per_piece

    def positions(self) -> list[list[int]]:
        """For each piece of the term that is not broad, the vocabulary positions of
        the pieces containing it."""
        if self._positions is None:
            index = self._index
            summaries, documents = index._postings
            self._positions = []
            for positions in map(index._vocabulary_positions, _pieces(self.text)):
                if positions is None:
                    continue
                listed = sum(map(summaries.count, positions)) + sum(map(documents.count, positions))
                if listed <= _CONVERT_LIMIT:
                    self._positions.append(positions)
        return self._positions

    def entry_lists(self) -> list[list[_Blocks]] | None:
        """The term's exact matches by entry, per tier 1-3: each tier's entries are the
        union of its ascending id lists. ``None`` unless the term is one piece (so it
        occurs in a text exactly when a piece of the text contains it) that is not
        broad, and its name matches are listed (``names_exact``)."""
        if self.text not in _pieces(self.text) or self.names_exact() is None:
            return None
        index = self._index
        positions = index._vocabulary_positions(self.text)
        if positions is None:
            return None
        groups: list[_Blocks] = [
            ids for group, ids in index._group_ids.items() if self.text in group
        ]
        summaries, documents = index._postings
        return [
            groups,
            [ids for ids in map(summaries.get, positions) if ids],
            [ids for ids in map(documents.get, positions) if ids],
        ]


class SearchIndex:
    """An immutable search index over a fixed catalog, built once.

    ``ranked`` yields ``(tier, entry index)`` pairs, where the entry index is the
    position in the ``entries`` given to the constructor. The index holds no
    policy: the caller authorizes each yielded entry and stops when its page is
    full. Safe to share between threads: nothing changes after construction.
    """

    __slots__ = (
        "_block_fields",
        "_entries",
        "_exact",
        "_group_block_sets",
        "_group_blocks",
        "_group_f",
        "_group_ids",
        "_name_blocks",
        "_name_f",
        "_name_grams",
        "_names",
        "_order",
        "_postings",
        "_vocabulary",
        "_vocabulary_blocks",
        "_vocabulary_grams",
    )

    def __init__(self, entries: Sequence[IndexEntry]) -> None:
        """Index ``entries``; names must be unique (``ValueError`` otherwise)."""
        order = sorted(range(len(entries)), key=lambda k: entries[k].name)
        ordered = [entries[k] for k in order]
        self._order: list[int] = order
        self._entries: list[IndexEntry] = ordered
        self._names: list[str] = [entry.name for entry in ordered]
        self._exact: dict[str, int] = {entries[k].name: k for k in order}
        if len(self._exact) != len(order):
            raise ValueError("search index entries must have unique names")

        folded_names = (name.casefold() for name in self._names)
        self._name_f: list[str] = [  # a name that folds to itself shares its string
            folded if folded != name else name
            for name, folded in zip(self._names, folded_names, strict=True)
        ]
        self._name_blocks = _block_texts(self._name_f, _BLOCK)
        self._name_grams = _GramIndex(self._name_blocks)

        shared: dict[str, str] = {}  # one string per distinct folded group
        self._group_f: list[str] = [
            shared.setdefault(folded, folded) for folded in (fold_group(e.group) for e in ordered)
        ]
        group_ids: defaultdict[str, array[int]] = defaultdict(_new_blocks)
        for entry_id, group in enumerate(self._group_f):
            group_ids[group].append(entry_id)
        self._group_ids: dict[str, array[int]] = dict(group_ids)
        self._group_blocks: dict[str, array[int]] = {
            group: array("i", sorted({entry_id // _BLOCK for entry_id in ids}))
            for group, ids in group_ids.items()
        }
        # A group filter tests many blocks: as a set, each test is one hash lookup.
        self._group_block_sets = {
            group: frozenset(blocks) for group, blocks in self._group_blocks.items()
        }

        # Every text field folded once, so a query never folds documentation; the block
        # path's fields (tier-major per block) cost memory close to the texts' own.
        summaries_f = [entry.summary.casefold() for entry in ordered]
        documents_f = [_SEPARATOR.join(entry.documents).casefold() for entry in ordered]
        self._block_fields: list[tuple[str, ...]] = [
            (
                *self._name_f[base : base + _BLOCK],
                *self._group_f[base : base + _BLOCK],
                *summaries_f[base : base + _BLOCK],
                *documents_f[base : base + _BLOCK],
            )
            for base in range(0, len(ordered), _BLOCK)
        ]
        summaries = _piece_entries(summaries_f)
        documents = _piece_entries(documents_f)
        # UTF-8 byte order is code point order: the vocabulary is sorted either way.
        encoded = sorted(summaries.keys() | documents.keys())
        self._vocabulary: list[str] = [piece.decode() for piece in encoded]
        self._vocabulary_blocks = _block_texts(self._vocabulary, _VOCABULARY_BLOCK)
        self._vocabulary_grams = _GramIndex(self._vocabulary_blocks)
        self._postings = (_Postings(encoded, summaries), _Postings(encoded, documents))

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"SearchIndex(<{len(self._order)} entries>)"

    def exact(self, query: str) -> int | None:
        """The entry index whose name equals ``query`` exactly (case-sensitive), else ``None``."""
        return self._exact.get(query)

    def scope(self, groups: Iterable[str] = (), prefixes: Iterable[str] = ()) -> Scope:
        """The entries whose folded group is one of ``groups`` (folded here) or whose
        name starts with one of ``prefixes`` (case-sensitive): a discovery scope."""
        found: set[int] = set()
        for folded in {fold_group(group) for group in groups}:
            found.update(self._group_ids.get(folded, ()))
        names, size = self._names, len(self._names)
        for prefix in set(prefixes):
            # Names sharing a prefix are contiguous in name order.
            first = bisect_left(names, prefix)
            end = bisect_left(names, prefix + "\U0010ffff", first)
            while end < size and names[end].startswith(prefix):
                end += 1
            found.update(range(first, end))
        ids = sorted(found)
        order = self._order
        return Scope(ids, frozenset(order[entry_id] for entry_id in ids))

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(tier, entry index)`` for every match, in ``(tier, name)`` order, lazily.

        ``query`` is split into terms by ``query_terms``; no terms browses every
        entry at tier 0. ``group`` keeps entries whose folded group equals
        ``fold_group(group)`` (empty: no filter). ``after`` is a keyset position:
        only entries whose ``(tier, name)`` is strictly greater are yielded (the
        name need not be in the index). ``scope`` (from ``scope``) keeps only its
        entries: an empty query walks the scope's own ids, so its cost follows the
        scope's size; with terms, matches outside it are dropped here, before any
        caller sees them.
        """
        if scope is None:
            return self._ranked(query, group, after)
        if not query_terms(query):
            return self._browse(scope, group, after)
        members = scope.members
        return (item for item in self._ranked(query, group, after) if item[1] in members)

    def _browse(
        self, scope: Scope, group: str, after: tuple[int, str] | None
    ) -> Iterator[tuple[int, int]]:
        """An empty query within a scope: its ids in name order (tier 0)."""
        folded = fold_group(group)
        if after is not None and after[0] > TIER_NAME:
            return
        start = 0 if after is None else bisect_right(self._names, after[1])
        ids = scope.ids
        groups, order = self._group_f, self._order
        for entry_id in ids[bisect_left(ids, start) :]:
            if not folded or groups[entry_id] == folded:
                yield TIER_NAME, order[entry_id]

    def _ranked(
        self, query: str, group: str, after: tuple[int, str] | None
    ) -> Iterator[tuple[int, int]]:
        terms = query_terms(query)
        folded_group = fold_group(group)
        if folded_group and folded_group not in self._group_ids:
            return
        after_tier, start_id = -1, 0
        if after is not None:
            after_tier, after_name = after
            start_id = bisect_right(self._names, after_name)
        order = self._order
        if not terms:
            if after_tier <= TIER_NAME:
                start = start_id if after_tier == TIER_NAME else 0
                ids: Iterable[int] = range(start, len(order))
                if folded_group:
                    ids = _tail(self._group_ids[folded_group], start)
                for entry_id in ids:
                    yield TIER_NAME, order[entry_id]
            return
        sources = [_Term(self, term) for term in terms]
        listed: list[list[list[_Blocks]]] | None = []
        for tier in _TIERS:
            if tier < after_tier:
                continue
            start = start_id if tier == after_tier else 0
            if tier != TIER_NAME and listed is not None:
                if not listed:
                    found = [source.entry_lists() for source in sources]
                    listed = [lists for lists in found if lists is not None]
                    if len(listed) < len(found):
                        listed = None
                if listed is not None:
                    names = [source.names_exact() or [] for source in sources]
                    windows = self._entry_matches(listed, names, terms, tier, folded_group, start)
                    for window in windows:
                        yield from window
                    continue
            blocks = self._candidates(sources, tier, folded_group, start // _BLOCK)
            if tier == TIER_NAME:
                yield from self._name_matches(blocks, terms, folded_group, start)
            else:
                for number in blocks:
                    yield from self._block_matches(number, terms, tier, folded_group, start)

    def _entry_matches(
        self,
        listed: list[list[list[_Blocks]]],
        names: list[list[_Blocks]],
        terms: tuple[str, ...],
        tier: int,
        group: str,
        start: int,
    ) -> Iterator[list[tuple[int, int]]]:
        """The entries from ``start`` on whose tier is ``tier`` (1 to 3), when every
        term's matches are listed by entry (``_Term.entry_lists``).

        An entry's tier is ``tier`` when every term matches it at or below ``tier`` and
        not every term matches it below. The walk goes by windows of ids, growing, and
        within a window computes that with set operations over the slices of the id
        lists; a term's name matches (tier 0) come from its few exact name blocks.
        Yields each window's results, in name order.
        """
        below = [[ids for lists in per_tier[: tier - 1] for ids in lists] for per_tier in listed]
        at = [per_tier[tier - 1] for per_tier in listed]
        if not any(at):
            return
        sizes = [
            _size(lower) + _size(exact) + _BLOCK * _size(blocks)
            for lower, exact, blocks in zip(below, at, names, strict=True)
        ]
        if 0 in sizes:
            return
        # The driver, whose next id starts each window: the smallest list of entries
        # that every result is in (the group filter's, or a term's), or the union of
        # the terms' tier lists (some term matches each result exactly at ``tier``).
        term = min(range(len(sizes)), key=sizes.__getitem__)
        driver: list[_Blocks] = below[term] + at[term]
        driver_blocks: list[_Blocks] = names[term]
        exact = [ids for lists in at for ids in lists]
        if _size(exact) < sizes[term]:
            driver, driver_blocks = exact, []
        members: _Blocks = range(len(self._order))
        if group:
            members = self._group_ids[group]
            if len(members) < min(sizes[term], _size(driver)):
                driver, driver_blocks = [members], []
        order, limit, width = self._order, len(self._order), _WINDOW
        low = start
        while low < limit:
            # Skip to the driver's next id.
            next_ids = [ids[k] for ids in driver if (k := bisect_left(ids, low)) < len(ids)]
            first_block = low // _BLOCK
            next_ids.extend(
                max(_BLOCK * blocks[k], low)
                for blocks in driver_blocks
                if (k := bisect_left(blocks, first_block)) < len(blocks)
            )
            if not next_ids:
                return
            low = min(next_ids)
            if group:  # every result is a member too: skip to the next one
                k = bisect_left(members, low)
                if k == len(members):
                    return
                low = members[k]
            high = min(low + width, limit)
            window = self._window(below, at, names, terms, members, low, high)
            if window:
                yield list(zip(repeat(tier), map(order.__getitem__, sorted(window))))
            low = high
            width *= 2

    def _window(
        self,
        below: list[list[_Blocks]],
        at: list[list[_Blocks]],
        names: list[list[_Blocks]],
        terms: tuple[str, ...],
        members: _Blocks,
        low: int,
        high: int,
    ) -> set[int]:
        """The ids in ``[low, high)`` of the tier ``at`` describes (see ``_entry_matches``)."""
        folded = self._name_f
        allowed: set[int] | None = None
        if not isinstance(members, range):
            allowed = set(members[bisect_left(members, low) : bisect_left(members, high)])
            if not allowed:
                return allowed
        found = allowed
        lowers: list[set[int]] = []
        for lower_lists, exact_lists, blocks, term in zip(below, at, names, terms, strict=True):
            lower: set[int] = set()
            for ids in lower_lists:
                lower.update(ids[bisect_left(ids, low) : bisect_left(ids, high)])
            for numbers in blocks:
                first = bisect_left(numbers, low // _BLOCK)
                for number in numbers[first : bisect_left(numbers, (high - 1) // _BLOCK + 1)]:
                    begin, end = max(number * _BLOCK, low), min(number * _BLOCK + _BLOCK, high)
                    tested = map(str.__contains__, folded[begin:end], repeat(term))
                    lower.update(compress(range(begin, end), tested))
            matched = set(lower)
            for ids in exact_lists:
                matched.update(ids[bisect_left(ids, low) : bisect_left(ids, high)])
            found = matched if found is None else found & matched
            if not found:
                return found
            lowers.append(lower)
        assert found is not None
        common = found.copy()
        for lower in lowers:
            common &= lower
            if not common:
                break
        return found - common

    # --- candidates -------------------------------------------------------------------

    def _candidates(self, terms: list[_Term], tier: int, group: str, first: int) -> Iterator[int]:
        """Ascending block numbers ``>= first``: a superset of the blocks holding an
        entry of tier ``tier`` (see the module docstring)."""
        everything = len(self._name_blocks)
        constraints: list[list[_Blocks]] = [[self._group_blocks[group]]] if group else []
        for term in terms:
            constraints.extend(term.constraints(tier))
        constraints = [[numbers for numbers in lists if numbers] for lists in constraints]
        if not all(constraints):
            return iter(())  # some constraint holds no block at all
        sizes = [_size(lists) for lists in constraints]
        # The driver: the smallest constraint, or the union of the terms' tier blocks.
        driver: list[_Blocks] = [range(first, everything)]
        size, chosen = everything, -1
        for k, listed in enumerate(sizes):
            if listed < size:
                driver, size, chosen = constraints[k], listed, k
        exact: list[_Blocks] = []
        for term in terms:
            found = term.tier_blocks(tier)
            if found is None:
                break
            exact.extend(numbers for numbers in found if numbers)
        else:
            if _size(exact) < size:
                driver, size, chosen = exact, _size(exact), -1
            if not exact:
                return iter(())
        # The other constraints, smallest first; the group filter's (k == 0) is a set.
        # One listing more than half of all blocks would filter too little to pay.
        group_set = self._group_block_sets[group] if group else frozenset()
        others = sorted(
            (
                (listed, lists, bool(group) and k == 0)
                for k, (listed, lists) in enumerate(zip(sizes, constraints, strict=True))
                if k != chosen and (2 * listed < everything or (group and k == 0))
            ),
            key=lambda other: other[0],
        )
        # A set filter must cost less to build than the candidate blocks it may skip.
        budget = min(_FILTER_LIMIT, 64 * size + 64)
        if len(driver) == 1 and all(len(lists) == 1 for _, lists, _ in others):
            if not others:
                return _tail(driver[0], first)
            return _leapfrog([driver[0], *(lists[0] for _, lists, _ in others)], first)
        if size <= _MATERIALIZE_LIMIT or len(driver) > _MERGE_FANOUT:
            common = set().union(*driver)
            for listed, lists, is_group in others:
                if is_group:
                    common &= group_set
                elif listed <= budget and listed <= 8 * len(common):
                    common.intersection_update(set().union(*lists) if len(lists) > 1 else lists[0])
                elif len(lists) <= _BISECT_LISTS:
                    member = _member(lists)
                    common = {number for number in common if member(number)}
                if not common:
                    return iter(())
            return _tail(sorted(common), first)
        members = [
            group_set.__contains__
            if is_group
            else _member(lists)
            if len(lists) <= _BISECT_LISTS
            else set().union(*lists).__contains__
            for listed, lists, is_group in others
            if is_group or len(lists) <= _BISECT_LISTS or listed <= budget
        ]
        if len(driver) == 1:
            return _filtered(_tail(driver[0], first), members)
        return _filtered(heapq.merge(*(_tail(numbers, first) for numbers in driver)), members)

    def _vocabulary_positions(self, piece: str) -> list[int] | None:
        """Vocabulary positions of the pieces containing ``piece``; ``None`` if broad."""
        lists = self._vocabulary_grams.all(piece)
        if not lists:
            return []
        blocks: _Blocks
        if len(piece) < _GRAM:  # the piece is in one of these lists: their union
            if len(lists) > 1 and _size(lists) > _FILTER_LIMIT:
                return None
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
        if len(blocks) > _VOCABULARY_SCAN_LIMIT:
            return None
        texts = self._vocabulary_blocks
        positions: list[int] = []
        for number in blocks:
            text = texts[number]
            at = text.find(piece)
            # The text is padded and joined with the separator, so the separators
            # before a match number one more than the pieces before it.
            position = number * _VOCABULARY_BLOCK - 1
            counted = 0
            while at >= 0:
                position += text.count(_SEPARATOR, counted, at)
                positions.append(position)
                counted = text.find(_SEPARATOR, at)
                at = text.find(piece, counted)
        return positions

    # --- the rule -----------------------------------------------------------------------

    def _name_matches(
        self, blocks: Iterator[int], terms: tuple[str, ...], group: str, start: int
    ) -> Iterator[tuple[int, int]]:
        """The entries of the candidate blocks whose name holds every term (tier 0).

        Names are joined by block already, so blocks are first tested in chunks at C
        speed; chunks grow from one, so a page found in the first blocks reads no more.
        """
        texts, names, groups, order = self._name_blocks, self._name_f, self._group_f, self._order
        limit = len(order)
        size = 1
        while chunk := list(islice(blocks, size)):
            for term in terms:
                tested = map(str.__contains__, map(texts.__getitem__, chunk), repeat(term))
                chunk = list(compress(chunk, tested))
            for number in chunk:
                first = number * _BLOCK
                for entry_id in range(max(first, start), min(first + _BLOCK, limit)):
                    if group and groups[entry_id] != group:
                        continue
                    name = names[entry_id]
                    if all(term in name for term in terms):
                        yield TIER_NAME, order[entry_id]
            size = min(2 * size, _CHUNK)

    def _block_matches(
        self, number: int, terms: tuple[str, ...], tier: int, group: str, start: int
    ) -> Iterator[tuple[int, int]]:
        """The entries of one candidate block (from ``start`` on) whose tier is ``tier``.

        Each entry's fields — name, group, summary, joined documents — were folded
        once, at construction; an entry's tier is, over its terms, the worst of the
        first field (in tier order) that holds the term.
        """
        base = number * _BLOCK
        count = min(base + _BLOCK, len(self._order)) - base
        fields = self._block_fields[number]
        order, groups = self._order, self._group_f
        for owner in range(max(0, start - base), count):
            if group and groups[base + owner] != group:
                continue
            worst = TIER_NAME
            for term in terms:
                for found in _TIERS:
                    if term in fields[found * count + owner]:
                        break
                else:
                    worst = _NO_TIER
                    break
                if found > worst:
                    worst = found
            if worst == tier:
                yield tier, order[base + owner]
