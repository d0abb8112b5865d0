"""The demo's policy: everyone may use every operation except ``admin.*``.

``admin.*`` operations need the ``desk.admin`` scope, for discovery and for execution
alike, so without it they are invisible (the one ``unavailable`` answer). The policy
reads only what the MCP adapter's context exposes, duck-typed: ``ctx.principal.scopes``
(a set of ``str``) and ``ctx.scope_key`` (the adapter's default scope key). Over stdio
the principal is the local one, which has no scopes, so a local agent never sees the
admin operations.
"""

from __future__ import annotations

from typing import Any

from .. import Discover, Execute, Failure, FailureCode

__all__ = ["ADMIN_SCOPE", "DeskPolicy"]

#: The scope that unlocks the ``admin.*`` operations.
ADMIN_SCOPE = "desk.admin"


class DeskPolicy:
    """Allow everything but ``admin.*``, which needs ``ADMIN_SCOPE`` (see the module docs)."""

    def scope_key(self, ctx: Any) -> str:
        """The context's own default scope key."""
        key: str = ctx.scope_key
        return key

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        """Return ``None`` to allow; raise ``Failure(UNAVAILABLE)`` to deny."""
        if request.name.startswith("admin.") and ADMIN_SCOPE not in ctx.principal.scopes:
            raise Failure(FailureCode.UNAVAILABLE)
