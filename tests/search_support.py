"""Helpers shared by the tests of the search rankings: ``test_search_relevance.py``,
``test_search_ranking.py`` and ``test_search_scorer.py``.

Operations and catalogs to rank, a deterministic ``Scorer`` (``Overlap``), a small
deterministic ``Embedder`` (``HashedWords``, for ``test_search_hybrid.py``,
``test_search_vectors.py`` and ``test_search_fusion.py``), and paging through
``Registry.search``.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

from opgate import Candidate, Operation, Ranking, Registry, SearchPage, finish

from conftest import Ctx, TeamPolicy

SECRET = b"relevance-test-secret-32-bytes!!"


def handler(invocation: Any) -> Any:
    return finish(None)  # type: ignore[arg-type]


def op(name: str, summary: str = "Does a thing.", **kwargs: Any) -> Operation:
    return Operation(name, summary, handler, **kwargs)


async def names(reg: Registry, query: str = "", ctx: Any = None, **kwargs: Any) -> list[str]:
    page = await reg.search(ctx or Ctx(), query, **kwargs)
    assert isinstance(page, SearchPage), page
    return [item.name for item in page.items]


async def all_pages(
    reg: Registry, query: str = "", ctx: Any = None, **kwargs: Any
) -> tuple[list[str], int]:
    found: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await reg.search(ctx or Ctx(), query, cursor=cursor, **kwargs)
        assert isinstance(page, SearchPage), page
        pages += 1
        found += [item.name for item in page.items]
        if page.next_cursor is None:
            return found, pages
        cursor = page.next_cursor


def catalog(count: int = 240, seed: int = 7) -> list[Operation]:
    rng = random.Random(seed)
    vocabulary = ["alpha", "beta", "gamma", "delta", "instances", "instance", "report", "user"]
    operations = []
    for number in range(count):
        group = ["billing", "Orders", "admin", "misc"][number % 4]
        prefix = "admin" if group == "admin" else group.lower()
        summary = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 6)))
        if number % 5 == 0:  # long summaries make the page's byte budget bind
            summary += " " + "padding " * 180
        operations.append(
            op(
                f"{prefix}.op{number:03d}",
                summary.strip() + ".",
                group=group,
                description=" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 8))),
            )
        )
    return operations


def relevance_registry(operations: list[Operation] | None = None, **kwargs: Any) -> Registry:
    kwargs.setdefault("ranking", Ranking.RELEVANCE)
    return Registry(catalog() if operations is None else operations, TeamPolicy(), **kwargs)


class Overlap:
    """A deterministic scorer: the number of query words in the candidate's summary
    and examples, counted by a plain split."""

    def __init__(self, name: str = "overlap-v1") -> None:
        self._name = name
        self.calls: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, candidates: Sequence[Candidate]) -> Sequence[float]:
        self.calls.append((query, len(candidates)))
        wanted = set(query.lower().split())
        texts = [" ".join((c.summary, *c.examples)).lower().replace(".", "") for c in candidates]
        return [float(len(wanted & set(text.split()))) for text in texts]


class HashedWords:
    """A deterministic embedder: each lower-cased word (runs of letters and digits) adds
    1 at ``crc32(word) % dimension`` (a stable hash, unlike ``hash``); a word of
    ``synonyms`` counts as its partner, so a vector can meet what no word shares.
    Records every call's number of texts."""

    def __init__(
        self,
        name: str = "hashed-words-v1",
        dimension: int = 64,
        synonyms: dict[str, str] | None = None,
    ) -> None:
        self._name = name
        self.dimension = dimension
        self.synonyms = synonyms or {}
        self.calls: list[int] = []

    @property
    def name(self) -> str:
        return self._name

    def vector(self, text: str) -> list[float]:
        row = [0.0] * self.dimension
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            word = self.synonyms.get(word, word)
            row[zlib.crc32(word.encode()) % self.dimension] += 1.0
        return row

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [self.vector(text) for text in texts]


def scorer_catalog() -> list[Operation]:
    return [
        op("a.long_name", "red green.", group="g"),
        op("b.x", "red green.", group="g"),
        op("c.x", "red.", group="h"),
        op("d.x", "blue.", group="g", examples=("green",)),
        op("admin.x", "red green blue.", group="g"),
    ]


def schema_catalog() -> list[Operation]:
    return [
        op(
            "s.upload",
            "Stores a file.",
            input_schema={
                "type": "object",
                "properties": {"zanzibar": {"type": "string", "description": "quokka"}},
            },
        ),
        op("s.other", "Removes a file.", examples=("zanzibar quokka",)),
    ]
