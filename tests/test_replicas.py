"""Three ``opgate serve --http`` replicas sharing one Redis, driven by official MCP clients.

The 2026-07-28 clients send every HTTP request to the next replica
(``RoundRobinTransport``: a load balancer without affinity). The tests page with
cursors across replicas, answer a prompt on another replica than the one that issued
it, race two replicas on one answer, kill a replica mid-handler and recover the chain
on another, and restart Redis. The 2025-11-25 era works behind a router with affinity
by ``Mcp-Session-Id`` (``StickyTransport``). The harness is benchmarks/replicas.py.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import MCPError

from conftest import ROOT
from redis_server import RedisServer

sys.path.insert(0, str(ROOT / "benchmarks"))

from replicas import ReplicaSet, RoundRobinTransport, StickyTransport, client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
LEASE = 2.0  # seconds: how long a killed replica's transition stays busy
YES = types.ElicitResult(action="accept", content={"ok": True})


async def accept(context: Any, params: Any) -> types.ElicitResult:
    if "Value" in params.message:
        return types.ElicitResult(action="accept", content={"value": 20})
    return YES


class Deployment:
    def __init__(self, redis: RedisServer, replicas: ReplicaSet, runs: Path) -> None:
        self.redis = redis
        self.replicas = replicas
        self.runs = runs

    def runs_of(self, id_: int) -> list[dict[str, Any]]:
        if not self.runs.exists():
            return []
        lines = [json.loads(line) for line in self.runs.read_text().splitlines() if line]
        return [line for line in lines if line["id"] == id_]

    def only(self, index: int) -> RoundRobinTransport:
        """A transport to one replica."""
        return RoundRobinTransport([self.replicas.ports[index]])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("replicas")
    redis = RedisServer(directory)
    redis.start()
    runs = directory / "runs.jsonl"
    try:
        with ReplicaSet(
            3,
            ledger_url=redis.url,
            prefix="replicas",
            lease=LEASE,
            log_dir=directory,
            environment={"OPGATE_REPLICA_RUNS": str(runs)},
        ) as replicas:
            yield Deployment(redis, replicas, runs)
    finally:
        redis.stop()


async def pending_on(deployment: Deployment, index: int, arguments: dict[str, Any]) -> Any:
    async with client(deployment.only(index), MODERN, elicitation=accept) as session:
        pending = await session.session.call_tool("invoke", arguments, allow_input_required=True)
    assert isinstance(pending, types.InputRequiredResult), pending
    return pending


async def retry_on(
    deployment: Deployment, index: int, arguments: dict[str, Any], pending: Any
) -> Any:
    async with client(deployment.only(index), MODERN, elicitation=accept) as session:
        return await session.session.call_tool(
            "invoke",
            arguments,
            request_state=pending.request_state,
            input_responses={"opgate": YES},
        )


def error_code(result: Any) -> str | None:
    if isinstance(result, types.CallToolResult) and result.is_error:
        return str(result.structured_content["error"]["code"])
    return None


async def test_paging_with_cursors_across_replicas(deployment: Deployment) -> None:
    transport = RoundRobinTransport(deployment.replicas.ports)
    names: list[str] = []
    async with client(transport, MODERN) as session:
        cursor = None
        while True:
            arguments: dict[str, Any] = {"query": "filler", "limit": 7}
            if cursor:
                arguments["cursor"] = cursor
            page = await session.call_tool("search", arguments)
            assert not page.is_error, page
            names += [item["name"] for item in page.structured_content["items"]]
            cursor = page.structured_content["next_cursor"]
            if cursor is None:
                break
    assert names == [f"items.item{i:02d}" for i in range(40)]
    assert set(transport.sent) == set(deployment.replicas.ports)


async def test_prompts_issued_on_one_replica_are_answered_on_another(
    deployment: Deployment,
) -> None:
    transport = RoundRobinTransport(deployment.replicas.ports)
    async with client(transport, MODERN, elicitation=accept) as session:
        # the client answers each InputRequiredResult and retries: every retry moves on
        result = await session.call_tool("invoke", {"name": "orders.chain", "arguments": {}})
        assert result.structured_content == {"total": 40}, result
        result = await session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 5}}
        )
        assert result.structured_content == {"id": 5}, result
    assert set(transport.sent) == set(deployment.replicas.ports)
    # and by hand: issued on replica 0, answered on replica 2
    arguments = {"name": "orders.confirm", "arguments": {"id": 6}}
    pending = await pending_on(deployment, 0, arguments)
    done = await retry_on(deployment, 2, arguments, pending)
    assert done.structured_content == {"id": 6}


async def test_two_replicas_racing_one_answer_run_the_handler_once(
    deployment: Deployment,
) -> None:
    arguments = {"name": "orders.slow", "arguments": {"id": 101, "hold": 1.5}}
    pending = await pending_on(deployment, 0, arguments)
    outcomes: list[Any] = []

    async def race(index: int) -> None:
        outcomes.append(await retry_on(deployment, index, arguments, pending))

    async with anyio.create_task_group() as group:
        group.start_soon(race, 1)
        group.start_soon(race, 2)
    codes = sorted(str(error_code(outcome)) for outcome in outcomes)
    assert codes == ["None", "busy"], outcomes
    done = next(outcome for outcome in outcomes if error_code(outcome) is None)
    assert done.structured_content == {"recovered": False}
    runs = deployment.runs_of(101)
    assert [run["phase"] for run in runs] == ["start", "end"]  # exactly one handler run
    # after the race the identical answer is a recovery, wherever it lands
    again = await retry_on(deployment, 0, arguments, pending)
    assert again.structured_content == {"recovered": True}


async def test_a_redis_restart_loses_continuations_but_not_cursors(
    deployment: Deployment,
) -> None:
    arguments = {"name": "orders.confirm", "arguments": {"id": 7}}
    pending = await pending_on(deployment, 0, arguments)
    transport = RoundRobinTransport(deployment.replicas.ports)
    async with client(transport, MODERN) as session:
        page = await session.call_tool("search", {"query": "filler", "limit": 5})
        cursor = page.structured_content["next_cursor"]
    deployment.redis.restart()
    error: BaseException | None = None
    try:
        await retry_on(deployment, 1, arguments, pending)
    except Exception as exc:  # the client's task group wraps it
        error = exc
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError), error
    assert "intent or job key" in str(error)
    assert error.error.data == {"code": "expired"}
    async with client(transport, MODERN, elicitation=accept) as session:
        page = await session.call_tool("search", {"query": "filler", "limit": 5, "cursor": cursor})
        assert next(item["name"] for item in page.structured_content["items"]) == "items.item05"
        # and the ledger works again at once
        result = await session.call_tool(
            "invoke", {"name": "orders.confirm", "arguments": {"id": 8}}
        )
        assert result.structured_content == {"id": 8}


async def test_the_legacy_era_works_behind_sticky_sessions(deployment: Deployment) -> None:
    """2025-11-25 elicitation rides the request's own stream, in one replica's session."""
    transports = [StickyTransport(deployment.replicas.ports, start=index) for index in range(3)]
    for index, transport in enumerate(transports):
        with anyio.fail_after(60):
            async with client(transport, "legacy", elicitation=accept) as session:
                result = await session.call_tool(
                    "invoke", {"name": "orders.confirm", "arguments": {"id": 20 + index}}
                )
                assert result.structured_content == {"id": 20 + index}, result
                page = await session.call_tool("search", {"query": "filler", "limit": 3})
                assert page.structured_content["next_cursor"]
        assert len(transport.sessions) == 1
        assert len(set(transport.sent)) == 1  # every request of the session on one replica
    assert len({transport.sent[0] for transport in transports}) == 3


async def test_the_legacy_era_fails_without_affinity(deployment: Deployment) -> None:
    transport = RoundRobinTransport(deployment.replicas.ports)
    with anyio.fail_after(60), pytest.raises(Exception):  # noqa: B017, PT011 - any refusal
        async with client(transport, "legacy", elicitation=accept, timeout=3) as session:
            await session.call_tool("invoke", {"name": "orders.confirm", "arguments": {"id": 30}})


async def test_a_replica_killed_mid_handler_is_recovered_on_another(
    deployment: Deployment,
) -> None:
    """Last in this module: it kills replica 1."""
    arguments = {"name": "orders.slow", "arguments": {"id": 202, "hold": 60}}
    pending = await pending_on(deployment, 0, arguments)
    victim = deployment.replicas.processes[1].pid

    async def doomed() -> None:
        with contextlib.suppress(Exception):
            await retry_on(deployment, 1, arguments, pending)

    async with anyio.create_task_group() as group:
        group.start_soon(doomed)
        with anyio.fail_after(30):
            while not deployment.runs_of(202):
                await anyio.sleep(0.05)
        assert deployment.runs_of(202)[0]["pid"] == victim
        killed_at = time.monotonic()
        deployment.replicas.kill(1)
        # the transition is held until the dead replica's lease runs out ...
        first = await retry_on(deployment, 2, arguments, pending)
        assert error_code(first) == "busy", first
        # ... then the identical answer recovers it on a live replica
        with anyio.fail_after(30):
            while True:
                outcome = await retry_on(deployment, 2, arguments, pending)
                if error_code(outcome) != "busy":
                    break
                await anyio.sleep(0.25)
        group.cancel_scope.cancel()
    assert time.monotonic() - killed_at >= LEASE * 0.5
    assert outcome.structured_content == {"recovered": True}, outcome
    runs = deployment.runs_of(202)
    assert [(run["pid"] == victim, run["recovery"], run["phase"]) for run in runs] == [
        (True, False, "start"),
        (False, True, "start"),
        (False, True, "end"),
    ]
