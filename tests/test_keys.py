"""Tests of ``opgate._keys``: the registry's secret, its subkeys, scope-key hashes and the
definitions revision.

A given secret is bytes of 32 to 4,096; each use gets its own HMAC-derived subkey, the
same for every replica holding the secret, and none is ever printed or pickled. Scope
keys are hashed under the scope subkey, with a bounded memo. The revision hashes each
definition field by field, the same bytes however the hashing is batched.
"""

from __future__ import annotations

import dataclasses
import hmac
import pickle

import pytest

from opgate import _keys
from opgate._keys import (
    SECRET_MAX_BYTES,
    SECRET_MIN_BYTES,
    Definition,
    RegistryKeys,
    ScopeHashes,
    definitions_revision,
)


def test_the_revision_hashes_the_same_bytes_as_field_by_field_updates() -> None:
    # The revision is shared between replicas: batching the hash calls must not change it.
    import hashlib
    import random

    from opgate._keys import Definition, definitions_revision

    rng = random.Random(4)

    def text() -> str:
        return "".join(rng.choice("aé\ud800b😀 ") for _ in range(rng.randint(0, 12)))

    shared = b'{"type":"object"}'
    definitions = [
        Definition(
            f"op{i:05d}",
            text(),
            text(),
            text(),
            tuple(text() for _ in range(rng.randint(0, 3))),
            text(),
            shared if i % 3 else text().encode("utf-8", "surrogatepass"),
            None if i % 2 else text().encode("utf-8", "surrogatepass"),
        )
        for i in range(1500)  # well over one batch of fields
    ]
    rng.shuffle(definitions)

    digest = hashlib.sha256(b"opgate/revision/v2")

    def put(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)

    put(b"9.9")
    for item in sorted(definitions, key=lambda d: d.name):
        for field in (item.name, item.group, item.summary, item.description, item.source):
            put(field.encode("utf-8", "surrogatepass"))
        digest.update(len(item.examples).to_bytes(4, "big"))
        for example in item.examples:
            put(example.encode("utf-8", "surrogatepass"))
        put(hashlib.sha256(item.input_schema).digest())
        if item.output_schema is None:
            digest.update(b"\0")
        else:
            digest.update(b"\1")
            put(hashlib.sha256(item.output_schema).digest())
    assert definitions_revision(definitions, "9.9") == digest.hexdigest()[:32]


SECRET = b"k" * SECRET_MIN_BYTES


def test_one_secret_derives_the_same_four_distinct_subkeys() -> None:
    keys = RegistryKeys.from_secret(SECRET)
    assert keys.shared
    subkeys = (keys.cursor, keys.scope, keys.seal, keys.mac)
    assert len(set(subkeys)) == 4
    assert all(len(key) == 32 for key in subkeys)
    assert keys.cursor == hmac.new(SECRET, b"opgate/key/cursor/v1", "sha256").digest()
    again = RegistryKeys.from_secret(bytearray(SECRET))
    assert (again.cursor, again.scope, again.seal, again.mac) == subkeys
    other = RegistryKeys.from_secret(b"l" * SECRET_MIN_BYTES)
    assert not set(subkeys) & {other.cursor, other.scope, other.seal, other.mac}


def test_without_a_secret_each_registry_makes_its_own() -> None:
    first, second = RegistryKeys.from_secret(None), RegistryKeys.from_secret(None)
    assert not first.shared
    assert first.cursor != second.cursor


def test_a_secret_is_bytes_of_a_sensible_length() -> None:
    with pytest.raises(TypeError, match="secret must be bytes"):
        RegistryKeys.from_secret("k" * 32)  # type: ignore[arg-type]
    for size in (SECRET_MIN_BYTES - 1, SECRET_MAX_BYTES + 1):
        with pytest.raises(ValueError, match=f"got {size}"):
            RegistryKeys.from_secret(b"k" * size)
    RegistryKeys.from_secret(b"k" * SECRET_MAX_BYTES)


def test_keys_are_never_printed_or_pickled() -> None:
    keys = RegistryKeys.from_secret(SECRET)
    assert repr(keys) == "RegistryKeys(shared=True)"
    hashes = ScopeHashes(keys.scope)
    for value in (keys, hashes):
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(value)


def test_a_scope_hash_is_the_hmac_of_the_key_and_its_memo_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = RegistryKeys.from_secret(SECRET).scope
    hashes = ScopeHashes(key)
    expected = hmac.new(key, b"alice:user", "sha256").digest()
    assert hashes.of("alice:user") == expected
    assert hashes.of("alice:user") is hashes.of("alice:user")  # remembered
    assert hashes.of("bob:user") != expected
    monkeypatch.setattr(_keys, "SCOPE_HASHES_CACHED", 3)
    for index in range(10):
        assert hashes.of(f"p{index}") == hmac.new(key, f"p{index}".encode(), "sha256").digest()
        assert len(hashes._cached) <= 3


def test_the_revision_counts_every_field_and_the_version() -> None:
    base = Definition("a", "g", "s", "d", ("e",), "src", b'{"type":"object"}', None)
    revision = definitions_revision([base], "1.0")
    assert len(revision) == 32
    assert definitions_revision([base], "1.0") == revision
    assert definitions_revision([base], "1.1") != revision
    changes = [
        {"name": "b"},
        {"group": "h"},
        {"summary": "t"},
        {"description": "e"},
        {"examples": ()},
        {"examples": ("e", "")},
        {"source": "other"},
        {"input_schema": b"{}"},
        {"output_schema": b'{"type":"object"}'},
    ]
    for change in changes:
        assert definitions_revision([dataclasses.replace(base, **change)], "1.0") != revision
    # a field's bytes never run into the next field's
    shifted = dataclasses.replace(base, group="gs", summary="")
    assert definitions_revision([shifted], "1.0") != revision
