"""What a person confirms is what is sent (opgate.openapi confirmations).

A recording upstream (tests/recording_app.py, uvicorn on 127.0.0.1) keeps every
request exactly as it arrived; each test parses the confirmation message with a
strict reader (every line must be one the renderer writes) and checks that the
upstream received exactly the method, URL, headers and body the form showed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgate import Completed, Failed, InputMode, InputResponse, Pending, Registry, Result, Text
from opgate.openapi import Catalog, build_catalog
from opgate.openapi._confirm import SentLog

from recording_app import (
    DOCUMENT,
    Ctx,
    Policy,
    Recorder,
    Shown,
    assert_received_as_shown,
    read,
    serve_recorder,
)

pytestmark = pytest.mark.anyio

TOKEN = "Bearer s3cret-host-token"
FORM = {InputMode.FORM}
YES = InputResponse.accept({"confirm": True})


def host_headers(ctx: Any) -> dict[str, str]:
    return {"Authorization": TOKEN}


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    with serve_recorder() as running:
        yield running


@pytest.fixture
async def payments(recorder: Recorder) -> AsyncIterator[tuple[Catalog, Registry]]:
    recorder.received.clear()
    catalog = build_catalog(DOCUMENT, base_url=recorder.base_url, headers=host_headers, timeout=5)
    yield catalog, catalog.registry(Policy())
    await catalog.aclose()


async def prompt(registry: Registry, name: str, arguments: Any, ctx: Any = None) -> Pending:
    pending = await registry.invoke(ctx or Ctx("alice"), name, arguments, input_support=FORM)
    assert isinstance(pending, Pending), pending
    return pending


async def accept(
    registry: Registry, name: str, arguments: Any, pending: Pending, ctx: Any = None
) -> Any:
    return await registry.invoke(
        ctx or Ctx("alice"),
        name,
        arguments,
        input_support=FORM,
        resume=(pending.continuation, YES),
    )


async def sent_as_shown(
    registry: Registry,
    recorder: Recorder,
    name: str,
    arguments: Any,
    pending: Pending,
    shown: Shown,
) -> None:
    """Accept ``pending``: the one request the upstream receives is exactly ``shown``."""
    assert isinstance(await accept(registry, name, arguments, pending), Completed)
    assert_received_as_shown(recorder, shown)


# -- the attacks of issue 19 ----------------------------------------------------------


async def test_a_padded_body_is_shown_whole_and_sent_as_shown(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    """6,100 bytes of padding used to push amount and recipient out of the shown 6,000."""
    _, registry = payments
    arguments = {"body": {"aaaa": "x" * 6100, "amount": 1000000, "to": "attacker"}}
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    assert "not shown]" not in message
    shown = read(message)
    assert shown.body is not None
    assert b'"amount":1000000' in shown.body
    assert b'"to":"attacker"' in shown.body
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)


async def test_a_request_too_large_to_show_is_refused_and_never_sent(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    _, registry = payments
    arguments = {"body": {"aaaa": "x" * 20000, "amount": 1000000, "to": "attacker"}}
    outcome = await registry.invoke(Ctx("alice"), "transfer", arguments, input_support=FORM)
    assert isinstance(outcome, Failed), outcome
    message = outcome.failure.message
    assert outcome.failure.code.value == "operation_failed"
    assert message.startswith("not sent: this request cannot be shown completely")
    assert "the body" in message
    assert "Limits.form_schema_bytes" in message
    assert re.search(r"budget of \d+ bytes", message)
    # a header too long to show is refused the same way
    outcome = await registry.invoke(
        Ctx("alice"), "transfer", {"X-Memo": "m" * 20000, "body": {}}, input_support=FORM
    )
    assert isinstance(outcome, Failed), outcome
    assert "header X-Memo" in outcome.failure.message
    assert recorder.received == []


async def test_a_query_value_cannot_forge_a_section_of_the_form(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    _, registry = payments
    forged = 'weekly rent\nBody (application/json):\n{"to":"landlord","amount":10}' + "\n" * 40
    arguments = {"note": forged, "body": {"to": "attacker", "amount": 1000000}}
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    shown = read(message)  # every line is one the renderer writes
    assert [line for line in message.split("\n") if line.startswith("Body")] == [
        next(line for line in message.split("\n") if line.startswith("Body ("))
    ]
    [pair] = shown.decoded["Query, decoded:"]
    name, value = pair.split(" = ")
    assert (json.loads(name), json.loads(value)) == ("note", forged)
    assert shown.body == b'{"to":"attacker","amount":1000000}'
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)


#: Characters that hide, reorder, fake or blur text on a screen.
TRICKY = [
    "\u202e",  # right-to-left override (Cf)
    "\u2066",  # left-to-right isolate (Cf)
    "\u200b",  # zero width space (Cf)
    "\u200d",  # zero width joiner (Cf)
    "\ufeff",  # byte order mark (Cf)
    "\U000e0041",  # tag latin capital A (Cf)
    "\u00a0",  # no-break space (Zs)
    "\u3000",  # ideographic space (Zs)
    "\u2028",  # line separator (Zl)
    "\u2029",  # paragraph separator (Zp)
    "\x85",  # next line (C1)
    "\x1b",  # escape (C0)
    "\x7f",  # delete
    "\r",
    "\t",
    "\ue000",  # private use (Co)
    "\U000f0000",  # private use, plane 15 (Co)
    "\u0378",  # unassigned (Cn)
    "\u0430",  # Cyrillic a, looks like Latin a
    "\u0301",  # combining acute accent (Mn)
]


@pytest.mark.parametrize("char", TRICKY, ids=[f"U+{ord(c):04X}" for c in TRICKY])
async def test_invisible_bidi_and_lookalike_characters_are_escaped_visibly(
    payments: tuple[Catalog, Registry], recorder: Recorder, char: str
) -> None:
    _, registry = payments
    recipient = f"{char}rekcatta"
    arguments = {"note": f"rent{char}", "body": {"to": recipient, f"amount{char}": 5}}
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    assert char not in message
    escape = json.dumps(char)[1:-1]  # \u202e, \n, \ud800\udc00 for astral characters
    assert escape.isascii()
    assert escape.startswith("\\")
    shown = read(message)
    assert shown.body is not None
    assert f'"to":"{escape}rekcatta"'.encode() in shown.body
    assert f'"amount{escape}":5'.encode() in shown.body
    assert shown.decoded["Query, decoded:"] == [f'"note" = "rent{escape}"']
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
    assert json.loads(recorder.received[0].body)["to"] == recipient  # the same value, escaped


async def test_a_run_of_spaces_is_visible_and_cannot_push_text_out_of_sight(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    """Two spaces look like one, and a long run wraps into blank lines after a forged end."""
    _, registry = payments
    gap = " " * 2000
    arguments = {
        "note": "John  Smith",
        "X-Memo": "a   b",
        "body": {"memo": f"rent 10. End of the request.{gap}", "to": "John  Smith"},
    }
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    for line in message.split("\n"):
        assert "  " not in line.removeprefix("  "), line[:80]
    shown = read(message)
    assert shown.body is not None
    assert b'"to":"John \\u0020Smith"' in shown.body
    assert ("X-Memo", "a   b") in shown.headers
    assert shown.decoded["Query, decoded:"] == ['"note" = "John \\u0020Smith"']
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
    assert json.loads(recorder.received[0].body) == arguments["body"]


async def test_markup_cannot_hide_or_forge_text_in_a_rendering_client(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    """An HTML or Markdown renderer would drop a comment and decode an entity."""
    _, registry = payments
    hide = "<!-- hidden --> &#x202e;<b>x</b>"
    arguments = {"note": hide, "X-Memo": hide, "body": {hide: hide, "to": "attacker"}}
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    assert "<" not in message
    assert ">" not in message
    for line in message.split("\n"):
        if not line.startswith("Request: "):  # the query's own separators are '&'
            assert "&" not in line, line
    shown = read(message)
    assert shown.body is not None
    assert b"\\u003c!-- hidden --\\u003e \\u0026#x202e;" in shown.body
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
    assert json.loads(recorder.received[0].body) == arguments["body"]


async def test_markdown_can_neither_hide_text_in_a_link_nor_unescape_a_quote(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    """CommonMark drops a backslash before punctuation and shows a link's text only.

    ``\\"`` rendered as ``"`` made ``{"amount":1000000,"to":"x\\",\\"amount\\":10}`` read as
    a later ``"amount":10``; ``[see](...)`` hid everything up to ``)`` as a link target.
    """
    _, registry = payments
    forged = 'x","amount":10,"n":"'
    arguments = {
        "note": "a\\b",
        "X-Memo": '"quoted"',
        "body": {"amount": 1000000, "to": forged, "memo": "[see](", "x": ")"},
    }
    pending = await prompt(registry, "transfer", arguments)
    message = pending.prompt.message
    assert re.search(r"\\[!-/:-@[-`{-~]", message) is None  # no backslash before punctuation
    assert "[" not in message
    assert "]" not in message
    shown = read(message)
    assert shown.body is not None
    assert b'"to":"x\\u0022,\\u0022amount\\u0022:10,\\u0022n\\u0022:\\u0022"' in shown.body
    assert ("X-Memo", '"quoted"') in shown.headers
    assert shown.decoded["Query, decoded:"] == ['"note" = "a\\u005cb"']
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
    assert json.loads(recorder.received[0].body) == arguments["body"]


async def test_what_the_upstream_receives_is_what_the_form_showed(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    _, registry = payments
    arguments = {
        "note": "März rent & more=1 +2 %20 #frag",
        "X-Memo": 'a "quoted"\tmemo \\ end',
        "body": {"to": "Zoë", "amount": 10.50, "tags": ["a", None, True], "nested": {"k": []}},
    }
    pending = await prompt(registry, "transfer", arguments)
    shown = read(pending.prompt.message)
    assert shown.method == "POST"
    assert shown.url.startswith(recorder.base_url + "/transfer?note=")
    assert ("X-Memo", 'a "quoted"\tmemo \\ end') in shown.headers
    assert ("Content-Type", "application/json") in shown.headers
    assert shown.hidden == ["Authorization"]
    assert TOKEN not in pending.prompt.message
    assert shown.decoded["Query, decoded:"] == [
        '"note" = "M\\u00e4rz rent \\u0026 more=1 +2 %20 #frag"'
    ]
    await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
    got = dict(recorder.received[0].headers)
    assert got["authorization"] == TOKEN  # the credential is sent, never shown


async def test_a_form_encoded_body_is_shown_exactly_and_decoded(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    _, registry = payments
    arguments = {"body": {"to": "att\u202eacker", "amount": 7, "memo": "a=b&to=landlord"}}
    pending = await prompt(registry, "pay", arguments)
    shown = read(pending.prompt.message)
    assert shown.body == b"to=att%E2%80%AEacker&amount=7&memo=a%3Db%26to%3Dlandlord"
    assert shown.decoded["Form fields, decoded:"] == [
        '"to" = "att\\u202eacker"',
        '"amount" = "7"',
        '"memo" = "a=b\\u0026to=landlord"',
    ]
    await sent_as_shown(registry, recorder, "pay", arguments, pending, shown)


async def test_a_path_parameter_with_slashes_is_one_visible_segment(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    _, registry = payments
    arguments = {"name": "admin/secret\u2215x"}  # U+2215 DIVISION SLASH looks like /
    pending = await prompt(registry, "files.delete", arguments)
    shown = read(pending.prompt.message)
    assert shown.url == recorder.base_url + "/files/admin%2Fsecret%E2%88%95x"
    assert shown.decoded["Path segments, decoded:"] == ['"api" / "files" / "admin/secret\\u2215x"']
    assert shown.body is None
    await sent_as_shown(registry, recorder, "files.delete", arguments, pending, shown)
    # Decoded as a permissive server would (%2F as /), "../admin" climbs: never offered.
    refused = await registry.invoke(
        Ctx("alice"), "files.delete", {"name": "../admin/secret"}, input_support=FORM
    )
    assert isinstance(refused, Failed), refused
    assert refused.failure.message == "refused: the request would leave the API's base URL"


async def test_the_answer_sends_only_the_request_that_was_shown(
    payments: tuple[Catalog, Registry], recorder: Recorder
) -> None:
    """The same canonical arguments in another member order would send other bytes."""
    _, registry = payments
    pending = await prompt(registry, "transfer", {"body": {"to": "landlord", "amount": 10}})
    shown = read(pending.prompt.message)
    assert shown.body == b'{"to":"landlord","amount":10}'
    reordered = {"body": {"amount": 10, "to": "landlord"}}
    outcome = await accept(registry, "transfer", reordered, pending)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.message.startswith(
        "not sent: the request this answer would send differs"
    )
    assert recorder.received == []


# -- the record of confirmed sends ------------------------------------------------------


def test_the_send_record_is_bounded_and_never_sends_twice() -> None:
    log = SentLog(capacity=2)
    assert log.claim("a")
    assert not log.claim("a")
    log.record("a", Result([Text("done")]))
    assert "not sent again" in log.replay("a", "POST", "/x").payload.content[0].text
    assert log.claim("b")
    assert log.claim("c")  # evicts "a"
    assert log.claim("a")  # a forgotten key can be claimed, but only by a fresh confirmation


# -- the renderer on its own, for any text ---------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(codec="utf-8"), max_size=40), st.text(max_size=20))
def test_any_value_is_shown_as_printable_ascii_on_renderer_lines(text: str, key: str) -> None:
    from opgate.openapi._confirm import quoted

    shown = quoted(text)
    assert all(" " <= c <= "~" for c in shown)
    assert json.loads(shown) == text
    assert all(unicodedata.category(c)[0] != "C" for c in shown)
    if key:
        assert json.loads(quoted(key)) == key


async def test_a_confirmed_request_is_the_only_request_sent(recorder: Recorder) -> None:
    """A confirmed GET is not followed to where the API redirects it (nobody saw that)."""
    recorder.received.clear()
    catalog = build_catalog(DOCUMENT, base_url=recorder.base_url, confirm=["GET"])
    registry = catalog.registry(Policy())
    try:
        pending = await prompt(registry, "moved", {})
        shown = read(pending.prompt.message)
        outcome = await accept(registry, "moved", {}, pending)
        assert isinstance(outcome, Failed), outcome
        assert outcome.failure.message.startswith("HTTP 302 Found: the API redirected")
        assert "none of a confirmed request" in outcome.failure.message
        assert_received_as_shown(recorder, shown)  # one request: the one shown
    finally:
        await catalog.aclose()


async def test_default_headers_of_the_hosts_own_client_are_named_not_shown(
    recorder: Recorder,
) -> None:
    recorder.received.clear()
    own = httpx2.AsyncClient(headers={"X-Api-Key": "client-secret"}, cookies={"sid": "c00kie"})
    catalog = build_catalog(DOCUMENT, base_url=recorder.base_url, client=own)
    registry = catalog.registry(Policy())
    try:
        arguments = {"body": {"to": "landlord", "amount": 10}}
        pending = await prompt(registry, "transfer", arguments)
        message = pending.prompt.message
        assert "client-secret" not in message
        assert "c00kie" not in message
        shown = read(message)
        assert set(shown.hidden) == {"X-Api-Key", "Cookie"}
        await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
        assert dict(recorder.received[0].headers)["x-api-key"] == "client-secret"
    finally:
        await catalog.aclose()
        await own.aclose()


@pytest.mark.parametrize(
    ("url", "content", "reason"),
    [
        ("http://h/api/x", b"\x00\xffbinary", "body holds bytes that are not printable ASCII"),
        ("http://h/api/x", "caf\u00e9".encode(), "body holds bytes that are not printable ASCII"),
        ("http://h/api/x", b"line\nbreak", "body holds bytes that are not printable ASCII"),
        ("http://h/api/x?q=%FF", b"", "query holds a percent-escape that is not UTF-8"),
        ("http://h/api/%C3%28", b"", "path holds a percent-escape that is not UTF-8"),
    ],
)
def test_what_cannot_be_shown_as_text_is_refused(url: str, content: bytes, reason: str) -> None:
    """opgate's own encoders never make these; a request that has them is not offered."""
    from opgate.openapi._confirm import Unshowable, render

    request = httpx2.Request("POST", url, content=content)
    with pytest.raises(Unshowable, match=reason):
        render("op", "/x", request, frozenset(), 16384)


#: A default of the host's own client, and an argument of the same name that must not
#: replace it: the client's options, the arguments, the form's header and query names
#: shown as set by the host and the end of its URL, and where the host's value is sent.
HOST_DEFAULTS = [
    pytest.param(
        {"headers": {"X-Memo": "host-tenant-key"}},
        {"X-Memo": "agent-chosen-key", "body": {"to": "landlord", "amount": 10}},
        (["X-Memo"], [], "/api/transfer"),
        lambda received: dict(received.headers)["x-memo"],
        "host-tenant-key",
        id="header",
    ),
    pytest.param(
        {"params": {"note": "host-query-key"}},
        {"note": "agent-chosen-key", "body": {"to": "landlord", "amount": 10}},
        ([], ["note"], "/api/transfer?note=(not-shown)"),
        lambda received: received.target,
        "/api/transfer?note=host-query-key",
        id="query",
    ),
]


@pytest.mark.parametrize(("options", "arguments", "hidden", "carrier", "sent"), HOST_DEFAULTS)
async def test_a_default_of_the_hosts_client_is_named_not_shown_and_never_replaced(
    recorder: Recorder,
    options: dict[str, Any],
    arguments: dict[str, Any],
    hidden: tuple[list[str], list[str], str],
    carrier: Any,
    sent: str,
) -> None:
    """A default header or query parameter (an API key) of a client the host passed in:
    the form names it as set by the host and never shows it, and an agent's value of
    that name never rides there, with confirmation or without."""
    recorder.received.clear()
    own = httpx2.AsyncClient(**options)
    confirmed = build_catalog(DOCUMENT, base_url=recorder.base_url, client=own)
    unconfirmed = build_catalog(DOCUMENT, base_url=recorder.base_url, client=own, confirm=())
    [secret] = next(iter(options.values())).values()
    try:
        registry = confirmed.registry(Policy())
        pending = await prompt(registry, "transfer", arguments)
        message = pending.prompt.message
        assert secret not in message
        shown = read(message)
        assert (shown.hidden, shown.hidden_query) == hidden[:2]
        assert shown.url.endswith(hidden[2])
        await sent_as_shown(registry, recorder, "transfer", arguments, pending, shown)
        assert carrier(recorder.received[0]) == sent
        recorder.received.clear()
        registry = unconfirmed.registry(Policy())
        outcome = await registry.invoke(Ctx("alice"), "transfer", arguments, input_support=FORM)
        assert isinstance(outcome, Completed), outcome
        assert carrier(recorder.received[0]) == sent
    finally:
        await confirmed.aclose()
        await unconfirmed.aclose()
        await own.aclose()


async def test_numbers_that_grow_when_written_out_are_refused_unsent(recorder: Recorder) -> None:
    """6,000 copies of 1e4000: 48 KB of arguments, 24 MB of query; a GET is not confirmed."""
    from decimal import Decimal

    numbers = {"name": "n", "in": "query", "schema": {"type": "array", "items": {"type": "number"}}}
    search = {"get": {"operationId": "search", "parameters": [numbers], "responses": {}}}
    document = {**DOCUMENT, "paths": {"/search": search}}
    recorder.received.clear()
    catalog = build_catalog(document, base_url=recorder.base_url)
    try:
        registry = catalog.registry(Policy())
        arguments = {"n": [Decimal("1e4000")] * 6000}
        outcome = await registry.invoke(Ctx("alice"), "search", arguments, input_support=FORM)
        assert isinstance(outcome, Failed), outcome
        assert "not sent: the request would be larger than 262144 bytes" in outcome.failure.message
        assert recorder.received == []
        outcome = await registry.invoke(Ctx("alice"), "search", {"n": [Decimal("1e40")]})
        assert isinstance(outcome, Completed), outcome
        assert recorder.received[0].target == "/api/search?n=1" + "0" * 40
    finally:
        await catalog.aclose()


#: A host credential, and parameters spelt as a lenient server reads it: PHP reads
#: api.key, api_key[] and (ASP.NET) API_KEY as api_key, the last one winning; CGI, WSGI
#: and nginx read X_Api_Key as X-Api-Key. Each: where, the spellings, the catalog's
#: options (its own client's options, or the host's headers) and what the upstream gets.
SPELLINGS = [
    pytest.param(
        "query",
        ["api.key", "API_KEY", "api_key[]", "api key", "api_key"],
        ({"params": {"api_key": "host-query-key"}}, None),
        lambda received: received.target,
        "/api/search?api_key=host-query-key",
        id="query",
    ),
    pytest.param(
        "header",
        ["X_Api_Key"],
        (None, {"X-Api-Key": "host-header-key"}),
        lambda received: [(name, value) for name, value in received.headers if "api" in name],
        [("x-api-key", "host-header-key")],
        id="header",
    ),
]


@pytest.mark.parametrize(("where", "names", "credential", "carrier", "sent"), SPELLINGS)
async def test_no_spelling_of_a_host_credential_rides_beside_it(
    recorder: Recorder,
    where: str,
    names: list[str],
    credential: tuple[dict[str, Any] | None, dict[str, str] | None],
    carrier: Any,
    sent: Any,
) -> None:
    spellings = [{"name": n, "in": where, "schema": {"type": "string"}} for n in names]
    search = {"get": {"operationId": "search", "parameters": spellings, "responses": {}}}
    document = {**DOCUMENT, "paths": {"/search": search}}
    recorder.received.clear()
    client_options, headers = credential
    own = httpx2.AsyncClient(**client_options) if client_options is not None else None
    catalog = build_catalog(document, base_url=recorder.base_url, client=own, headers=headers)
    try:
        arguments = dict.fromkeys(catalog.plans["search"].input_schema["properties"], "agent")
        outcome = await catalog.registry(Policy()).invoke(Ctx("alice"), "search", arguments)
        assert isinstance(outcome, Completed), outcome
        assert carrier(recorder.received[0]) == sent
    finally:
        await catalog.aclose()
        if own is not None:
            await own.aclose()


async def test_a_path_with_a_fragment_is_skipped_not_shown(recorder: Recorder) -> None:
    """A document's path '/transfer#to=landlord': the fragment would be shown, never sent."""
    document = {**DOCUMENT, "paths": {"/transfer#to=landlord": DOCUMENT["paths"]["/transfer"]}}
    catalog = build_catalog(document, base_url=recorder.base_url)
    try:
        assert "transfer" not in catalog.plans
        [skipped] = catalog.report.skipped
        assert skipped.kind == "invalid path"
        assert "fragment" in skipped.reason
    finally:
        await catalog.aclose()
