"""A toy embedder for the hybrid ranking's evaluation (``bench_relevance.py``).

``ToyEmbedder`` is what a host without a model could write in a few lines: each text's
words (opgate's own splitting, so ``ListObjectsV2`` is ``list objects v2``) less the
stop words, stemmed, each stem and its padded character trigrams hashed (CRC-32, stable
across processes, with a sign bit) into ``dimension`` buckets at weight ``1 + log(n)``.
It knows no synonyms: it is a fuzzier lexical signal, there to measure what the fusion
itself costs and does with a cheap embedder, not what a semantic model brings (the
``MiniLM`` column does that, where installed).
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from opgate._search._tokens import STOP_WORDS, Stems, words

__all__ = ["ToyEmbedder"]


class ToyEmbedder:
    """Hashed stems and character trigrams, signed, into ``dimension`` floats."""

    def __init__(self, dimension: int = 256, trigram_weight: float = 0.5) -> None:
        self.dimension = dimension
        self.trigram_weight = trigram_weight
        self._stems = Stems()
        self._features = lru_cache(maxsize=1 << 18)(self._word_features)

    @property
    def name(self) -> str:
        return f"toy-hashed-{self.dimension}-v1"

    def _bucket(self, feature: str) -> tuple[int, float]:
        code = zlib.crc32(feature.encode())
        return code % self.dimension, 1.0 if code >> 31 else -1.0

    def _word_features(self, word: str) -> tuple[tuple[int, float, float], ...]:
        stem = self._stems(word)
        found = [(*self._bucket("w:" + stem), 1.0)]
        padded = f"#{stem}#"
        found += [
            (*self._bucket("g:" + padded[k : k + 3]), self.trigram_weight)
            for k in range(len(padded) - 2)
        ]
        return tuple(found)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for at, text in enumerate(texts):
            counts = Counter(w for w in words(text) if w not in STOP_WORDS)
            row = rows[at]
            for word, count in counts.items():
                weight = 1.0 + math.log(count)
                for bucket, sign, scale in self._features(word):
                    row[bucket] += sign * scale * weight
        return rows
