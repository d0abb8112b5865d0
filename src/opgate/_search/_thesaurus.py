"""Generic API operation verbs: the relevance ranking's only word list.

Agents and catalogs often name one action with different verbs: an agent asks to
*list* what a catalog *describes*, to *upload* what it *puts*, to *call* what it
*invokes*. ``VERBS`` groups the verbs that name the same action on any API; a query
word in a group also matches the other words of its group, at ``SYNONYM`` of the
weight a literal match has (``_relevance``). The groups are generic API vocabulary,
the same for every catalog (none names a vendor, a service or a resource), and the
whole list is in ``docs/search.md``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SYNONYM", "VERBS", "alternatives"]

#: What a match through the thesaurus weighs, against a literal match's 1.
SYNONYM = 0.5

#: Groups of verbs that name the same action on an API.
VERBS: tuple[frozenset[str], ...] = (
    frozenset({"list", "describe", "get", "enumerate"}),
    frozenset({"upload", "put", "insert"}),
    frozenset({"call", "run", "execute", "invoke", "start"}),
    frozenset({"remove", "delete"}),
    frozenset({"add", "new", "make", "create"}),
    frozenset({"change", "modify", "edit", "update", "set", "put", "rename"}),
    frozenset({"save", "write"}),
    frozenset({"allow", "authorize", "grant", "permit"}),
    frozenset({"search", "query", "filter"}),
)


def alternatives(stem: Callable[[str], str]) -> dict[str, tuple[str, ...]]:
    """Each verb's stem (``stem(word)``) with the stems of the other verbs of its
    groups, in sorted order."""
    found: dict[str, set[str]] = {}
    for group in VERBS:
        stems = {stem(word) for word in group}
        for own in stems:
            found.setdefault(own, set()).update(stems - {own})
    return {own: tuple(sorted(others)) for own, others in found.items()}
