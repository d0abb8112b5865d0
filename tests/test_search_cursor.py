"""Tests of ``opgate._search._cursor``: sealed search cursors.

Round trips, binding, expiry, and refusal of every alteration, on ``CursorSealer``
itself; then cursors through ``Registry.search``: bound to the principal, query, group
and registry, expiring after ten minutes, naming no scope key, fitting the smallest
token budget, and free to change the page size.
"""

from __future__ import annotations

import base64
import pickle
import re
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate import Failed, FailureCode, Registry, SearchPage
from opgate._limits import Limits
from opgate._search._cursor import (
    CURSOR_CHARS,
    CURSOR_LIFETIME,
    MAX_POSITION,
    CursorBinding,
    CursorError,
    CursorSealer,
)
from registry_support import op, registry

from conftest import AllowAll, Ctx, TeamPolicy

pytestmark = pytest.mark.anyio

FAST = settings(max_examples=150, deadline=None)
ALPHABET = string.ascii_letters + string.digits + "-_"


class Clock:
    """A settable clock, in seconds."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def binding(**changes: object) -> CursorBinding:
    fields: dict[str, object] = {
        "method": "search",
        "revision": "rev-1",
        "query": "Orders refund",
        "group": "billing",
        "scope_hash": bytes(range(32)),
    }
    fields.update(changes)
    return CursorBinding(**fields)  # type: ignore[arg-type]


def refused(sealer: CursorSealer, cursor: object, bound: CursorBinding | None = None) -> str:
    with pytest.raises(CursorError) as caught:
        sealer.open(cursor, bound or binding())  # type: ignore[arg-type]
    assert str(caught.value) == "invalid cursor"  # never says which check failed
    return caught.value.reason


texts = st.text(max_size=40)  # includes lone surrogates and every plane
bindings = st.builds(
    CursorBinding,
    method=texts,
    revision=texts,
    query=texts,
    group=texts,
    scope_hash=st.binary(min_size=32, max_size=32),
)


@FAST
@given(bound=bindings, tier=st.integers(0, 255), position=st.integers(0, MAX_POSITION))
def test_round_trip(bound: CursorBinding, tier: int, position: int) -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(bound, (tier, position))
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    assert len(cursor) == CURSOR_CHARS
    assert sealer.open(cursor, bound) == (tier, position)


def test_cursors_are_short_and_carry_no_plaintext() -> None:
    sealer = CursorSealer()
    secret_query = "needle-in-the-query"
    bound = binding(query=secret_query, group="needle-group")
    # every cursor has one length, within the smallest token budget (issue 9, item 18)
    assert CURSOR_CHARS == 55
    assert Limits(token_bytes=64).token_bytes >= CURSOR_CHARS
    for position in (0, 4660, MAX_POSITION):
        cursor = sealer.seal(bound, (3, position))
        assert len(cursor) == CURSOR_CHARS
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        assert b"needle" not in raw
        assert position.to_bytes(4, "big") not in raw  # the position is encrypted too
        assert "needle" not in cursor


def test_each_cursor_has_a_fresh_nonce() -> None:
    sealer = CursorSealer(clock=Clock())
    cursors = {sealer.seal(binding(), (0, 7)) for _ in range(50)}
    assert len(cursors) == 50
    assert len({cursor[:16] for cursor in cursors}) == 50  # the nonce leads


@pytest.mark.parametrize(
    "changed",
    [
        {"method": "inspect"},
        {"revision": "rev-2"},
        {"query": "orders refund"},  # casing is bound: exact names are case-sensitive
        {"query": "Orders  refund"},
        {"query": "Orders refund x"},
        {"query": ""},
        {"group": "Billing"},
        {"group": ""},
        {"scope_hash": bytes(32)},
        {"scope_hash": bytes(range(1, 33))},
    ],
)
def test_a_cursor_opens_only_for_its_own_binding(changed: dict[str, object]) -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(), (1, 17))
    assert refused(sealer, cursor, binding(**changed)) == "unauthentic"
    assert sealer.open(cursor, binding()) == (1, 17)


def test_binding_fields_cannot_be_shifted_into_each_other() -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(query="ab", group="c"), (0, 1))
    assert refused(sealer, cursor, binding(query="a", group="bc")) == "unauthentic"
    cursor = sealer.seal(binding(method="search", revision=""), (0, 1))
    assert refused(sealer, cursor, binding(method="", revision="search")) == "unauthentic"


def test_another_sealer_cannot_open_a_cursor() -> None:
    cursor = CursorSealer().seal(binding(), (0, 2))
    assert refused(CursorSealer(), cursor) == "unauthentic"


def test_expiry_is_checked_with_the_injected_clock() -> None:
    clock = Clock()
    sealer = CursorSealer(clock=clock)
    sealed_at = clock.now
    cursor = sealer.seal(binding(), (2, 3))
    clock.now = sealed_at + CURSOR_LIFETIME - 0.001
    assert sealer.open(cursor, binding()) == (2, 3)
    clock.now = sealed_at + CURSOR_LIFETIME  # at the expiry instant: expired
    assert refused(sealer, cursor) == "expired"
    clock.now = sealed_at + 10 * CURSOR_LIFETIME
    assert refused(sealer, cursor) == "expired"
    assert CURSOR_LIFETIME == 600.0


def test_a_custom_lifetime_is_honoured_and_validated() -> None:
    clock = Clock(0.0)
    sealer = CursorSealer(lifetime=5, clock=clock)
    cursor = sealer.seal(binding(), (0, 2))
    clock.now = 4.999
    assert sealer.open(cursor, binding()) == (0, 2)
    clock.now = 5.0
    assert refused(sealer, cursor) == "expired"
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive and finite"):
            CursorSealer(lifetime=bad)
    for wrong in ("600", True, None):
        with pytest.raises(TypeError):
            CursorSealer(lifetime=wrong)  # type: ignore[arg-type]


def test_every_altered_character_is_refused() -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(), (3, 17))
    for place, original in enumerate(cursor):
        for replacement in ALPHABET:
            if replacement != original:
                altered = cursor[:place] + replacement + cursor[place + 1 :]
                assert refused(sealer, altered) in ("unauthentic", "malformed")


def test_every_altered_bit_is_refused() -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(), (0, 9))
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    for place in range(len(raw)):
        for bit in range(8):
            altered = bytearray(raw)
            altered[place] ^= 1 << bit
            text = base64.urlsafe_b64encode(bytes(altered)).rstrip(b"=").decode()
            assert refused(sealer, text) == "unauthentic"


def test_truncated_and_extended_cursors_are_refused() -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(), (1, 20))
    for length in range(len(cursor)):
        assert refused(sealer, cursor[:length]) in ("unauthentic", "malformed")
    for extra in ALPHABET:
        assert refused(sealer, cursor + extra) in ("unauthentic", "malformed")
        assert refused(sealer, extra + cursor) in ("unauthentic", "malformed")
    assert refused(sealer, cursor + cursor) == "malformed"  # every cursor has one length


@pytest.mark.parametrize(
    "spoil",
    [
        lambda c: c + "=",
        lambda c: c + "==",
        lambda c: c.replace("-", "+").replace("_", "/") + "+/",
        lambda c: " " + c,
        lambda c: c + "\n",
        lambda c: c[:10] + "." + c[11:],
        lambda c: c[:10] + "\u00e9" + c[11:],
        lambda c: c[:10] + "\uff21" + c[11:],  # a fullwidth A
        lambda c: c.encode(),
        lambda c: None,
        lambda c: 12345,
        lambda c: "",
        lambda c: "A" * 5000,
    ],
)
def test_other_alphabets_and_types_are_refused(spoil: object) -> None:
    sealer = CursorSealer()
    cursor = sealer.seal(binding(), (1, 5))
    assert refused(sealer, spoil(cursor)) == "malformed"  # type: ignore[operator]


# The base64url alphabet in value order: a character's index is its six bits.
BASE64 = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def test_non_canonical_base64_is_refused() -> None:
    sealer = CursorSealer()
    for position in range(3):
        cursor = sealer.seal(binding(), (0, position))
        unused_bits = {2: 4, 3: 2, 0: 0}[len(cursor) % 4]
        value = BASE64.index(cursor[-1])
        assert value & ((1 << unused_bits) - 1) == 0
        for low in range(1, 1 << unused_bits):
            # Decodes to the same bytes, but only the canonical spelling is accepted.
            assert refused(sealer, cursor[:-1] + BASE64[value | low]) == "malformed"


def test_seal_validates_the_position() -> None:
    sealer = CursorSealer()
    for tier in (-1, 256, True, 1.0, "1"):
        with pytest.raises(ValueError, match="tier"):
            sealer.seal(binding(), (tier, 1))  # type: ignore[arg-type]
    for position in (-1, MAX_POSITION + 1, True, 1.0, "x", b"x"):
        with pytest.raises(ValueError, match="position"):
            sealer.seal(binding(), (0, position))  # type: ignore[arg-type]


def test_binding_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        binding(scope_hash=bytes(31))
    with pytest.raises(ValueError, match="32 bytes"):
        binding(scope_hash="a" * 32)
    with pytest.raises(TypeError, match="query"):
        binding(query=None)
    assert "scope_hash" not in repr(binding())


def test_the_key_never_shows() -> None:
    sealer = CursorSealer(lifetime=60)
    assert repr(sealer) == "CursorSealer(lifetime=60.0)"
    assert not hasattr(sealer, "__dict__")
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(sealer)
    assert refused(sealer, "A" * CURSOR_CHARS) == "unauthentic"  # well-formed, not sealed here


# --- cursors through Registry.search ----------------------------------------------------


async def test_page_size_may_change_on_continuation() -> None:
    reg = registry([op(f"op{i:02}") for i in range(30)], policy=AllowAll())
    first = await reg.search(Ctx(), "", limit=3)
    assert isinstance(first, SearchPage)
    second = await reg.search(Ctx(), "", limit=10, cursor=first.next_cursor)
    assert isinstance(second, SearchPage)
    assert [i.name for i in second.items] == [f"op{i:02}" for i in range(3, 13)]


async def first_cursor(reg: Registry, ctx: Ctx, query: str = "", group: str = "") -> str:
    page = await reg.search(ctx, query, group=group, limit=1)
    assert isinstance(page, SearchPage)
    assert page.next_cursor is not None
    return page.next_cursor


async def assert_invalid_cursor(reg: Registry, ctx: Ctx, cursor: str, **kwargs: Any) -> None:
    outcome = await reg.search(ctx, kwargs.pop("query", ""), cursor=cursor, **kwargs)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code in (FailureCode.INVALID_CURSOR, FailureCode.INVALID_REQUEST)


async def test_tampered_cursor_bytes_fail_at_every_position() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx())
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    for index in range(len(raw)):
        altered = bytearray(raw)
        altered[index] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(altered)).decode().rstrip("=")
        await assert_invalid_cursor(reg, Ctx(), text)
    for index in range(len(cursor)):
        swapped = cursor[:index] + ("A" if cursor[index] != "A" else "B") + cursor[index + 1 :]
        await assert_invalid_cursor(reg, Ctx(), swapped)


async def test_truncated_extended_and_garbage_cursors_fail() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx())
    for bad in (cursor[:-1], cursor[: len(cursor) // 2], "", cursor + "A", "!!!", "x" * 2000):
        await assert_invalid_cursor(reg, Ctx(), bad)


async def test_cursor_bound_to_scope_query_group_and_registry() -> None:
    reg = registry(policy=TeamPolicy())
    cursor = await first_cursor(reg, Ctx(), "orders")
    ok = await reg.search(Ctx(), "orders", cursor=cursor)
    assert isinstance(ok, SearchPage)
    await assert_invalid_cursor(reg, Ctx(principal="bob"), cursor, query="orders")
    await assert_invalid_cursor(reg, Ctx(), cursor, query="refund")
    await assert_invalid_cursor(reg, Ctx(), cursor, query="Orders")  # casing is bound
    await assert_invalid_cursor(reg, Ctx(), cursor, query="orders", group="billing")
    other = registry(policy=TeamPolicy())
    await assert_invalid_cursor(other, Ctx(), cursor, query="orders")
    # whitespace-normalized query continues fine
    again = await reg.search(Ctx(), "  orders ", cursor=cursor)
    assert isinstance(again, SearchPage)


async def test_cursor_group_binding_ignores_group_case() -> None:
    reg = registry(policy=AllowAll())
    cursor = await first_cursor(reg, Ctx(), "", group="orders")
    page = await reg.search(Ctx(), "", group="ORDERS", cursor=cursor)
    assert isinstance(page, SearchPage)
    assert [i.name for i in page.items] == ["orders.refund"]


async def test_cursor_expires_after_ten_minutes() -> None:
    clock = Clock()
    reg = registry(policy=AllowAll(), clock=clock)
    cursor = await first_cursor(reg, Ctx())
    clock.now += 599
    assert isinstance(await reg.search(Ctx(), "", cursor=cursor), SearchPage)
    clock.now += 2
    await assert_invalid_cursor(reg, Ctx(), cursor)


async def test_public_messages_never_contain_scope_key() -> None:
    reg = registry(policy=TeamPolicy())
    cursor = await first_cursor(reg, Ctx(principal="alice-secret-scope"))
    outcome = await reg.search(Ctx(principal="mallory"), "", cursor=cursor)
    assert isinstance(outcome, Failed)
    assert "alice-secret-scope" not in str(outcome.failure)
    assert "alice-secret-scope" not in cursor


def test_the_smallest_token_budget_holds_cursors_for_any_name() -> None:
    # cursors carry a catalog position, not a name (issue 9, item 18)
    registry([op("a" * 10)], limits=Limits(token_bytes=64))
    registry([op("a" * 128)], limits=Limits(token_bytes=64))
