"""Forged records of the shared ledger (``opgate.redis._ledger``): a Redis writer without
the secret cannot move a record.

Each field it forges is refused (``expired``, or an answer that differs) by the
identity and state MACs a replica checks before it acts on a record: the handler is
not called, and a completed call never runs again for real.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from opgate import Completed, Failed, FailureCode, InputMode, Pending, Registry

from conftest import Ctx, free_port
from redis_replicas import (
    SHORT_LEASE,
    STATE,
    Raw,
    Replicas,
    Steps,
    answer,
    start,
    stop_renewing,
    until_not_busy,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def replicas(redis_server: Any, request: pytest.FixtureRequest) -> Any:
    group = Replicas(redis_server.url, f"f-{request.node.name[:40]}-{free_port()}")
    try:
        yield group
    finally:
        await group.close()


@pytest.fixture
async def raw(replicas: Replicas) -> Any:
    access = Raw(replicas)
    try:
        yield access
    finally:
        await access.client.aclose()


class Scene:
    """Chain X (the victim) and chain Y (same arguments, so the same binding): Redis
    holds records the writer may copy from."""

    def __init__(self, a: Registry, b: Registry, handler: Steps, raw: Raw) -> None:
        self.a, self.b, self.handler, self.raw = a, b, handler, raw
        self.x: list[Pending] = []
        self.y: list[Pending] = []

    async def make(self, stage: str) -> None:
        """``pending`` (x[0]), ``answered`` (x[0] answered, x[1] pending) or
        ``completed`` (x[1] completed); Y the same."""
        for chain in (self.x, self.y):
            chain.append(await start(self.a))
            if stage in ("answered", "completed"):
                chain.append(await answer(self.a, chain[0]))
                assert isinstance(chain[-1], Pending)
            if stage == "completed":
                assert isinstance(await answer(self.a, chain[1]), Completed)


async def forge_completed_to_pending(scene: Scene) -> Pending:
    await scene.make("completed")
    await scene.raw.set(scene.x[1], s="pending")  # the attack the issue names
    return scene.x[1]


async def forge_completed_to_pending_with_anothers_mac(scene: Scene) -> Pending:
    await scene.make("completed")
    other = await start(scene.a)  # a pending record: its state MAC says pending
    await scene.raw.set(scene.x[1], s="pending", v=await scene.raw.get(other, "v"))
    await scene.raw.client.hdel(scene.raw.record(scene.x[1]), "a")
    return scene.x[1]


async def forge_completed_to_answered(scene: Scene) -> Pending:
    await scene.make("completed")
    await scene.raw.set(scene.x[1], s="answered")
    return scene.x[1]


async def forge_pending_to_completed(scene: Scene) -> Pending:
    await scene.make("completed")
    await scene.raw.set(scene.x[1], s="pending")  # (refused, removed)
    fresh = await start(scene.a)
    await scene.raw.set(fresh, s="completed", a=await scene.raw.get(scene.y[1], "a"))
    return fresh


async def forge_round(scene: Scene) -> Pending:
    await scene.make("pending")
    await scene.raw.set(scene.x[0], n=9)
    return scene.x[0]


async def forge_deadline(scene: Scene) -> Pending:
    await scene.make("pending")
    deadline = int(await scene.raw.get(scene.x[0], "d"))
    await scene.raw.set(scene.x[0], d=deadline + 10**9)
    return scene.x[0]


async def forge_binding(scene: Scene) -> Pending:
    await scene.make("pending")
    other = await scene.a.invoke(
        Ctx(), "orders.refund", '{"order": "another"}', input_support={InputMode.FORM}
    )
    assert isinstance(other, Pending)
    await scene.raw.set(scene.x[0], b=await scene.raw.get(other, "b"))
    return scene.x[0]


async def forge_chain(scene: Scene) -> Pending:
    await scene.make("pending")
    await scene.raw.set(scene.x[0], c=await scene.raw.get(scene.y[0], "c"))
    return scene.x[0]


async def forge_identity_mac(scene: Scene) -> Pending:
    await scene.make("pending")
    await scene.raw.set(scene.x[0], i=await scene.raw.get(scene.y[0], "i"), n=1)
    return scene.x[0]


async def forge_prompt(scene: Scene) -> Pending:
    await scene.make("pending")
    await scene.raw.set(scene.x[0], m=await scene.raw.get(scene.y[0], "m"))
    return scene.x[0]


async def forge_answer(scene: Scene) -> Pending:
    await scene.make("completed")
    await scene.raw.set(scene.x[1], a=await scene.raw.get(scene.y[1], "a"))
    return scene.x[1]


async def forge_child(scene: Scene) -> Pending:
    await scene.make("answered")
    await scene.raw.set(scene.x[0], k=await scene.raw.get(scene.y[0], "k"))
    return scene.x[0]


async def forge_child_token(scene: Scene) -> Pending:
    await scene.make("answered")
    y = scene.y[0]
    await scene.raw.set(scene.x[0], k=await scene.raw.get(y, "k"), t=await scene.raw.get(y, "t"))
    return scene.x[0]


async def forge_whole_record(scene: Scene) -> Pending:
    await scene.make("completed")
    fields = await scene.raw.client.hgetall(scene.raw.record(scene.y[0]))  # Y's first: answered
    await scene.raw.client.hset(scene.raw.record(scene.x[1]), mapping=fields)
    return scene.x[1]


async def forge_broken_claim_mac(scene: Scene) -> Pending:
    """While its answer runs, the writer replaces the MAC the claim left for a lease
    expiry with the record's own earlier (pending) state MAC, and the replica dies."""
    await scene.make("pending")
    x = scene.x[0]
    scene.handler.gate = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(answer, scene.a, x)
        await scene.handler.entered.wait()
        await scene.raw.set(x, w=await scene.raw.get(x, "v"))
        stop_renewing(scene.a)
        with anyio.fail_after(20):
            while (await scene.raw.get(x, "s")) != b"needs_recovery":
                await scene.b.search(None, "orders")  # any call: time passes in Redis
                await scene.b._ledger.statistics()  # type: ignore[attr-defined]
                await anyio.sleep(0.05)
        scene.handler.gate.set()
    scene.handler.gate = None
    return x


#: Forgeries of a record never answered: the replica that issued it keeps its own
#: authentic copy of what they alter, so its answer there is the genuine first one.
UNANSWERED = {"round", "deadline", "chain", "identity-mac", "sealed-prompt", "binding"}

#: Each forgery, and whether the replica's MAC check (rather than a lookup) refuses it.
FORGERIES: dict[str, tuple[Callable[[Scene], Awaitable[Pending]], bool]] = {
    "state-completed-to-pending": (forge_completed_to_pending, True),
    "state-completed-to-pending-another-records-state-mac": (
        forge_completed_to_pending_with_anothers_mac,
        True,
    ),
    "state-completed-to-answered": (forge_completed_to_answered, True),
    "state-pending-to-completed-another-records-answer": (forge_pending_to_completed, False),
    "round": (forge_round, True),
    "deadline": (forge_deadline, True),
    "binding": (forge_binding, False),
    "chain": (forge_chain, False),
    "identity-mac": (forge_identity_mac, True),
    "sealed-prompt": (forge_prompt, True),
    "answer-mac": (forge_answer, False),
    "child": (forge_child, True),
    "child-and-its-sealed-token": (forge_child_token, True),
    "whole-record-from-another-key": (forge_whole_record, False),
    "lease-expiry-state-mac": (forge_broken_claim_mac, True),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_record_is_refused(replicas: Replicas, raw: Raw, forgery: str) -> None:
    """The writer changes one field (or copies it from another record); the identical
    answer, on the replica that reads the record from Redis and (once the record was
    answered) on the one that issued it, never reaches the handler, and the forged
    record is refused. A record never answered stays answerable, once, on the replica
    that issued it and kept its authentic copy."""
    handler = Steps()
    a = replicas.replica(handler, lease=SHORT_LEASE)
    b = replicas.replica(handler, lease=SHORT_LEASE)
    scene = Scene(a, b, handler, raw)
    make, by_mac = FORGERIES[forgery]
    target = await make(scene)
    before = list(handler.calls)
    forged = b._ledger.forged  # type: ignore[attr-defined]
    for reg in (b,) if forgery in UNANSWERED else (b, a):
        outcome = await until_not_busy(reg, target)
        assert isinstance(outcome, Failed), (forgery, outcome)
        assert outcome.failure.code in (FailureCode.EXPIRED, FailureCode.INVALID_REQUEST)
    assert handler.calls == before, forgery  # the handler was not called at all
    if by_mac:
        assert b._ledger.forged > forged, forgery  # type: ignore[attr-defined]
    if forgery in UNANSWERED:
        assert isinstance(await answer(a, target), Pending)  # the genuine first answer
        assert handler.calls == [*before, ({**STATE, "step": 1}, False)]


def test_the_forgery_figures() -> None:
    """docs/security.md gives these figures; keep them true."""
    assert len(FORGERIES) == 15
    assert sum(by_mac for _, by_mac in FORGERIES.values()) == 10
