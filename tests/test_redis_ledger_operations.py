"""Operating the shared ledger: what a replica does while Redis is down, hung or
flapping; a ``RedisLedger`` never pickled with its password; the Redis answer rooms
against the in-memory ledger's. How ``opgate serve`` is given the ledger and Redis's
password is tests/test_cli_ledger.py's.

The replica tests run ``opgate serve --http`` processes (benchmarks/replicas.py) against
a real ``redis-server`` and drive them with the official MCP client.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
import redis.asyncio as redis_client

import opgate.redis._ledger as redis_ledger
from opgate import (
    Completed,
    Failed,
    FailureCode,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate.redis import RedisLedger

from conftest import ROOT, SECRET, Ctx, TeamPolicy, free_port
from redis_server import RedisServer

sys.path.insert(0, str(ROOT / "benchmarks"))

from replicas import ReplicaSet, RoundRobinTransport, client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
LEGACY = "legacy"  # 2025-11-25
PASSWORD = "redis-PASSWORD-marker-7f3a"
YES = types.ElicitResult(action="accept", content={"ok": True})
CONFIRM = {"name": "orders.confirm", "arguments": {"id": 7}}
ECHO = {"name": "util.echo", "arguments": {"text": "hello"}}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FORM_SUPPORT = {InputMode.FORM}


async def accept(context: Any, params: Any) -> types.ElicitResult:
    return YES


# -- item 8: Redis down stops only what needs it ----------------------------------------------


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def error_of(result: Any) -> tuple[str, str] | None:
    if isinstance(result, types.CallToolResult) and result.is_error:
        error = result.structured_content["error"]
        return str(error["code"]), str(error["message"])
    return None


async def calls_while_down(replicas: ReplicaSet, era: str) -> None:
    """What a form-capable client gets from a replica whose Redis is down."""
    async with client(RoundRobinTransport(replicas.ports), era, elicitation=accept) as session:
        plain = await session.call_tool("invoke", ECHO)
        assert error_of(plain) is None, plain
        assert text_of(plain) == "echo hello"
        prompting = await session.call_tool("invoke", CONFIRM)
        assert error_of(prompting) is not None, prompting
        code, message = error_of(prompting)  # type: ignore[misc]
        assert code == "confirmation_required"
        assert "prompts are unavailable" in message
        assert "try again" in message
        assert text_of(prompting).count("confirmation_required") == 1
        assert isinstance(
            await session.call_tool("search", {"query": "orders"}), types.CallToolResult
        )


async def test_a_replica_serves_what_needs_no_ledger_while_redis_is_down(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)  # its port is known; it is not running yet
    try:
        with ReplicaSet(1, ledger_url=redis.url, prefix="down", log_dir=tmp_path) as replicas:
            assert "is unreachable" in replicas.log(0)  # said at startup
            assert "serving anyway" in replicas.log(0)
            for era in (MODERN, LEGACY):
                await calls_while_down(replicas, era)
            # Redis comes up: prompts work again without a restart of the replica
            redis.start()
            with anyio.fail_after(30):
                while True:
                    async with client(
                        RoundRobinTransport(replicas.ports), MODERN, elicitation=accept
                    ) as session:
                        first = await session.session.call_tool(
                            "invoke", CONFIRM, allow_input_required=True
                        )
                    if isinstance(first, types.InputRequiredResult):
                        break
                    await anyio.sleep(0.2)
            assert "available again" in replicas.log(0)
            # Redis goes down between the prompt and its answer: the answer is busy,
            # said once, and the plain call still works
            redis.stop()
            async with client(
                RoundRobinTransport(replicas.ports), MODERN, elicitation=accept
            ) as session:
                answered = await session.session.call_tool(
                    "invoke",
                    CONFIRM,
                    request_state=first.request_state,
                    input_responses={"opgate": YES},
                )
                assert error_of(answered) == (
                    "busy",
                    "the continuation store is unavailable; try again shortly",
                ), (answered, replicas.log(0))
                assert text_of(answered).startswith("busy: the continuation store")
                assert text_of(answered).count("busy") == 1
                assert error_of(await session.call_tool("invoke", ECHO)) is None
            log = replicas.log(0)
            # one line per change of health, not one per call
            assert log.count("is unavailable (") == 1, log  # the startup line said the first
    finally:
        redis.stop()


# -- attacks: a hung Redis, a flapping Redis ------------------------------------------------


def plain_and_prompting(calls: list[str]) -> list[Operation]:
    async def notes(inv: Invocation) -> Any:
        calls.append("notes")
        return finish(Result([Text("notes")]))

    async def confirm(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("Sure?", FORM, 1))
        calls.append("confirmed")
        return finish(Result([Text("confirmed")]))

    return [
        Operation("notes.list", "List notes", notes),
        Operation("orders.confirm", "Confirm an order", confirm),
    ]


async def timed(reg: Registry, name: str, **kwargs: Any) -> tuple[float, Any]:
    started = time.monotonic()
    outcome = await reg.invoke(Ctx(), name, "{}", input_support=FORM_SUPPORT, **kwargs)
    return time.monotonic() - started, outcome


async def test_a_hung_redis_costs_one_wait_per_retry_not_one_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis paused (SIGSTOP): a call waits for it once; while it is down, one call at a
    time (and at most one a second) tries it and the others do not wait; when it
    resumes, prompts work again. The wait is longer than the retry interval, so a
    second try while the first still waits would show."""
    monkeypatch.setattr(redis_ledger, "CALL_TIMEOUT", 1.5)
    server = RedisServer(tmp_path)
    server.start()
    calls: list[str] = []
    reg = Registry(
        plain_and_prompting(calls),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger(server.url, prefix="hung"),
    )
    pid = server._process.pid  # type: ignore[union-attr]
    try:
        assert isinstance((await timed(reg, "orders.confirm"))[1], Pending)
        os.kill(pid, signal.SIGSTOP)
        waited, outcome = await timed(reg, "notes.list")
        assert isinstance(outcome, Completed), outcome
        assert waited >= 1.5  # the call that found it hung
        spans: list[tuple[float, float]] = []

        async def one() -> None:
            started = time.monotonic()
            elapsed, outcome = await timed(reg, "notes.list")
            assert isinstance(outcome, Completed), outcome
            spans.append((started, started + elapsed))

        async with anyio.create_task_group() as group:
            for _ in range(80):  # a call every 50 ms for four seconds
                group.start_soon(one)
                await anyio.sleep(0.05)
        assert len(spans) == 80
        slow = sorted(span for span in spans if span[1] - span[0] >= 1.0)
        assert 1 <= len(slow) <= 3, spans  # Redis was tried again, not by everyone
        for before, after in itertools.pairwise(slow):
            assert after[0] >= before[1], slow  # never two tries at once
        os.kill(pid, signal.SIGCONT)
        with anyio.fail_after(20):
            while not isinstance((await timed(reg, "orders.confirm"))[1], Pending):
                await anyio.sleep(0.1)
        said = [r.getMessage() for r in caplog.records if r.name == "opgate.redis"]
        assert sum("is unavailable" in line for line in said) == 1, said
        assert sum("available again" in line for line in said) == 1, said
    finally:
        os.kill(pid, signal.SIGCONT)
        await reg.aclose()
        server.stop()


async def test_a_flapping_redis_never_runs_an_answer_twice(tmp_path: Path) -> None:
    """Redis stopped and started five times between prompts and their answers: plain
    calls always work, prompts are refused while it is down, and every answer runs its
    handler once or is refused (busy, then expired once Redis lost the prompt)."""
    server = RedisServer(tmp_path)
    server.start()
    calls: list[str] = []
    reg = Registry(
        plain_and_prompting(calls),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger(server.url, prefix="flap"),
    )
    answered = 0
    try:
        for _ in range(5):
            with anyio.fail_after(20):
                while not isinstance(pending := (await timed(reg, "orders.confirm"))[1], Pending):
                    await anyio.sleep(0.1)
            kept = (await timed(reg, "orders.confirm"))[1]
            assert isinstance(kept, Pending)
            answer = (kept.continuation, InputResponse.accept({"ok": True}))
            assert isinstance((await timed(reg, "orders.confirm", resume=answer))[1], Completed)
            answered += 1
            server.stop()
            assert isinstance((await timed(reg, "notes.list"))[1], Completed)
            refused = (await timed(reg, "orders.confirm"))[1]
            assert isinstance(refused, Failed)
            assert refused.failure.code in (FailureCode.CONFIRMATION_REQUIRED, FailureCode.BUSY)
            late = (pending.continuation, InputResponse.accept({"ok": True}))
            down = (await timed(reg, "orders.confirm", resume=late))[1]
            assert isinstance(down, Failed)
            assert down.failure.code is FailureCode.BUSY
            # the replay of the answered one is busy too: it never runs again
            again = (await timed(reg, "orders.confirm", resume=answer))[1]
            assert isinstance(again, Failed)
            assert again.failure.code is FailureCode.BUSY
            server.start()
        assert calls.count("confirmed") == answered
    finally:
        await reg.aclose()
        server.stop()


# -- a RedisLedger never leaks its password -------------------------------------------------


def test_a_redis_ledger_is_never_pickled_or_copied_with_its_credentials() -> None:
    import copy
    import pickle

    for ledger in (
        RedisLedger(f"redis://:{PASSWORD}@127.0.0.1:1/0"),
        RedisLedger("redis://127.0.0.1:1/0", password=PASSWORD),
    ):
        assert PASSWORD not in repr(ledger)
        for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match="cannot be pickled") as refused:
                attempt(ledger)
            assert PASSWORD not in str(refused.value)
    reg = Registry(
        plain_and_prompting([]),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger("redis://127.0.0.1:1/0", password=PASSWORD),
    )
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(reg._ledger)
    with pytest.raises(ValueError, match="twice"):
        RedisLedger(f"redis://:{PASSWORD}@127.0.0.1:1/0", password="another")


# -- the answer room: the Redis script against the in-memory ledger -------------------------


async def rooms_of(reg: Registry) -> tuple[int, int]:
    """``(used, rooms)`` of either ledger, the rooms checked against their parts."""
    from opgate._ledger import Ledger

    ledger: Any = reg._ledger
    if isinstance(ledger, Ledger):
        assert sum(ledger._rooms.values()) == ledger.rooms
        return ledger.used, ledger.rooms
    store = redis_client.Redis.from_url(ledger._url)
    try:
        head = ledger._key_prefix
        rooms = {k: int(v) for k, v in (await store.hgetall(head + "rooms")).items()}
        total = int(await store.get(head + "roomsum") or 0)
        assert sum(rooms.values()) == total
        return int(await store.get(head + "used") or 0), total
    finally:
        await store.aclose()


async def test_the_redis_answer_rooms_follow_the_in_memory_ledger(redis_server: Any) -> None:
    """Random new calls, answers of random sizes that prompt again or finish, and answers
    the policy refuses, from six principals on a small ledger, made on both ledgers at
    once: every outcome, the bytes used and the rooms kept agree after every step, and
    after everything expired nothing is left on either."""
    import random

    from opgate import Limits

    note = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 20000}}}

    async def ask(inv: Invocation) -> Any:
        size = int(inv.arguments["size"])
        if inv.resume is None or (inv.arguments["again"] and inv.resume.state["step"] == 1):
            step = 1 if inv.resume is None else 2
            return await_input(FormInput("note?", note, {"s": "x" * size, "step": step}))
        return finish(Result([Text("done")]))

    ID = {
        "type": "object",
        "properties": {"size": {"type": "integer"}, "again": {"type": "boolean"}},
        "required": ["size", "again"],
    }
    limits = Limits(ledger_bytes=2 * 1024 * 1024, principal_bytes=512 * 1024)
    now = [3_000_000.0]
    registries = []
    for ledger in (None, RedisLedger(redis_server.url, prefix=f"differential-{free_port()}")):
        options: dict[str, Any] = {"secret": SECRET, "ledger": ledger} if ledger else {}
        registries.append(
            Registry(
                [Operation("ask", "Ask", ask, input_schema=ID)],
                TeamPolicy(),
                limits=limits,
                clock=lambda: now[0],
                **options,
            )
        )
    pending: list[list[tuple[str, str, Pending]]] = [[], []]  # (principal, args, prompt)
    seen: set[tuple[str, Any]] = set()
    rng = random.Random(19016)
    try:
        for step in range(400):
            if step % 100 == 99:  # everything expires: both ledgers give it all back
                now[0] += limits.input_lifetime.total_seconds() + 1
                pending = [[], []]
                for _ in range(100):  # Redis sweeps a batch per call
                    if (await registries[1]._ledger.statistics()).live == 0:
                        break
                registries[0]._ledger.sweep()  # type: ignore[attr-defined]
                assert await rooms_of(registries[0]) == await rooms_of(registries[1]) == (0, 0)
            now[0] += 1
            principal = f"p{rng.randrange(6)}"
            deny = rng.random() < 0.15
            text = "y" * rng.choice([0, 10, 3000, limits.answer_bytes - 16])
            answering = bool(pending[0]) and rng.random() < 0.45
            index = rng.randrange(len(pending[0])) if answering else 0
            again = "true" if rng.random() < 0.5 else "false"
            arguments = f'{{"size": {rng.randrange(6000)}, "again": {again}}}'
            outcomes: list[Any] = []
            for side, reg in enumerate(registries):
                policy: Any = reg._policy
                policy.deny_execute.clear()
                if deny:
                    policy.deny_execute.add("ask")
                if answering:
                    who, args, waiting = pending[side][index]
                    resume = (waiting.continuation, InputResponse.accept({"note": text}))
                    ctx = Ctx(principal=who)
                    outcomes.append(
                        await reg.invoke(
                            ctx, "ask", args, input_support=FORM_SUPPORT, resume=resume
                        )
                    )
                else:
                    ctx = Ctx(principal=principal)
                    outcomes.append(
                        await reg.invoke(ctx, "ask", arguments, input_support=FORM_SUPPORT)
                    )
            shapes = [
                (type(o).__name__, o.failure.message if isinstance(o, Failed) else None)
                for o in outcomes
            ]
            assert shapes[0] == shapes[1], (step, answering, outcomes)
            seen.add((shapes[0][0], answering))
            for side, outcome in enumerate(outcomes):
                if answering:
                    who, args, _ = pending[side][index]
                    if isinstance(outcome, Pending | Completed):
                        pending[side].pop(index)
                    if isinstance(outcome, Pending):
                        pending[side].append((who, args, outcome))
                elif isinstance(outcome, Pending):
                    pending[side].append((principal, arguments, outcome))
            assert await rooms_of(registries[0]) == await rooms_of(registries[1]), step
        # every kind of step happened: prompts, refusals, answers prompting and finishing
        assert {("Pending", False), ("Failed", False), ("Pending", True)} <= seen, seen
        assert {("Completed", True), ("Failed", True)} <= seen, seen
    finally:
        for reg in registries:
            await reg.aclose()
