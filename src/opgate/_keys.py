"""The registry's secret, the keys derived from it, scope-key hashes and the definitions revision.

A registry has one master secret: ``Registry(..., secret=bytes)`` (at least
``SECRET_MIN_BYTES``; replicas that share it, and the same definitions, open each
other's cursors and continuations) or 32 random bytes made when it is built. Each
use gets its own subkey, derived with HMAC-SHA256 over a fixed label, so no key
serves two purposes::

    cursor key   = HMAC(secret, "opgate/key/cursor/v1")   AES-256-GCM for search cursors
    scope key    = HMAC(secret, "opgate/key/scope/v1")    HMAC of scope keys (cursors, ledger)
    seal key     = HMAC(secret, "opgate/key/seal/v1")     AES-256-GCM for retained prompts, tokens
    mac key      = HMAC(secret, "opgate/key/mac/v1")      HMAC of bindings and answers in a
                                                          shared ledger

The *revision* names a catalog: a SHA-256 over every definition as the registry
compiled it, so two processes built from the same definitions compute the same
revision, and any difference in what a caller can see or send makes another one.
What counts, per operation in name order: name, group, summary, description,
examples, source, the canonical input schema and the canonical output schema (or
none); plus the opgate version, because the ranking and cursor layout belong to
it. Handlers and policies are code and do not count; ``Limits`` do not count
(cursors and continuations do not depend on them).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

__all__ = [
    "SCOPE_HASHES_CACHED",
    "SECRET_MIN_BYTES",
    "Definition",
    "RegistryKeys",
    "ScopeHashes",
    "definitions_revision",
]

#: Shortest secret accepted: 256 bits, the strength of the keys derived from it.
SECRET_MIN_BYTES = 32

#: Longest secret accepted; a longer one is a mistake (a whole file, a certificate).
SECRET_MAX_BYTES = 4096

#: Scope-key hashes remembered (principals are few and hot).
SCOPE_HASHES_CACHED = 4096

#: Versions the revision's encoding.
_REVISION_DOMAIN = b"opgate/revision/v2"
_SHA256_LENGTH = (32).to_bytes(8, "big")
_REVISION_BATCH = 4096  # fields hashed per update call


@dataclass(frozen=True, slots=True)
class Definition:
    """One operation as the revision sees it (texts and canonical schemas)."""

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]
    source: str
    input_schema: bytes
    output_schema: bytes | None


def definitions_revision(definitions: Iterable[Definition], version: str) -> str:
    """The revision of a catalog: 32 hex digits of a SHA-256 over its definitions.

    Each field is hashed as its 8-byte big-endian length, then its bytes; a schema
    field holds the SHA-256 of the schema's canonical bytes, computed once per bytes
    object (identical schemas share one, so a catalog that repeats its schemas does
    not hash them again).
    """
    # The fields are laid out in a list and hashed a few thousand at a time (the same
    # bytes as updating field by field, whose per-field calls cost more than the
    # hashing; a bounded list, since one list of every encoded text kept ~30 MB of
    # freed heap in the process's RSS at 20,000 operations).
    digest = hashlib.sha256()
    parts: list[bytes] = [_REVISION_DOMAIN]
    append = parts.append
    schema_digests: dict[int, bytes] = {}
    digest_length = _SHA256_LENGTH

    def put(data: bytes) -> None:
        append(len(data).to_bytes(8, "big"))
        append(data)

    def schema(data: bytes) -> None:
        known = schema_digests.get(id(data))
        if known is None:
            known = schema_digests[id(data)] = hashlib.sha256(data).digest()
        append(digest_length)
        append(known)

    put(version.encode("utf-8"))
    for item in sorted(definitions, key=lambda d: d.name):
        for text in (item.name, item.group, item.summary, item.description, item.source):
            data = text.encode("utf-8", "surrogatepass")
            append(len(data).to_bytes(8, "big"))
            append(data)
        append(len(item.examples).to_bytes(4, "big"))
        for example in item.examples:
            put(example.encode("utf-8", "surrogatepass"))
        schema(item.input_schema)
        if item.output_schema is None:
            append(b"\0")
        else:
            append(b"\1")
            schema(item.output_schema)
        if len(parts) >= _REVISION_BATCH:
            digest.update(b"".join(parts))
            parts.clear()
    digest.update(b"".join(parts))
    return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class RegistryKeys:
    """The subkeys of one master secret; ``shared`` says whether it was given.

    Never printed: ``repr`` shows only whether the secret is shared.
    """

    shared: bool
    cursor: bytes = field(repr=False)
    scope: bytes = field(repr=False)
    seal: bytes = field(repr=False)
    mac: bytes = field(repr=False)

    @classmethod
    def from_secret(cls, secret: bytes | None) -> RegistryKeys:
        """Derive the subkeys; ``None`` makes a random secret (one process only).

        ``TypeError`` for a secret that is not bytes, ``ValueError`` for one shorter
        than ``SECRET_MIN_BYTES`` or longer than ``SECRET_MAX_BYTES``.
        """
        shared = secret is not None
        if secret is None:
            secret = secrets.token_bytes(SECRET_MIN_BYTES)
        elif not isinstance(secret, bytes | bytearray):
            raise TypeError("secret must be bytes (read it from a file or the environment)")
        elif not SECRET_MIN_BYTES <= len(secret) <= SECRET_MAX_BYTES:
            raise ValueError(
                f"secret must be {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} bytes, "
                f"got {len(secret)}; make one with: python -c "
                f"'import secrets; print(secrets.token_urlsafe(32))'"
            )
        master = bytes(secret)

        def derive(label: str) -> bytes:
            return hmac.new(master, f"opgate/key/{label}/v1".encode(), "sha256").digest()

        return cls(shared, derive("cursor"), derive("scope"), derive("seal"), derive("mac"))

    def __reduce__(self) -> NoReturn:
        raise TypeError("registry keys cannot be pickled")


class ScopeHashes:
    """The keyed hashes that stand for scope keys in cursors and continuations.

    ``of(key)`` is the HMAC-SHA256 of the scope key under the scope subkey; up to
    ``SCOPE_HASHES_CACHED`` of them are remembered (then all are forgotten at once:
    bounded, and recomputing is cheap). Never printed or pickled.
    """

    __slots__ = ("_cached", "_key")

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._cached: dict[str, bytes] = {}

    def of(self, key: str) -> bytes:
        """The keyed hash that stands for a scope key in cursors and continuations."""
        cached = self._cached.get(key)
        if cached is None:
            cached = hmac.new(self._key, key.encode("utf-8", "surrogatepass"), "sha256").digest()
            if len(self._cached) >= SCOPE_HASHES_CACHED:
                self._cached.clear()  # bounded; recomputing is cheap
            self._cached[key] = cached
        return cached

    def __reduce__(self) -> NoReturn:
        raise TypeError("registry keys cannot be pickled")
