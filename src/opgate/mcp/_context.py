"""Who is calling: the ``Principal`` and the ``CallContext`` a policy receives.

The MCP adapter builds one ``CallContext`` per request and passes it as ``ctx`` to
every ``Policy`` callback and to ``Registry`` calls. Over streamable HTTP with
bearer authentication the principal comes from the SDK's verified ``AccessToken``
(issuer, client, subject, scopes); over stdio, and over HTTP without
authentication, it is the one ``LOCAL_PRINCIPAL``.

``Principal.scope_key`` is the documented default scope key: a hash of the issuer,
client id, subject and sorted scopes, so it changes whenever the principal or its
granted scopes change (the spec asks the key to follow the authorization scope)
and never contains the bearer token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOCAL_PRINCIPAL", "CallContext", "Principal"]

#: Prefix of every default scope key, so hosts can tell them from their own.
SCOPE_KEY_PREFIX = "mcp:"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    ``client_id``: the OAuth client (or ``"local"``); ``issuer``: the token issuer
    (the ``iss`` claim) when known; ``subject``: the resource owner (``sub``) when
    known; ``scopes``: the granted scopes. Built from a verified token, never from
    anything the client asserts about itself.
    """

    client_id: str
    issuer: str | None = None
    subject: str | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)
    _scope_key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id:
            raise TypeError("Principal.client_id must be a nonempty str")
        for label, value in (("issuer", self.issuer), ("subject", self.subject)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Principal.{label} must be a str or None")
        scopes: object = self.scopes
        if isinstance(scopes, str) or not isinstance(scopes, Iterable):
            raise TypeError("Principal.scopes must be a collection of str")
        frozen = frozenset(scopes)
        if not all(isinstance(scope, str) for scope in frozen):
            raise TypeError("Principal.scopes must be a collection of str")
        object.__setattr__(self, "scopes", frozen)
        identity = [self.issuer, self.client_id, self.subject, sorted(frozen)]
        encoded = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()
        object.__setattr__(self, "_scope_key", SCOPE_KEY_PREFIX + digest)

    @property
    def scope_key(self) -> str:
        """The default scope key: ``"mcp:"`` and a SHA-256 of who and what scopes.

        Opaque, stable for the same principal and scopes, different when either
        changes, and free of credentials.
        """
        return self._scope_key

    def has_scope(self, scope: str) -> bool:
        """Whether ``scope`` was granted."""
        return scope in self.scopes


#: The principal of stdio servers and of HTTP servers without authentication.
LOCAL_PRINCIPAL = Principal(client_id="local", subject="local")


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a policy receives as ``ctx`` for one MCP request.

    ``principal``: who is calling; ``protocol_version``: the negotiated MCP
    version; ``session_id``: the streamable-HTTP session id when there is one;
    ``request``: the SDK's own request context (an escape hatch for hosts that
    need transport details; opgate itself reads nothing else from it).
    """

    principal: Principal
    protocol_version: str
    session_id: str | None = None
    request: Any = field(default=None, repr=False, compare=False)

    @property
    def scope_key(self) -> str:
        """The principal's default scope key (see ``Principal.scope_key``)."""
        return self.principal.scope_key
