"""Operation names for upstream tools: ``NAME.TOOL``, deterministic, unique, within the rule.

opgate's name rule is ``[A-Za-z0-9_.-]{1,128}``. The scheme, applied by
``Namer.names`` to each upstream's tools, upstreams in the file's order:

1. ``NAME.TOOL``, with every character of the tool name outside ``[A-Za-z0-9_.-]``
   replaced by ``_`` (``read file`` → ``fs.read_file``; ``gh/issues`` →
   ``gh.gh_issues``).
2. A name longer than 128 characters keeps its first 119 and ends with ``_`` and
   8 hex digits of the SHA-256 of the untruncated name.
3. A name already taken gets ``_2``, ``_3``, ... (cut to fit), in that order.

The tools whose name needs no change (rule 1 or 2) are named first, in code-point
order, then the others in code-point order. So a tool keeps its plain name whatever
else the upstream lists: a newcomer ``read file`` becomes ``fs.read_file_2`` and can
never push the real ``read_file`` off ``fs.read_file`` (and its pins and policy onto
itself), and an upstream that lists its tools in another order gets the same names.

Upstream names hold no dot (``_config``), so the first dot of an operation name
always ends its upstream's name, and two upstreams never compete for a name
unless truncation makes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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
        """The operation name for ``tool`` of ``upstream`` (rules 1 to 3), claimed now."""
        cleaned = _UNSAFE.sub("_", tool) or "_"
        whole = f"{upstream}.{cleaned}"
        base = shorten(whole)
        candidate = self._names.claim(base)
        return Naming(candidate, cleaned != tool, base != whole, candidate != base)

    def names(self, upstream: str, tools: Iterable[str]) -> dict[str, Naming]:
        """The names of all of ``upstream``'s ``tools`` (distinct tool names): those that
        need no change first, then the rest, each group in code-point order."""
        ordered = sorted(set(tools), key=lambda tool: (_needs_change(upstream, tool), tool))
        return {tool: self.name(upstream, tool) for tool in ordered}


def _needs_change(upstream: str, tool: str) -> bool:
    whole = f"{upstream}.{tool}"
    return not tool or _UNSAFE.search(tool) is not None or shorten(whole) != whole
