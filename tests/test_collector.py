"""The cyclic collector: paused only while a registry is built, never for a request.

``paused_collector`` switches the collector off for the whole process, so it is kept to
registry construction (thousands of acyclic objects, once); parsing and copying a
request's JSON leave it alone, whatever the size (issue 20, item 10).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from opgate import ConfigurationError, Operation, Registry
from opgate._collector import paused_collector
from opgate._json import detach, from_python, parse
from registry_support import handler

from conftest import AllowAll

# 64 KiB of arrays nested 126 deep inside {"a":[...]}: about 16,000 containers.
_BLOCK = "[" * 126 + "]" * 126
_NESTED = '{"a":[' + ",".join([_BLOCK] * 259) + "]}"
_OBJECTS = '{"a":[' + ",".join(['{"k":1}'] * 8000) + "]}"


@pytest.mark.parametrize("text", [_NESTED, _OBJECTS], ids=["nested arrays", "small objects"])
def test_requests_never_switch_the_collector_off(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Issue 20, item 10: the switch is process-wide, so a host's other threads would
    lose their collector while one request is parsed or copied. Only registry
    construction pauses it."""
    switched: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: switched.append("disable"))
    for profile in (False, True):
        value = parse(text, profile=profile)
        assert isinstance(value, dict)
        assert detach(value) == value
        assert from_python(value) == value
    with pytest.raises(ValueError, match="nesting"):
        parse('{"a":[' + _BLOCK + "," + "[" * 200 + "]" * 200 + "]}")
    assert switched == []


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


# --- registry construction pauses it, and always restores it ----------------------------


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_enabled")
def test_the_collector_is_restored_after_construction_and_after_a_refusal() -> None:
    Registry([Operation("a", "does a", handler)], AllowAll())
    assert gc.isenabled()
    bad = Operation("b", "does b", handler, input_schema={"type": "object", "pattern": "("})
    with pytest.raises(ConfigurationError, match="operation 'b'"):
        Registry([Operation("a", "does a", handler), bad], AllowAll())
    assert gc.isenabled()
    gc.disable()
    try:
        Registry([Operation("a", "does a", handler)], AllowAll())
        assert not gc.isenabled()  # a host that turned it off keeps it off
    finally:
        gc.enable()
