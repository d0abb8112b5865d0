"""Words and stems for the relevance ranking.

Operation catalogs spell one idea many ways: ``DescribeDBInstances``,
``describe_db_instances``, ``describe-db-instances`` and "describes DB instances" all
name the same operation. ``words`` turns any of them into the same folded words, and
``Stems`` maps each word to its English stem, so ``instances``/``instance`` and
``invalidate``/``invalidation`` meet.

Splitting (``words``): a word is

* a run of capitals, with the digits right after it, not followed by a lower-case
  letter (``DB`` in ``DBInstances``, ``EC2``, ``S3``);
* an optional capital, then lower-case letters, then any digits (``Describe``,
  ``instances``, ``ec2``, ``elbv2``);
* a run of digits on its own;
* a run of letters and digits (``str.isalnum``) holding any character outside ASCII,
  kept whole.

Everything else — dots, underscores, hyphens, slashes, spaces, punctuation — separates
words, and every word is folded to lower case. So ``DescribeDBInstances`` gives
``describe db instances`` and ``s3.ListObjectsV2`` gives ``s3 list objects v2``.

Stemming uses the Snowball English stemmer (Porter 2) from ``pystemmer``: a C
implementation maintained with the Snowball project, a few hundred nanoseconds per
distinct word (each is stemmed once and remembered). It is a general English
algorithm, not a word list: the same rules apply to every catalog. A word holding
anything but ASCII letters (``ec2``, ``v2``, ``ñandú``) is kept as it is.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import Stemmer

__all__ = [
    "FILLER_WORDS",
    "REQUEST_STOP_WORDS",
    "STOP_WORDS",
    "Stems",
    "chunk_words",
    "content_words",
    "count_words",
    "derivations",
    "segment",
    "words",
]

_WORD = re.compile(r"[A-Z]+[0-9]*(?![a-z])|[A-Z]?[a-z]+[0-9]*|[0-9]+")

#: Runs of letters and digits, for texts that are not all ASCII.
_RUN = re.compile(r"[^\W_]+")

_ASCII_LETTERS = re.compile(r"[a-z]+")


#: NLTK's English stop-word list (179 words, as ``bm25s`` ships it, ``STOPWORDS_EN_PLUS``)
#: without its spellings with an apostrophe, which ``words`` splits into pieces the list
#: already holds (``don't`` gives ``don`` and ``t``).
_NLTK_ENGLISH = """
    a about above after again against ain all am an and any are aren as at be because been
    before being below between both but by can couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here
    hers herself him himself his how i if in into is isn it its itself just ll m ma me
    mightn more most mustn my myself needn no nor not now o of off on once only or other
    our ours ourselves out over own re s same shan she should shouldn so some such t than
    that the their theirs them themselves then there these they this those through to too
    under until up ve very was wasn we were weren what when where which while who whom why
    will with won wouldn y you your yours yourself yourselves
"""
#: English function words (a standard list, no catalog's words).
STOP_WORDS = frozenset(_NLTK_ENGLISH.split())

#: The words of NLTK's English list that come, in its own order, before its first
#: conjunction: the personal and possessive pronouns, the interrogatives, the
#: demonstratives, the forms of *be*, *have* and *do*, and the articles. Unlike the
#: prepositions and conjunctions after them (``from``, ``to``, ``on``: ``create ami from
#: instance``), they relate no word of a query to another (``_relevance``: a keyword
#: query's filler does not count towards coverage).
_FILLERS = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing a an the
"""
FILLER_WORDS = frozenset(_FILLERS.split())

#: The English stop-word list of the Glasgow Information Retrieval Group (318 words), as
#: scikit-learn 1.9.1 ships it (``sklearn/feature_extraction/_stop_words.py``,
#: ``ENGLISH_STOP_WORDS``, BSD-3-Clause; read from its wheel, alphabetical here). Beside
#: function words it holds the words people wrap a request in (``please``, ``give``,
#: ``show``, ``find``, ``get``, ``see``, ``take``), and a few nouns of its own choosing
#: (``bill``, ``fire``, ``interest``, ``system``).
_GLASGOW_ENGLISH = """
    a about above across after afterwards again against all almost alone along already also
    although always am among amongst amoungst amount an and another any anyhow anyone
    anything anyway anywhere are around as at back be became because become becomes becoming
    been before beforehand behind being below beside besides between beyond bill both bottom
    but by call can cannot cant co con could couldnt cry de describe detail do done down due
    during each eg eight either eleven else elsewhere empty enough etc even ever every
    everyone everything everywhere except few fifteen fifty fill find fire first five for
    former formerly forty found four from front full further get give go had has hasnt have
    he hence her here hereafter hereby herein hereupon hers herself him himself his how
    however hundred i ie if in inc indeed interest into is it its itself keep last latter
    latterly least less ltd made many may me meanwhile might mill mine more moreover most
    mostly move much must my myself name namely neither never nevertheless next nine no
    nobody none noone nor not nothing now nowhere of off often on once one only onto or
    other others otherwise our ours ourselves out over own part per perhaps please put
    rather re same see seem seemed seeming seems serious several she should show side since
    sincere six sixty so some somehow someone something sometime sometimes somewhere still
    such system take ten than that the their them themselves then thence there thereafter
    thereby therefore therein thereupon these they thick thin third this those though three
    through throughout thru thus to together too top toward towards twelve twenty two un
    under until up upon us very via was we well were what whatever when whence whenever
    where whereafter whereas whereby wherein whereupon wherever whether which while whither
    who whoever whole whom whose why will with within without would yet you your yours
    yourself yourselves
"""
#: The words a request written as a sentence drops (``content_words``): ``STOP_WORDS``
#: and the Glasgow list. Operation names use some of them (``find``, ``get``, ``show``,
#: ``describe``), so a keyword query keeps them (``_relevance.KEYWORD_QUERY``), and the
#: catalog side (compound pieces) knows only ``STOP_WORDS``.
REQUEST_STOP_WORDS = STOP_WORDS | frozenset(_GLASGOW_ENGLISH.split())


def content_words(text: str | list[str]) -> list[str]:
    """The folded words of ``text`` (or the folded words given) that are not
    ``REQUEST_STOP_WORDS``, in order; all of them when every one is a stop word (a query
    such as ``who am i`` still searches)."""
    found = words(text) if isinstance(text, str) else text
    return [word for word in found if word not in REQUEST_STOP_WORDS] or found


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order, with repeats (see the module docstring)."""
    if not text.isascii():
        found: list[str] = []
        for run in _RUN.findall(text):
            found += [w.lower() for w in _WORD.findall(run)] if run.isascii() else [run.casefold()]
        return found
    found = _WORD.findall(text)
    if not found:
        return found
    # One join and one lower() at C speed instead of a call per word; a word never
    # holds a space, so splitting gives the words back.
    return " ".join(found).lower().split(" ")


#: A word, or the line break that ``chunk_words`` puts between chunks.
_WORD_OR_BREAK = re.compile(_WORD.pattern + "|\n")


def chunk_words(chunks: list[str]) -> tuple[list[str], list[int]]:
    """The folded words of each chunk (a text without whitespace, as ``str.split``
    gives), all in one list, and each chunk's number of words: ``words`` of each chunk,
    with one regular expression pass over each run of ASCII chunks."""
    found: list[str] = []
    sizes: list[int] = []
    run: list[str] = []

    def close_run() -> None:
        # One pass over the run joined by line breaks, which no chunk holds: the words
        # come back split on whitespace (line breaks dropped), and the chunk sizes from
        # where the line breaks fall among them.
        spelled = _WORD_OR_BREAK.findall("\n".join(run))
        spelled.append("\n")
        found.extend(" ".join(spelled).lower().split())
        breaks = np.flatnonzero(np.fromiter(map("\n".__eq__, spelled), bool, len(spelled)))
        sizes.extend((np.diff(breaks, prepend=-1) - 1).tolist())
        run.clear()

    for chunk in chunks:
        if chunk.isascii():
            run.append(chunk)
            continue
        if run:
            close_run()
        spelled = words(chunk)
        found += spelled
        sizes.append(len(spelled))
    if run:
        close_run()
    return found, sizes


#: The shortest piece ``segment`` cuts a word into, and the longest word it cuts.
PIECE_MIN = 3
SEGMENT_MAX = 40


def segment(word: str, frequency: Callable[[str], int]) -> list[str] | None:
    """``word`` cut into the fewest pieces of at least ``PIECE_MIN`` letters that each have
    a positive ``frequency`` (``runpagespeed`` into ``run page speed`` when the catalog
    uses those words), ties to the cut whose rarest piece is the most frequent; ``None``
    when ``word`` has no such cut into two or more pieces. Only words of ASCII letters, at
    most ``SEGMENT_MAX`` of them, are cut."""
    size = len(word)
    if not 2 * PIECE_MIN <= size <= SEGMENT_MAX or _ASCII_LETTERS.fullmatch(word) is None:
        return None
    # best[i]: the best cut of word[:i] as (pieces, -rarest frequency, pieces list)
    best: list[tuple[int, int, list[str]] | None] = [None] * (size + 1)
    best[0] = (0, 0, [])
    for end in range(PIECE_MIN, size + 1):
        for start in range(end - PIECE_MIN + 1):
            before = best[start]
            if before is None:
                continue
            piece = word[start:end]
            seen = frequency(piece)
            if seen <= 0:
                continue
            rarest = seen if not before[2] else min(seen, -before[1])
            candidate = (before[0] + 1, -rarest, [*before[2], piece])
            current = best[end]
            if current is None or candidate[:2] < current[:2]:
                best[end] = candidate
    found = best[size]
    return found[2] if found is not None and found[0] >= 2 else None


#: The shortest beginning two stems share in ``derivations``, and the most letters either
#: goes on for after it.
DERIVATION_PREFIX = 7
DERIVATION_SUFFIX = 3


def derivations(stem: str, vocabulary: Sequence[str]) -> list[str]:
    """The stems of ``vocabulary`` (sorted) that are derived from the same word as
    ``stem``, as far as spelling can tell: they share a beginning of at least
    ``DERIVATION_PREFIX`` letters, and each of the two goes on for at most
    ``DERIVATION_SUFFIX`` letters after it. Snowball leaves such derivations apart:
    ``subscrib`` (*subscribe*) and ``subscript`` (*subscription*), ``transcrib`` and
    ``transcript``. Stems of ASCII letters only; ``stem`` itself is not one of them."""
    if len(stem) < DERIVATION_PREFIX or _ASCII_LETTERS.fullmatch(stem) is None:
        return []
    head = stem[:DERIVATION_PREFIX]
    first = bisect_left(vocabulary, head)
    end = bisect_left(vocabulary, head + "\U0010ffff", first)
    found = []
    for other in vocabulary[first:end]:
        if other == stem or _ASCII_LETTERS.fullmatch(other) is None:
            continue
        common = DERIVATION_PREFIX
        while common < min(len(stem), len(other)) and stem[common] == other[common]:
            common += 1
        if max(len(stem), len(other)) - common <= DERIVATION_SUFFIX:
            found.append(other)
    return found


def count_words(text: str) -> Counter[str]:
    """Each folded word of ``text`` with its number of occurrences."""
    return Counter(words(text))


class Stems:
    """Maps folded words to their Snowball English stems, remembering each one.

    Safe to share between threads: the stemmer (a C object that is not thread-safe)
    runs under a lock, and a word learned twice at once gets the same stem.
    """

    __slots__ = ("_known", "_lock", "_stemmer")

    def __init__(self, known: dict[str, str] | None = None) -> None:
        # Without pystemmer's own cache: ``_known`` remembers the catalog's words, and a
        # query's other words are not remembered (``__call__``), there either.
        self._stemmer = Stemmer.Stemmer("english", 0)
        self._known: dict[str, str] = {} if known is None else dict(known)
        self._lock = threading.Lock()

    def known(self) -> dict[str, str]:
        """The words learned so far (``many``) and their stems: what ``Stems(known)``
        starts from."""
        return dict(self._known)

    def many(self, found: list[str]) -> list[str]:
        """The stems of ``found`` (folded words), in order; one stemmer call for all."""
        known = self._known
        new = [word for word in found if word not in known]
        if new:
            stemmable = [word for word in new if _ASCII_LETTERS.fullmatch(word)]
            with self._lock:
                stemmed = self._stemmer.stemWords(stemmable)
            for word in new:
                known[word] = word
            for word, stem in zip(stemmable, stemmed, strict=True):
                known[word] = str(stem)
        return [known[word] for word in found]

    def __call__(self, word: str) -> str:
        """The stem of one folded word. A word not learned through ``many`` is stemmed
        but not remembered: queries bring arbitrary words, and remembering them would
        let a caller grow this map without bound."""
        stem = self._known.get(word)
        if stem is None:
            if _ASCII_LETTERS.fullmatch(word) is None:
                return word
            with self._lock:
                stem = str(self._stemmer.stemWord(word))
        return stem
