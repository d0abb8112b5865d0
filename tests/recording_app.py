"""A recording upstream on 127.0.0.1: every request exactly as it arrived, and its OpenAPI.

``serve_recorder()`` runs a raw ASGI app with uvicorn in a thread and yields a
``Recorder``: its base URL (``http://127.0.0.1:PORT/api``) and the list of requests
it received, each a ``Received`` (method, the raw request target, the header lines
as they came, the body bytes). It answers ``200 {"ok": true}`` with a ``Set-Cookie``, except
``/api/moved``: a redirect inside the base URL.

``DOCUMENT`` describes what the confirmation tests send: a JSON body with a query
and a header parameter, a form-encoded body, and a path parameter.

``Ctx`` and ``Policy`` are the tests' caller and policy (allow all, one scope per
principal).

``read(message)`` parses a confirmation message strictly (every line must be one the
renderer writes); ``assert_received_as_shown`` checks that the one request received
is exactly the method, URL, headers and body it showed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from asgi_thread import serve_asgi

__all__ = [
    "DOCUMENT",
    "Ctx",
    "Policy",
    "Received",
    "Recorder",
    "Shown",
    "assert_received_as_shown",
    "read",
    "serve_recorder",
]


@dataclass(frozen=True)
class Received:
    method: str
    target: str  # the raw path and query, as sent
    headers: tuple[tuple[str, str], ...]  # names lower-cased by the server, values as sent
    body: bytes


@dataclass
class Recorder:
    base_url: str
    origin: str  # http://127.0.0.1:PORT
    received: list[Received] = field(default_factory=list)


@dataclass
class Ctx:
    principal: str


class Policy:
    """Allows everything; each principal is a scope of its own."""

    def scope_key(self, ctx: Any) -> str:
        return str(ctx.principal)

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


_ANY = {"type": "object"}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Payments", "version": "1"},
    "paths": {
        "/transfer": {
            "post": {
                "operationId": "transfer",
                "parameters": [
                    {"name": "note", "in": "query", "schema": {"type": "string"}},
                    {"name": "X-Memo", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ANY}},
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/pay": {
            "post": {
                "operationId": "pay",
                "requestBody": {
                    "required": True,
                    "content": {"application/x-www-form-urlencoded": {"schema": _ANY}},
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/moved": {
            "get": {"operationId": "moved", "responses": {"302": {"description": "elsewhere"}}}
        },
        "/files/{name}": {
            "delete": {
                "operationId": "files.delete",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


def _app(recorder: Recorder) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        target = scope["raw_path"].decode("ascii")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("ascii")
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"])
        recorder.received.append(Received(scope["method"], target, headers, b"".join(chunks)))
        if scope["path"].endswith("/moved"):
            location = [(b"location", b"/api/files/elsewhere")]
            await send({"type": "http.response.start", "status": 302, "headers": location})
            await send({"type": "http.response.body", "body": b""})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"set-cookie", b"session=given-to-the-last-caller; Path=/"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

    return app


@contextmanager
def serve_recorder() -> Iterator[Recorder]:
    """Run the recording app with uvicorn in a thread; yield its ``Recorder``."""
    recorder = Recorder("", "")
    with serve_asgi(_app(recorder), "the recording app") as port:
        recorder.origin = f"http://127.0.0.1:{port}"
        recorder.base_url = f"{recorder.origin}/api"
        yield recorder


@dataclass
class Shown:
    """A confirmation message, read strictly."""

    method: str
    url: str
    headers: list[tuple[str, str]]  # visible headers, in order
    hidden: list[str]  # names of headers shown as not shown
    body: bytes | None
    decoded: dict[str, list[str]]  # section -> its indented lines

    @property
    def hidden_query(self) -> list[str]:
        """Names of the query parameters shown as not shown."""
        lines = self.decoded.get("Query, decoded:", [])
        return [json.loads(m.group(1)) for line in lines if (m := _HIDDEN_PAIR.fullmatch(line))]


_HEADER = re.compile(r'Header: ([!#$%&\'*+.^_`|~0-9A-Za-z-]+): (".*")')
_HIDDEN = re.compile(r"Header: ([!#$%&'*+.^_`|~0-9A-Za-z-]+): not shown \(set by the host\)")
_HIDDEN_PAIR = re.compile(r'(".*") = not shown \(set by the host\)')
_BODY = re.compile(r"Body \((\d+) bytes\), exactly as sent, on the next line after two spaces:")


def read(message: str) -> Shown:
    """Parse a confirmation message; fail on any line the renderer does not write."""
    assert all(c == "\n" or " " <= c <= "~" for c in message), "not printable ASCII"
    lines = message.split("\n")
    assert re.fullmatch(r"Send [A-Z]+ \S+ \([A-Za-z0-9_.-]+\)\?", lines[0]), lines[0]
    assert lines[1].startswith("Shown below: the whole request")
    method = url = ""
    headers: list[tuple[str, str]] = []
    hidden: list[str] = []
    body: bytes | None = None
    decoded: dict[str, list[str]] = {}
    section: str | None = None
    index = 2
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("  "):
            assert section is not None, line
            decoded[section].append(line[2:])
            continue
        section = None
        if match := re.fullmatch(r"Request: ([A-Z]+) (\S+)", line):
            assert not method
            method, url = match.groups()
        elif match := _HEADER.fullmatch(line):
            headers.append((match.group(1), json.loads(match.group(2))))
        elif match := _HIDDEN.fullmatch(line):
            hidden.append(match.group(1))
        elif match := _BODY.fullmatch(line):
            assert body is None
            raw = lines[index]
            index += 1
            assert raw.startswith("  ")
            body = raw[2:].encode("ascii")
            assert len(body) == int(match.group(1))
        elif line == "Body: none":
            assert body is None
        elif line in ("Query, decoded:", "Path segments, decoded:", "Form fields, decoded:"):
            section = line
            decoded[section] = []
        elif line == "End of the request.":
            assert index == len(lines), "text after the end"
        else:
            raise AssertionError(f"a line the renderer does not write: {line[:120]!r}")
    assert lines[-1] == "End of the request."
    return Shown(method, url, headers, hidden, body, decoded)


def assert_received_as_shown(recorder: Recorder, shown: Shown) -> None:
    """The one request the upstream received is exactly what ``shown`` says."""
    assert len(recorder.received) == 1, recorder.received
    got = recorder.received[0]
    assert got.method == shown.method
    target = got.target
    if shown.hidden_query:
        path, _, query = target.partition("?")
        pairs = [pair.partition("=") for pair in query.split("&")]
        hidden = set(shown.hidden_query)
        masked = [k + s + ("(not-shown)" if unquote_plus(k) in hidden else v) for k, s, v in pairs]
        target = path + "?" + "&".join(masked)
    assert recorder.origin + target == shown.url
    hidden = {name.lower() for name in shown.hidden}
    visible = [(name, value) for name, value in got.headers if name not in hidden]
    assert visible == [(name.lower(), value) for name, value in shown.headers]
    assert {name for name, _ in got.headers} >= hidden
    assert got.body == (shown.body or b"")
