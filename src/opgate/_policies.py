"""Ready policies for the common cases: ``LocalPolicy`` and ``ScopePolicy``.

A ``Registry`` still needs a policy passed explicitly; these are two a small app can
pass instead of writing a class:

* ``LocalPolicy()`` allows every request. It is for a server that only one trusted
  principal reaches: a stdio server (the MCP client that started it) or a process
  calling its own registry. Never for a server several principals reach.
* ``ScopePolicy({"orders.read": {"orders"}, ...})`` maps token scopes to the groups a
  principal may discover and execute: a principal sees and runs the operations of the
  groups its scopes name (and of ``everyone``'s), and nothing else, which its
  ``discovery_scope`` tells the registry up front (search never considers another
  group; inspect and invoke answer ``unavailable``).

Both read the context duck-typed, as the MCP adapter's ``CallContext`` provides it:
``ctx.scope_key`` (the adapter's default scope key: a hash of the principal and its
granted scopes) and, for ``ScopePolicy``, ``ctx.principal.scopes``. A host with other
contexts passes ``scopes=`` (and ``key=``) functions reading its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final

from ._policy import DiscoveryScope, PolicyRequest

__all__ = ["LocalPolicy", "ScopePolicy"]

#: ``LocalPolicy``'s scope key when the context has none of its own.
LOCAL_KEY: Final = "local"


def _own_key(ctx: Any) -> str | None:
    key = getattr(ctx, "scope_key", None)
    return key if isinstance(key, str) and key else None


def _groups(value: object, what: str) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a collection of group names (str), not a str")
    groups = frozenset(value)
    if not all(isinstance(group, str) for group in groups):
        raise TypeError(f"{what} must be a collection of group names (str)")
    return groups


class LocalPolicy:
    """Allow everything, for the one local principal of a stdio server.

    ``scope_key(ctx)`` is the context's own ``ctx.scope_key`` when it has one (over MCP,
    the local principal's default key), else ``"local"`` (a host calling the registry
    with ``ctx=None``); ``authorize`` allows every request. Pass it only where a single
    trusted principal reaches the registry: over HTTP with bearer authentication every
    token holder would be allowed everything (use ``ScopePolicy`` there).
    """

    __slots__ = ()

    def scope_key(self, ctx: Any) -> str:
        """The context's own scope key, or ``"local"``."""
        return _own_key(ctx) or LOCAL_KEY

    def authorize(self, ctx: Any, request: PolicyRequest) -> None:
        """Allow (``None``) every ``Discover`` and ``Execute``."""
        return None

    def __repr__(self) -> str:
        return "LocalPolicy()"


class ScopePolicy:
    """Map granted scopes to the groups a principal may discover and execute.

    ``ScopePolicy(groups, *, everyone=(), scopes=None, key=None)``:

    * ``groups``: a mapping from a scope to the group names it opens, for example
      ``{"orders.read": {"orders"}, "desk.admin": {"admin", "orders"}}``; groups compare
      case-folded, as ``DiscoveryScope`` compares them (``""`` names the operations
      without a group).
    * ``everyone``: groups open to every principal, with or without scopes.
    * ``scopes``: a function from the context to the granted scopes; by default
      ``ctx.principal.scopes`` (the MCP adapter's ``Principal``). A context without them
      fails the request as ``internal`` (a misconfiguration must not pass as "no scopes").
    * ``key``: a function from the context to its scope key; by default ``ctx.scope_key``,
      which must change when the granted scopes change (the MCP adapter's does).

    ``discovery_scope(ctx)`` returns the groups of the granted scopes plus ``everyone``;
    outside them the registry answers ``unavailable`` without asking ``authorize``, and
    ``authorize`` allows everything inside. Scopes it does not know open nothing.
    """

    __slots__ = ("_everyone", "_groups", "_key", "_scopes")

    def __init__(
        self,
        groups: Mapping[str, Collection[str]],
        *,
        everyone: Collection[str] = (),
        scopes: Callable[[Any], Iterable[str]] | None = None,
        key: Callable[[Any], str] | None = None,
    ) -> None:
        if not isinstance(groups, Mapping):
            raise TypeError(f"ScopePolicy groups must be a mapping, not {type(groups).__name__}")
        table: dict[str, frozenset[str]] = {}
        for scope, names in groups.items():
            if not isinstance(scope, str):
                raise TypeError("ScopePolicy scopes (the mapping's keys) must be str")
            table[scope] = _groups(names, f"ScopePolicy groups[{scope!r}]")
        self._groups = table
        self._everyone = _groups(everyone, "ScopePolicy everyone")
        self._scopes = scopes
        self._key = key

    def _granted(self, ctx: Any) -> Iterable[str]:
        if self._scopes is not None:
            return self._scopes(ctx)
        return ctx.principal.scopes  # type: ignore[no-any-return]  # duck-typed (module docs)

    def groups_for(self, ctx: Any) -> frozenset[str]:
        """The groups this context's principal may discover and execute."""
        granted = self._granted(ctx)
        if isinstance(granted, str) or not isinstance(granted, Iterable):
            raise TypeError("ScopePolicy: the granted scopes must be a collection of str")
        opened = set(self._everyone)
        for scope in granted:
            opened |= self._groups.get(scope, frozenset())
        return frozenset(opened)

    def scope_key(self, ctx: Any) -> str:
        """``key(ctx)``, by default the context's own ``ctx.scope_key``."""
        if self._key is not None:
            return self._key(ctx)
        key = _own_key(ctx)
        if key is None:
            raise TypeError("ScopePolicy: the context has no scope_key; pass key=")
        return key

    def discovery_scope(self, ctx: Any) -> DiscoveryScope:
        """Only the groups of the granted scopes (and ``everyone``'s) are discoverable."""
        return DiscoveryScope(groups=self.groups_for(ctx))

    def authorize(self, ctx: Any, request: PolicyRequest) -> None:
        """Allow: the registry already kept the request inside ``discovery_scope``."""
        return None

    def __repr__(self) -> str:
        table = {scope: sorted(names) for scope, names in self._groups.items()}
        return f"ScopePolicy({table!r}, everyone={sorted(self._everyone)!r})"
