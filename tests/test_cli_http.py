"""``opgate serve --http``'s announcement, printed once the port is bound."""

from __future__ import annotations

from opgate.cli._http import _serving_line


def test_the_serving_line_counts_in_words() -> None:
    assert _serving_line(1, "127.0.0.1", 8000) == (
        "opgate: serving 1 operation at http://127.0.0.1:8000/mcp"
    )
    assert _serving_line(4, "::1", 8000) == "opgate: serving 4 operations at http://[::1]:8000/mcp"
