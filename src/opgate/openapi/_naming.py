"""Operation names: deterministic, unique, and within opgate's rule ``[A-Za-z0-9_.-]{1,128}``.

The scheme, applied to operations in document order (paths in the order written,
methods in the order ``get put post delete options head patch trace``):

1. With an ``operationId``: the id, with ``/`` and whitespace runs turned into ``.``
   and every other character outside ``[A-Za-z0-9_.-]`` into ``_``
   (``issues/create`` → ``issues.create``, ``listPets`` stays ``listPets``).
2. Without one: the lower-case method, ``_``, and the path's segments joined by
   ``.``, template braces dropped, other characters as in 1
   (``GET /repos/{owner}/{repo}`` → ``get_repos.owner.repo``; ``GET /`` → ``get_root``).
3. A name longer than 128 characters keeps its first 119 and ends with ``_`` and 8
   hex digits of the SHA-256 of the untruncated name.
4. A name already taken (compared exactly) gets ``_2``, ``_3``, ... in document order,
   so the first operation keeps the plain name.

Names depend only on the document, never on the order of a dictionary built at run
time or on a random seed: re-importing the same document gives the same names.
"""

from __future__ import annotations

import re

from ..names import MAX_NAME, UniqueNames, shorten

__all__ = ["MAX_NAME", "Namer", "base_name"]

_SEPARATORS = re.compile(r"[/\s]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_BRACES = re.compile(r"[{}]")


def _clean(text: str) -> str:
    return _UNSAFE.sub("_", _SEPARATORS.sub(".", text.strip()).strip("."))


def base_name(method: str, path: str, operation_id: object) -> str:
    """The name before uniqueness suffixes (rules 1 to 3 of the module docstring)."""
    name = ""
    if isinstance(operation_id, str):
        name = _clean(operation_id)
    if not name:
        segments = [s for s in _BRACES.sub("", path).split("/") if s]
        name = f"{method.lower()}_" + (_clean(".".join(segments)) or "root")
    return shorten(name)


class Namer:
    """Hands out unique names in call order (rule 4)."""

    def __init__(self) -> None:
        self._names = UniqueNames()

    def name(self, method: str, path: str, operation_id: object) -> str:
        return self._names.claim(base_name(method, path, operation_id))
