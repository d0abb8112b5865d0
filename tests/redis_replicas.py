"""Replicas of one deployment in one process, for the shared-ledger tests
(``test_redis_ledger.py``, ``test_redis_script.py``, ``test_redis_ledger_forgeries.py``).

``Replicas(url, prefix)`` builds registries from the same definitions with the same
secret and ``RedisLedger`` prefix on a real ``redis-server``; ``Steps`` is their
handler (two prompts, then finish); ``start`` and ``answer`` drive its chain; ``Raw``
reads and writes a record's fields in Redis, as any writer can.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import redis.asyncio as redis_client

from opgate import (
    Failed,
    FailureCode,
    FormInput,
    InputAction,
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
from opgate.ledger import token_hash
from opgate.redis import RedisLedger

from conftest import SECRET, Ctx, TeamPolicy

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FORM_SUPPORT = {InputMode.FORM}
ARGS = '{"order": "ORDER-ARGUMENT-MARKER"}'
MESSAGE = "Refund PROMPT-MESSAGE-MARKER?"
STATE = {"job": "PRIVATE-STATE-MARKER"}


class Steps:
    """Two prompts, then finish; records every call; ``gate`` holds answered calls."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()

    async def __call__(self, inv: Invocation) -> Any:
        resume = inv.resume
        self.calls.append(None if resume is None else (resume.state, resume.recovery_only))
        if resume is not None and self.gate is not None and not resume.recovery_only:
            self.entered.set()
            await self.gate.wait()
        if resume is not None and resume.recovery_only:
            return finish(Result([Text("recovered")]))
        step = 0 if resume is None else resume.state["step"]
        if resume is not None and resume.action is not InputAction.ACCEPT:
            return finish(Result([Text("declined")]))
        if step < 2:
            return await_input(FormInput(MESSAGE, FORM, {**STATE, "step": step + 1}))
        return finish(Result([Text("refunded")]))


def catalog(handler: Any, extra: int = 12) -> list[Operation]:
    operations = [Operation("orders.refund", "Refund an order", handler)]
    operations += [
        Operation(f"orders.filler{i:02d}", "Filler operation", handler) for i in range(extra)
    ]
    return operations


class Replicas:
    """Registries sharing one Redis deployment (same prefix and secret)."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix
        self.made: list[Registry] = []

    def replica(
        self,
        handler: Any,
        *,
        secret: bytes = SECRET,
        extra: int = 12,
        clock: Any = None,
        lease: timedelta | None = None,
        url: str | None = None,
    ) -> Registry:
        options: dict[str, Any] = {"prefix": self.prefix}
        if lease is not None:
            options["lease"] = lease
        registry = Registry(
            catalog(handler, extra),
            TeamPolicy(),
            clock=clock,
            secret=secret,
            ledger=RedisLedger(url or self.url, **options),
        )
        self.made.append(registry)
        return registry

    async def close(self) -> None:
        for registry in self.made:
            await registry.aclose()


async def start(reg: Registry, ctx: Ctx | None = None) -> Pending:
    outcome = await reg.invoke(ctx or Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT)
    assert isinstance(outcome, Pending), outcome
    return outcome


async def answer(reg: Registry, pending: Pending, ok: bool = True, **kwargs: Any) -> Any:
    return await reg.invoke(
        kwargs.pop("ctx", Ctx()),
        "orders.refund",
        ARGS,
        input_support=FORM_SUPPORT,
        resume=(pending.continuation, InputResponse.accept({"ok": ok})),
        **kwargs,
    )


#: A short lease for the tests that wait for one to run out (in Redis's time).
SHORT_LEASE = timedelta(milliseconds=500)


def stop_renewing(reg: Registry) -> None:
    """As far as Redis can tell, the replica dies: its leases are no longer renewed."""
    reg._ledger._keeper.close()  # type: ignore[attr-defined]


async def until_not_busy(reg: Registry, pending: Pending, **kwargs: Any) -> Any:
    """Retry the identical answer until it is not ``busy`` (bounded)."""
    with anyio.fail_after(20):
        while True:
            outcome = await answer(reg, pending, **kwargs)
            if not (isinstance(outcome, Failed) and outcome.failure.code is FailureCode.BUSY):
                return outcome
            await anyio.sleep(0.05)


class Raw:
    """Direct access to the deployment's keys in Redis, as any writer has."""

    def __init__(self, replicas: Replicas) -> None:
        self.client = redis_client.Redis.from_url(replicas.url)
        self.head = f"{{{replicas.prefix}}}:"

    def record(self, pending: Pending) -> str:
        return self.head + "r:" + token_hash(pending.continuation).hex()

    async def get(self, pending: Pending, field: str) -> bytes:
        value = await self.client.hget(self.record(pending), field)
        assert value is not None, field
        return value

    async def set(self, pending: Pending, **fields: Any) -> None:
        await self.client.hset(self.record(pending), mapping=fields)
