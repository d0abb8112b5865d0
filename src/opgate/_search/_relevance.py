"""The relevance ranking: field-weighted BM25 over an inverted index.

Each operation is four fields of words (``_tokens.words``), stemmed
(``_tokens.Stems``):

====================  ======================================================  ======
field                 text                                                    weight
====================  ======================================================  ======
name                  the operation name                                      ``NAME``
group                 the group                                               ``GROUP``
summary               the summary                                             ``SUMMARY``
documentation         description, examples, source                           ``DOCUMENTATION``
====================  ======================================================  ======

Schemas are not indexed (spec 003: "Schemas are excluded from the index and pages"):
a host that wants a parameter name found writes it in the examples or the description.

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
of their weight: ``postgres`` meets ``postgresql``. A query term also matches, in
names and groups only and at a discount, the name terms that abbreviate it (prefixes,
and short contractions the catalog attests: ``db`` for ``database``), those spelled as
its word's derivations (``subscript`` for ``subscrib``), those the catalog associates
with a rare term (``contain`` for ``kubernet``, ``ASSOCIATIONS``) and the generic
verbs of its ``_thesaurus`` group (``list`` meets ``describe``); each operation takes
the best of a term's sources. An operation's score is the sum
of its terms' weights times the *coverage* factor ``(matched / terms) ** COVERAGE``:
every term need not match, but one matching all of them ranks above one matching
most. Ties break by the shorter name, then by name (``str`` order), so the order is
total and deterministic, and a keyset position (the last placed name) resumes it
exactly.
"""

from __future__ import annotations

import functools
import itertools
import re
from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._index import TIER_NAME, IndexEntry, Scope, SearchIndex, fold_group
from ._thesaurus import SYNONYM, alternatives
from ._tokens import (
    DERIVATION_PREFIX,
    DERIVATION_SUFFIX,
    FILLER_WORDS,
    Stems,
    chunk_words,
    content_words,
    segment,
    words,
)
from ._tokens import STOP_WORDS as STOP_WORD_SET

__all__ = ["TABLES", "RelevanceEntry", "RelevanceIndex"]

#: Field weights, in field order: a word in the name says most about what the
#: operation does.
NAME = 3.0
GROUP = 1.5
SUMMARY = 1.5
DOCUMENTATION = 0.4
_WEIGHTS = np.array([NAME, GROUP, SUMMARY, DOCUMENTATION])

#: The field numbers of name and group: a term found in either *names* the operation.
_GROUP_FIELD = 1

#: The name bonus of a keyword query (``REQUEST_NAMING`` for a request): the score is
#: multiplied by ``1 + NAMING * named / terms``, where ``named`` counts the query terms
#: found in the name or group.
NAMING = 1.0

#: The name bonus of a request (more than ``KEYWORD_QUERY`` words): ``named / terms``
#: shrinks as a request grows, and a request's name matches would otherwise count for
#: little beside the words it matches in long descriptions.
REQUEST_NAMING = 4.0

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

#: Contractions in names (``_contractions``): name terms of ``CONTRACTION_SIZES``
#: letters spelling a query term of at most ``CONTRACTION_SOURCE_MAX`` letters, kept
#: when at least ``ATTESTED_NAMES`` operations name them and the share of those using
#: the full term is at least ``LIFT`` times its share over the catalog; they weigh as
#: abbreviations.
CONTRACTIONS = True
CONTRACTION_SIZES = (2, 4)
CONTRACTION_SOURCE_MAX = 12
ATTESTED_NAMES = 5
LIFT = 8.0

#: Whether derivations in names match (``_tokens.derivations``): a name or group term
#: spelled as a derivation of a query term's word (``subscript``, the stem of
#: *subscription*, for ``subscrib``, of *subscribe*) matches it as an abbreviation does,
#: at ``ABBREVIATION`` of its weight.
DERIVATIONS = True
#: The most derivations one query term matches (the name terms most used first): a
#: catalog of many names sharing a beginning (``connectoraab``, ``connectoraac``...)
#: would otherwise make one term a source per name term.
DERIVATION_LIMIT = 8

#: Whether the stop words (``_tokens.REQUEST_STOP_WORDS``) of a query of more than
#: ``KEYWORD_QUERY`` words are dropped (``content_words``): such a query is a request
#: written as a sentence, whose function words say nothing about the operation. A
#: shorter query is keywords, and keeps them: there a function word is usually part of
#: a name (``cost and usage`` for ``GetCostAndUsage``).
#: (A switch for the evaluation's figures with and without it.)
STOP_WORDS = True
KEYWORD_QUERY = 4

#: Whether a keyword query's fillers (``_tokens.FILLER_WORDS``: pronouns, determiners,
#: auxiliaries) leave coverage out: such a word adds its weight and its name matches, but
#: an operation does not cover more of the query by having ``this`` or ``your`` in its
#: documentation, nor becomes a candidate by it alone (a query of nothing but fillers
#: counts them all).
FILLERS = True

#: Whether words written as one (``runpagespeed``, ``wordcloud``) are cut into the
#: catalog's words (``_tokens.segment``): a name or group word into pieces each more
#: frequent in the catalog than the word itself, added to its field beside it; a query
#: word the catalog never uses into words it does, searched instead of it.
COMPOUNDS = True

#: Whether two adjacent query words the catalog writes as one (``pub sub`` for
#: ``pubsub``) are searched as that word instead (``_joined``): when the joined word is
#: a name or group term that the catalog uses more often than either word, neither a
#: stop word. The converse of ``COMPOUNDS``' cut, which splits a word into pieces each
#: more frequent than it.
JOINS = True

#: Whether query verbs also match their generic alternatives (``_thesaurus``).
#: (A switch for the evaluation's figures with and without it.)
THESAURUS = True

#: Associations (``_associations``): a rare query term (used by at most
#: ``ASSOCIATION_USE`` of the operations, and in at most ``ASSOCIATION_NAMED`` names or
#: groups) also matches, in names and groups only and at ``ASSOCIATION`` of their
#: weight, the name and group terms the catalog attests for it: held by at least
#: ``ASSOCIATED_NAMES`` of the operations using the term, at least
#: ``ASSOCIATION_SHARE`` of them and ``ASSOCIATION_LIFT`` times the name term's share of
#: the whole catalog; at most ``ASSOCIATION_LIMIT``, the most shared first. The
#: catalog names a concept differently from the documentation that explains it
#: (``kubernetes`` in the documentation of a ``container`` API's operations).
ASSOCIATIONS = True
ASSOCIATION = 0.25
ASSOCIATION_USE = 0.01
ASSOCIATION_NAMED = 2
ASSOCIATED_NAMES = 5
ASSOCIATION_SHARE = 0.2
ASSOCIATION_LIFT = 8.0
ASSOCIATION_LIMIT = 3

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

#: Chunks looked up at once while reading a field's texts, and operations whose
#: postings are built at once: construction's transient arrays stay a few MiB however
#: large the catalog (freed memory the C allocator keeps counts in the RSS).
_CHUNKS = 1 << 15
_BLOCK = 1 << 10

#: The words ``_joins`` joins: ASCII letters only, as ``_tokens.segment`` cuts.
_LETTERS = re.compile(r"[a-z]+")

_Floats = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.signedinteger[Any]]


@dataclass(frozen=True, slots=True)
class RelevanceEntry:
    """One operation's indexed texts: its search entry."""

    entry: IndexEntry


def _expand(offsets: _Ints, values: _Ints, ids: _Ints) -> tuple[_Ints, _Ints]:
    """The concatenation of ``values[offsets[i]:offsets[i + 1]]`` for each ``i`` of
    ``ids`` (a CSR gather), and each one's size; gathered about ``_CHUNKS`` values at a
    time."""
    sizes = (offsets[1:] - offsets[:-1])[ids]
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    found = np.empty(total, dtype=values.dtype)
    cuts = np.searchsorted(ends, np.arange(_CHUNKS, total, _CHUNKS), side="right")
    for first, end in itertools.pairwise([0, *np.unique(cuts).tolist(), len(ids)]):
        if end <= first:
            continue
        counts, last = sizes[first:end], ends[first:end]
        low, high = int(last[0] - counts[0]), int(last[-1])
        # each output position, minus where its id's values start in the output, plus
        # where they start in ``values``
        gather = np.arange(low, high) + np.repeat(offsets[ids[first:end]] - (last - counts), counts)
        found[low:high] = values[gather]
    return found, sizes


def _postings_block(
    first: int,
    end: int,
    occurrences: list[tuple[_Ints, _Ints]],
    stems_of: list[_Ints],
    pieces: tuple[_Ints, _Ints] | None,
    parts: _Floats,
) -> tuple[_Ints, _Ints, _Floats, npt.NDArray[np.bool_]]:
    """The postings of operations ``first`` to ``end``: their (term, operation) pairs in
    that order (terms and operations), each pair's tf and whether it is named.

    Every word occurrence of every field is one integer key, (term, operation, field)
    in that order of significance: sorting the keys (values, not an argsort) groups
    each term's operations, and the field gives what the occurrence adds to the tf
    (``parts``); the sums run in key order (fields ascending), the same on every
    replica and whatever the blocks."""
    count = parts.shape[1]
    fields = len(occurrences)
    keys: list[_Ints] = []
    for field, ((found, offsets), stems) in enumerate(zip(occurrences, stems_of, strict=True)):
        low, high = int(offsets[first]), int(offsets[end])
        if high == low:
            continue
        owners = np.repeat(np.arange(first, end), np.diff(offsets[first : end + 1]))
        keys.append((stems[low:high].astype(np.int64) * count + owners) * fields + field)
        if field <= _GROUP_FIELD and pieces is not None:
            # a compound's pieces count as occurrences of the field beside it
            cut, sizes = _expand(*pieces, found[low:high])
            if len(cut):
                keys.append((cut * count + np.repeat(owners, sizes)) * fields + field)
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), np.zeros(0, dtype=bool)
    ordered = np.sort(np.concatenate(keys))
    field_of = ordered % fields
    pairs = ordered // fields  # term * count + operation
    starts = np.flatnonzero(np.concatenate(([True], pairs[1:] != pairs[:-1])))
    tf = np.add.reduceat(parts[field_of, pairs % count], starts)
    # the first occurrence of each pair has its lowest field
    named = field_of[starts] <= _GROUP_FIELD
    pairs = pairs[starts]
    return (pairs // count).astype(np.int32), pairs % count, tf, named


class _Vocabulary:
    """The words of a catalog's texts, each tokenized and stemmed once.

    Texts are split on whitespace first (``str.split``, which never cuts a word:
    ``words`` never spans whitespace) and each distinct chunk is split into words once:
    a catalog's documentation repeats its chunks (about 28k distinct in 707k at 20k
    AWS operations). Each distinct folded word gets an id and is stemmed once. Word
    and stem ids are ``int32`` (a catalog has far fewer than 2**31 words).
    """

    __slots__ = (
        "_chunk_ids",
        "_chunk_offsets",
        "_chunk_words",
        "_stem_of",
        "_stems",
        "stem_ids",
        "word_ids",
    )

    def __init__(self, stems: Stems) -> None:
        self._stems = stems
        self._chunk_ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self._chunk_words = array("i")  # the word ids of every distinct chunk, in order
        self._chunk_offsets = array("q", [0])  # where each chunk's words begin
        self.word_ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self.stem_ids: dict[str, int] = {}
        self._stem_of = array("i")  # word id -> stem id

    def occurrences(self, texts: Sequence[str]) -> tuple[_Ints, _Ints]:
        """The word ids of every word of ``texts``, in order, and where each text's
        words begin among them (``len(texts) + 1`` offsets). Each distinct text is read
        once (documentation repeats), its chunks about ``_CHUNKS`` at a time: a string
        per chunk occurrence lives only while its batch is read."""
        text_ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        codes = np.fromiter(map(text_ids.__getitem__, texts), np.int64, len(texts))
        read: list[_Ints] = []  # the words of the distinct texts, a batch at a time
        sizes: list[int] = []  # how many each distinct text has
        chunks: list[str] = []
        ends = array("q")  # where each text of the batch ends among its chunks
        for text in text_ids:
            chunks += text.split()
            ends.append(len(chunks))
            if len(chunks) >= _CHUNKS:
                self._read(chunks, ends, read, sizes)
                chunks.clear()
                del ends[:]
        self._read(chunks, ends, read, sizes)
        del chunks, ends
        text_offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        found, counts = _expand(text_offsets, np.concatenate(read), codes)
        return found, np.concatenate(([0], np.cumsum(counts)))

    def _read(
        self, chunks: list[str], ends: array[int], read: list[_Ints], sizes: list[int]
    ) -> None:
        """Append the words of a batch of texts (``chunks``, each text ending at its
        ``ends``) to ``read`` and each text's number of words to ``sizes``, learning the
        new chunks."""
        known = len(self._chunk_ids)
        ids = np.fromiter(map(self._chunk_ids.__getitem__, chunks), np.int32, len(chunks))
        if len(self._chunk_ids) > known:
            self._learn(list(itertools.islice(self._chunk_ids, known, None)))
        found, counts = _expand(
            np.frombuffer(self._chunk_offsets, dtype=np.int64),
            np.frombuffer(self._chunk_words, dtype=np.int32),
            ids,
        )
        read.append(found)
        at = np.concatenate(([0], np.cumsum(counts)))[np.frombuffer(ends, dtype=np.int64)]
        sizes += np.diff(at, prepend=0).tolist()

    def _learn(self, chunks: list[str]) -> None:
        word_ids, chunk_words_, chunk_offsets = (
            self.word_ids,
            self._chunk_words,
            self._chunk_offsets,
        )
        known = len(word_ids)
        found, sizes = chunk_words(chunks)
        chunk_words_.extend(map(word_ids.__getitem__, found))
        ends = itertools.accumulate(sizes, initial=chunk_offsets[-1])
        chunk_offsets.extend(itertools.islice(ends, 1, None))
        if len(word_ids) > known:
            new = list(itertools.islice(word_ids, known, None))
            stem_ids = self.stem_ids
            self._stem_of.extend(
                stem_ids.setdefault(stem, len(stem_ids)) for stem in self._stems.many(new)
            )

    def stem_of(self, found: _Ints) -> _Ints:
        """The stem ids of word ids."""
        return np.frombuffer(self._stem_of, dtype=np.int32)[found]


class RelevanceIndex:
    """The relevance ranking over one catalog (entries in name order, as the
    ``SearchIndex`` beside it, whose exact names it reuses to resume after a cursor)."""

    __slots__ = (
        "_associated",
        "_contracted",
        "_counts",
        "_derived",
        "_entries",
        "_group_codes",
        "_groups",
        "_lengths",
        "_name_entries",
        "_name_offsets",
        "_name_sizes",
        "_name_term_offsets",
        "_name_terms",
        "_name_weights",
        "_named",
        "_offsets",
        "_rule",
        "_short_names",
        "_stem_ids",
        "_stems",
        "_surface",
        "_surface_offsets",
        "_synonyms",
        "_vocabulary",
        "_vocabulary_ids",
        "_weights",
        "_word_ids",
    )

    def __init__(self, entries: Sequence[RelevanceEntry], rule: SearchIndex) -> None:
        self._rule = rule
        self._stems = stems = Stems()
        self._query_state()
        count = len(entries)
        groups: dict[str, int] = {}
        self._group_codes = np.array(
            [groups.setdefault(fold_group(item.entry.group), len(groups)) for item in entries],
            dtype=np.int32,
        )
        self._groups = groups
        self._lengths = np.array([len(item.entry.name) for item in entries], dtype=np.int64)
        documents = [item.entry.documents for item in entries]
        columns = (
            [item.entry.name for item in entries],
            [item.entry.group for item in entries],
            [item.entry.summary for item in entries],
            # each document a text of its own: words never span whitespace, so the
            # words of the documents are those of their join
            list(itertools.chain.from_iterable(documents)),
        )
        vocabulary = _Vocabulary(stems)
        # Per field, the word ids of every occurrence in operation order and where each
        # operation's begin (CSR by operation).
        occurrences = [vocabulary.occurrences(texts) for texts in columns]
        del columns
        found, offsets = occurrences[-1]
        by_document = np.fromiter(map(len, documents), np.int64, count)
        occurrences[-1] = (found, offsets[np.concatenate(([0], np.cumsum(by_document)))])
        del documents, by_document, found, offsets
        stems_of = [vocabulary.stem_of(found) for found, _ in occurrences]
        # how often each stem occurs in the catalog, for cutting compounds
        self._counts = np.bincount(np.concatenate(stems_of), minlength=len(vocabulary.stem_ids))
        self._word_ids = dict(vocabulary.word_ids)  # read-only from here: no default
        self._stem_ids = stem_ids = vocabulary.stem_ids
        pieces = self._compounds(
            np.concatenate([found for found, _ in occurrences[: _GROUP_FIELD + 1]]),
            vocabulary,
        )
        del vocabulary
        # What one occurrence adds to BM25F's tf, per field and operation: the field's
        # weight over the operation's length normalization in that field.
        fields = len(occurrences)
        parts = np.zeros((fields, count))
        lengths = [np.diff(offsets) for _, offsets in occurrences]
        for field, (found, _) in enumerate(occurrences):
            average = max(len(found) / max(count, 1), 1.0)
            parts[field] = _WEIGHTS[field] / (1 - B + B * lengths[field] / average)
        # short alphabetic terms: the candidates for contractions (found on first use)
        low, high = CONTRACTION_SIZES
        self._short_names = {
            stem: known
            for stem, known in stem_ids.items()
            if low <= len(stem) <= high and stem.isalpha()
        }
        # the operations whose names hold each folded word (CSR by word id)
        name_words = occurrences[0][0]
        order = np.argsort(name_words, kind="stable")
        self._surface = np.repeat(np.arange(count), lengths[0])[order]
        self._surface_offsets = np.concatenate(
            ([0], np.cumsum(np.bincount(name_words, minlength=len(self._word_ids))))
        )
        del name_words, order
        self._vocabulary = sorted(stem_ids)
        self._vocabulary_ids = np.fromiter(
            (stem_ids[stem] for stem in self._vocabulary), np.int64, len(stem_ids)
        )
        size = len(stem_ids)
        # The postings, a block of operations at a time: each block's (term, operation)
        # pairs in order, their tf and whether the name or group holds the term.
        blocks = [
            _postings_block(first, min(first + _BLOCK, count), occurrences, stems_of, pieces, parts)
            for first in range(0, count, _BLOCK)
        ]
        del occurrences, stems_of, pieces, parts, lengths
        if not blocks or not sum(len(block[0]) for block in blocks):
            self._offsets = np.zeros(size + 1, dtype=np.int64)
            self._entries = np.zeros(0, dtype=np.int64)
            self._weights = np.zeros(0)
            self._named = np.zeros(0, dtype=bool)
            self._name_sizes = np.ones(count)
            self._name_offsets = self._offsets
            self._name_entries, self._name_weights = self._entries, self._weights
            self._name_terms = np.zeros(0, dtype=np.int32)
            self._name_term_offsets = np.zeros(count + 1, dtype=np.int64)
            self._derived = {}
            return
        # Each block's pairs go after the earlier blocks' pairs of their terms: blocks
        # hold ascending operations, so the postings end up by (term, operation), as
        # one sort of every occurrence would order them.
        df = np.zeros(size, dtype=np.int64)
        for block in blocks:
            df += np.bincount(block[0], minlength=size)
        self._offsets = np.concatenate(([0], np.cumsum(df)))
        total = int(self._offsets[-1])
        term_of = np.empty(total, dtype=np.int32)
        self._entries = np.empty(total, dtype=np.int64)
        tf = np.empty(total)
        self._named = np.empty(total, dtype=bool)
        filled = self._offsets[:-1].copy()
        while blocks:
            terms, operations, sums, named = blocks.pop(0)
            # a block's pairs are sorted by term: each one's rank among its term's
            group = np.flatnonzero(np.concatenate(([True], terms[1:] != terms[:-1])))
            rank = np.arange(len(terms)) - np.repeat(group, np.diff(group, append=len(terms)))
            at = filled[terms] + rank
            term_of[at], self._entries[at], tf[at], self._named[at] = (
                terms,
                operations,
                sums,
                named,
            )
            filled += np.bincount(terms, minlength=size)
        idf = np.log(1 + (count - df + 0.5) / (df + 0.5))
        # idf * tf / (k1 + tf), in place
        self._weights = idf[term_of]
        self._weights *= tf
        tf += K1
        self._weights /= tf
        del tf
        # the postings restricted to names and groups, for the sources matching only there
        named_terms = term_of[self._named]
        self._name_offsets = np.concatenate(
            ([0], np.cumsum(np.bincount(named_terms, minlength=size)))
        )
        self._name_entries = self._entries[self._named]
        self._name_weights = self._weights[self._named]
        self._derived = self._derivation_table()
        # the name and group terms of each operation (CSR by operation), for associations
        per_operation = np.bincount(self._name_entries, minlength=count)
        self._name_sizes = np.maximum(per_operation, 1).astype(np.float64)
        order = np.argsort(self._name_entries, kind="stable")
        self._name_terms = named_terms[order]
        self._name_term_offsets = np.concatenate(([0], np.cumsum(per_operation)))

    def _query_state(self) -> None:
        """What queries read and learn beside the tables: the thesaurus over this
        index's stemmer, and the contractions and associations found on first use."""
        self._synonyms = alternatives(self._stems)
        self._contracted: dict[str, list[int]] = {}
        self._associated: dict[int, list[int]] = {}

    def tables(self) -> dict[str, object]:
        """What this index's build computed from its entries alone (``TABLES``, and the
        catalog's words with their stems as ``"_stems"``): the arrays themselves, not
        copies. ``from_tables`` makes the same index of them."""
        found: dict[str, object] = {slot: getattr(self, slot) for slot in TABLES}
        found["_stems"] = self._stems.known()
        return found

    @classmethod
    def from_tables(cls, tables: dict[str, Any], rule: SearchIndex) -> RelevanceIndex:
        """The index whose build computed ``tables`` (``tables()``, possibly of an index
        built elsewhere: ``_index_build``), beside ``rule``."""
        index = cls.__new__(cls)
        for slot in TABLES:
            setattr(index, slot, tables[slot])
        index._rule = rule
        index._stems = Stems(tables["_stems"])
        index._query_state()
        return index

    def _derivation_table(self) -> dict[str, list[int]]:
        """The name and group terms ``_derivations`` may return, by beginning: each
        term of ASCII letters under its beginnings of ``DERIVATION_PREFIX`` letters or
        more that leave at most ``DERIVATION_SUFFIX`` of its letters after them, the
        terms used in most names first (then by id). Two terms are derivations of each other
        (``_tokens.derivations``) exactly when one of the beginnings of the query
        term that leave it at most ``DERIVATION_SUFFIX`` letters is one of these."""
        offsets = self._name_offsets
        table: dict[str, list[int]] = {}
        for stem, known in self._stem_ids.items():
            if (
                len(stem) < DERIVATION_PREFIX
                or offsets[known + 1] == offsets[known]
                or _LETTERS.fullmatch(stem) is None
            ):
                continue
            for size in range(max(DERIVATION_PREFIX, len(stem) - DERIVATION_SUFFIX), len(stem) + 1):
                table.setdefault(stem[:size], []).append(known)
        for found in table.values():
            found.sort(key=lambda t: (int(offsets[t]) - int(offsets[t + 1]), t))
        return table

    def _compounds(self, found: _Ints, vocabulary: _Vocabulary) -> tuple[_Ints, _Ints] | None:
        """The pieces of the compound words among ``found`` (word ids of names and
        groups), as stem ids in CSR form by word id, or ``None`` if there are none
        (``COMPOUNDS``): a word is cut when each of its pieces occurs more often in the
        catalog than the word itself."""
        if not COMPOUNDS or not len(found):
            return None
        spelled = list(self._word_ids)
        stem_of = np.frombuffer(vocabulary._stem_of, dtype=np.int32)
        counts = self._counts
        cut: dict[int, list[int]] = {}
        for word_id in np.unique(found).tolist():
            found_pieces = segment(
                spelled[word_id], functools.partial(self._commoner, int(counts[stem_of[word_id]]))
            )
            if found_pieces is not None:
                cut[word_id] = [self._stem_ids[self._stems(piece)] for piece in found_pieces]
        if not cut:
            return None
        sizes = np.zeros(len(spelled), dtype=np.int64)
        for word_id, stems_ in cut.items():
            sizes[word_id] = len(stems_)
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        values = np.fromiter(
            (stem for word_id in sorted(cut) for stem in cut[word_id]), np.int64, int(offsets[-1])
        )
        return offsets, values

    def _commoner(self, than: int, word: str) -> int:
        """How much more often the catalog uses ``word`` (``_frequency``) than ``than``."""
        return self._frequency(word) - than

    def _frequency(self, word: str) -> int:
        """How often the catalog uses ``word``'s stem, if it uses ``word`` (folded) at all
        and it is not a stop word (never a piece of a compound: ``forget`` is no ``for
        get``)."""
        if word not in self._word_ids or word in STOP_WORD_SET:
            return 0
        return int(self._counts[self._stem_ids[self._stems(word)]])

    def _pieces(self, word: str) -> list[str]:
        """``word``, or the catalog's words it is written of if the catalog never uses it
        (``COMPOUNDS``)."""
        if not COMPOUNDS or self._stems(word) in self._stem_ids:
            return [word]
        return segment(word, self._frequency) or [word]

    def __len__(self) -> int:
        return len(self._lengths)

    def __repr__(self) -> str:
        return f"RelevanceIndex(<{len(self._lengths)} entries, {len(self._vocabulary)} terms>)"

    def terms(self, query: str) -> list[str]:
        """The query's distinct stems, in first-seen order."""
        return list(dict.fromkeys(map(self._stems, self._query_words(query)[0])))

    def _query_words(self, query: str) -> tuple[list[str], bool]:
        """The words a query searches with — a request's without its stop words
        (``_tokens.REQUEST_STOP_WORDS``, when ``STOP_WORDS`` is on), compounds the
        catalog never uses cut into words it does (``_pieces``) — and whether it is a
        request (more than ``KEYWORD_QUERY`` words)."""
        found = words(query)
        request = len(found) > KEYWORD_QUERY
        if JOINS:
            found = self._joined(found)
        if STOP_WORDS and request:
            found = content_words(found)
        return [piece for word in found for piece in self._pieces(word)], request

    def _joined(self, found: list[str]) -> list[str]:
        """``found`` with each pair of adjacent words that the catalog writes as one
        (``JOINS``) replaced by that word, left to right."""
        joined: list[str] = []
        at = 0
        while at < len(found):
            if at + 1 < len(found) and self._joins(found[at], found[at + 1]):
                joined.append(found[at] + found[at + 1])
                at += 2
            else:
                joined.append(found[at])
                at += 1
        return joined

    def _joins(self, first: str, second: str) -> bool:
        """Whether ``first`` and ``second`` are a word of the catalog's names or groups
        written in two (``JOINS``): the catalog uses their join, as a name or group term,
        more often than either of them, and neither is a stop word."""
        word = first + second
        if (
            word not in self._word_ids  # the cheap test first: most pairs stop here
            or first in STOP_WORD_SET
            or second in STOP_WORD_SET
            or _LETTERS.fullmatch(word) is None
        ):
            return False
        term = self._stem_ids[self._stems(word)]
        if self._name_offsets[term + 1] == self._name_offsets[term]:
            return False
        often = self._frequency(word)
        return self._frequency(first) < often and self._frequency(second) < often

    def _expansions(self, term: str) -> list[int]:
        """The ids of the vocabulary terms that ``term`` (not in it) is a prefix of: at
        most ``PREFIX_LIMIT``, those with the most postings first, then alphabetically."""
        if len(term) < PREFIX_MIN:
            return []
        vocabulary = self._vocabulary
        first = bisect_left(vocabulary, term)
        end = bisect_left(vocabulary, term + "\U0010ffff", first)
        found = self._vocabulary_ids[first:end]
        if len(found) > PREFIX_LIMIT:
            postings = self._offsets[found + 1] - self._offsets[found]
            # a stable sort of terms in vocabulary order: ties stay alphabetical
            found = found[np.argsort(-postings, kind="stable")[:PREFIX_LIMIT]]
        return found.tolist()  # type: ignore[no-any-return]

    def _abbreviations(self, term: str) -> list[int]:
        """The ids of the vocabulary terms that begin ``term`` (shorter, at least
        ``ABBREVIATION_MIN`` characters), then of the short name terms the catalog
        attests as its contractions (``_contractions``)."""
        ids = self._stem_ids
        found = [
            ids[term[:size]] for size in range(ABBREVIATION_MIN, len(term)) if term[:size] in ids
        ]
        if CONTRACTIONS:
            found += [t for t in self._contractions(term) if t not in found]
        return found

    def _derivations(self, term: str) -> list[int]:
        """The ids of the name and group terms spelled as derivations of ``term``'s word
        (``_tokens.derivations``), at most ``DERIVATION_LIMIT`` of them, the most used in
        names first: a few dictionary look-ups (``_derivation_table``), whatever the
        catalog's vocabulary."""
        if len(term) < DERIVATION_PREFIX or _LETTERS.fullmatch(term) is None:
            return []
        known = self._stem_ids.get(term)
        found: dict[int, None] = {}
        table = self._derived
        for size in range(max(DERIVATION_PREFIX, len(term) - DERIVATION_SUFFIX), len(term) + 1):
            for other in table.get(term[:size], ())[: DERIVATION_LIMIT + 1]:
                if other != known:
                    found[other] = None
        if len(found) <= DERIVATION_LIMIT:
            return list(found)
        offsets = self._name_offsets
        ranked = sorted(found, key=lambda t: (int(offsets[t]) - int(offsets[t + 1]), t))
        return ranked[:DERIVATION_LIMIT]

    def _associations(self, known: int) -> list[int]:
        """The ids of the name and group terms the catalog attests for vocabulary term
        ``known`` (see ``ASSOCIATIONS``): none unless the term is rare and rarely in a
        name; else those many of its operations have in their names, far more often
        than the catalog's operations as a whole do, the most shared first (ties by
        id). A function of the catalog alone, hidden operations included (``scores``
        leaves stop words out). Worked out once per term and remembered."""
        remembered = self._associated.get(known)
        if remembered is not None:
            return remembered
        kept: list[int] = []
        name_offsets, operations = self._name_offsets, len(self._lengths)
        first, end = self._offsets[known], self._offsets[known + 1]  # one per operation
        if (
            name_offsets[known + 1] - name_offsets[known] <= ASSOCIATION_NAMED
            and ASSOCIATED_NAMES <= end - first <= ASSOCIATION_USE * operations
        ):
            holders = self._entries[first:end]
            starts = self._name_term_offsets[holders]
            sizes = self._name_term_offsets[holders + 1] - starts
            # every holder's name terms, one gather: each run starts where its holder's do
            at = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(sizes.sum())
            terms, counts = np.unique(self._name_terms[at], return_counts=True)
            share = counts / len(holders)
            elsewhere = (name_offsets[terms + 1] - name_offsets[terms]) / operations
            attested = (
                (counts >= ASSOCIATED_NAMES)
                & (share >= ASSOCIATION_SHARE)
                & (share >= ASSOCIATION_LIFT * elsewhere)
                & (terms != known)
            )
            terms, counts = terms[attested], counts[attested]
            # the most shared first, ties by term id: the same on every replica
            kept = terms[np.lexsort((terms, -counts))][:ASSOCIATION_LIMIT].tolist()
        # at most one entry per vocabulary term; a race stores the same list twice
        self._associated[known] = kept
        return kept

    def _contractions(self, term: str) -> list[int]:
        """The ids of the name terms of ``CONTRACTION_SIZES`` letters that spell
        ``term``'s first letter then some of its later letters in order (``db`` for
        ``database``), kept when the catalog attests them: at least ``ATTESTED_NAMES``
        operations have the short term in their name or group, and the share of them
        using ``term`` itself somewhere is at least ``LIFT`` times ``term``'s share of
        the whole catalog. Worked out once per term and remembered."""
        remembered = self._contracted.get(term)
        if remembered is not None:
            return remembered
        known = self._stem_ids.get(term)
        if known is None or not term.isalpha() or len(term) > CONTRACTION_SOURCE_MAX:
            return []
        short = self._short_names
        head, rest = term[0], term[1:]
        spelled = {
            head + "".join(letters)
            for size in range(CONTRACTION_SIZES[0] - 1, CONTRACTION_SIZES[1])
            for letters in itertools.combinations(rest, size)
        }
        offsets, entries = self._offsets, self._entries
        name_offsets, name_entries = self._name_offsets, self._name_entries
        holders = entries[offsets[known] : offsets[known + 1]]  # ascending
        base = len(holders) / len(self._lengths)
        kept = []
        for candidate in sorted(short[s] for s in spelled if s in short and s != term):
            named = name_entries[name_offsets[candidate] : name_offsets[candidate + 1]]
            if len(named) < ATTESTED_NAMES:
                continue
            at = np.minimum(np.searchsorted(holders, named), len(holders) - 1)
            if np.mean(holders[at] == named) >= LIFT * base:
                kept.append(candidate)
        # at most one entry per vocabulary term; a race stores the same list twice
        self._contracted[term] = kept
        return kept

    def scores(self, query: str) -> tuple[_Ints, _Floats]:
        """The entries sharing a term with ``query`` (ascending ids) and their scores."""
        found_words, request = self._query_words(query)
        by_term: dict[str, dict[str, None]] = {}  # stem -> its spellings, in order
        for word in found_words:
            by_term.setdefault(self._stems(word), {})[word] = None
        count = len(self._lengths)
        total = np.zeros(count)
        matched = np.zeros(count, dtype=np.int16)
        named = np.zeros(count, dtype=np.int16)
        exact = np.zeros(count, dtype=np.int16)
        filled: _Ints | None = None  # the fillers matched, apart from ``matched``
        fillers = 0
        offsets, entries, weights, names = self._offsets, self._entries, self._weights, self._named
        for term, spellings in by_term.items():
            hit = matched
            if FILLERS and all(word in FILLER_WORDS for word in spellings):
                if filled is None:
                    filled = np.zeros(count, dtype=np.int16)
                hit, fillers = filled, fillers + 1
            for word in spellings:
                word_id = self._word_ids.get(word)
                if word_id is not None:
                    first, end = self._surface_offsets[word_id : word_id + 2]
                    if end > first:
                        exact[self._surface[first:end]] += 1
                        break
            known = self._stem_ids.get(term)
            # (term id, discount, names only) sources of this term's weight
            sources = [(known, 1.0, False)] if known is not None else []
            abbreviations = self._abbreviations(term)
            if DERIVATIONS:
                abbreviations += [t for t in self._derivations(term) if t not in abbreviations]
            sources += [(t, ABBREVIATION, True) for t in abbreviations]
            if (
                ASSOCIATIONS
                and known is not None
                and not all(word in STOP_WORD_SET for word in spellings)
            ):
                sources += [
                    (t, ASSOCIATION, True)
                    for t in self._associations(known)
                    if t not in abbreviations
                ]
            if THESAURUS:
                sources += [
                    (self._stem_ids[other], SYNONYM, True)
                    for other in self._synonyms.get(term, ())
                    if other in self._stem_ids
                ]
            if not sources:
                sources = [(t, PREFIX_DISCOUNT, False) for t in self._expansions(term)]
                if not sources:
                    continue
            if known is not None and len(sources) == 1:
                first, end = offsets[known], offsets[known + 1]
                ids = entries[first:end]
                total[ids] += weights[first:end]
                hit[ids] += 1
                named[ids] += names[first:end]
                continue
            best = np.zeros(count)
            naming = np.zeros(count, dtype=bool)
            if known is not None:  # the literal source first: plain stores, no maximum
                first, end = offsets[known], offsets[known + 1]
                ids = entries[first:end]
                best[ids] = weights[first:end]
                naming[ids] = names[first:end]
                sources = sources[1:]
            for source, discount, only_names in sources:
                if only_names:
                    first, end = self._name_offsets[source : source + 2]
                    ids, values = self._name_entries[first:end], self._name_weights[first:end]
                    best[ids] = np.maximum(best[ids], values * discount)
                    naming[ids] = True
                    continue
                first, end = offsets[source], offsets[source + 1]
                ids, values, flags = entries[first:end], weights[first:end], names[first:end]
                best[ids] = np.maximum(best[ids], values * discount)
                naming[ids] |= flags
            total += best
            hit += best > 0
            named += naming
        terms = len(by_term) - fillers
        if terms == 0 and filled is not None:  # nothing but fillers: they are the query
            matched, terms = filled, fillers
        found = np.flatnonzero(matched > 0)  # over a bool array: ~4x faster than int16
        size = max(terms, 1)
        steps = np.arange(size + 1) / size
        coverage = steps**COVERAGE
        bonus = 1 + (REQUEST_NAMING if request else NAMING) * steps
        spelled = 1 + SURFACE * steps
        hits = np.minimum(named[found], size)  # a filler can name the operation too
        precision = 1 + PRECISION * hits / self._name_sizes[found]
        return found, (
            total[found]
            * coverage[matched[found]]
            * bonus[hits]
            * precision
            * spelled[np.minimum(exact[found], size)]
        )

    def ranks(self, query: str) -> bool:
        """Whether ``query`` has a word (``terms``); ``_ranking.ranked_by`` hands a query
        without one to the rule."""
        return bool(self.terms(query))

    def ranked(
        self,
        query: str,
        group: str = "",
        after: tuple[int, str] | None = None,
        *,
        scope: Scope | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Yield ``(0, entry index)`` for every entry sharing a term with ``query``, best
        first; ``Ranker``'s contract (``after`` holds the last placed name)."""
        found, scores = self.scores(query)
        lengths = self._lengths
        bound: tuple[int, float] | None = None
        if after is not None:
            last = self._rule.exact(after[1])
            if last is None:  # pragma: no cover - cursors carry names of this catalog
                return
            # Read before the group and scope filters: the last placed operation may have
            # left the principal's scope since (a revoked grant), and paging still
            # resumes after it.
            at = np.flatnonzero(found == last)
            bound = (last, float(scores[at[0]]) if len(at) else 0.0)
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
        if bound is not None:
            last, score = bound
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


#: The slots a build computes from the entries alone (``RelevanceIndex.tables``): all
#: but the rule index beside it, the stemmer and what queries read and learn
#: (``_query_state``).
TABLES = tuple(
    slot
    for slot in RelevanceIndex.__slots__
    if slot not in {"_rule", "_stems", "_synonyms", "_contracted", "_associated"}
)
