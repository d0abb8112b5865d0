"""``opgate.cli._escapes``: ``visible`` keeps a printable character (or a tab) and
writes any other as its Python escape, so text from outside cannot drive the terminal
or start a log line of its own."""

from __future__ import annotations

import codecs
import sys

import pytest

from opgate.cli._escapes import visible


@pytest.mark.parametrize(
    ("character", "shown"),
    [
        ("a", "a"),
        (" ", " "),
        ("é", "é"),
        ("漢", "漢"),
        ("\t", "\t"),
        ("\n", "\\x0a"),
        ("\r", "\\x0d"),
        ("\x1b", "\\x1b"),
        ("\x7f", "\\x7f"),
        ("\x85", "\\x85"),
        ("\xa0", "\\xa0"),
        ("\u2028", "\\u2028"),
        ("\u202e", "\\u202e"),
        ("\ud800", "\\ud800"),
        ("\U000e0041", "\\U000e0041"),
        ("\U0010ffff", "\\U0010ffff"),
    ],
)
def test_a_character_is_shown_itself_or_escaped(character: str, shown: str) -> None:
    assert visible(character) == shown


def test_every_character_comes_out_printable_and_escapes_read_back() -> None:
    for code in range(sys.maxunicode + 1):
        character = chr(code)
        shown = visible(character)
        if character.isprintable() or character == "\t":
            assert shown == character
        else:
            assert shown.isascii(), repr(character)
            assert shown.isprintable(), repr(character)
            assert codecs.decode(shown, "unicode_escape") == character
