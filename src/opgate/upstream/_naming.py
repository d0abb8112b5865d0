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

import re
from dataclasses import dataclass

from ..names import MAX_NAME, UniqueNames, shorten

__all__ = ["MAX_NAME", "Namer", "Naming"]

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
        self._names = UniqueNames()

    def name(self, upstream: str, tool: str) -> Naming:
        """The operation name for ``tool`` of ``upstream`` (rules 1 to 3)."""
        cleaned = _UNSAFE.sub("_", tool) or "_"
        whole = f"{upstream}.{cleaned}"
        base = shorten(whole)
        candidate = self._names.claim(base)
        return Naming(candidate, cleaned != tool, base != whole, candidate != base)
