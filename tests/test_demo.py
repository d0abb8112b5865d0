"""The support-desk demo: its database, operations, policy, form prompts, and the driver."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from opgate import (
    Completed,
    Failed,
    FailureCode,
    InputMode,
    InputResponse,
    Pending,
    ProgressUpdate,
    Registry,
    URLPrompt,
)
from opgate.demo import ADMIN_SCOPE, DATABASE_ENV, build_registry
from opgate.demo._database import Desk, default_database_path, resolve_database_path
from opgate.demo._seed import SEED_CUSTOMERS, SEED_ORDERS
from opgate.demo._terminal import fill_form, parse_field
from opgate.mcp import CallContext, GatewayServer, Principal

LOCAL = CallContext(Principal(client_id="local", subject="local"), "2025-11-25")
ADMIN = CallContext(Principal(client_id="ops", subject="kim", scopes={ADMIN_SCOPE}), "2025-11-25")
BOTH = {InputMode.FORM, InputMode.URL}

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "desk" / "demo.sqlite3"


@pytest.fixture
def registry(database: Path) -> Registry:
    return build_registry(database)


async def call(
    registry: Registry, name: str, arguments: dict[str, Any], ctx: CallContext = LOCAL, **kw: Any
) -> Any:
    return await registry.invoke(ctx, name, json.dumps(arguments), **kw)


def structured(outcome: object) -> Any:
    assert isinstance(outcome, Completed), outcome
    return outcome.result.structured


# --- the database ------------------------------------------------------------------


def test_seeds_on_first_run_only(database: Path) -> None:
    desk = Desk(database)
    assert desk.open() is True
    with desk.write() as db:
        db.execute("UPDATE customers SET name = ? WHERE id = 1", ("Countess Ada",))
    assert desk.open() is False
    build_registry(database)  # a second start keeps the data too
    with desk.read() as db:
        assert db.execute("SELECT name FROM customers WHERE id = 1").fetchone()[0] == "Countess Ada"
        assert db.execute("SELECT count(*) FROM customers").fetchone()[0] == SEED_CUSTOMERS
        assert db.execute("SELECT count(*) FROM orders").fetchone()[0] == SEED_ORDERS


def _dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [line for line in db.iterdump() if "seeded_at" not in line]


def test_seed_data_is_deterministic(tmp_path: Path) -> None:
    Desk(tmp_path / "a.sqlite3").open()
    Desk(tmp_path / "b.sqlite3").open()
    assert _dump(tmp_path / "a.sqlite3") == _dump(tmp_path / "b.sqlite3")


def test_database_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_database_path() == tmp_path / "data" / "opgate" / "demo.sqlite3"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_database_path() == Path.home() / ".local/share/opgate/demo.sqlite3"
    monkeypatch.setenv(DATABASE_ENV, str(tmp_path / "env.sqlite3"))
    assert resolve_database_path() == tmp_path / "env.sqlite3"
    assert resolve_database_path(tmp_path / "arg.sqlite3") == tmp_path / "arg.sqlite3"


# --- the catalog -------------------------------------------------------------------


async def test_catalog_is_big_and_typed(registry: Registry) -> None:
    assert len(registry) >= 30
    names: list[str] = []
    cursor = None
    while True:
        page = await registry.search(ADMIN, "", limit=20, cursor=cursor)
        assert not isinstance(page, Failed)
        names += [item.name for item in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(names) == len(registry)
    groups = {name.split(".")[0] for name in names}
    assert groups >= {"customers", "orders", "invoices", "refunds", "payments", "tickets"}
    assert groups >= {"products", "reports", "admin"}
    with_output = 0
    for name in names:
        spec = await registry.inspect(ADMIN, name)
        assert not isinstance(spec, Failed)
        assert spec.input_schema != {"type": "object"}, name  # a real input schema
        with_output += spec.output_schema is not None
    assert with_output >= 30


async def test_success_with_structured_result_and_text_copy(registry: Registry) -> None:
    outcome = await call(registry, "customers.get", {"customer": 1})
    assert isinstance(outcome, Completed)
    body = outcome.result.structured
    assert body["name"] == "Ada Lovelace"
    assert json.loads(outcome.result.content[0].text) == body


async def test_not_found_fails_with_the_handlers_message(registry: Registry) -> None:
    outcome = await call(registry, "orders.get", {"order": 4242})
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert outcome.failure.message == "order 4242 not found"


async def test_admin_needs_the_scope(registry: Registry) -> None:
    denied = await call(registry, "admin.audit_log", {})
    assert isinstance(denied, Failed)
    assert denied.failure.code is FailureCode.UNAVAILABLE
    page = await registry.search(LOCAL, "audit")
    assert not isinstance(page, Failed)
    assert all(not item.name.startswith("admin.") for item in page.items)
    assert isinstance(await registry.inspect(LOCAL, "admin.reset_demo"), Failed)
    assert structured(await call(registry, "admin.audit_log", {}, ADMIN))["total"] >= 0


async def test_sql_injection_in_strings_is_harmless(registry: Registry, database: Path) -> None:
    hostile = "x' OR '1'='1'; DROP TABLE customers; --"
    found = structured(await call(registry, "customers.list", {"query": hostile}))
    assert found == {"items": [], "total": 0, "offset": 0}
    wildcard = structured(await call(registry, "customers.list", {"query": "%"}))
    assert wildcard["total"] == 0  # LIKE wildcards are matched literally
    made = structured(
        await call(registry, "customers.create", {"name": hostile, "email": "evil@example.com"})
    )
    assert made["name"] == hostile
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM customers").fetchone()[0] == SEED_CUSTOMERS + 1


async def test_writes_persist_and_are_audited(registry: Registry, database: Path) -> None:
    order = structured(
        await call(
            registry, "orders.create", {"customer": 2, "lines": [{"product": 5, "quantity": 2}]}
        )
    )
    assert order["status"] == "placed"
    assert order["total"] == "25.00"
    again = build_registry(database)
    assert structured(await call(again, "orders.get", {"order": order["id"]}))["id"] == order["id"]
    log = structured(await call(again, "admin.audit_log", {"limit": 1}, ADMIN))
    assert log["items"][0]["operation"] == "orders.create"


# --- human input -------------------------------------------------------------------


async def _refund_prompt(registry: Registry, order: int) -> Pending:
    pending = await call(registry, "refunds.request", {"order": order}, input_support=BOTH)
    assert isinstance(pending, Pending), pending
    return pending


async def test_refund_accepted_once_even_when_replayed(registry: Registry) -> None:
    pending = await _refund_prompt(registry, 1)
    assert "confirm" in pending.prompt.schema["properties"]
    answer = InputResponse.accept({"confirm": True, "reason": "damaged"})
    args = {"order": 1}
    done = await call(
        registry, "refunds.request", args, input_support=BOTH, resume=(pending.continuation, answer)
    )
    first = structured(done)
    assert first["replayed"] is False
    assert first["order_status"] == "refunded"
    again = await call(
        registry, "refunds.request", args, input_support=BOTH, resume=(pending.continuation, answer)
    )
    second = structured(again)  # recovery_only: the same refund, not a second one
    assert second["replayed"] is True
    assert second["id"] == first["id"]
    refunds = structured(await call(registry, "refunds.list", {"order": 1}))
    assert refunds["total"] == 1
    assert isinstance(await call(registry, "refunds.request", args, input_support=BOTH), Failed)


@pytest.mark.parametrize(
    "answer",
    [
        InputResponse.decline(),
        InputResponse.cancel(),
        InputResponse.accept({"confirm": False, "reason": "late"}),
    ],
)
async def test_refund_not_confirmed_changes_nothing(
    registry: Registry, answer: InputResponse
) -> None:
    pending = await _refund_prompt(registry, 2)
    outcome = await call(
        registry,
        "refunds.request",
        {"order": 2},
        input_support=BOTH,
        resume=(pending.continuation, answer),
    )
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert "refund not made" in outcome.failure.message
    assert structured(await call(registry, "orders.get", {"order": 2}))["refunded"] == "0.00"


async def test_refund_without_a_form_needs_confirmation(registry: Registry) -> None:
    outcome = await call(registry, "refunds.request", {"order": 1})
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.CONFIRMATION_REQUIRED


async def test_payment_hand_off_records_a_pending_payment(registry: Registry) -> None:
    invoice = structured(await call(registry, "invoices.list", {"status": "open", "limit": 1}))
    number = invoice["items"][0]["id"]
    pending = await call(registry, "payments.checkout", {"invoice": number}, input_support=BOTH)
    assert isinstance(pending, Pending)
    assert isinstance(pending.prompt, URLPrompt)
    assert pending.prompt.url.startswith("https://pay.example.com/checkout/")
    resume = (pending.continuation, InputResponse.accept())
    paid = structured(
        await call(
            registry, "payments.checkout", {"invoice": number}, input_support=BOTH, resume=resume
        )
    )
    assert paid["status"] == "pending"
    assert paid["checkout_url"] == pending.prompt.url
    replay = structured(
        await call(
            registry, "payments.checkout", {"invoice": number}, input_support=BOTH, resume=resume
        )
    )
    assert replay["id"] == paid["id"]
    status = structured(await call(registry, "invoices.get", {"invoice": number}))["status"]
    assert status == "pending"
    settled = structured(
        await call(registry, "admin.settle_payment", {"payment": paid["id"]}, ADMIN)
    )
    assert settled["status"] == "settled"


async def test_payment_declined_records_nothing(registry: Registry) -> None:
    pending = await call(registry, "payments.checkout", {"invoice": 6}, input_support=BOTH)
    assert isinstance(pending, Pending)
    outcome = await call(
        registry,
        "payments.checkout",
        {"invoice": 6},
        input_support=BOTH,
        resume=(pending.continuation, InputResponse.decline()),
    )
    assert isinstance(outcome, Failed)
    assert structured(await call(registry, "payments.list", {"invoice": 6}))["total"] == 0


async def test_escalation_asks_two_questions(registry: Registry) -> None:
    args = {"ticket": 1}
    first = await call(registry, "tickets.escalate", args, input_support=BOTH)
    assert isinstance(first, Pending)
    assert "team" in first.prompt.schema["properties"]
    second = await call(
        registry,
        "tickets.escalate",
        args,
        input_support=BOTH,
        resume=(first.continuation, InputResponse.accept({"team": "billing", "priority": "high"})),
    )
    assert isinstance(second, Pending)
    assert "notify" in second.prompt.schema["properties"]
    done = await call(
        registry,
        "tickets.escalate",
        args,
        input_support=BOTH,
        resume=(second.continuation, InputResponse.accept({"notify": True, "message": "On it"})),
    )
    ticket = structured(done)
    assert (ticket["status"], ticket["team"]) == ("escalated", "billing")
    assert ticket["comments"][-1]["body"] == "On it"
    assert ticket["customer_notified"] is True
    assert ticket["outcome"] == "ticket 1 escalated to Billing (high); Ada Lovelace told by email"


async def _escalate(registry: Registry, *responses: InputResponse) -> Any:
    """Escalate ticket 1 answering with ``responses`` in turn; the last outcome."""
    args = {"ticket": 1}
    outcome = await call(registry, "tickets.escalate", args, input_support=BOTH)
    for response in responses:
        assert isinstance(outcome, Pending), outcome
        outcome = await call(
            registry,
            "tickets.escalate",
            args,
            input_support=BOTH,
            resume=(outcome.continuation, response),
        )
    return outcome


TEAM = InputResponse.accept({"team": "engineering", "priority": "urgent"})


async def test_escalation_second_question_declined_escalates_without_telling(
    registry: Registry,
) -> None:
    before = structured(await call(registry, "tickets.get", {"ticket": 1}))["comments"]
    ticket = structured(await _escalate(registry, TEAM, InputResponse.decline()))
    assert (ticket["status"], ticket["team"], ticket["priority"]) == (
        "escalated",
        "engineering",
        "urgent",
    )
    assert ticket["customer_notified"] is False
    assert ticket["outcome"] == (
        "ticket 1 escalated to Engineering (urgent);"
        " Ada Lovelace not told: the second question was declined"
    )
    added = ticket["comments"][len(before) :]
    assert [c["internal"] for c in added] == [True]  # the team's note, no message to Ada


async def test_escalation_answered_no_escalates_without_telling(registry: Registry) -> None:
    ticket = structured(await _escalate(registry, TEAM, InputResponse.accept({"notify": False})))
    assert (ticket["status"], ticket["customer_notified"]) == ("escalated", False)
    assert ticket["outcome"].endswith("; Ada Lovelace not told: the person answered no")


@pytest.mark.parametrize(
    ("responses", "message"),
    [
        (
            [InputResponse.decline()],
            "ticket 1 not escalated and Ada Lovelace not told:"
            " the first question (team and priority) was declined",
        ),
        (
            [InputResponse.cancel()],
            "ticket 1 not escalated and Ada Lovelace not told:"
            " the first question (team and priority) was cancelled",
        ),
        (
            [TEAM, InputResponse.cancel()],
            "ticket 1 not escalated to Engineering (urgent) and Ada Lovelace not told:"
            " the second question (tell the customer) was cancelled",
        ),
    ],
)
async def test_escalation_stopped_says_nothing_was_done(
    registry: Registry, responses: list[InputResponse], message: str
) -> None:
    before = structured(await call(registry, "tickets.get", {"ticket": 1}))
    outcome = await _escalate(registry, *responses)
    assert isinstance(outcome, Failed)
    assert outcome.failure.message == message
    assert structured(await call(registry, "tickets.get", {"ticket": 1})) == before


async def test_export_streams_progress(registry: Registry) -> None:
    updates: list[ProgressUpdate] = []
    outcome = await call(registry, "reports.export_orders", {}, progress=updates.append)
    summary = structured(outcome)
    assert summary["rows"] == SEED_ORDERS
    assert len(updates) >= 4
    assert updates[-1].completed == updates[-1].total
    csv_text = outcome.result.content[1].text
    assert csv_text.startswith("order,customer,")
    assert len(csv_text.splitlines()) == SEED_ORDERS + 1


# --- the terminal form -------------------------------------------------------------

FORM = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "maxLength": 5},
        "confirm": {"type": "boolean"},
        "reason": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]},
        "count": {"type": "integer", "minimum": 1, "default": 2},
    },
    "required": ["confirm", "reason"],
}


def _answers(*typed: str) -> Iterator[str]:
    yield from typed


def _fill(*typed: str) -> tuple[str, Any, list[str]]:
    replies = _answers(*typed)
    said: list[str] = []

    def ask(prompt: str) -> str:
        try:
            return next(replies)
        except StopIteration:
            raise EOFError from None

    action, answers = fill_form("Sure?", FORM, ask, said.append)
    return action, answers, said


def test_terminal_form_asks_required_fields_first_and_validates() -> None:
    action, answers, said = _fill("", "maybe", "y", "3", "2", "toolong", "ok", "")
    assert action == "accept"
    assert answers == {"confirm": True, "reason": "b", "count": 2, "note": "ok"}
    assert "      (type y or n)" in said
    assert "      (pick one of the numbers shown)" in said
    assert "      (at most 5 characters)" in said


@pytest.mark.parametrize(("typed", "action"), [("d", "decline"), ("c", "cancel")])
def test_terminal_form_decline_and_cancel(typed: str, action: str) -> None:
    assert _fill(typed)[:2] == (action, None)


def test_terminal_form_end_of_input_cancels() -> None:
    assert _fill("", "y")[:2] == ("cancel", None)


def test_parse_field_conversions() -> None:
    assert parse_field("7", {"type": "integer"}) == 7
    assert parse_field("2.5", {"type": "number"}) == 2.5
    assert parse_field("1, b", {"type": "array", "items": {"enum": ["a", "b"]}}) == ["a", "b"]
    with pytest.raises(ValueError, match="email"):
        parse_field("nope", {"type": "string", "format": "email"})
    with pytest.raises(ValueError, match="at least 1"):
        parse_field("0", {"type": "integer", "minimum": 1})


# --- over MCP ----------------------------------------------------------------------


async def test_refund_over_mcp_with_the_official_client(registry: Registry) -> None:
    asked: list[str] = []

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True, "reason": "late"})

    server = GatewayServer(registry)
    async with Client(server.sdk_server, mode="legacy", elicitation_callback=on_elicit) as client:
        result = await client.call_tool(
            "invoke", {"name": "refunds.request", "arguments": {"order": 3}}
        )
    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["reason"] == "late"
    assert asked[0].startswith("Refund ")


def test_opgate_demo_end_to_end(tmp_path: Path) -> None:
    database = tmp_path / "e2e.sqlite3"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "opgate", "demo", "--database", str(database)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for line in (
        "answers   a script (no TTY)",
        "protocol  2025-11-25",
        "search   ",
        "(more: yes)",
        'inspect {"name": "refunds.request"}',
        "x  operation_failed: order 999999 not found",
        "x  unavailable:",
        "<- the server asks a form: Refund ",
        "x  operation_failed: refund not made: the person chose decline",
        "<- the server asks to open a link: Pay invoice",
        "https://pay.example.com/checkout/cs_",
        '"status": "pending"',
        "<- the server asks a form: Tell Ada Lovelace",
        " escalated to Engineering (urgent); Ada Lovelace not told: the second question was"
        " declined",
        '"status": "escalated"',
        '"customer_notified": false',
        "5/5",
        "demo finished: every step behaved as expected",
    ):
        assert line in out, line
    assert database.exists()
    again = subprocess.run(
        [sys.executable, "-m", "opgate", "demo", "--database", str(database)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "order 2 of" in again.stdout  # order 1 was refunded by the first run and stays so
