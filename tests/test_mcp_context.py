"""``opgate.mcp._context``: the ``Principal`` and the ``CallContext`` a policy receives.

A principal's default scope key is opaque, stable for the same caller and scopes, and
different when any of them changes. The principal read from a verified bearer token
(``principal_from_token``) is exercised over HTTP in ``test_mcp_transports.py``.
"""

from __future__ import annotations

import re

import pytest

from opgate.mcp import LOCAL_PRINCIPAL, CallContext, Principal


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


def test_every_part_of_the_identity_changes_the_scope_key() -> None:
    base = Principal("app", issuer="https://idp", subject="alice", scopes=frozenset({"a"}))
    variants = [
        base,
        Principal("app2", issuer="https://idp", subject="alice", scopes=frozenset({"a"})),
        Principal("app", issuer="https://idp2", subject="alice", scopes=frozenset({"a"})),
        Principal("app", issuer=None, subject="alice", scopes=frozenset({"a"})),
        Principal("app", issuer="", subject="alice", scopes=frozenset({"a"})),
        Principal("app", issuer="https://idp", subject=None, scopes=frozenset({"a"})),
        Principal("app", issuer="https://idp", subject="alice", scopes=frozenset()),
    ]
    assert len({principal.scope_key for principal in variants}) == len(variants)
    for principal in variants:
        assert re.fullmatch(r"mcp:[0-9a-f]{64}", principal.scope_key)


def test_parts_cannot_run_into_each_other() -> None:
    assert Principal("ab", subject="c").scope_key != Principal("a", subject="bc").scope_key
    joined = Principal("app", scopes=frozenset({"read,write"}))
    split = Principal("app", scopes=frozenset({"read", "write"}))
    assert joined.scope_key != split.scope_key


def test_scopes_are_a_set_of_strings() -> None:
    principal = Principal("app", scopes=["b", "a", "b"])  # type: ignore[arg-type]
    assert principal.scopes == frozenset({"a", "b"})
    assert principal == Principal("app", scopes=frozenset({"a", "b"}))
    assert principal.has_scope("a")
    assert not principal.has_scope("c")
    with pytest.raises(TypeError, match="scopes"):
        Principal("app", scopes=frozenset({"a", 1}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scopes"):
        Principal("app", scopes=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="issuer"):
        Principal("app", issuer=b"https://idp")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="subject"):
        Principal("app", subject=7)  # type: ignore[arg-type]


def test_the_local_principal() -> None:
    assert (LOCAL_PRINCIPAL.client_id, LOCAL_PRINCIPAL.subject) == ("local", "local")
    assert LOCAL_PRINCIPAL.scopes == frozenset()
    assert LOCAL_PRINCIPAL.issuer is None
    assert LOCAL_PRINCIPAL.scope_key == Principal("local", subject="local").scope_key


def test_a_call_context_has_its_principals_scope_key_and_keeps_the_request_out() -> None:
    alice = Principal("app", subject="alice")
    request = object()
    ctx = CallContext(alice, "2025-11-25", session_id="s1", request=request)
    assert ctx.scope_key == alice.scope_key
    assert ctx.request is request
    assert ctx == CallContext(alice, "2025-11-25", session_id="s1")
    assert "request" not in repr(ctx)
    assert CallContext(alice, "2025-11-25").session_id is None
