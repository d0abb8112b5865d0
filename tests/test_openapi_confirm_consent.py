"""A person's confirmation (``opgate.openapi._confirm``) answers one request, for one
principal, once.

An accepted confirmation is bound to the operation, the canonical arguments, the
principal (the policy's scope key), the serving lifetime and, through the prompt's
private state, the exact request shown (its digest) and one send (its key). These
tests try to reuse one answer for something else, on the in-memory ledger and on a
shared Redis ledger between replicas in one process; tests/test_openapi_replicas.py
does the same over MCP in both protocol eras against ``opgate serve`` replicas.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from opgate import Completed, Failed, InputMode, InputResponse, Pending, Registry
from opgate.openapi import Catalog, build_catalog

from conftest import SECRET
from recording_app import (
    DOCUMENT,
    Ctx,
    Policy,
    Recorder,
    assert_received_as_shown,
    read,
    serve_recorder,
)

pytestmark = pytest.mark.anyio

FORM = {InputMode.FORM}
YES = InputResponse.accept({"confirm": True})
TRANSFER = {"body": {"to": "landlord", "amount": 10}}
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    with serve_recorder() as running:
        yield running


class Replicas:
    """Registries over one ledger (in memory: one registry; Redis: one per replica)."""

    def __init__(self, kind: str, redis_url: str | None) -> None:
        self.kind = kind
        self.redis_url = redis_url
        self.prefix = f"consent-{next(_prefixes)}"
        self.catalogs: list[Catalog] = []
        self.registries: list[Registry] = []

    def add(self, base_url: str, **options: Any) -> Registry:
        catalog = build_catalog(DOCUMENT, base_url=base_url, timeout=5, **options)
        shared: dict[str, Any] = {}
        if self.kind == "redis":
            from opgate.redis import RedisLedger

            assert self.redis_url is not None
            shared = {"secret": SECRET, "ledger": RedisLedger(self.redis_url, prefix=self.prefix)}
        elif self.registries:
            return self.registries[0]  # one process: every "replica" is the same registry
        registry = Registry(catalog.operations, catalog.policy(Policy()), **shared)
        self.catalogs.append(catalog)
        self.registries.append(registry)
        return registry

    async def close(self) -> None:
        for catalog in self.catalogs:
            await catalog.aclose()
        for registry in self.registries:
            ledger = registry._ledger
            if hasattr(ledger, "aclose"):
                await ledger.aclose()


@pytest.fixture(params=["memory", "redis"])
async def replicas(request: pytest.FixtureRequest, recorder: Recorder) -> AsyncIterator[Replicas]:
    recorder.received.clear()
    url = request.getfixturevalue("redis_server").url if request.param == "redis" else None
    made = Replicas(request.param, url)
    yield made
    await made.close()


async def ask(registry: Registry, ctx: Any, name: str, arguments: Any) -> Pending:
    pending = await registry.invoke(ctx, name, arguments, input_support=FORM)
    assert isinstance(pending, Pending), pending
    return pending


async def answer(
    registry: Registry,
    ctx: Any,
    name: str,
    arguments: Any,
    pending: Pending,
    response: InputResponse = YES,
) -> Any:
    return await registry.invoke(
        ctx, name, arguments, input_support=FORM, resume=(pending.continuation, response)
    )


def code(outcome: Any) -> str:
    assert isinstance(outcome, Failed), outcome
    return outcome.failure.code.value


async def test_one_confirmation_cannot_be_used_for_other_arguments_operations_or_principals(
    replicas: Replicas, recorder: Recorder
) -> None:
    first = replicas.add(recorder.base_url)
    second = replicas.add(recorder.base_url)
    alice, bob = Ctx("alice"), Ctx("bob")
    pending = await ask(first, alice, "transfer", TRANSFER)
    shown = read(pending.prompt.message)
    other = {"body": {"to": "attacker", "amount": 1000000}}
    assert code(await answer(second, alice, "transfer", other, pending)) == "expired"
    assert code(await answer(second, alice, "transfer", {**TRANSFER, "note": "x"}, pending)) == (
        "expired"
    )
    assert code(await answer(second, alice, "pay", TRANSFER, pending)) == "expired"
    assert code(await answer(second, bob, "transfer", TRANSFER, pending)) == "expired"
    assert recorder.received == []
    # the refusals left the prompt usable: the person's answer still sends, once
    done = await answer(second, alice, "transfer", TRANSFER, pending)
    assert isinstance(done, Completed), done
    assert_received_as_shown(recorder, shown)
    for registry in (first, second):
        again = await answer(registry, alice, "transfer", TRANSFER, pending)
        assert isinstance(again, Completed | Failed), again
        text = again.result.content[0].text if isinstance(again, Completed) else ""
        message = again.failure.message if isinstance(again, Failed) else text
        assert "already sent" in message
        assert "not sent again" in message
        assert code(await answer(registry, bob, "transfer", TRANSFER, pending)) == "expired"
    assert len(recorder.received) == 1


async def test_a_declined_answer_is_final_for_its_prompt(
    replicas: Replicas, recorder: Recorder
) -> None:
    registry = replicas.add(recorder.base_url)
    alice = Ctx("alice")
    pending = await ask(registry, alice, "transfer", TRANSFER)
    declined = await answer(registry, alice, "transfer", TRANSFER, pending, InputResponse.decline())
    assert code(declined) == "operation_failed"
    # the same prompt cannot be answered again the other way: a chain never forks
    assert code(await answer(registry, alice, "transfer", TRANSFER, pending)) == "invalid_request"
    assert recorder.received == []


async def test_a_replica_with_another_base_url_refuses_the_answer(
    redis_server: Any, recorder: Recorder
) -> None:
    """The person saw one URL; a replica configured with another never sends elsewhere."""
    recorder.received.clear()
    replicas = Replicas("redis", redis_server.url)
    try:
        shown_by = replicas.add(recorder.base_url)
        answered_by = replicas.add(recorder.origin + "/other")
        alice = Ctx("alice")
        pending = await ask(shown_by, alice, "transfer", TRANSFER)
        assert read(pending.prompt.message).url == recorder.base_url + "/transfer"
        outcome = await answer(answered_by, alice, "transfer", TRANSFER, pending)
        assert code(outcome) == "operation_failed"
        assert outcome.failure.message.startswith(
            "not sent: the request this answer would send differs"
        )
        assert recorder.received == []
    finally:
        await replicas.close()


async def test_a_replica_that_does_not_confirm_never_sends_an_answered_prompt(
    redis_server: Any, recorder: Recorder
) -> None:
    """A declined (or replayed) answer reaching a replica with confirm=() is not a send."""
    recorder.received.clear()
    replicas = Replicas("redis", redis_server.url)
    try:
        confirming = replicas.add(recorder.base_url)
        careless = replicas.add(recorder.base_url, confirm=())
        alice = Ctx("alice")
        pending = await ask(confirming, alice, "transfer", TRANSFER)
        declined = await answer(
            careless, alice, "transfer", TRANSFER, pending, InputResponse.decline()
        )
        assert code(declined) == "operation_failed"
        assert recorder.received == []
        pending = await ask(confirming, alice, "transfer", TRANSFER)
        assert isinstance(await answer(confirming, alice, "transfer", TRANSFER, pending), Completed)
        replayed = await answer(careless, alice, "transfer", TRANSFER, pending)
        assert "not sent again" in replayed.failure.message
        assert len(recorder.received) == 1
    finally:
        await replicas.close()


async def test_a_cookie_from_one_principals_response_never_rides_on_anothers(
    recorder: Recorder,
) -> None:
    """The recorder answers with Set-Cookie; opgate's shared client keeps no cookies."""
    recorder.received.clear()
    catalog = build_catalog(DOCUMENT, base_url=recorder.base_url, confirm=())
    registry = catalog.registry(Policy())
    try:
        for who in ("alice", "bob"):
            outcome = await registry.invoke(Ctx(who), "transfer", TRANSFER)
            assert isinstance(outcome, Completed), outcome
        assert [dict(got.headers).get("cookie") for got in recorder.received] == [None, None]
    finally:
        await catalog.aclose()
