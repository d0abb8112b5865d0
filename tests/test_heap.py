"""Giving a registry build's freed memory back: ``trim_heap`` and where it runs."""

from __future__ import annotations

import platform

import pytest

from opgate import Ranking, Registry, _registry
from opgate._heap import trim_heap
from registry_support import op

from conftest import AllowAll

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4096


def test_trim_heap_asks_glibc_and_only_glibc() -> None:
    assert trim_heap() is GLIBC
    assert trim_heap() is GLIBC  # looked up once, asked every time


def test_freed_pages_below_live_blocks_go_back() -> None:
    if not GLIBC:  # nothing to ask elsewhere (the test above)
        assert not trim_heap()
        return
    # 48 MiB in 1 KiB blocks (below glibc's mmap threshold: from its heap), one in 64
    # kept: the freed runs between them are whole pages the allocator keeps resident.
    blocks = [bytes(1024) for _ in range(48 * 1024)]
    kept = blocks[::64]
    del blocks
    before = _rss()
    assert trim_heap()
    assert before - _rss() > 16 * 2**20
    assert len(kept) == 768


def test_a_build_and_a_new_ranking_trim_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []
    monkeypatch.setattr(_registry, "trim_heap", lambda: calls.append(None) or True)
    registry = Registry([op("a.b")], AllowAll())
    assert len(calls) == 1
    registry.replace(secret=b"k" * 32)
    assert len(calls) == 1  # nothing built
    registry.replace(ranking=Ranking.RELEVANCE)
    assert len(calls) == 2
