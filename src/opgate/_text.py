"""The UTF-8 sizes of text, and whether text is valid UTF-8 at all.

``utf8_size`` counts a lone surrogate as it would encode with ``surrogatepass``
(three bytes) instead of failing; ``has_surrogate`` tells whether there is one;
``json_string_size`` counts text as canonical JSON writes it inside a string, and
fails on a lone surrogate. All three measure with the text's own ``encode``; code
that must not call a ``str`` subclass's methods uses ``str.encode`` itself.
"""

from __future__ import annotations

from json.encoder import encode_basestring

__all__ = ["has_surrogate", "json_string_size", "utf8_size"]


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text`` (a lone surrogate counts as it would encode)."""
    return len(text.encode("utf-8", "surrogatepass"))


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (is not valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_string_size(text: str) -> int:
    """UTF-8 bytes of ``text`` as the body of a JSON string, quotes excluded.

    Escaped as canonical JSON escapes it: ``\\"``, ``\\\\``, the short escapes,
    ``\\u00xx`` for the other control characters, everything else literal. Equal to the
    UTF-8 length for text without quotes, backslashes or controls; escapes only add.
    ``ValueError`` (``UnicodeEncodeError``) for a lone surrogate.
    """
    escaped = encode_basestring(text)
    if escaped.isascii():
        return len(escaped) - 2
    return len(escaped.encode("utf-8")) - 2
