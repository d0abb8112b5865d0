"""The UTF-8 size helpers of ``opgate._text``."""

from __future__ import annotations

import json

import pytest

from opgate._text import has_surrogate, json_string_size, utf8_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("", 0), ("refund", 6), ("é", 2), ("€", 3), ("😀", 4), ("\ud800", 3), ("a\udfffb", 5)],
)
def test_utf8_size_counts_a_lone_surrogate_as_it_would_encode(text: str, size: int) -> None:
    assert utf8_size(text) == size


@pytest.mark.parametrize(
    ("text", "found"), [("", False), ("é😀", False), ("\ud800", True), ("a\udfffb", True)]
)
def test_has_surrogate_tells_text_that_is_not_valid_utf8(text: str, found: bool) -> None:
    assert has_surrogate(text) is found


@pytest.mark.parametrize(
    "text", ["", "plain", 'a "quote"', "back\\slash", "\n\t\x00\x1f", "é😀\x7f"]
)
def test_json_string_size_counts_the_body_as_json_writes_it(text: str) -> None:
    written = json.dumps(text, ensure_ascii=False, separators=(",", ":"))
    assert json_string_size(text) == len(written.encode("utf-8")) - 2


def test_json_string_size_refuses_a_lone_surrogate() -> None:
    with pytest.raises(UnicodeEncodeError):
        json_string_size("a\ud800")
