"""``opgate.redis._script``: the shared ledger's Lua script on a real ``redis-server``.

* The script's state table is ``TRANSITIONS``: every settle, give-back and claim the
  script runs follows it and refuses the rest (whatever state Redis holds).
* A run whose reply was lost and that the replica sends again (the same ids) is
  recognized as the earlier run: nothing charged twice, no ``busy`` against its own
  claim, no prompt committed twice or orphaned.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as redis_client

from opgate import Completed, Failed, FailureCode, Pending
from opgate.ledger import IN_FLIGHT, TRANSITIONS, Event, RecordState, token_hash
from opgate.redis._script import CLAIM_EVENTS, GIVE_BACK
from opgate.redis._wire import ScriptWire

from conftest import free_port, ledger_stats
from redis_replicas import Raw, Replicas, Steps, answer, start

pytestmark = pytest.mark.anyio

SETTLING = [Event.REVERT, Event.PROMPTED, Event.FINISHED, Event.BROKEN, Event.REPLAYED]
SETTLING += [Event.RECOVERED]


@pytest.fixture
async def replicas(redis_server: Any, request: pytest.FixtureRequest) -> Any:
    group = Replicas(redis_server.url, f"s-{request.node.name[:40]}-{free_port()}")
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


# -- one state table ------------------------------------------------------------------------


async def test_every_settle_follows_the_table_and_refuses_the_rest(
    replicas: Replicas, raw: Raw
) -> None:
    reg = replicas.replica(Steps())
    backend: Any = reg._ledger
    pending = await start(reg)
    key = token_hash(pending.continuation).hex()
    chain = (await raw.get(pending, "c")).decode()
    checked = 0
    for state in RecordState:
        for event in [*(e.value for e in SETTLING), "abandon"]:
            await raw.set(pending, s=state.value, h="c1", w="w")
            reply = await backend._run(
                "settle", backend._now_ms(), key, chain, event, "c1", "", b"mac"
            )
            after = (await raw.get(pending, "s")).decode()
            if state not in IN_FLIGHT:
                assert reply[0] == "lost", (state, event)
                assert after == state.value
                continue
            allowed = TRANSITIONS[state].get(
                GIVE_BACK[state] if event == "abandon" else Event(event)
            )
            if allowed is None:
                assert reply[0] == "illegal", (state, event)
                assert after == state.value
            else:
                assert reply[0] == "ok", (state, event)
                assert after == allowed.value
            checked += 1
    assert checked == len(IN_FLIGHT) * (len(SETTLING) + 1)


async def test_every_claim_follows_the_table(replicas: Replicas, raw: Raw) -> None:
    reg = replicas.replica(Steps())
    backend: Any = reg._ledger
    pending = await start(reg)
    key = token_hash(pending.continuation).hex()
    chain = (await raw.get(pending, "c")).decode()
    for state in [*RecordState, "bogus"]:
        name = state.value if isinstance(state, RecordState) else state
        await raw.client.hdel(raw.record(pending), "h")
        await raw.set(pending, s=name, a="A")
        reply = await backend._run(
            "claim", backend._now_ms(), key, chain, "A", 0, 0, "r1", "c2", b"n", b"a"
        )
        after = (await raw.get(pending, "s")).decode()
        if state in IN_FLIGHT:
            assert reply[0] == "busy"
            continue
        if not isinstance(state, RecordState):
            assert reply[0] == "illegal"
            assert after == name
            continue
        event = next(e for e in CLAIM_EVENTS if e in TRANSITIONS[state])
        assert reply[0] == "ok", (state, reply)
        assert reply[1].decode() == event.value
        assert after == TRANSITIONS[state][event].value
        await backend._run("release", backend._now_ms(), "r1")


async def test_a_record_in_a_state_outside_the_table_is_refused(
    replicas: Replicas, raw: Raw
) -> None:
    handler = Steps()
    a, b = replicas.replica(handler), replicas.replica(handler)
    pending = await start(a)
    await raw.set(pending, s="bogus")
    outcome = await answer(b, pending)
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.EXPIRED
    assert len(handler.calls) == 1


# -- a run sent again ------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["begin", "commit", "claim", "settle"])
async def test_a_script_run_whose_reply_was_lost_is_not_run_twice(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """A connection can drop after Redis ran a script and before its reply came back; the
    replica then sends the same run again (the same ids) on a new connection. The script
    must recognize its own earlier run: no second reservation charged, no ``busy`` against
    its own claim, no prompt committed twice or orphaned."""
    handler = Steps()
    reg = replicas.replica(handler)

    async def chain() -> None:
        first = await start(reg)
        second = await answer(reg, first)
        assert isinstance(second, Pending), second
        assert isinstance(await answer(reg, second), Completed)

    await chain()  # a clean chain: what one completed chain keeps charged
    clean = (await ledger_stats(reg)).used
    exchange = ScriptWire._exchange
    marker = b"$%d\r\n%s\r\n" % (len(op), op.encode())
    lost: list[bytes] = []

    async def losing(self: ScriptWire, connection: Any, command: bytes) -> Any:
        reply = await exchange(self, connection, command)
        if marker in command and not lost:
            lost.append(command)  # it ran on the server; its reply never arrives
            raise redis_client.ConnectionError("connection reset by peer")
        return reply

    monkeypatch.setattr(ScriptWire, "_exchange", losing)
    del handler.calls[:]
    await chain()
    assert lost
    assert [call is None or call[1] for call in handler.calls] == [True, False, False]
    assert (await ledger_stats(reg)).used == 2 * clean  # nothing charged twice, nothing left
    assert await reg._ledger.reservations() == 0  # type: ignore[attr-defined]
