"""The load command (benchmarks/load_replicas.py) at a CI-bounded scale, and its soak.

CI: four official clients against one and three replicas on one Redis, 3 s of warm-up
and 10 s measured each: zero errors, each replica's RSS grows by less than
``RSS_GROWTH`` and Redis's memory by less than ``REDIS_GROWTH`` after the warm-up.
The ten-minute soak (``slow``) runs the same mix.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import load_replicas

#: Growth of a replica's RSS after warm-up that the run tolerates (allocator noise,
#: caches filling); a leak per request would exceed it within the run.
RSS_GROWTH = 24 * 1024 * 1024

#: Growth of Redis's used_memory after warm-up that the run tolerates: prompts live 60 s
#: (the load command's default), so the soak reaches a steady state; a leak of records or
#: accounting entries would not.
REDIS_GROWTH = 16 * 1024 * 1024


def check(results: list[load_replicas.RunResult]) -> None:
    for result in results:
        assert result.stats.errors == [], result.stats.errors[:10]
        assert result.requests > 20
        for kind in load_replicas.KINDS:
            assert result.stats.latencies[kind], kind  # every kind of request was made
        for start, end in zip(result.rss_start, result.rss_end, strict=True):
            assert start > 0
            assert end - start < RSS_GROWTH, (start, end)
        assert result.redis_start > 0
        assert result.redis_end - result.redis_start < REDIS_GROWTH
    tables = load_replicas.tables(results)
    assert "requests/s" in load_replicas.format_table(tables[0])


def test_load_against_one_and_three_replicas() -> None:
    check(load_replicas.run([1, 3], clients=4, duration=10, warmup=3))


@pytest.mark.slow
def test_soak_ten_minutes() -> None:
    check(load_replicas.run([3], clients=8, duration=600, warmup=10))
