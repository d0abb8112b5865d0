"""Confirmations across ``opgate serve --openapi`` replicas, in both MCP protocol eras.

Two replicas share one Redis ledger and serve the recording upstream's document
(tests/recording_app.py) with bearer authentication (``alice-token`` and
``bob-token``, tests/mcp_catalog.py). A hostile agent (or client) tries to reuse
one person's confirmation on the other replica: for other arguments, another
operation, another principal, or a second time. The harness is benchmarks/replicas.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import MCPError

from conftest import ROOT
from recording_app import DOCUMENT, Recorder, assert_received_as_shown, read, serve_recorder
from redis_server import RedisServer

sys.path.insert(0, str(ROOT / "benchmarks"))

from replicas import ReplicaSet, RoundRobinTransport, StickyTransport, client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
YES = types.ElicitResult(action="accept", content={"confirm": True})
TRANSFER = {"name": "transfer", "arguments": {"body": {"to": "landlord", "amount": 10}}}
HOST_TOKEN = "Bearer host-credential-for-the-api"


async def no_person(context: Any, params: Any) -> types.ElicitResult:
    """Declares form support; the tests answer by hand, so nobody is asked here."""
    raise AssertionError("the client was asked to show a prompt")


class Deployment:
    def __init__(self, recorder: Recorder, replicas: ReplicaSet) -> None:
        self.recorder = recorder
        self.replicas = replicas

    def to(self, index: int) -> RoundRobinTransport:
        return RoundRobinTransport([self.replicas.ports[index]])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("openapi-replicas")
    spec = directory / "payments.json"
    spec.write_text(json.dumps(DOCUMENT))
    redis = RedisServer(directory)
    redis.start()
    try:
        with serve_recorder() as recorder:
            serve = [
                "--openapi", str(spec), "--base-url", recorder.base_url,
                "--header", "Authorization=PAYMENTS_TOKEN",
                "--token-verifier", "tests.mcp_catalog:TokenVerifier",
            ]  # fmt: skip
            with ReplicaSet(
                2,
                ledger_url=redis.url,
                prefix="openapi-consent",
                log_dir=directory,
                environment={"PAYMENTS_TOKEN": HOST_TOKEN},
                serve=serve,
            ) as replicas:
                yield Deployment(recorder, replicas)
    finally:
        redis.stop()


async def ask_on(deployment: Deployment, index: int, bearer: str, call: dict[str, Any]) -> Any:
    async with client(
        deployment.to(index), MODERN, elicitation=no_person, bearer=bearer
    ) as session:
        pending = await session.session.call_tool("invoke", call, allow_input_required=True)
    assert isinstance(pending, types.InputRequiredResult), pending
    return pending


async def answer_on(
    deployment: Deployment, index: int, bearer: str, call: dict[str, Any], pending: Any
) -> Any:
    """The retry carrying ``pending``'s state and an accept; an ``MCPError`` is returned."""
    try:
        transport = deployment.to(index)
        async with client(transport, MODERN, elicitation=no_person, bearer=bearer) as session:
            return await session.session.call_tool(
                "invoke",
                call,
                request_state=pending.request_state,
                input_responses={"opgate": YES},
            )
    except Exception as exc:  # the client's task group wraps it
        error: BaseException = exc
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        assert isinstance(error, MCPError), error
        return error


def refused_as_expired(outcome: Any) -> bool:
    return isinstance(outcome, MCPError) and outcome.error.data == {"code": "expired"}


def message_of(outcome: Any) -> str:
    assert isinstance(outcome, types.CallToolResult), outcome
    assert outcome.is_error, outcome
    return str(outcome.structured_content["error"]["message"])


async def test_a_confirmation_is_bound_across_replicas_in_the_2026_era(
    deployment: Deployment,
) -> None:
    recorder = deployment.recorder
    recorder.received.clear()
    pending = await ask_on(deployment, 0, "alice-token", TRANSFER)
    shown = read(pending.input_requests["opgate"].params.message)
    assert HOST_TOKEN not in pending.input_requests["opgate"].params.message
    other_arguments = {"name": "transfer", "arguments": {"body": {"to": "attacker", "amount": 9}}}
    other_operation = {"name": "pay", "arguments": TRANSFER["arguments"]}
    assert refused_as_expired(
        await answer_on(deployment, 1, "alice-token", other_arguments, pending)
    )
    assert refused_as_expired(
        await answer_on(deployment, 1, "alice-token", other_operation, pending)
    )
    assert refused_as_expired(await answer_on(deployment, 1, "bob-token", TRANSFER, pending))
    assert recorder.received == []
    done = await answer_on(deployment, 1, "alice-token", TRANSFER, pending)
    assert isinstance(done, types.CallToolResult), done
    assert not done.is_error, done
    assert_received_as_shown(recorder, shown)
    assert dict(recorder.received[0].headers)["authorization"] == HOST_TOKEN
    for index in (0, 1):  # the same answer again, on either replica: never a second send
        again = await answer_on(deployment, index, "alice-token", TRANSFER, pending)
        if isinstance(again, types.CallToolResult) and not again.is_error:
            text = again.content[0].text
        else:
            text = message_of(again)
        assert "already sent" in text
        assert "not sent again" in text
        assert refused_as_expired(
            await answer_on(deployment, index, "bob-token", TRANSFER, pending)
        )
    assert len(recorder.received) == 1


async def test_every_2025_call_asks_the_person_and_cannot_carry_another_answer(
    deployment: Deployment,
) -> None:
    """2025-11-25: the answer rides the call's own elicitation; it is never reusable."""
    recorder = deployment.recorder
    recorder.received.clear()
    messages: list[str] = []

    async def person(context: Any, params: Any) -> types.ElicitResult:
        messages.append(params.message)
        return YES if len(messages) <= 2 else types.ElicitResult(action="decline")

    transport = StickyTransport(deployment.replicas.ports)
    with anyio.fail_after(60):
        async with client(transport, "legacy", elicitation=person, bearer="alice-token") as session:
            for _ in range(3):
                result = await session.call_tool("invoke", TRANSFER)
                assert result.is_error == (len(messages) == 3), result
            assert len(messages) == 3  # each call asked the person again
            assert "was not confirmed" in message_of(result)
            # a modern continuation (issued to alice) cannot be answered through this era
            pending = await ask_on(deployment, 0, "alice-token", TRANSFER)
            smuggled = await session.session.call_tool(
                "invoke",
                TRANSFER,
                request_state=pending.request_state,
                input_responses={"opgate": YES},
            )
            assert "belong to protocol 2026-07-28" in message_of(smuggled)
    assert len(recorder.received) == 2
    for message, received in zip(messages, recorder.received, strict=False):
        recorder_one = Recorder(recorder.base_url, recorder.origin, [received])
        assert_received_as_shown(recorder_one, read(message))
