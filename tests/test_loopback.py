"""``opgate.loopback.is_loopback``: the one rule for "this machine" the adapters share."""

from __future__ import annotations

import pytest

from opgate.loopback import is_loopback


@pytest.mark.parametrize("host", ["localhost", "LocalHost", "127.0.0.1", "127.9.8.7", "::1"])
def test_the_loopback_names_and_addresses_are_this_machine(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    ["", "0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com", "[::1]", "127.1"],
)
def test_anything_else_is_not_whatever_it_resolves_to(host: str) -> None:
    assert not is_loopback(host)
