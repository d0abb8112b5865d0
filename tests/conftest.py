"""Shared fixtures: the anyio backend, a principal context and simple policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from opgate import Discover, Execute, Failure, FailureCode


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Ctx:
    """What a host passes as ``ctx``: here, a principal and its grants."""

    principal: str = "alice"
    admin: bool = False


@dataclass
class TeamPolicy:
    """Allows everything except ``admin.*`` for non-admins; records every request."""

    calls: list[Any] = field(default_factory=list)
    deny_execute: set[str] = field(default_factory=set)

    def scope_key(self, ctx: Ctx) -> str:
        return f"{ctx.principal}:{'admin' if ctx.admin else 'user'}"

    def authorize(self, ctx: Ctx, request: Discover | Execute) -> None:
        self.calls.append(request)
        if request.name.startswith("admin.") and not ctx.admin:
            raise Failure(FailureCode.UNAVAILABLE)
        if isinstance(request, Execute) and request.name in self.deny_execute:
            raise Failure(FailureCode.UNAVAILABLE, "you may not run this")


class AllowAll:
    def scope_key(self, ctx: Any) -> str:
        return "everyone"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None
