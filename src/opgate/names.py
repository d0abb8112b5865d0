"""Operation names for catalog sources: cut to the rule, and made unique.

opgate's name rule is ``[A-Za-z0-9_.-]{1,128}``. A catalog source (an OpenAPI
description, an MCP server's tools) derives a name from its own text, cleans it to
those characters, then:

* ``shorten``: a name longer than ``MAX_NAME`` keeps its first 119 characters and
  ends with ``_`` and 8 hex digits of the SHA-256 of the whole name;
* ``UniqueNames.claim``: a name already handed out gets ``_2``, ``_3``, ... (cut to
  fit), in call order, so the first claimant keeps the plain name.

Both are deterministic: the same names in the same order give the same results.
"""

from __future__ import annotations

import hashlib

__all__ = ["MAX_NAME", "UniqueNames", "shorten"]

#: The longest operation name the rule allows.
MAX_NAME = 128
_KEPT = MAX_NAME - 9  # room for "_" and 8 hex digits


def shorten(name: str) -> str:
    """``name`` itself when within ``MAX_NAME``, else its cut, hash-suffixed form."""
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[:_KEPT]}_{digest}"


class UniqueNames:
    """Hands out each name once; a name already taken gets the first free ``_N``."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._next: dict[str, int] = {}  # base -> the first suffix number not yet tried

    def claim(self, base: str) -> str:
        """``base``, or ``base`` cut and suffixed ``_2``, ``_3``, ... if taken; now taken."""
        # Numbers below ``_next[base]`` were all found taken, and names are never
        # released, so the search resumes there: linear in the names, not quadratic.
        candidate, number = base, self._next.get(base, 2)
        if candidate in self._taken:
            while True:
                suffix = f"_{number}"
                candidate = base[: MAX_NAME - len(suffix)] + suffix
                number += 1
                if candidate not in self._taken:
                    break
            self._next[base] = number
        self._taken.add(candidate)
        return candidate
