"""The shared Redis ledger beyond the contract suite: replicas, secrets, leases, faults.

Replicas here are registries in one process built from the same definitions with the
same secret and ``RedisLedger`` prefix, on a real ``redis-server``; the multi-process
HTTP tests are in test_replicas.py; the script's own rules in test_redis_script.py,
forged records in test_redis_ledger_forgeries.py.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as redis_client

from opgate import (
    Completed,
    ConfigurationError,
    Failed,
    FailureCode,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Pending,
    Registry,
    Result,
    SearchPage,
    Text,
    finish,
)
from opgate.redis import RedisLedger

from conftest import SECRET, Ctx, TeamPolicy, free_port, ledger_stats
from redis_replicas import (
    ARGS,
    FORM_SUPPORT,
    SHORT_LEASE,
    STATE,
    Replicas,
    Steps,
    answer,
    catalog,
    start,
    stop_renewing,
    until_not_busy,
)
from redis_server import RedisServer

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self, now: float = 2_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def replicas(redis_server: Any, request: pytest.FixtureRequest) -> Any:
    group = Replicas(redis_server.url, f"r-{request.node.name[:40]}-{free_port()}")
    try:
        yield group
    finally:
        await group.close()


def code(outcome: Any) -> FailureCode:
    assert isinstance(outcome, Failed), outcome
    return outcome.failure.code


# -- configuration ---------------------------------------------------------------------


def test_a_shared_ledger_needs_a_shared_secret(redis_server: Any) -> None:
    with pytest.raises(ConfigurationError, match="shared secret"):
        Registry(catalog(Steps()), TeamPolicy(), ledger=RedisLedger(redis_server.url))
    with pytest.raises(ConfigurationError, match="32"):
        Registry(catalog(Steps()), TeamPolicy(), secret=b"short")
    with pytest.raises(TypeError):
        Registry(catalog(Steps()), TeamPolicy(), secret="a str is not bytes" * 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="URL"):
        RedisLedger("localhost:6379")
    with pytest.raises(ValueError, match="lease"):
        RedisLedger(redis_server.url, lease=timedelta(milliseconds=1))
    assert "6379" not in repr(RedisLedger("redis://:password@host:6379/0"))


def test_the_revision_is_a_hash_of_the_definitions() -> None:
    one = Registry(catalog(Steps()), TeamPolicy())
    same = Registry(catalog(Steps()), TeamPolicy())
    other = Registry(catalog(Steps(), extra=13), TeamPolicy())
    renamed = [Operation("orders.refund", "Refund an order (v2)", Steps())]
    assert one.revision == same.revision
    assert len({one.revision, other.revision, Registry(renamed, TeamPolicy()).revision}) == 3


# -- replicas ------------------------------------------------------------------------------


async def test_replicas_share_cursors_and_continuations(replicas: Replicas) -> None:
    handler = Steps()
    a, b, c = (replicas.replica(handler) for _ in range(3))
    # paging: each page from another replica
    names: list[str] = []
    cursor = None
    for reg in (a, b, c, a, b):
        page = await reg.search(Ctx(), "orders", limit=3, cursor=cursor)
        assert isinstance(page, SearchPage), page
        names += [item.name for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert names == sorted(names)
    assert len(names) == 13
    # a chain whose every step lands on another replica
    first = await start(a)
    second = await answer(b, first)
    assert isinstance(second, Pending)
    replay = await answer(c, first)  # the identical answer again, elsewhere: the same prompt
    assert isinstance(replay, Pending)
    assert (replay.continuation, replay.expires_at, replay.prompt) == (
        second.continuation,
        second.expires_at,
        second.prompt,
    )
    done = await answer(c, second)
    assert isinstance(done, Completed)
    recovered = await answer(a, second)  # after completion: recovery-only, on any replica
    assert isinstance(recovered, Completed)
    assert handler.calls[-1] == ({**STATE, "step": 2}, True)
    assert len(handler.calls) == 4


async def test_another_secret_or_catalog_cannot_use_them(replicas: Replicas) -> None:
    handler = Steps()
    a = replicas.replica(handler)
    stranger = replicas.replica(handler, secret=b"another secret of at least 32 bytes!!")
    newer = replicas.replica(handler, extra=13)
    page = await a.search(Ctx(), "orders", limit=2)
    assert isinstance(page, SearchPage)
    assert page.next_cursor
    for reg in (stranger, newer):
        outcome = await reg.search(Ctx(), "orders", limit=2, cursor=page.next_cursor)
        assert code(outcome) is FailureCode.INVALID_CURSOR
    pending = await start(a)
    assert code(await answer(stranger, pending)) is FailureCode.EXPIRED
    assert code(await answer(newer, pending)) is FailureCode.EXPIRED  # bound to the revision
    assert code(await answer(a, pending, ctx=Ctx(principal="mallory"))) is FailureCode.EXPIRED
    assert isinstance(await answer(a, pending), Pending)
    assert len(handler.calls) == 2


async def test_one_replicas_shutdown_expires_nothing_its_peers_answer(replicas: Replicas) -> None:
    a, b = replicas.replica(Steps()), replicas.replica(Steps())
    serving_a, serving_b = a.open_lifetime(), b.open_lifetime()
    pending = await a.invoke(
        Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, lifetime=serving_a
    )
    assert isinstance(pending, Pending)
    await serving_a.close()
    # a closed handle commits nothing new ...
    refused = await a.invoke(
        Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, lifetime=serving_a
    )
    assert code(refused) is FailureCode.EXPIRED
    # ... but its prompt is still answerable on a peer, through the peer's own lifetime
    assert isinstance(await answer(b, pending, lifetime=serving_b), Pending)
    # direct calls (no lifetime) are a deployment lifetime of their own
    assert code(await answer(b, pending)) is FailureCode.EXPIRED


async def test_two_replicas_racing_one_answer_make_one_transition(replicas: Replicas) -> None:
    handler = Steps()
    a, b = replicas.replica(handler), replicas.replica(handler)
    first = await start(a)
    handler.gate = anyio.Event()
    outcomes: list[Any] = []

    async def run(reg: Registry) -> None:
        outcomes.append(await answer(reg, first))

    async with anyio.create_task_group() as group:
        for reg in (a, b) * 5:
            group.start_soon(run, reg)
        await handler.entered.wait()
        await anyio.sleep(0.05)
        handler.gate.set()
    pending = [o for o in outcomes if isinstance(o, Pending)]
    busy = [o for o in outcomes if isinstance(o, Failed) and o.failure.code is FailureCode.BUSY]
    assert len(pending) + len(busy) == 10
    assert pending
    assert len({p.continuation for p in pending}) == 1
    assert len(handler.calls) == 2  # the initial call and exactly one answer


async def test_a_dead_replicas_transition_is_recovered_after_its_lease(replicas: Replicas) -> None:
    clock = Clock()
    dying, healthy = Steps(), Steps()
    a = replicas.replica(dying, clock=clock, lease=SHORT_LEASE)
    b = replicas.replica(healthy, clock=clock, lease=SHORT_LEASE)
    first = await start(a)
    base = (await ledger_stats(a)).used
    dying.gate = anyio.Event()  # a's handler never returns while we watch
    async with anyio.create_task_group() as group:
        group.start_soon(answer, a, first)
        await dying.entered.wait()
        assert code(await answer(b, first)) is FailureCode.BUSY  # held, across replicas
        await anyio.sleep(SHORT_LEASE.total_seconds() * 2)
        assert code(await answer(b, first)) is FailureCode.BUSY  # a renews: still held
        stop_renewing(a)  # a is "dead"
        stopped = anyio.current_time()
        recovered = await until_not_busy(b, first)
        assert anyio.current_time() - stopped >= SHORT_LEASE.total_seconds() / 2
        assert isinstance(recovered, Completed), recovered
        assert healthy.calls[-1] == ({**STATE, "step": 1}, True)  # recovery-only
        dying.gate.set()  # the "dead" handler returns at last: its settle is refused
    assert isinstance(await answer(b, first), Completed)  # still recoverable, never forked
    # the dead replica's reservation came back with its lease; the answer stays charged
    assert (await ledger_stats(b)).used == base + len(b'{"ok":true}')
    clock.now += 601
    assert (await ledger_stats(b)).used == 0


async def test_a_dead_replicas_reservation_comes_back_after_its_lease(replicas: Replicas) -> None:
    clock = Clock()
    handler = Steps()
    a = replicas.replica(handler, clock=clock, lease=SHORT_LEASE)
    b = replicas.replica(handler, clock=clock, lease=SHORT_LEASE)
    handler.gate = anyio.Event()

    async def blocked(inv: Invocation) -> Any:
        handler.entered.set()
        await anyio.sleep(30)

    stuck = Registry(
        [Operation("orders.refund", "Refund an order", blocked)],
        TeamPolicy(),
        clock=clock,
        secret=SECRET,
        ledger=RedisLedger(replicas.url, prefix=replicas.prefix, lease=SHORT_LEASE),
    )
    replicas.made.append(stuck)
    async with anyio.create_task_group() as group:
        group.start_soon(start, stuck)
        await handler.entered.wait()
        assert (await ledger_stats(b)).used > 0  # an initial call's reservation
        await anyio.sleep(SHORT_LEASE.total_seconds() * 2)
        assert (await ledger_stats(b)).used > 0  # renewed while its handler runs
        stop_renewing(stuck)
        with anyio.fail_after(20):
            while (await ledger_stats(b)).used:
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    assert (await ledger_stats(a)).used == 0


# -- what Redis holds ---------------------------------------------------------------------


async def dump(url: str, prefix: str) -> dict[bytes, Any]:
    client = redis_client.Redis.from_url(url)
    try:
        values: dict[bytes, Any] = {}
        async for key in client.scan_iter(match=f"{{{prefix}}}:*"):
            kind = await client.type(key)
            if kind == b"hash":
                values[key] = await client.hgetall(key)
            elif kind == b"zset":
                values[key] = await client.zrange(key, 0, -1, withscores=True)
            else:
                values[key] = await client.get(key)
        return values
    finally:
        await client.aclose()


async def ttls(url: str, keys: list[bytes]) -> dict[bytes, int]:
    client = redis_client.Redis.from_url(url)
    try:
        return {key: await client.pttl(key) for key in keys}
    finally:
        await client.aclose()


async def test_redis_holds_no_application_data_and_no_tokens(replicas: Replicas) -> None:
    reg = replicas.replica(Steps())
    first = await start(reg)
    second = await reg.invoke(
        Ctx(),
        "orders.refund",
        ARGS,
        input_support=FORM_SUPPORT,
        resume=(first.continuation, InputResponse.accept({"ok": True})),
    )
    assert isinstance(second, Pending)
    everything = repr(await dump(replicas.url, replicas.prefix)).encode()
    for secret in (
        b"ORDER-ARGUMENT-MARKER",
        b"PROMPT-MESSAGE-MARKER",
        b"PRIVATE-STATE-MARKER",
        b"orders.refund",
        b"alice",
        first.continuation.encode(),
        second.continuation.encode(),
        b'"ok"',
    ):
        assert secret not in everything, secret


async def test_record_ttls_are_set_once_and_never_extended(replicas: Replicas) -> None:
    clock = Clock()
    reg = replicas.replica(Steps(), clock=clock)
    first = await start(reg)
    records = [k for k in await dump(replicas.url, replicas.prefix) if b"}:r:" in k]
    assert len(records) == 1
    before = (await ttls(replicas.url, records))[records[0]]
    # deadline (600 s) + lease (15 s) + grace (60 s)
    assert 600_000 < before <= 675_000
    clock.now += 300  # the registry's clock moves; the TTL was set once, relative
    assert isinstance(await answer(reg, first), Pending)
    after = (await ttls(replicas.url, records))[records[0]]
    assert 0 < after <= before


# -- faults ---------------------------------------------------------------------------------


async def test_a_redis_restart_loses_continuations_not_cursors(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    replicas = Replicas(server.url, "restart")
    try:
        handler = Steps()
        a, b = replicas.replica(handler), replicas.replica(handler)
        pending = await start(a)
        page = await a.search(Ctx(), "orders", limit=2)
        assert isinstance(page, SearchPage)
        assert page.next_cursor
        server.restart()
        outcome = await answer(b, pending)
        assert code(outcome) is FailureCode.EXPIRED
        assert "intent or job key" in outcome.failure.message
        # the replica that issued it knows the record, and finds it lost at the claim
        assert code(await answer(a, pending)) is FailureCode.EXPIRED
        assert isinstance(
            await b.search(Ctx(), "orders", limit=2, cursor=page.next_cursor), SearchPage
        )
        # the ledger works again at once
        assert isinstance(await answer(b, await start(b)), Pending)
    finally:
        await replicas.close()
        server.stop()


async def test_an_unreachable_redis_refuses_only_what_needs_it() -> None:
    """Redis down: a first call with input support runs as for a host without it (a
    request for input is ``confirmation_required``, a plain call completes); an answer
    to a prompt is ``busy``, said once ("busy: the continuation store ...")."""
    handler = Steps()
    seen: list[bool] = []

    def plain(inv: Invocation) -> Any:
        seen.append(inv.supports(InputMode.FORM))
        return finish(Result([Text("listed")]))

    operations = [*catalog(handler), Operation("notes.list", "List notes", plain)]
    reg = Registry(
        operations,
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger(f"redis://127.0.0.1:{free_port()}/0"),
    )
    try:
        outcome = await reg.invoke(Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
        assert code(outcome) is FailureCode.CONFIRMATION_REQUIRED
        assert "prompts are unavailable" in outcome.failure.message
        assert handler.calls == [None]  # it ran, and asked for input it could not get
        listed = await reg.invoke(Ctx(), "notes.list", "{}", input_support=FORM_SUPPORT)
        assert isinstance(listed, Completed), listed
        assert seen == [False]  # the handler is told that prompts cannot be shown
        token = "A" * 43
        answer = (token, InputResponse.accept({"ok": True}))
        for _ in range(2):  # tried, then failed at once while Redis was just tried
            resumed = await reg.invoke(
                Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, resume=answer
            )
            assert code(resumed) is FailureCode.BUSY
            assert str(resumed.failure).startswith("busy: the continuation store is unavailable")
            assert str(resumed.failure).count("busy") == 1
        # calls that need no continuation do not touch Redis
        assert (
            code(await reg.invoke(Ctx(), "orders.refund", ARGS))
            is FailureCode.CONFIRMATION_REQUIRED
        )
        assert isinstance(await reg.search(Ctx(), "orders"), SearchPage)
    finally:
        await reg.aclose()


async def test_prompts_in_flight_past_their_deadline_do_not_stall_the_sweep(
    replicas: Replicas,
) -> None:
    """The sweep removes due records in batches of 64 and leaves the ones in flight to
    their settle; 64 long handlers past their deadlines must not keep every later due
    record (and the bytes it holds) from being removed."""
    clock = Clock()
    handler = Steps()
    handler.gate = anyio.Event()
    reg = replicas.replica(handler, clock=clock, lease=timedelta(hours=1))
    held = [await start(reg) for _ in range(64)]
    clock.now += 1
    await start(reg)  # due one second after the held ones; never answered
    async with anyio.create_task_group() as group:
        for pending in held:
            group.start_soon(answer, reg, pending)
        with anyio.fail_after(30):
            while len(handler.calls) < 65 + 64:
                await anyio.sleep(0.01)
        clock.now += 601  # past every deadline; the held handlers are still running
        for _ in range(3):  # each ledger call sweeps one batch; batches move on
            await ledger_stats(reg)
        assert (await ledger_stats(reg)).live == 64  # the idle prompt was removed
        handler.gate.set()
    stats = await ledger_stats(reg)
    assert (stats.live, stats.used) == (0, 0)  # each settle removed its own record


async def accounting(url: str, prefix: str) -> tuple[int, dict[bytes, int], int, list[bytes]]:
    """``used``, the per-principal shares, the chains' retained total, and every key left."""
    values = await dump(url, prefix)
    head = f"{{{prefix}}}:".encode()
    used = int(values.get(head + b"used") or 0)
    scopes = {k: int(v) for k, v in (values.get(head + b"scopes") or {}).items()}
    chains = sum(int(v.get(b"r", 0)) for k, v in values.items() if k.startswith(head + b"c:"))
    return used, scopes, chains, sorted(k[len(head) :] for k in values)


async def test_per_principal_accounting_survives_a_dead_replicas_recovery(
    replicas: Replicas,
) -> None:
    """Two principals, one chain each; alice's answer dies with its replica and is
    recovered elsewhere after the lease. At every step the global count, the sum of the
    principals' shares and the sum of the chains' retained bytes agree; each principal's
    share is what its own chain holds; after the deadlines nothing is left charged."""
    clock = Clock()
    dying, healthy = Steps(), Steps()
    a = replicas.replica(dying, clock=clock, lease=SHORT_LEASE)
    b = replicas.replica(healthy, clock=clock, lease=SHORT_LEASE)
    alice, bob = Ctx("alice"), Ctx("bob")

    async def agree() -> dict[bytes, int]:
        used, scopes, chains, _ = await accounting(replicas.url, replicas.prefix)
        assert used == sum(scopes.values()) == chains
        assert (await ledger_stats(b)).used == used
        return scopes

    first_a, first_b = await start(a, alice), await start(b, bob)
    shares = await agree()
    assert len(shares) == 2
    assert len(set(shares.values())) == 1  # the same flow, the same charge
    dying.gate = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: answer(a, first_a, ctx=alice))
        await dying.entered.wait()
        assert isinstance(await answer(b, first_b, ctx=bob), Pending)  # bob's goes on
        await agree()
        stop_renewing(a)  # alice's replica stopped renewing: its lease runs out
        recovered = await until_not_busy(b, first_a, ctx=alice)
        assert isinstance(recovered, Completed), recovered
        after = await agree()
        dying.gate.set()  # the "dead" handler returns at last: its settle is refused
    assert await agree() == after
    assert await b._ledger.reservations() == 0  # type: ignore[attr-defined]
    clock.now += 601
    await ledger_stats(b)
    used, scopes, chains, keys = await accounting(replicas.url, replicas.prefix)
    assert (used, scopes, chains) == (0, {}, 0)
    assert not [k for k in keys if k.startswith((b"c:", b"r:"))], keys


def test_the_overhead_benchmark_runs_tiny(redis_server: Any) -> None:
    """benchmarks/bench_ledger_redis.py at a tiny scale: both transitions, sane numbers."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_ledger_redis

    table = bench_ledger_redis.run(10, redis_server.url)
    assert [row["transition"] for row in table.rows] == ["prompt", "resume"]
    for row in table.rows:
        assert row["scripts"] == 2
        assert 0 < row["memory µs"] < row["redis µs"]
        assert isinstance(row["ok"], bool)
    assert "server time" in " ".join(table.notes)
