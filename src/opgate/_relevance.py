"""The relevance ranking: field-weighted BM25 over an inverted index.

Each operation is five fields of words (``_tokens.words``), stemmed
(``_tokens.Stems``):

====================  ======================================================  ======
field                 text                                                    weight
====================  ======================================================  ======
name                  the operation name                                      ``NAME``
group                 the group                                               ``GROUP``
summary               the summary                                             ``SUMMARY``
parameters            the input schema's top-level property names and their  ``PARAMETERS``
                      ``title``/``description``
documentation         description, examples, source                           ``DOCUMENTATION``
====================  ======================================================  ======

A term's weight for an operation is BM25F (Robertson and Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009): its occurrences in each
field, each multiplied by the field's weight and divided by the field's length
normalization ``1 - b + b * length / average length``, are summed into ``tf``; the
weight is ``idf * tf / (k1 + tf)`` with ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``.
All of this is computed once, at construction: a term's postings are the ids of the
operations holding it and their weights.

A query's words are stemmed the same way. A query term absent from the vocabulary
matches the vocabulary terms it is a prefix of (at least ``PREFIX_MIN`` characters,
at most ``PREFIX_LIMIT`` of them, the most frequent first), at ``PREFIX_DISCOUNT``
of their weight: ``postgres`` meets ``postgresql``. An operation's score is the sum
of its terms' weights times the *coverage* factor ``(matched / terms) ** COVERAGE``:
every term need not match, but one matching all of them ranks above one matching
most. Ties break by the shorter name, then by name (``str`` order), so the order is
total and deterministic, and a keyset position (the last placed name) resumes it
exactly.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._parameters import parameter_text
from ._search import TIER_NAME, IndexEntry, Scope, SearchIndex, fold_group
from ._tokens import Stems, words

__all__ = ["RelevanceEntry", "RelevanceIndex", "parameter_text"]

#: Field weights, in field order: a word in the name says most about what the
#: operation does.
NAME = 3.0
GROUP = 1.5
SUMMARY = 1.5
PARAMETERS = 0.6
DOCUMENTATION = 0.4
_WEIGHTS = np.array([NAME, GROUP, SUMMARY, PARAMETERS, DOCUMENTATION])

#: The field numbers of name and group: a term found in either *names* the operation.
_GROUP_FIELD = 1

#: The name bonus: the score is multiplied by ``1 + NAMING * named / terms``, where
#: ``named`` counts the query terms found in the name or group.
NAMING = 1.0

#: The name precision bonus: the score is multiplied by ``1 + PRECISION * named /
#: name terms``, where ``name terms`` counts the distinct terms of the name and group:
#: an operation whose name the query explains entirely beats one whose name says more.
PRECISION = 2.0

#: The exact-word bonus: the score is multiplied by ``1 + SURFACE * exact / terms``,
#: where ``exact`` counts the query words found unstemmed in the name (``object``
#: prefers ``DeleteObject`` to ``DeleteObjects``).
SURFACE = 0.5

#: Abbreviations in names: a name term of at least ``ABBREVIATION_MIN`` characters
#: that begins a longer query term (``repo`` for ``repository``, ``org`` for
#: ``organization``, ``config`` for ``configuration``) matches it at ``ABBREVIATION``
#: of its weight.
ABBREVIATION_MIN = 3
ABBREVIATION = 0.5

#: BM25 saturation and length normalization.
K1 = 1.2
B = 0.75

#: The exponent of the coverage factor ``(matched / terms) ** COVERAGE``.
COVERAGE = 1.5

#: Prefix expansion of a query term missing from the vocabulary.
PREFIX_MIN = 3
PREFIX_LIMIT = 8
PREFIX_DISCOUNT = 0.5

#: The first results are ordered after a partial partition; the rest sort once, if
#: a caller pages that far.
_FIRST = 64

_Floats = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RelevanceEntry:
    """One operation's indexed texts: the search entry and its parameter text."""

    entry: IndexEntry
    parameters: str = ""


class RelevanceIndex:
    """The relevance ranking over one catalog (entries in name order, as the
    ``SearchIndex`` beside it, whose exact names, scopes and browsing it reuses)."""

    __slots__ = (
        "_entries",
        "_group_codes",
        "_groups",
        "_lengths",
        "_name_sizes",
        "_named",
        "_offsets",
        "_rule",
        "_stem_ids",
        "_stems",
        "_surface",
        "_vocabulary",
        "_weights",
    )

    def __init__(self, entries: Sequence[RelevanceEntry], rule: SearchIndex) -> None:
        self._rule = rule
        self._stems = stems = Stems()
        count = len(entries)
        stem_ids: dict[str, int] = {}
        word_ids: dict[str, int] = {}  # folded word -> term id (its stem's)
        groups: dict[str, int] = {}
        self._group_codes = np.array(
            [groups.setdefault(fold_group(item.entry.group), len(groups)) for item in entries],
            dtype=np.int32,
        )
        self._groups = groups
        self._lengths = np.array([len(item.entry.name) for item in entries], dtype=np.int64)
        columns = (
            [item.entry.name for item in entries],
            [item.entry.group for item in entries],
            [item.entry.summary for item in entries],
            [item.parameters for item in entries],
            [" ".join(item.entry.documents) for item in entries],
        )
        # Every word occurrence of every field: its term, its operation, and what it
        # contributes to BM25F's tf (the field's weight over its length normalization).
        all_keys: list[_Ints] = []
        all_parts: list[_Floats] = []
        all_named: list[npt.NDArray[np.bool_]] = []
        surface: dict[str, list[int]] = {}
        ids = np.arange(count, dtype=np.int64)
        for field, texts in enumerate(columns):
            found: list[str] = []
            sizes = array("i")
            for text in texts:
                spelled = words(text) if text else []
                found += spelled
                sizes.append(len(spelled))
            if not found:
                continue
            lengths = np.frombuffer(sizes, dtype=np.int32).astype(np.int64)
            owners = np.repeat(ids, lengths)
            if field == 0:
                for word, owner in zip(found, owners.tolist(), strict=True):
                    surface.setdefault(word, []).append(owner)
            average = max(len(found) / max(count, 1), 1.0)
            part = _WEIGHTS[field] / (1 - B + B * lengths / average)
            new = sorted(set(found).difference(word_ids))
            for word, stem in zip(new, stems.many(new), strict=True):
                word_ids[word] = stem_ids.setdefault(stem, len(stem_ids))
            terms = np.fromiter(map(word_ids.__getitem__, found), dtype=np.int64, count=len(found))
            all_keys.append(terms * count + owners)
            all_parts.append(np.repeat(part, lengths))
            all_named.append(np.full(len(found), field <= _GROUP_FIELD))
        self._surface = {word: np.array(listed, dtype=np.intp) for word, listed in surface.items()}
        self._stem_ids = stem_ids
        vocabulary = sorted(stem_ids)
        self._vocabulary = vocabulary
        size = len(stem_ids)
        if not all_keys:
            self._offsets = np.zeros(size + 1, dtype=np.int64)
            self._entries = np.zeros(0, dtype=np.int64)
            self._weights = np.zeros(0)
            self._named = np.zeros(0, dtype=bool)
            self._name_sizes = np.ones(count)
            return
        keys = np.concatenate(all_keys)
        contribution = np.concatenate(all_parts)
        named_at = np.concatenate(all_named)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        tf = np.add.reduceat(contribution[order], starts)
        self._named = np.logical_or.reduceat(named_at[order], starts)
        keys = keys[starts]
        term_of = keys // count
        df = np.bincount(term_of, minlength=size)
        idf = np.log(1 + (count - df + 0.5) / (df + 0.5))
        self._weights = idf[term_of] * tf / (K1 + tf)
        self._entries = keys % count
        self._name_sizes = np.maximum(
            np.bincount(self._entries[self._named], minlength=count), 1
        ).astype(np.float64)
        self._offsets = np.concatenate(([0], np.cumsum(df)))

    def __len__(self) -> int:
        return len(self._lengths)

    def __repr__(self) -> str:
        return f"RelevanceIndex(<{len(self._lengths)} entries, {len(self._vocabulary)} terms>)"

    def terms(self, query: str) -> list[str]:
        """The query's distinct stems, in first-seen order."""
        return list(dict.fromkeys(map(self._stems, words(query))))

    def _expansions(self, term: str) -> list[int]:
        """The ids of the vocabulary terms that ``term`` (not in it) is a prefix of."""
        if len(term) < PREFIX_MIN:
            return []
        vocabulary, ids, offsets = self._vocabulary, self._stem_ids, self._offsets
        first = bisect_left(vocabulary, term)
        end = bisect_left(vocabulary, term + "\U0010ffff", first)
        found = [ids[stem] for stem in vocabulary[first:end]]
        if len(found) > PREFIX_LIMIT:
            found.sort(key=lambda t: (int(offsets[t]) - int(offsets[t + 1]), vocabulary[t]))
            found = found[:PREFIX_LIMIT]
        return found

    def _abbreviations(self, term: str) -> list[int]:
        """The ids of the vocabulary terms that begin ``term`` (shorter, at least
        ``ABBREVIATION_MIN`` characters)."""
        ids = self._stem_ids
        return [
            ids[term[:size]] for size in range(ABBREVIATION_MIN, len(term)) if term[:size] in ids
        ]

    def scores(self, query: str) -> tuple[_Ints, _Floats]:
        """The entries sharing a term with ``query`` (ascending ids) and their scores."""
        found_words = words(query)
        by_term: dict[str, set[str]] = {}
        for word in found_words:
            by_term.setdefault(self._stems(word), set()).add(word)
        count = len(self._lengths)
        total = np.zeros(count)
        matched = np.zeros(count, dtype=np.int16)
        named = np.zeros(count, dtype=np.int16)
        exact = np.zeros(count, dtype=np.int16)
        offsets, entries, weights, names = self._offsets, self._entries, self._weights, self._named
        for term, spellings in by_term.items():
            for word in spellings:
                listed = self._surface.get(word)
                if listed is not None:
                    exact[listed] += 1
                    break
            known = self._stem_ids.get(term)
            # (term id, discount, names only) sources of this term's weight
            sources = [(known, 1.0, False)] if known is not None else []
            sources += [(t, ABBREVIATION, True) for t in self._abbreviations(term)]
            if not sources:
                sources = [(t, PREFIX_DISCOUNT, False) for t in self._expansions(term)]
                if not sources:
                    continue
            if known is not None and len(sources) == 1:
                first, end = offsets[known], offsets[known + 1]
                ids = entries[first:end]
                total[ids] += weights[first:end]
                matched[ids] += 1
                named[ids] += names[first:end]
                continue
            best = np.zeros(count)
            naming = np.zeros(count, dtype=bool)
            for source, discount, only_names in sources:
                first, end = offsets[source], offsets[source + 1]
                ids, values, flags = entries[first:end], weights[first:end], names[first:end]
                if only_names:
                    ids, values, flags = ids[flags], values[flags], flags[flags]
                best[ids] = np.maximum(best[ids], values * discount)
                naming[ids] |= flags
            total += best
            matched += best > 0
            named += naming
        found = np.flatnonzero(matched)
        size = max(len(by_term), 1)
        steps = np.arange(size + 1) / size
        coverage = steps**COVERAGE
        bonus = 1 + NAMING * steps
        spelled = 1 + SURFACE * steps
        hits = named[found]
        precision = 1 + PRECISION * hits / self._name_sizes[found]
        return found, (
            total[found]
            * coverage[matched[found]]
            * bonus[hits]
            * precision
            * spelled[np.minimum(exact[found], size)]
        )

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(0, entry index)`` for every entry sharing a term with ``query``, best
        first; the same contract as ``SearchIndex.ranked`` (``after`` holds the last
        placed name; an empty query browses by name through the rule's index)."""
        if not self.terms(query):
            return self._rule.ranked(query, group, after, scope=scope)
        return self._ranked(query, group, after, scope)

    def _ranked(
        self, query: str, group: str, after: tuple[int, str] | None, scope: Scope | None
    ) -> Iterator[tuple[int, int]]:
        found, scores = self.scores(query)
        if group:
            code = self._groups.get(fold_group(group))
            if code is None:
                return
            keep = self._group_codes[found] == code
            found, scores = found[keep], scores[keep]
        if scope is not None:
            member = np.zeros(len(self._lengths), dtype=bool)
            member[list(scope.members)] = True
            keep = member[found]
            found, scores = found[keep], scores[keep]
        lengths = self._lengths
        if after is not None:
            last = self._rule.exact(after[1])
            if last is None:  # pragma: no cover - cursors carry names of this catalog
                return
            at = np.flatnonzero(found == last)
            score = float(scores[at[0]]) if len(at) else 0.0
            size = lengths[last]
            own = lengths[found]
            keep = (scores < score) | (
                (scores == score) & ((own > size) | ((own == size) & (found > last)))
            )
            found, scores = found[keep], scores[keep]
        yield from self._ordered(found, scores)

    def _ordered(self, found: _Ints, scores: _Floats) -> Iterator[tuple[int, int]]:
        """``found`` by descending score, then shorter name, then name (id order)."""
        lengths = self._lengths
        if len(found) > _FIRST:
            floor = np.partition(scores, len(scores) - _FIRST)[len(scores) - _FIRST]
            head = scores >= floor
            chosen, chosen_scores = found[head], scores[head]
            order = np.lexsort((chosen, lengths[chosen], -chosen_scores))
            for entry_id in chosen[order].tolist():
                yield TIER_NAME, entry_id
            rest = ~head
            found, scores = found[rest], scores[rest]
        order = np.lexsort((found, lengths[found], -scores))
        for entry_id in found[order].tolist():
            yield TIER_NAME, entry_id
