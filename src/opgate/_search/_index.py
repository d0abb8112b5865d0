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
``(tier, name)`` becomes ``(tier, first id after name)`` by bisection. A set of
entries is a bitset (``_bitsets``): whole sets combine at C speed, and a page reads
the lowest set bits from its start id on.

For each term and field (tier) the query computes, on first use, a bitset of the
entries where the term may match, flagged *exact* when it is the match set itself
and not a superset; a field too costly to list is *unknown* (it constrains
nothing):

* name: a trigram index over the folded names, made exact by testing names where a
  term's trigrams leave few (``_name_index``);
* group: the distinct folded groups holding the term, each a union of runs of ids
  (``_group_index``);
* summary and documentation: for a term that is one piece of text, the union of the
  postings of the vocabulary pieces containing it (exact); for a term of several
  pieces, the intersection of such unions over its pieces (a superset); see
  ``_text_index``.

Posting lists long enough are kept as bitsets, the others as id arrays, and a
term's field is unknown when listing it would cost too much (``_postings``): such a
term is common, so testing it directly on the candidates the other terms leave is
cheap.

An entry's tier is ``k`` when every term matches it at or below ``k`` and not every
term matches it below ``k``. Tier by tier, best first and only as far as the
caller reads (so the documentation field, the largest, is computed last), the
candidates are the intersection over terms of each term's fields up to ``k`` (a
superset), minus the intersection of their exact fields below ``k`` (a subset of
the entries of better tiers). When every field involved is exact the candidates
are exactly the tier's entries; otherwise each candidate read is checked with the
rule itself on its folded fields.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ._bitsets import bitset_of, ones_from, tail, union
from ._group_index import GroupIndex
from ._name_index import NameIndex
from ._postings import SEPARATOR, Field, restore_slots
from ._text_index import TextIndex, pieces

__all__ = [
    "TIER_DOCUMENTATION",
    "TIER_GROUP",
    "TIER_NAME",
    "TIER_SUMMARY",
    "IndexEntry",
    "Scope",
    "SearchIndex",
    "fold_group",
    "has_terms",
    "normalize_query",
    "query_terms",
]

#: Field tiers, best first: name matches outrank group, summary, then documentation.
TIER_NAME = 0
TIER_GROUP = 1
TIER_SUMMARY = 2
TIER_DOCUMENTATION = 3
_TIERS = (TIER_NAME, TIER_GROUP, TIER_SUMMARY, TIER_DOCUMENTATION)

#: When a text tier's candidates are down to this many, the remaining terms are
#: tested on each of them instead of having their fields listed: per tier (testing
#: the documentation, a long text, costs more than testing a summary).
_SURVIVORS = (0, 0, 32, 16)

_NO_TIER = len(_TIERS)  # worse than any tier: "no match"
_UNCHECKED = -1  # for ``checked`` in ``_ranked``: "worse than tier -1", not checked yet


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


def has_terms(query: str) -> bool:
    """Whether ``query_terms(query)`` is not empty, without splitting the query:
    ``str.split()`` drops exactly the characters ``str.isspace()`` accepts."""
    return bool(query) and not query.isspace()


def fold_group(group: str) -> str:
    """The case-folded group (``str.casefold``), used for filtering and cursor binding.

    Whitespace is not stripped: a group is an identifier compared exactly after
    folding, so ``" billing"`` filters only a group spelled with that space.
    """
    return group.casefold()


# --- building -------------------------------------------------------------------------


def _folded_names(names: Sequence[str]) -> list[str]:
    """The names case-folded; a name that folds to itself shares its string."""
    folded_names = (name.casefold() for name in names)
    return [
        folded if folded != name else name for name, folded in zip(names, folded_names, strict=True)
    ]


def _folded_groups(entries: Iterable[IndexEntry]) -> list[str]:
    """The entries' folded groups, one string per distinct folded group."""
    shared: dict[str, str] = {}
    return [shared.setdefault(folded, folded) for folded in (fold_group(e.group) for e in entries)]


class _Term:
    """One folded term of a query: its fields, computed on first use."""

    __slots__ = ("_fields", "_index", "_pieces", "text")

    def __init__(self, index: SearchIndex, text: str) -> None:
        self._index = index
        self._fields: list[Field | None] = [None, None, None, None]
        self._pieces: list[list[int] | None] | None = None
        self.text = text

    def in_no_text(self) -> bool:
        """Whether the term is known to occur in no summary and no documentation (a
        piece of it is in no text), once a text field was computed."""
        return self._pieces is not None and any(positions == [] for positions in self._pieces)

    def kept(self) -> bool:
        """Whether the term's text fields are kept by the index (``TextIndex.kept``)."""
        return self._index._text_fields.kept(self.text) is not None

    def field(self, tier: int) -> Field:
        found = self._fields[tier]
        if found is None:
            if tier == TIER_NAME:
                found = self._index._name_field.field(self.text)
            elif tier == TIER_GROUP:
                found = self._index._group_field.field(self.text)
            else:
                found = self._text(tier)
            self._fields[tier] = found
        return found

    def _text(self, tier: int) -> Field:
        texts = self._index._text_fields
        found = pieces(self.text)
        # A term that is one piece occurs in a text exactly when one of the text's
        # pieces contains it; otherwise each of its pieces lies in one of them.
        exact = self.text in found
        if exact:
            closure = texts.kept(self.text)
            if closure is not None:
                return Field(closure[tier - TIER_SUMMARY], True)
        if self._pieces is None:
            wanted = [self.text] if exact else sorted(found)
            self._pieces = [texts.positions(piece) for piece in wanted]
        return texts.field(tier - TIER_SUMMARY, self._pieces, exact)


class SearchIndex:
    """An immutable search index over a fixed catalog, built once.

    ``ranked`` yields ``(tier, entry index)`` pairs, where the entry index is the
    position in the ``entries`` given to the constructor. The index holds no
    policy: the caller authorizes each yielded entry and stops when its page is
    full. Safe to share between threads: nothing changes after construction.
    """

    __slots__ = (
        "_documents_f",
        "_entries",
        "_everything",
        "_exact",
        "_group_f",
        "_group_field",
        "_name_f",
        "_name_field",
        "_names",
        "_order",
        "_summaries_f",
        "_text_fields",
    )
    __setstate__ = restore_slots  # a pickle sets only these slots

    def __init__(self, entries: Sequence[IndexEntry]) -> None:
        """Index ``entries``; names must be unique (``ValueError`` otherwise)."""
        order = sorted(range(len(entries)), key=lambda k: entries[k].name)
        ordered = [entries[k] for k in order]
        size = len(order)
        self._order: list[int] = order
        self._entries: list[IndexEntry] = ordered
        self._names: list[str] = [entry.name for entry in ordered]
        self._exact: dict[str, int] = {entries[k].name: k for k in order}
        if len(self._exact) != len(order):
            raise ValueError("search index entries must have unique names")
        self._everything = (1 << size) - 1

        self._name_f = _folded_names(self._names)
        self._name_field = NameIndex(self._name_f)
        self._group_f = _folded_groups(ordered)
        self._group_field = GroupIndex(self._group_f)
        # Every text field folded once, so a query never folds documentation.
        self._summaries_f = [entry.summary.casefold() for entry in ordered]
        self._documents_f = [SEPARATOR.join(entry.documents).casefold() for entry in ordered]
        self._text_fields = TextIndex(self._summaries_f, self._documents_f)

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
            found.update(self._group_field.ids.get(folded, ()))
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

    def ranks(self, query: str) -> bool:
        """Always: the rule ranks every query itself (``ranked`` browses one without
        terms), so it is every other ranking's fallback."""
        return True

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
        entry at tier 0 (``browse``). ``group`` keeps entries whose folded group
        equals ``fold_group(group)`` (empty: no filter). ``after`` is a keyset
        position: only entries whose ``(tier, name)`` is strictly greater are yielded
        (the name need not be in the index). ``scope`` (from ``scope``) keeps only its
        entries: an empty query walks the scope's own ids, so its cost follows the
        scope's size; with terms, matches outside it are dropped here, before any
        caller sees them.
        """
        if not query or query.isspace():  # no terms (``has_terms``, inline)
            return self.browse(group, after, scope)
        if scope is None:
            return self._ranked(query, group, after)
        members = scope.members
        return (item for item in self._ranked(query, group, after) if item[1] in members)

    def browse(
        self, group: str = "", after: tuple[int, str] | None = None, scope: Scope | None = None
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(0, entry index)`` for every entry in name order, lazily: an empty
        query under every ranking. ``group``, ``after`` and ``scope`` as for ``ranked``."""
        folded = fold_group(group)
        if after is not None and after[0] > TIER_NAME:
            return
        # A position before tier 0 (a keyset of tier -1) keeps every entry.
        start = 0 if after is None or after[0] < TIER_NAME else bisect_right(self._names, after[1])
        order = self._order
        if scope is not None:
            ids = scope.ids
            groups = self._group_f
            for entry_id in ids[bisect_left(ids, start) :]:
                if not folded or groups[entry_id] == folded:
                    yield TIER_NAME, order[entry_id]
            return
        found: Iterable[int] = range(start, len(order))
        if folded:
            members = self._group_field.ids.get(folded)
            if members is None:
                return
            found = tail(members, start)
        for entry_id in found:
            yield TIER_NAME, order[entry_id]

    def _ranked(
        self, query: str, group: str, after: tuple[int, str] | None
    ) -> Iterator[tuple[int, int]]:
        terms = query_terms(query)
        folded_group = fold_group(group)
        if folded_group and folded_group not in self._group_field.ids:
            return
        after_tier, start_id = -1, 0
        if after is not None:
            after_tier, after_name = after
            start_id = bisect_right(self._names, after_name)
        order = self._order
        sources = [_Term(self, term) for term in terms]
        allowed = self._group_field.bits(folded_group) if folded_group else self._everything
        # Per term, its fields computed so far, tier by tier; ``broad``: one is unknown.
        fields: list[list[Field]] = [[] for _ in sources]
        broad = [False] * len(sources)
        done = 0  # entries placed after a check with the rule
        checked: dict[int, int] = {}  # the tiers of the entries checked so far
        # Terms whose text fields are kept first (they cost a lookup), then the
        # longest first: a long term is usually the rarest.
        by_cost = sorted(range(len(sources)), key=lambda k: (not sources[k].kept(), -len(terms[k])))
        for tier in _TIERS:
            candidates = allowed & ~done
            if tier >= TIER_SUMMARY:  # counted below, to decide whether to list a field
                candidates &= ~self._below(fields, allowed, tier)
            exact = True
            for k in by_cost:
                listed = fields[k]
                if broad[k]:
                    exact = False
                    continue  # unknown: every entry, tested one by one
                if (
                    len(listed) <= tier
                    and tier >= TIER_SUMMARY
                    and candidates.bit_count() <= _SURVIVORS[tier]
                ):
                    # So few candidates left that testing the term on each costs less
                    # than listing its field: it waits for a later tier.
                    exact = False
                    continue
                while len(listed) <= tier:
                    listed.append(sources[k].field(len(listed)))
                superset = 0
                for field in listed:
                    if field.bits is None:
                        broad[k] = True
                        break
                    superset |= field.bits
                    exact = exact and field.exact
                if broad[k]:
                    exact = False
                else:
                    candidates &= superset
            if tier == TIER_SUMMARY and any(
                listed and all(field.bits == 0 for field in listed) and sources[k].in_no_text()
                for k, listed in enumerate(fields)
            ):
                return  # a term matches no name, no group and no text: nothing matches
            # Again, now that every term listed here has its fields below this tier (a
            # term left waiting earlier may have just had them computed).
            candidates &= ~self._below(fields, allowed, tier)
            if tier < after_tier or not candidates:
                continue
            start = start_id if tier == after_tier else 0
            if exact:
                for entry_id in ones_from(candidates, start):
                    yield tier, order[entry_id]
                continue
            placed: list[int] = []
            for entry_id in ones_from(candidates, start):
                # Known: its tier, or ``-2 - t`` when it was found worse than tier ``t``.
                found = checked.get(entry_id, _UNCHECKED)
                if found < 0 and -2 - found < tier:
                    # The rule itself, reading no field past this tier's.
                    found = self._tier_of(entry_id, terms, tier)
                    checked[entry_id] = -2 - tier if found == _NO_TIER else found
                if found == tier:
                    placed.append(entry_id)
                    yield tier, order[entry_id]
            # Checked, so certain: later tiers need not read them again.
            done |= bitset_of([placed], len(order))

    @staticmethod
    def _below(fields: list[list[Field]], allowed: int, tier: int) -> int:
        """Entries certainly of a better tier than ``tier``: those every term matches in
        an exact field below it (all of them, when every such field is exact)."""
        below = allowed
        for listed in fields:
            below &= union(field.bits for field in listed[:tier] if field.exact)  # type: ignore[misc]
        return below

    def _tier_of(self, entry_id: int, terms: tuple[str, ...], limit: int) -> int:
        """The entry's tier for ``terms`` by the rule itself, if at most ``limit``;
        otherwise ``_NO_TIER`` (fields past ``limit``, the documentation above all,
        are not read)."""
        fields = (
            self._name_f[entry_id],
            self._group_f[entry_id],
            self._summaries_f[entry_id],
            self._documents_f[entry_id],
        )
        worst = TIER_NAME
        for term in terms:
            found = 0
            while term not in fields[found]:
                found += 1
                if found > limit:
                    return _NO_TIER
            if found > worst:
                worst = found
        return worst
