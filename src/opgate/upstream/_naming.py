"""Operation names for upstream tools: ``NAME.TOOL``, deterministic, unique, within the rule.

opgate's name rule is ``[A-Za-z0-9_.-]{1,128}``. The scheme, applied to each
upstream's tools in code-point order of the tool names (so an upstream that lists
its tools in another order gets the same names), upstreams in the file's order:

1. ``NAME.TOOL``, with every character of the tool name outside ``[A-Za-z0-9_.-]``
   replaced by ``_`` (``read file`` → ``fs.read_file``; ``gh/issues`` →
   ``gh.gh_issues``).
2. A name longer than 128 characters keeps its first 119 and ends with ``_`` and
   8 hex digits of the SHA-256 of the untruncated name.
3. A name already taken gets ``_2``, ``_3``, ... (cut to fit), in that order, so the
   first tool keeps the plain name.

Upstream names hold no dot (``_config``), so the first dot of an operation name
always ends its upstream's name, and two upstreams never compete for a name
unless truncation makes them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = ["MAX_NAME", "Namer", "Naming"]

#: opgate's name rule: 1 to 128 characters.
MAX_NAME = 128
#: Characters kept before the hash of a shortened name (``_`` and 8 hex digits follow).
_KEPT = MAX_NAME - 9
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class Naming:
    """The name given to one tool and what was changed to make it.

    * ``name``: the operation name;
    * ``replaced``: characters outside the rule were replaced;
    * ``shortened``: the name was cut to 128 characters;
    * ``suffixed``: the name was taken and a number was added.
    """

    name: str
    replaced: bool = False
    shortened: bool = False
    suffixed: bool = False

    @property
    def changed(self) -> bool:
        """Whether the name is not plainly ``NAME.TOOL``."""
        return self.replaced or self.shortened or self.suffixed


class Namer:
    """Hands out unique names in call order (rule 3 needs the names given so far)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._next: dict[str, int] = {}  # base -> the first suffix number not yet tried

    def name(self, upstream: str, tool: str) -> Naming:
        """The operation name for ``tool`` of ``upstream`` (rules 1 to 3)."""
        cleaned = _UNSAFE.sub("_", tool) or "_"
        base = f"{upstream}.{cleaned}"
        replaced = cleaned != tool
        shortened = len(base) > MAX_NAME
        if shortened:
            digest = hashlib.sha256(base.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            base = f"{base[:_KEPT]}_{digest}"
        # Numbers below ``_next[base]`` were all found taken, and names are never
        # released, so the search resumes there: linear in the tools, not quadratic.
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
        return Naming(candidate, replaced, shortened, candidate != base)
