"""Text from outside made safe to print: a document's paths, an agent's arguments in a
cause, an exception's message must not drive the terminal or forge a log line."""

from __future__ import annotations

__all__ = ["visible"]


def visible(character: str) -> str:
    """``character`` itself when printable (or a tab), else its Python escape."""
    if character.isprintable() or character == "\t":
        return character
    code = ord(character)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
