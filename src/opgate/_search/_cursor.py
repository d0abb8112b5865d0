"""Sealed search cursors.

A cursor carries a keyset position — the last ``(tier, position)`` placed on a
page, where ``position`` is the operation's index in the registry's name-sorted
catalog — sealed with AES-256-GCM under a key made fresh for each ``CursorSealer``
(one per registry), or derived from the registry's shared secret (``_keys``), and
never exposed. What the cursor is bound to is authenticated, not
carried: the method, the registry revision, the whitespace-normalized query
(casing kept: exact names are case-sensitive), the case-folded group and the hash
of the caller's scope key go into the associated data, so a cursor stays short
and reveals neither query nor group. The sealed payload holds the position and
the expiry instant. Because the revision is bound, a position is only ever read
against the catalog it was issued for (a registry's catalog never changes), and
every cursor has the same length, ``CURSOR_CHARS`` (55), whatever the names: the
64-byte ``Limits.token_bytes`` floor always holds it.

Layout (then unpadded URL-safe base64)::

    nonce (12 random bytes) || AES-GCM(key, nonce, payload, associated data)
    payload = expiry (IEEE 754 double, big-endian) || tier (1 byte) || position (4 bytes)

``open`` refuses, with the one ``CursorError``, every cursor that was altered
(any byte), truncated, extended, written in another alphabet or non-canonical
base64, sealed by another sealer, bound to anything else, or expired. A cursor is
valid while ``clock() < expiry``: at its expiry instant it has expired. Nothing
ever restarts a search from the beginning in place of a refused cursor.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "CURSOR_CHARS",
    "CURSOR_LIFETIME",
    "MAX_POSITION",
    "SCOPE_HASH_BYTES",
    "CursorBinding",
    "CursorError",
    "CursorSealer",
]

#: Seconds a cursor stays valid (spec 003: cursors expire after ten minutes).
CURSOR_LIFETIME = 600.0

#: Length of the scope-key hash a cursor is bound to (a SHA-256 digest).
SCOPE_HASH_BYTES = 32

#: AES-256: the strongest AES-GCM key size.
_KEY_BITS = 256

#: The standard AES-GCM nonce size; random nonces of this size are safe far beyond
#: the number of cursors one registry seals.
_NONCE_BYTES = 12

#: The AES-GCM authentication tag size.
_TAG_BYTES = 16

#: Separates cursors from any other use of the key, and versions the layout.
_DOMAIN = b"opgate/search-cursor/v1"

_PAYLOAD = struct.Struct(">dBI")  # expiry, tier, catalog position

#: Highest tier a payload can carry (one byte).
_MAX_TIER = 255

#: Highest catalog position a payload can carry (four bytes).
MAX_POSITION = 2**32 - 1

#: Length of every cursor: nonce, tag and the fixed-size payload, in unpadded base64.
CURSOR_CHARS = math.ceil((_NONCE_BYTES + _TAG_BYTES + _PAYLOAD.size) * 4 / 3)

_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")


class CursorError(Exception):
    """A cursor that cannot be used: malformed, altered, foreign, mismatched or expired.

    The message is always the same, so nothing public says which check failed;
    ``reason`` (``"malformed"``, ``"unauthentic"`` or ``"expired"``) is private,
    for tests and diagnostics. The registry maps this to ``invalid_cursor``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__("invalid cursor")
        self.reason = reason


def _refuse(reason: str) -> NoReturn:
    raise CursorError(reason) from None


@dataclass(frozen=True, slots=True)
class CursorBinding:
    """Everything a cursor is bound to.

    ``method`` (``"search"``), ``revision`` (the hash of the registry's definitions),
    ``query`` (whitespace-normalized, casing kept), ``group`` (case-folded) and
    ``scope_hash`` (the 32-byte hash of the caller's scope key, left out of
    ``repr``).
    """

    method: str
    revision: str
    query: str
    group: str
    scope_hash: bytes = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("method", "revision", "query", "group"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"CursorBinding.{name} must be a str")
        if not isinstance(self.scope_hash, bytes) or len(self.scope_hash) != SCOPE_HASH_BYTES:
            raise ValueError(f"CursorBinding.scope_hash must be {SCOPE_HASH_BYTES} bytes")

    def associated_data(self) -> bytes:
        """The binding as AES-GCM associated data: unambiguous (length-prefixed) bytes."""
        parts = [_DOMAIN]
        for text in (self.method, self.revision, self.query, self.group):
            encoded = text.encode("utf-8", "surrogatepass")
            parts += [len(encoded).to_bytes(4, "big"), encoded]
        parts.append(self.scope_hash)
        return b"".join(parts)


class CursorSealer:
    """Seals and opens search cursors under a fresh random key, or ``key``.

    ``lifetime`` is in seconds (positive, finite); ``clock`` returns the current
    time in seconds (``time.time`` unless a test injects one); ``key`` is a 32-byte
    AES key derived from a registry's shared secret (replicas that share it open
    each other's cursors). The key lives only inside the AEAD object: it is never
    returned, printed or pickled.
    """

    __slots__ = ("_aead", "_clock", "_lifetime")

    def __init__(
        self,
        *,
        lifetime: float = CURSOR_LIFETIME,
        clock: Callable[[], float] = time.time,
        key: bytes | None = None,
    ) -> None:
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float):
            raise TypeError("cursor lifetime must be a number of seconds")
        if not (math.isfinite(lifetime) and lifetime > 0):
            raise ValueError("cursor lifetime must be positive and finite")
        if key is None:
            key = AESGCM.generate_key(bit_length=_KEY_BITS)
        elif not isinstance(key, bytes) or len(key) * 8 != _KEY_BITS:
            raise ValueError(f"a cursor key must be {_KEY_BITS // 8} bytes")
        self._aead = AESGCM(key)
        self._clock = clock
        self._lifetime = float(lifetime)

    def __repr__(self) -> str:
        return f"CursorSealer(lifetime={self._lifetime!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a CursorSealer cannot be pickled: its key never leaves the process")

    def seal(self, binding: CursorBinding, position: tuple[int, int]) -> str:
        """A URL-safe cursor of ``CURSOR_CHARS`` characters for ``position`` (tier,
        catalog position), bound to ``binding``."""
        tier, index = position
        for label, value, highest in (("tier", tier, _MAX_TIER), ("position", index, MAX_POSITION)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= highest:
                raise ValueError(f"cursor {label} must be an int in 0..{highest}")
        expiry = self._clock() + self._lifetime
        payload = _PAYLOAD.pack(expiry, tier, index)
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, payload, binding.associated_data())
        return base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")

    def open(self, cursor: str, binding: CursorBinding) -> tuple[int, int]:
        """The position sealed in ``cursor``, if it is authentic, bound to ``binding``
        and not expired; otherwise ``CursorError``."""
        raw = _decode(cursor)
        nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        try:
            payload = self._aead.decrypt(nonce, sealed, binding.associated_data())
        except InvalidTag:
            _refuse("unauthentic")
        if len(payload) != _PAYLOAD.size:  # pragma: no cover - only this sealer's payloads
            _refuse("malformed")
        expiry, tier, index = _PAYLOAD.unpack(payload)
        if not self._clock() < expiry:
            _refuse("expired")
        return tier, index


def _decode(cursor: object) -> bytes:
    """The bytes of a canonical, unpadded URL-safe base64 cursor, or ``CursorError``."""
    if not isinstance(cursor, str):
        _refuse("malformed")
    if len(cursor) != CURSOR_CHARS:
        _refuse("malformed")
    if not _ALPHABET.fullmatch(cursor):
        _refuse("malformed")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):  # pragma: no cover - the checks above exclude these
        _refuse("malformed")
    # Only the canonical spelling is accepted: unused low bits of the last character
    # must be zero, so no two texts open the same cursor.
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != cursor:
        _refuse("malformed")
    return raw
