"""``opgate.mcp._context``: the ``Principal`` and the ``CallContext`` a policy receives.

A principal's default scope key is opaque, stable for the same caller and scopes, and
different when any of them changes. The principal read from a verified bearer token
(``principal_from_token``) is exercised over HTTP in ``test_mcp_transports.py``.
"""

from __future__ import annotations

import pytest

from opgate.mcp import Principal


def test_principal_scope_key_is_opaque_and_follows_scopes() -> None:
    alice = Principal("app", issuer="https://idp", subject="alice", scopes=frozenset({"a"}))
    same = Principal("app", issuer="https://idp", subject="alice", scopes={"a"})  # type: ignore[arg-type]
    more = Principal("app", issuer="https://idp", subject="alice", scopes=frozenset({"a", "b"}))
    other = Principal("app", issuer="https://idp", subject="bob", scopes=frozenset({"a"}))
    assert alice.scope_key == same.scope_key
    assert len({alice.scope_key, more.scope_key, other.scope_key}) == 3
    assert alice.scope_key.startswith("mcp:")
    assert "alice" not in alice.scope_key
    with pytest.raises(TypeError):
        Principal("")
    with pytest.raises(TypeError):
        Principal("app", scopes="admin")  # type: ignore[arg-type]
