"""``opgate.upstream._relay``: an upstream's questions relayed as opgate prompts, through
the ``Registry``.

Two copies of ``tests/relay_servers.py`` run over stdio: ``old`` speaks 2025-11-25 only
(its questions are ``elicitation/create`` inside the call, which the gateway holds open)
and ``new`` 2026-07-28 (its questions are ``InputRequiredResult``s, relayed without
state in this process). For both: a form answered and the upstream's result returned,
a decline, a URL hand-off, two questions in turn with a replayed answer (the registry
replays the next prompt) and a recovery after completion (the kept outcome, the
upstream not asked again), a caller without form support and a form outside the
profile (``confirmation_required``, the upstream gets a decline), progress, a
cancelled call cancelled upstream, sampling and roots refused, a ``-32042`` error's
hand-offs shown in turn and the call sent again once they are accepted (asked again
while the upstream still refuses, up to ``Limits.max_prompts``; declined, the call
fails and is not sent again; the 2025-11-25 upstream's
``notifications/elicitation/complete`` does no harm). For ``old``: a held call whose
person does not answer in time is declined upstream and no longer held;
a question that arrives while another call is in flight is refused. With two replicas
sharing a Redis ledger, the answer to ``new``'s question may reach the other replica;
the answer to ``old``'s may not (its call is held by the replica that asked).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from opgate import (
    Completed,
    Failed,
    FailureCode,
    FormPrompt,
    InputMode,
    InputResponse,
    Limits,
    LocalPolicy,
    Pending,
    ProgressUpdate,
    Registry,
    Text,
    URLPrompt,
)
from opgate.upstream import Catalog, load_config, open_catalog

from relay_servers import GREET_FORM, HANDOFF_URL, entry

pytestmark = pytest.mark.anyio

FORM = {InputMode.FORM}
BOTH = {InputMode.FORM, InputMode.URL}
ERAS = {"old": "2025-11-25", "new": "2026-07-28"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def catalog() -> AsyncIterator[Catalog]:
    config = load_config({"mcpServers": {"old": entry("legacy"), "new": entry("modern")}})
    async with open_catalog(config, start_timeout=60, call_timeout=60) as opened:
        assert [status.protocol_version for status in opened.report.upstreams] == [
            "2025-11-25",
            "2026-07-28",
        ]
        yield opened


@pytest.fixture(scope="module")
def registry(catalog: Catalog) -> Registry:
    return catalog.registry(LocalPolicy())


@pytest.fixture(params=["old", "new"])
def up(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def call(
    registry: Registry,
    name: str,
    arguments: dict[str, Any],
    answer: tuple[Pending, InputResponse] | None = None,
    **kwargs: Any,
) -> Any:
    resume = None if answer is None else (answer[0].continuation, answer[1])
    support = kwargs.pop("input_support", BOTH)
    return await registry.invoke(
        None, name, arguments, input_support=support, resume=resume, **kwargs
    )


async def settled(catalog: Catalog, up: str) -> None:
    """Wait until no call of ``up`` is in flight or held (abandoned calls end on their own)."""
    session = catalog.sessions[up]
    with anyio.fail_after(30):
        while session.in_flight or len(session.held):
            await anyio.sleep(0.05)
    # A call cancelled here leaves the upstream's questions refused for call_timeout
    # (the session cannot know the upstream stopped): relay_servers does stop, so the
    # next test may start without the wait.
    session._quarantine_until = -math.inf


async def marked(marker: Path) -> str:
    with anyio.fail_after(30):
        while not marker.exists():
            await anyio.sleep(0.05)
    return marker.read_text()


async def test_a_form_is_answered_and_the_upstreams_result_returned(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    name = f"{up}.greet"
    asked = await call(registry, name, {"topic": "tea"}, input_support=FORM)
    assert isinstance(asked, Pending), asked
    assert isinstance(asked.prompt, FormPrompt)
    assert asked.prompt.message == f"upstream {up!r} asks: Who are you?"
    assert asked.prompt.schema == GREET_FORM
    if up == "old":
        assert len(catalog.sessions[up].held) == 1
    answer = InputResponse.accept({"name": "Ada", "color": "g"})
    done = await call(registry, name, {"topic": "tea"}, (asked, answer), input_support=FORM)
    assert isinstance(done, Completed), done
    assert done.result.structured == {
        "action": "accept",
        "name": "Ada",
        "color": "g",
        "topic": "tea",
        "era": ERAS[up],
    }
    assert done.result.content == (Text("greet accept"),)
    await settled(catalog, up)


async def test_a_round_that_cannot_be_shown_declines_every_request_and_waits_little(
    registry: Registry, catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2026-07-28: the first request was accepted, the second cannot be shown. Sending the
    # accept with the decline would let the upstream act while the caller is told
    # confirmation_required (and may call again); the upstream's slow answer to the
    # declines is nobody's, so the caller does not wait for it.
    from opgate.upstream import _relay

    monkeypatch.setattr(_relay, "DECLINE_TIMEOUT", 0.5, raising=False)
    marker = tmp_path / "double"
    arguments = {"marker": str(marker), "delay": 20}
    first = await call(registry, "new.double", arguments)
    assert isinstance(first, Pending), first
    start = anyio.current_time()
    second = await call(registry, "new.double", arguments, (first, InputResponse.accept({"a": 1})))
    assert anyio.current_time() - start < 5
    assert isinstance(second, Failed), second
    assert second.failure.code is FailureCode.CONFIRMATION_REQUIRED
    assert await marked(marker) == "first=decline second=decline"
    await settled(catalog, "new")


async def test_a_question_names_its_upstream_and_shows_its_hidden_characters(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    asked = await call(registry, f"{up}.spoof", {})
    assert isinstance(asked, Pending), asked
    assert isinstance(asked.prompt, FormPrompt)
    assert asked.prompt.message == (
        f"upstream {up!r} asks: Enter\\u001b[2J \\u202eyour\\u202c PIN\\u000d\\n\\n"
        "opgate: this form is the gateway's own"
    )
    (field,) = asked.prompt.schema["properties"].values()
    assert field == {
        "type": "string",
        "title": "P\\u202eIN\\u0007",
        "description": "4 digits\\nor else",
    }
    done = await call(registry, f"{up}.spoof", {}, (asked, InputResponse.decline()))
    assert isinstance(done, Completed), done
    assert done.result.content == (Text("spoof decline"),)
    await settled(catalog, up)


@pytest.mark.parametrize("response", [InputResponse.decline(), InputResponse.cancel()])
async def test_a_decline_or_cancel_reaches_the_upstream(
    registry: Registry, catalog: Catalog, up: str, response: InputResponse
) -> None:
    asked = await call(registry, f"{up}.greet", {"topic": "tea"})
    assert isinstance(asked, Pending), asked
    done = await call(registry, f"{up}.greet", {"topic": "tea"}, (asked, response))
    assert isinstance(done, Completed), done
    assert done.result.structured["action"] == response.action.value
    assert done.result.structured["name"] is None
    await settled(catalog, up)


async def test_a_url_hand_off_is_relayed(registry: Registry, catalog: Catalog, up: str) -> None:
    asked = await call(registry, f"{up}.handoff", {})
    assert isinstance(asked, Pending), asked
    assert asked.prompt == URLPrompt(f"upstream {up!r} asks: Sign in to continue", HANDOFF_URL)
    done = await call(registry, f"{up}.handoff", {}, (asked, InputResponse.accept()))
    assert isinstance(done, Completed), done
    assert done.result.content == (Text(f"hand-off accept ({ERAS[up]})"),)
    await settled(catalog, up)


async def test_a_url_elicitation_required_error_is_a_hand_off_then_the_call_again(
    registry: Registry, catalog: Catalog, up: str, request: pytest.FixtureRequest
) -> None:
    arguments = {"key": f"{request.node.name}", "times": 2, "handoffs": 2}
    url = f"{HANDOFF_URL}?gate={arguments['key']}"
    first = await call(registry, f"{up}.gated", arguments)
    assert isinstance(first, Pending), first
    assert first.prompt == URLPrompt(f"upstream {up!r} asks: Authorize step 1", f"{url}&step=1")
    second = await call(registry, f"{up}.gated", arguments, (first, InputResponse.accept()))
    assert isinstance(second, Pending), second
    assert second.prompt == URLPrompt(f"upstream {up!r} asks: Authorize step 2", f"{url}&step=2")
    # Both accepted: the call is sent again; the upstream still refuses, so it is asked again.
    third = await call(registry, f"{up}.gated", arguments, (second, InputResponse.accept()))
    assert isinstance(third, Pending), third
    assert third.prompt == URLPrompt(f"upstream {up!r} asks: Authorize step 1", f"{url}&step=1")
    fourth = await call(registry, f"{up}.gated", arguments, (third, InputResponse.accept()))
    assert isinstance(fourth, Pending), fourth
    done = await call(registry, f"{up}.gated", arguments, (fourth, InputResponse.accept()))
    assert isinstance(done, Completed), done
    # In 2025-11-25 the upstream sent notifications/elicitation/complete first: harmless.
    assert done.result.content == (Text(f"gated open after 3 calls ({ERAS[up]})"),)
    recovered = await call(registry, f"{up}.gated", arguments, (fourth, InputResponse.accept()))
    assert isinstance(recovered, Completed), recovered
    assert recovered.result.content == done.result.content
    await settled(catalog, up)


async def test_an_upstream_that_always_wants_its_hand_off_stops_at_the_prompt_limit(
    registry: Registry, catalog: Catalog, up: str, request: pytest.FixtureRequest
) -> None:
    arguments = {"key": request.node.name, "times": 1000}
    outcome = await call(registry, f"{up}.gated", arguments)
    prompts = 0
    while isinstance(outcome, Pending):
        prompts += 1
        outcome = await call(registry, f"{up}.gated", arguments, (outcome, InputResponse.accept()))
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.INTERACTION_LIMIT
    assert prompts == Limits().max_prompts
    await settled(catalog, up)


@pytest.mark.parametrize("response", [InputResponse.decline(), InputResponse.cancel()])
async def test_a_declined_hand_off_fails_the_call_without_sending_it_again(
    registry: Registry,
    catalog: Catalog,
    up: str,
    response: InputResponse,
    request: pytest.FixtureRequest,
) -> None:
    arguments = {"key": f"{request.node.name}", "times": 1}
    asked = await call(registry, f"{up}.gated", arguments)
    assert isinstance(asked, Pending), asked
    outcome = await call(registry, f"{up}.gated", arguments, (asked, response))
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    what = {"decline": "declined", "cancel": "cancelled"}[response.action.value]
    assert f"the person {what} it, so the call was not sent again" in outcome.failure.message
    # Not sent again: the next call is the upstream's second, which it answers.
    done = await call(registry, f"{up}.gated", arguments)
    assert isinstance(done, Completed), done
    assert done.result.content == (Text(f"gated open after 2 calls ({ERAS[up]})"),)
    await settled(catalog, up)


async def test_a_hand_off_needs_url_support(
    registry: Registry, catalog: Catalog, up: str, request: pytest.FixtureRequest
) -> None:
    outcome = await call(registry, f"{up}.gated", {"key": request.node.name}, input_support=FORM)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED
    await settled(catalog, up)


async def test_questions_in_turn_replayed_and_recovered(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    first = await call(registry, f"{up}.survey", {})
    assert isinstance(first, Pending), first
    assert isinstance(first.prompt, FormPrompt)
    assert first.prompt.message == f"upstream {up!r} asks: First?"
    a = InputResponse.accept({"a": 1})
    second = await call(registry, f"{up}.survey", {}, (first, a))
    assert isinstance(second, Pending), second
    assert isinstance(second.prompt, FormPrompt)
    assert second.prompt.message == f"upstream {up!r} asks: Second?"
    # The same answer again: the registry replays the next prompt, the upstream is not asked.
    again = await call(registry, f"{up}.survey", {}, (first, a))
    assert isinstance(again, Pending), again
    assert (again.continuation, again.prompt) == (second.continuation, second.prompt)
    b = InputResponse.accept({"b": True})
    done = await call(registry, f"{up}.survey", {}, (second, b))
    assert isinstance(done, Completed), done
    assert done.result.structured == {"first": {"a": 1}, "second": {"b": True}}
    # The last answer again, after completion: a recovery gets the outcome it led to.
    recovered = await call(registry, f"{up}.survey", {}, (second, b))
    assert isinstance(recovered, Completed), recovered
    assert recovered.result.structured == done.result.structured
    await settled(catalog, up)


async def test_a_caller_without_form_support_gets_confirmation_required(
    registry: Registry, catalog: Catalog, up: str, tmp_path: Path
) -> None:
    marker = tmp_path / "action"
    outcome = await call(
        registry, f"{up}.greet", {"topic": "tea", "marker": str(marker)}, input_support=()
    )
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED
    assert await marked(marker) == "decline"
    await settled(catalog, up)


async def test_a_url_hand_off_needs_url_support(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    outcome = await call(registry, f"{up}.handoff", {}, input_support=FORM)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED
    await settled(catalog, up)


async def test_a_form_outside_the_profile_gets_confirmation_required(
    registry: Registry, catalog: Catalog, up: str, tmp_path: Path
) -> None:
    marker = tmp_path / "action"
    outcome = await call(registry, f"{up}.nested", {"marker": str(marker)})
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED
    message = outcome.failure.message
    assert message.startswith(f"upstream {up!r} asked for a form that opgate cannot show (")
    assert "nested objects are not supported" in message
    assert await marked(marker) == "decline"
    await settled(catalog, up)


async def test_progress_arrives_through_the_progress_channel(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    seen: list[ProgressUpdate] = []
    done = await call(registry, f"{up}.steps", {"count": 3}, progress=seen.append)
    assert isinstance(done, Completed), done
    assert seen, "no progress arrived"
    assert [update.total for update in seen] == [3] * len(seen)
    assert all(update.message.startswith("step ") for update in seen)
    assert [update.completed for update in seen] == sorted(update.completed for update in seen)
    await settled(catalog, up)


async def test_a_cancelled_call_is_cancelled_upstream(
    registry: Registry, catalog: Catalog, up: str, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    first = anyio.Event()

    def sink(update: ProgressUpdate) -> None:
        first.set()

    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: call(
                registry, f"{up}.steps", {"count": 200, "marker": str(marker)}, progress=sink
            )
        )
        with anyio.fail_after(30):
            await first.wait()
        group.cancel_scope.cancel()
    assert await marked(marker) == "cancelled"
    await settled(catalog, up)


async def test_sampling_and_roots_are_refused(
    registry: Registry, catalog: Catalog, up: str
) -> None:
    for tool, what in (("sample", "Sampling"), ("roots", "List roots")):
        outcome = await call(registry, f"{up}.{tool}", {})
        if up == "old":  # the SDK answers the upstream's request with a JSON-RPC error
            assert isinstance(outcome, Completed), outcome
            assert outcome.result.content == (Text(f"{tool} refused: -32600 {what} not supported"),)
        else:  # inside an InputRequiredResult: the call fails, as in the SDK's own client
            assert isinstance(outcome, Failed), outcome
            assert outcome.failure.code is FailureCode.OPERATION_FAILED
            word = "sampling" if tool == "sample" else "roots"
            assert outcome.failure.message == (
                f"upstream 'new' asked for {word}, which the gateway does not relay"
            )
    await settled(catalog, up)


async def test_a_question_while_another_call_is_in_flight_is_refused(
    registry: Registry, catalog: Catalog, tmp_path: Path
) -> None:
    started = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: call(registry, "old.steps", {"count": 200}, progress=lambda _: started.set())
        )
        with anyio.fail_after(30):
            await started.wait()
        outcome = await call(registry, "old.greet", {"topic": "tea"})
        group.cancel_scope.cancel()
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert outcome.failure.message == (
        "upstream 'old' failed the call: error -32600: the gateway relays an elicitation "
        "only while it has one call in flight to this server: it cannot tell whose it is"
    )  # and not how many calls other callers have in flight
    await settled(catalog, "old")


async def test_one_held_call_serialises_the_upstreams_questions(
    registry: Registry, catalog: Catalog
) -> None:
    # Nothing ties a 2025-11-25 question to its call, so while one waits for a person
    # (its call is in flight) no other call of the upstream can ask, whoever calls.
    session = catalog.sessions["old"]
    held = await call(registry, "old.greet", {"topic": "tea"})
    assert isinstance(held, Pending), held
    refused = await call(registry, "old.greet", {"topic": "coffee"})
    assert isinstance(refused, Failed), refused
    assert "cannot tell whose it is" in refused.failure.message
    assert "now" not in refused.failure.message
    assert len(session.held) == 1
    answer = InputResponse.accept({"name": "Ada"})
    done = await call(registry, "old.greet", {"topic": "tea"}, (held, answer))
    assert isinstance(done, Completed), done
    await settled(catalog, "old")
    again = await call(registry, "old.greet", {"topic": "coffee"})
    assert isinstance(again, Pending), again  # the next question is relayed again
    catalog.sessions["old"].held.abandon_all()
    await settled(catalog, "old")


async def test_a_held_calls_failure_is_its_own_whatever_goes_wrong_reading_it(
    registry: Registry, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = catalog.sessions["old"]
    plain = await call(registry, "old.broken", {})
    assert isinstance(plain, Failed), plain
    assert plain.failure.message == (
        "upstream 'old' failed the call: error -32602: broken on purpose"
    )

    async def failing(*args: Any) -> Any:
        raise RuntimeError("a bug while naming the failure")

    monkeypatch.setattr(session, "_failure", failing)
    outcome = await call(registry, "old.broken", {})
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.message == "upstream 'old' failed (RuntimeError)"
    monkeypatch.undo()
    assert session.status().connected  # the connection's task group did not end
    after = await call(registry, "old.steps", {"count": 1})
    assert isinstance(after, Completed), after


async def test_an_answer_to_a_call_no_longer_held_fails(
    registry: Registry, catalog: Catalog
) -> None:
    asked = await call(registry, "old.greet", {"topic": "tea"})
    assert isinstance(asked, Pending), asked
    catalog.sessions["old"].held.abandon_all()  # as the session's closing does
    outcome = await call(registry, "old.greet", {"topic": "tea"}, (asked, InputResponse.decline()))
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert "is no longer waiting for this answer" in outcome.failure.message
    await settled(catalog, "old")


async def test_a_held_call_nobody_answers_in_time_is_declined(tmp_path: Path) -> None:
    config = load_config({"mcpServers": {"old": entry("legacy")}})
    async with open_catalog(config, start_timeout=60, hold_timeout=0.5) as catalog:
        registry = catalog.registry(LocalPolicy())
        marker = tmp_path / "action"
        arguments = {"topic": "tea", "marker": str(marker)}
        asked = await call(registry, "old.greet", arguments)
        assert isinstance(asked, Pending), asked
        assert await marked(marker) == "decline"  # the upstream got its decline on time
        await settled(catalog, "old")
        answer = InputResponse.accept({"name": "Ada"})
        late = await call(registry, "old.greet", arguments, (asked, answer))
        assert isinstance(late, Failed), late
        assert "is no longer waiting for this answer" in late.failure.message


async def test_a_2026_answer_may_reach_another_replica_a_2025_one_may_not(
    redis_server: Any,
) -> None:
    from opgate.redis import RedisLedger

    from conftest import SECRET

    config = load_config({"mcpServers": {"old": entry("legacy"), "new": entry("modern")}})
    async with (
        open_catalog(config, start_timeout=60) as first,
        open_catalog(config, start_timeout=60) as second,
    ):
        replicas = [
            Registry(
                catalog.operations,
                LocalPolicy(),
                secret=SECRET,
                ledger=RedisLedger(redis_server.url, prefix="relay-replicas"),
            )
            for catalog in (first, second)
        ]
        one, other = replicas
        try:
            answer = InputResponse.accept({"name": "Ada"})
            asked = await call(one, "new.greet", {"topic": "tea"})
            assert isinstance(asked, Pending), asked
            done = await call(other, "new.greet", {"topic": "tea"}, (asked, answer))
            assert isinstance(done, Completed), done
            assert done.result.structured["name"] == "Ada"
            asked = await call(one, "old.greet", {"topic": "tea"})
            assert isinstance(asked, Pending), asked
            elsewhere = await call(other, "old.greet", {"topic": "tea"}, (asked, answer))
            assert isinstance(elsewhere, Failed), elsewhere
            assert "held by another gateway process" in elsewhere.failure.message
        finally:
            for registry in replicas:
                await registry.aclose()


class _Principals:
    """A policy whose principal is the context itself, and which allows everything."""

    def scope_key(self, ctx: Any) -> Any:
        return ctx

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


@pytest.mark.parametrize("ending", ["timeout", "cancel"])
async def test_a_late_question_of_a_call_given_up_reaches_nobody(
    tmp_path: Path, ending: str
) -> None:
    # alice's call ends at the gateway (timed out, or her client cancels) while the
    # upstream ignores the cancellation and asks later, when bob's call is the only
    # one in flight: the question must not be bob's, and no answer of his alice's.
    config = load_config({"mcpServers": {"old": entry("legacy")}})
    async with open_catalog(config, start_timeout=60, call_timeout=2) as catalog:
        registry = catalog.registry(_Principals())
        session = catalog.sessions["old"]
        marker = tmp_path / "alice"
        delay = 2.6 if ending == "timeout" else 1.2  # when bob's call is in flight
        arguments = {"who": "alice", "delay": delay, "marker": str(marker)}
        if ending == "timeout":
            gone = await registry.invoke("alice", "old.stubborn", arguments, input_support=BOTH)
            assert isinstance(gone, Failed), gone
            assert "did not answer within 2 s" in gone.failure.message
        else:
            with anyio.move_on_after(0.3):
                await registry.invoke("alice", "old.stubborn", arguments, input_support=BOTH)
        with anyio.fail_after(5):  # the gateway's task of the call ends on its own
            while session.in_flight:
                await anyio.sleep(0.05)
        assert session.quarantined
        bob = await registry.invoke("bob", "old.steps", {"count": 12}, input_support=BOTH)
        assert isinstance(bob, Completed), bob  # never alice's question
        assert await marked(marker) == "alice refused -32600"
