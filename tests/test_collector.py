"""The cyclic collector stays out of decoding and copying big JSON values (issue 9, item 1).

Decoded JSON is acyclic, so the collector's passes during a decode find nothing; on 64 KiB
of nested containers they cost several times the decode itself. These tests count the
passes that run while opgate decodes or copies such a value: without the pause, 46 (one
of them a full collection) for the nested arrays and 11 for the small objects; with it,
at most the one pass owed for the allocations when the collector is switched back on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from opgate._collector import paused_collector
from opgate._json import detach, parse

# 64 KiB of arrays nested 126 deep inside {"a":[...]}: about 16,000 containers.
_BLOCK = "[" * 126 + "]" * 126
_NESTED = '{"a":[' + ",".join([_BLOCK] * 259) + "]}"
_OBJECTS = '{"a":[' + ",".join(['{"k":1}'] * 8000) + "]}"


@pytest.fixture
def passes() -> Iterator[list[int]]:
    """Count cyclic-collector passes; the collector is enabled with default thresholds."""
    seen: list[int] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    was_enabled = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()


@pytest.mark.parametrize("text", [_NESTED, _OBJECTS], ids=["nested arrays", "small objects"])
@pytest.mark.parametrize("profile", [False, True])
def test_parse_runs_no_collector_pass(passes: list[int], text: str, profile: bool) -> None:
    value = parse(text, profile=profile)
    assert isinstance(value, dict)
    assert len(passes) <= 1  # the pass the allocations are owed, once re-enabled


@pytest.mark.parametrize("text", [_NESTED, _OBJECTS], ids=["nested arrays", "small objects"])
def test_detach_runs_no_collector_pass(passes: list[int], text: str) -> None:
    value = parse(text)
    passes.clear()
    copy = detach(value)
    assert copy == value
    assert copy is not value
    assert len(passes) <= 1  # the pass the allocations are owed, once re-enabled


def test_a_failed_parse_restores_the_collector() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError, match="nesting"):
        parse('{"a":[' + _BLOCK + "," + "[" * 200 + "]" * 200 + "]}")
    assert gc.isenabled()


def test_a_collector_the_host_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with paused_collector():
            assert not gc.isenabled()
        parse(_NESTED)
        detach(parse(_OBJECTS))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_restored_when_the_block_raises() -> None:
    assert gc.isenabled()

    def fail_inside() -> None:
        with paused_collector():
            assert not gc.isenabled()
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert gc.isenabled()
