"""Faults of the shared ledger: a stopped, killed or restarted Redis, a replica killed
mid-handler, a handler that blocks its event loop, replicas with skewed clocks.

Every test counts the handler's runs in an effects file (``ledger_faults.py``) and
asserts the ledger's promise: a confirmed answer runs the handler for real
(``recovery_only=False``) at most once, and exactly once when the client is told
it completed; a recovery only ever follows a real run; no two runs of one answer
overlap; every other outcome is a clear, retryable ``busy`` or (after Redis lost
its data) ``expired``. Each Redis here is its own ``redis-server`` (it is stopped and
killed). The default run is short; ``-m slow`` runs many randomized rounds.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as redis_client

from opgate import Completed, Failed, FailureCode, Pending, Registry
from opgate.redis._wire import ScriptWire

from conftest import free_port
from ledger_faults import Effects, answer, prompt, replica
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent


class Redis:
    """A ``redis-server`` of the test's own, and the replicas made on it."""

    def __init__(self, directory: Path) -> None:
        self.server = RedisServer(directory)
        self.server.start()
        self.effects = Effects(directory / "effects.jsonl")
        self.made: list[Registry] = []
        self.prefix = f"faults-{os.getpid()}-{random.randrange(10**9)}"

    def replica(self, **options: Any) -> Registry:
        reg = replica(self.server.url, self.prefix, self.effects, **options)
        self.made.append(reg)
        return reg

    async def close(self) -> None:
        for reg in self.made:
            await reg.aclose()
        self.server.stop()


@pytest.fixture
async def redis(tmp_path: Path) -> Any:
    deployment = Redis(tmp_path)
    try:
        yield deployment
    finally:
        await deployment.close()


def is_busy(outcome: Any) -> bool:
    return isinstance(outcome, Failed) and outcome.failure.code is FailureCode.BUSY


async def until_settled(reg: Registry, chain: int, token: str, seconds: float = 30) -> Any:
    """The identical answer, retried while ``busy`` (bounded)."""
    with anyio.fail_after(seconds):
        while True:
            outcome = await answer(reg, chain, token)
            if not is_busy(outcome):
                return outcome
            await anyio.sleep(0.05)


def check_runs(effects: Effects, chain: int, outcome: Any, *, lost_ok: bool = False) -> None:
    """The ledger's promise for one answer (see the module docstring)."""
    runs = effects.runs(chain)
    real = [run for run in runs if not run["recovery"] and run["phase"] == "start"]
    assert len(real) <= 1, runs  # never doubled
    starts = [run for run in runs if run["phase"] == "start"]
    if starts and starts[0]["recovery"]:
        raise AssertionError(f"a recovery without a real run before it (lost): {runs}")
    # no two runs overlap: each start is followed by its own end, unless its process
    # was killed (kill_round checks that the kill came first)
    open_run: dict[str, Any] | None = None
    for run in runs:
        if run["phase"] == "start":
            if open_run is not None and open_run["pid"] == os.getpid():
                raise AssertionError(f"two runs of one answer overlap: {runs}")
            open_run = run
        else:
            assert open_run is not None, runs
            open_run = None
    if isinstance(outcome, Completed):
        assert len(real) == 1, runs  # completed: it happened, exactly once
    else:
        assert isinstance(outcome, Failed), outcome
        allowed = {FailureCode.BUSY} | ({FailureCode.EXPIRED} if lost_ok else set())
        assert outcome.failure.code in allowed, outcome


# -- item 3: a stopped Redis ----------------------------------------------------------------


async def test_a_claim_that_redis_runs_after_the_replica_gave_up_does_nothing(
    redis: Redis,
) -> None:
    """Redis is stopped while the person's answer arrives; the replica answers ``busy``
    after its timeout; Redis then runs the queued claim, which must do nothing: the
    identical retry performs the confirmed action exactly once, for real."""
    reg = redis.replica()
    pending = await prompt(reg, 1)
    assert isinstance(pending, Pending)
    redis.server.pause()
    try:
        gave_up = await answer(reg, 1, pending.continuation)
    finally:
        redis.server.resume()
    assert is_busy(gave_up), gave_up
    assert "unavailable" in gave_up.failure.message
    assert redis.effects.runs(1) == []
    done = await until_settled(reg, 1, pending.continuation)
    assert isinstance(done, Completed), done
    assert done.result.content[0].text == "sent"  # type: ignore[union-attr]
    check_runs(redis.effects, 1, done)
    assert [(r["recovery"], r["phase"]) for r in redis.effects.runs(1)] == [
        (False, "start"),
        (False, "end"),
    ]


async def test_a_claim_whose_reply_never_came_is_given_back(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis ran the claim, and both the reply and its retry's reply were lost: the
    replica cannot know, so its keeper gives the claim back (the record is answerable
    again at once instead of breaking into ``needs_recovery`` after the lease)."""
    reg = redis.replica(lease=timedelta(seconds=30))
    pending = await prompt(reg, 2)
    assert isinstance(pending, Pending)
    exchange = ScriptWire._exchange
    marker = b"$5\r\nclaim\r\n"
    lost: list[bytes] = []

    async def losing(self: ScriptWire, connection: Any, command: bytes) -> Any:
        reply = await exchange(self, connection, command)
        if marker in command and len(lost) < 2:
            lost.append(command)  # it ran on the server; its reply never arrives
            raise redis_client.ConnectionError("connection reset by peer")
        return reply

    monkeypatch.setattr(ScriptWire, "_exchange", losing)
    gave_up = await answer(reg, 2, pending.continuation)
    assert is_busy(gave_up), gave_up
    assert len(lost) == 2
    started = time.monotonic()
    done = await until_settled(reg, 2, pending.continuation)
    assert time.monotonic() - started < 10  # not after the 30 s lease: given back
    assert isinstance(done, Completed), done
    check_runs(redis.effects, 2, done)
    assert reg._ledger._keeper.owed == 0  # type: ignore[attr-defined]


# -- item 4: exclusivity does not depend on the handler yielding nor on clocks ------------


async def test_a_handler_blocking_its_event_loop_keeps_its_record(redis: Redis) -> None:
    """An async handler that blocks its loop for 2.5 leases: the keeper thread renews
    the lease, so a retry on another replica (its own thread and loop) is ``busy``
    until the handler ends, then recovers after it (start A, end A, start B, end B)."""
    lease = timedelta(seconds=1)
    reg_a = redis.replica(lease=lease, hold=lambda: 0.0)
    pending = await prompt(reg_a, 3)
    assert isinstance(pending, Pending)
    started = threading.Event()
    seen: list[tuple[float, Any]] = []

    def other_replica() -> None:
        async def run() -> None:
            reg_b = redis.replica(lease=lease)
            started.wait(10)
            with anyio.fail_after(30):
                while True:
                    outcome = await answer(reg_b, 3, pending.continuation)
                    seen.append((time.monotonic(), outcome))
                    if not is_busy(outcome):
                        break
                    await anyio.sleep(0.1)
            await reg_b.aclose()

        anyio.run(run)

    thread = threading.Thread(target=other_replica)
    thread.start()

    blocking = redis.made[0]
    original = blocking._invoker._entries[0].handler  # type: ignore[attr-defined]

    async def blocks(inv: Any) -> Any:
        if inv.resume is not None and not inv.resume.recovery_only:
            redis.effects.write(3, False, "start")
            started.set()
            time.sleep(2.5 * lease.total_seconds())  # blocks the event loop
            redis.effects.write(3, False, "end")
            from opgate import Result, Text, finish

            return finish(Result([Text("sent")]))
        return await original(inv)

    object.__setattr__(blocking._invoker._entries[0], "handler", blocks)  # type: ignore[attr-defined]
    ended = None
    done = await answer(reg_a, 3, pending.continuation)
    ended = time.monotonic()
    assert isinstance(done, Completed), done
    await anyio.to_thread.run_sync(thread.join, 40)
    busy_while_running = [o for at, o in seen if at < ended]
    assert busy_while_running, seen
    assert all(is_busy(o) for o in busy_while_running), seen
    last = seen[-1][1]
    assert isinstance(last, Completed), seen
    phases = [(r["recovery"], r["phase"]) for r in redis.effects.runs(3)]
    assert phases == [(False, "start"), (False, "end"), (True, "start"), (True, "end")]


class Skewed:
    def __init__(self, offset: float) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.mark.parametrize(("holder", "retrier"), [(0.0, 12.0), (12.0, 0.0), (0.0, -12.0)])
async def test_a_replica_with_a_skewed_clock_cannot_run_beside_the_original(
    redis: Redis, holder: float, retrier: float
) -> None:
    """Replicas whose clocks differ by 12 s, with a lease of 2 s: leases are Redis's, so
    a retry on the other replica is ``busy`` while the original runs (for a lease and a
    half), whatever the skew, and recovers only after it."""
    lease = timedelta(seconds=2)
    a = redis.replica(lease=lease, hold=lambda: 3.0, clock=Skewed(holder))
    b = redis.replica(lease=lease, hold=lambda: 0.0, clock=Skewed(retrier))
    pending = await prompt(a, 4)
    assert isinstance(pending, Pending)
    retries: list[Any] = []
    async with anyio.create_task_group() as group:

        async def original() -> None:
            outcome = await answer(a, 4, pending.continuation)
            assert isinstance(outcome, Completed), outcome

        group.start_soon(original)
        with anyio.fail_after(10):
            while not redis.effects.runs(4):
                await anyio.sleep(0.02)
        while len(redis.effects.runs(4)) < 2:
            retries.append(await answer(b, 4, pending.continuation))
            await anyio.sleep(0.1)
    assert retries
    assert all(is_busy(o) for o in retries[:-1]), retries
    done = await until_settled(b, 4, pending.continuation)
    assert isinstance(done, Completed), done
    phases = [(r["recovery"], r["phase"]) for r in redis.effects.runs(4)]
    assert phases[:2] == [(False, "start"), (False, "end")], phases
    assert set(phases[2:]) <= {(True, "start"), (True, "end")}, phases


async def test_a_redis_stopped_for_longer_than_the_lease_does_not_run_it_out(
    redis: Redis,
) -> None:
    """Redis is stopped for 2.5 leases while a handler runs, and a retry on another
    replica is queued meanwhile: when Redis resumes, the lease clock has advanced at
    most half a lease, so the retry is ``busy`` (not a recovery beside the original)."""
    lease = timedelta(seconds=1)
    a = redis.replica(lease=lease, hold=lambda: 4.0, timeout=timedelta(seconds=10))
    b = redis.replica(lease=lease, timeout=timedelta(seconds=10))
    pending = await prompt(a, 5)
    assert isinstance(pending, Pending)
    async with anyio.create_task_group() as group:

        async def original() -> None:
            assert isinstance(await answer(a, 5, pending.continuation), Completed)

        group.start_soon(original)
        with anyio.fail_after(10):
            while not redis.effects.runs(5):
                await anyio.sleep(0.02)
        redis.server.pause()
        try:
            async with anyio.create_task_group() as inner:
                retried: list[Any] = []

                async def retry() -> None:
                    retried.append(await answer(b, 5, pending.continuation))

                inner.start_soon(retry)
                await anyio.sleep(2.5 * lease.total_seconds())
                redis.server.resume()
        finally:
            redis.server.resume()
        assert is_busy(retried[0]), retried
    done = await until_settled(b, 5, pending.continuation)
    assert isinstance(done, Completed), done
    phases = [(r["recovery"], r["phase"]) for r in redis.effects.runs(5)]
    assert phases == [(False, "start"), (False, "end"), (True, "start"), (True, "end")]


# -- the fault-injection rounds -------------------------------------------------------------


async def pause_round(redis: Redis, rng: random.Random, chain: int) -> None:
    """Redis stopped for 0.1-2.5 s at a random moment of the answer's transition."""
    reg = redis.replica(hold=lambda: rng.uniform(0.0, 0.3))
    pending = await prompt(reg, chain)
    assert isinstance(pending, Pending)
    async with anyio.create_task_group() as group:

        async def fault() -> None:
            await anyio.sleep(rng.uniform(0.0, 0.3))
            redis.server.pause()
            await anyio.sleep(rng.uniform(0.1, 2.5))
            redis.server.resume()

        group.start_soon(fault)
        first = await answer(reg, chain, pending.continuation)
    outcome = first if not is_busy(first) else await until_settled(reg, chain, pending.continuation)
    check_runs(redis.effects, chain, outcome)
    assert isinstance(outcome, Completed), outcome  # nothing is lost by a pause


async def restart_round(redis: Redis, rng: random.Random, chain: int) -> None:
    """Redis killed at a random moment of the answer's transition, and started again
    (no persistence: its data is gone; the answer is then ``expired``, or done)."""
    reg = redis.replica(hold=lambda: rng.uniform(0.0, 0.3))
    pending = await prompt(reg, chain)
    assert isinstance(pending, Pending)
    async with anyio.create_task_group() as group:

        async def fault() -> None:
            await anyio.sleep(rng.uniform(0.0, 0.3))
            redis.server.kill()
            await anyio.sleep(rng.uniform(0.0, 0.5))
            await anyio.to_thread.run_sync(redis.server.start)

        group.start_soon(fault)
        first = await answer(reg, chain, pending.continuation)
    outcome = first if not is_busy(first) else await until_settled(reg, chain, pending.continuation)
    check_runs(redis.effects, chain, outcome, lost_ok=True)
    if isinstance(outcome, Failed):
        assert "intent or job key" in outcome.failure.message


async def kill_round(redis: Redis, rng: random.Random, chain: int) -> None:
    """A replica in its own process SIGKILLed mid-handler: after its lease, the identical
    answer on another replica is a recovery (never a second real run)."""
    reg = redis.replica()
    pending = await prompt(reg, chain)
    assert isinstance(pending, Pending)
    process = subprocess.Popen(
        [sys.executable, str(HERE / "ledger_faults.py"), redis.server.url, redis.prefix,
         str(redis.effects.path), str(chain)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "OPGATE_FAULT_HOLD": "60"},
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write(pending.continuation.encode() + b"\n")
        process.stdin.close()
        with anyio.fail_after(30):
            while not redis.effects.runs(chain):
                await anyio.sleep(0.02)
        await anyio.sleep(rng.uniform(0.0, 0.5))
        assert is_busy(await answer(reg, chain, pending.continuation))  # held by the other
    finally:
        process.kill()
        process.wait()
    outcome = await until_settled(reg, chain, pending.continuation)
    assert isinstance(outcome, Completed), outcome
    runs = redis.effects.runs(chain)
    assert [(r["recovery"], r["phase"]) for r in runs] == [
        (False, "start"),
        (True, "start"),
        (True, "end"),
    ]
    assert runs[0]["pid"] == process.pid


async def skew_round(redis: Redis, rng: random.Random, chain: int) -> None:
    """The answer runs on one replica while another, whose clock is off by up to a
    minute, retries it: ``busy`` until the original ends, then a recovery."""
    a = redis.replica(hold=lambda: 1.0)
    b = redis.replica(clock=Skewed(rng.uniform(-60, 60)))
    pending = await prompt(a, chain)
    assert isinstance(pending, Pending)
    async with anyio.create_task_group() as group:

        async def original() -> None:
            assert isinstance(await answer(a, chain, pending.continuation), Completed)

        group.start_soon(original)
        with anyio.fail_after(10):
            while not redis.effects.runs(chain):
                await anyio.sleep(0.02)
        while len(redis.effects.runs(chain)) < 2:
            assert is_busy(await answer(b, chain, pending.continuation))
            await anyio.sleep(0.05)
    outcome = await until_settled(b, chain, pending.continuation)
    check_runs(redis.effects, chain, outcome)
    assert isinstance(outcome, Completed)


ROUNDS = {"pause": pause_round, "restart": restart_round, "kill": kill_round, "skew": skew_round}


async def test_faults_never_lose_or_double_an_effect(redis: Redis) -> None:
    """One round of each fault (the short run); ``test_faults_soak`` runs many."""
    rng = random.Random(19)
    for chain, kind in enumerate(ROUNDS, start=100):
        await ROUNDS[kind](redis, rng, chain)


@pytest.mark.slow
async def test_faults_soak(redis: Redis) -> None:
    """Sixty randomized rounds of every fault, seeded (the seed is in the failure)."""
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    kinds = list(ROUNDS) * 15
    rng.shuffle(kinds)
    for chain, kind in enumerate(kinds, start=1000):
        try:
            await ROUNDS[kind](redis, rng, chain)
        except BaseException as exc:
            raise AssertionError(f"seed {seed}, round {chain} ({kind})") from exc


async def test_a_confirmed_openapi_send_survives_a_stopped_redis(redis: Redis) -> None:
    """The issue's case end to end: ``POST /items`` confirmed while Redis is stopped.
    The retry after ``busy`` sends it once (a real send, not "already sent … not sent
    again" with nothing sent), and a further retry is the recorded replay."""
    from opgate import InputMode, InputResponse
    from opgate.openapi import build_catalog
    from opgate.redis import RedisLedger

    from ledger_faults import SECRET, Open
    from openapi_app import ITEMS, LOG, document, serve_app

    ITEMS.clear()
    LOG.clear()
    arguments = {"body": {"name": "transfer", "price": 10}}
    form = {InputMode.FORM}
    yes = InputResponse.accept({"confirm": True})
    with serve_app() as base_url:
        catalog = build_catalog(document(), base_url=base_url, timeout=5)
        ledger = RedisLedger(redis.server.url, prefix=redis.prefix, timeout=timedelta(seconds=1))
        reg = Registry(catalog.operations, catalog.policy(Open()), secret=SECRET, ledger=ledger)
        redis.made.append(reg)
        try:
            pending = await reg.invoke(None, "items.create", arguments, input_support=form)
            assert isinstance(pending, Pending), pending
            resume = (pending.continuation, yes)
            redis.server.pause()
            try:
                gave_up = await reg.invoke(
                    None, "items.create", arguments, input_support=form, resume=resume
                )
            finally:
                redis.server.resume()
            assert is_busy(gave_up), gave_up
            assert LOG.count(("POST", "/api/items", "")) == 0
            with anyio.fail_after(30):
                while True:
                    sent = await reg.invoke(
                        None, "items.create", arguments, input_support=form, resume=resume
                    )
                    if not is_busy(sent):
                        break
                    await anyio.sleep(0.05)
            assert isinstance(sent, Completed), sent
            assert "already sent" not in sent.result.content[0].text  # type: ignore[union-attr]
            assert LOG.count(("POST", "/api/items", "")) == 1
            again = await reg.invoke(
                None, "items.create", arguments, input_support=form, resume=resume
            )
            assert isinstance(again, Completed), again
            assert "already sent" in again.result.content[0].text  # type: ignore[union-attr]
            assert LOG.count(("POST", "/api/items", "")) == 1
            assert len(ITEMS) == 1
        finally:
            await catalog.aclose()


def test_give_backs_owed_to_an_unreachable_redis_are_bounded() -> None:
    """A long outage cannot grow a replica's owed give-backs without bound."""
    from opgate.redis._ledger import MAX_OWED, _Keeper

    keeper = _Keeper(
        f"redis://127.0.0.1:{free_port()}/0", b"{x}:", 300, 0.2, lambda op, args: (op, *args)
    )
    try:
        for n in range(MAX_OWED + 10):
            keeper.owe(("settle", "k", "c", "abandon", f"c{n}", "", b""), f"r:c:k:c{n}")
        assert keeper.owed == MAX_OWED
        assert len(keeper._held) == MAX_OWED
    finally:
        keeper.close()


class StallingProxy:
    """A TCP proxy to Redis that can stall the connections open now (new ones pass):
    a connection whose replies stop coming while Redis itself stays reachable."""

    def __init__(self, port: int) -> None:
        import socket

        self._target = ("127.0.0.1", port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self._stalled: set[int] = set()
        self._open: list[Any] = []
        self.accepted = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        """Stop forwarding on every connection open now."""
        self._stalled.update(id(pair) for pair in self._open)

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            pair = (client, upstream)
            self._open.append(pair)
            self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(pair, source, sink), daemon=True).start()

    def _pump(self, pair: Any, source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                while id(pair) in self._stalled and not self._closed:
                    time.sleep(0.01)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in pair:
                end.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for pair in self._open:
            for end in pair:
                end.close()


async def test_a_stalled_renewal_does_not_outlast_the_lease(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The keeper's connection stops answering (Redis itself stays reachable): with a
    1 s lease and a 10 s call timeout, the renewal gives up and the keeper renews on a
    fresh connection within the lease, instead of sitting in one renewal past it
    (while another replica could recover the record beside the running original)."""
    import logging

    proxy = StallingProxy(redis.server.port)
    try:
        lease = timedelta(seconds=1)
        reg = replica(
            proxy.url, redis.prefix, redis.effects, lease=lease, timeout=timedelta(seconds=10)
        )
        keeper = reg._ledger._keeper  # type: ignore[attr-defined]
        caplog.set_level(logging.WARNING, logger="opgate.redis")
        keeper.hold("r:c:k:x")
        deadline = time.monotonic() + 5
        while proxy.accepted < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # a renewal or two went through
        proxy.stall()
        stalled_at = time.monotonic()
        while proxy.accepted < 2 and time.monotonic() < stalled_at + 12:
            time.sleep(0.01)
        reconnected = time.monotonic() - stalled_at
        await reg.aclose()
        assert proxy.accepted >= 2
        assert reconnected < lease.total_seconds(), reconnected
        assert "leases not renewed (TimeoutError)" in caplog.text
    finally:
        proxy.close()


async def test_closing_the_ledger_gives_up_its_leases_explicitly(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Leases still held when the ledger closes are given up (and logged), not resumed
    silently by the next ``hold``: the new thread renews only its own records."""
    import logging

    reg = redis.replica(lease=timedelta(seconds=1))
    keeper = reg._ledger._keeper  # type: ignore[attr-defined]
    caplog.set_level(logging.WARNING, logger="opgate.redis")
    keeper.hold("r:c:k:old")
    await reg.aclose()
    assert "ledger closed with 1 lease(s) held" in caplog.text
    keeper.hold("r:c:k:new")
    assert list(keeper._held) == ["r:c:k:new"]
    keeper.drop("r:c:k:old")  # the old run ends later: nothing to release
    assert list(keeper._held) == ["r:c:k:new"]
