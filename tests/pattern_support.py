"""Watching which patterns a build hands the regex engine (``_pattern_proof.all_compile``)."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest

from opgate import _pattern_proof as pattern_proof


def record_compiles(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> list[str]:
    """The patterns ``modules`` (those that imported ``all_compile``) compile from now
    on, in order: a list that grows as they do."""
    seen: list[str] = []
    batch = pattern_proof.all_compile

    def all_compile(patterns: Sequence[str], options: Any) -> bool:
        seen.extend(patterns)
        return batch(patterns, options)

    for module in modules:
        monkeypatch.setattr(module, "all_compile", all_compile)
    return seen
