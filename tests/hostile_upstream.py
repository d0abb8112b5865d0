"""An upstream API that misbehaves on purpose, served by uvicorn on 127.0.0.1.

``serve_hostile()`` yields ``Hostile``: its base URL (``http://127.0.0.1:PORT/api``),
the OpenAPI document of its operations (one ``GET /api/<name>`` per entry of
``ROUTES``, plus ``POST /api/transfer`` which a person confirms), and ``received``:
every request that reached it (method, raw path, headers), inside the base URL or
not, so a test can prove which headers a redirect carried where.

Each route is an ASGI coroutine ``(scope, receive, send)``; a test may add its own
to ``ROUTES`` before building its catalog (the document is built from ``ROUTES``).
Raw TCP answers that no ASGI server would send (an endless header, a bad status
line) come from ``serve_raw(answer)``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import json
import re
import socket
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from asgi_thread import serve_asgi

__all__ = [
    "ESCAPES",
    "ROUTES",
    "Hostile",
    "Received",
    "document",
    "normalised",
    "serve_hostile",
    "serve_raw",
]

Route = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


@dataclass(frozen=True)
class Received:
    """One request as the server saw it: ``host`` is its Host header."""

    method: str
    raw_path: str
    headers: dict[str, str]

    @property
    def path(self) -> str:
        """The path as a permissive server would route it: see ``normalised``."""
        return normalised(self.raw_path)


def normalised(raw_path: str) -> str:
    """Decoded (twice), backslashes as slashes, ``;`` parameters and dot segments removed,
    repeated slashes merged: what the most permissive server would route."""
    from urllib.parse import unquote

    path = unquote(unquote(raw_path.split("?", 1)[0])).replace("\\", "/")
    kept: list[str] = []
    for segment in path.split("/"):
        segment = segment.split(";", 1)[0]
        if segment in ("", "."):
            continue
        if segment == "..":
            if kept:
                kept.pop()
            continue
        kept.append(segment)
    return "/" + "/".join(kept)


RECEIVED: list[Received] = []


async def _answer(
    send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = headers if headers is not None else [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _request_headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200: the request headers and query, as JSON (as httpbin's /get does)."""
    echoed = {"headers": _request_headers(scope), "query": scope["query_string"].decode("latin-1")}
    await _answer(send, 200, json.dumps(echoed).encode())


async def echo_error(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """400: the request headers, as JSON, in an error."""
    await _answer(send, 400, json.dumps({"error": "bad", "seen": _request_headers(scope)}).encode())


async def echo_encoded(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 text: the headers URL-encoded (lower-case hex), base64-encoded and HTML-escaped."""
    from urllib.parse import quote

    lines = []
    for name, value in _request_headers(scope).items():
        encoded = re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe=""))
        lines.append(f"{name}: {encoded}")
        lines.append(base64.b64encode(f"{name}: {value}".encode()).decode())
        lines.append(value.replace('"', "&quot;").replace("\\", "&#92;"))
    await _answer(send, 200, "\n".join(lines).encode(), [(b"content-type", b"text/plain")])


async def echo_escaped(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 JSON: the header values with every character written as a \\u escape."""
    values = _request_headers(scope).values()
    escaped = ",".join('"' + "".join(f"\\u{ord(c):04x}" for c in v) + '"' for v in values)
    await _answer(send, 200, f"[{escaped}]".encode())


async def set_cookie(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200: sets a session cookie for the caller (and 200 more, to fill a cookie jar)."""
    caller = _request_headers(scope).get("x-api-key", "nobody")
    headers = [(b"content-type", b"application/json")]
    headers.append((b"set-cookie", f"session=of-{caller}; Path=/".encode()))
    headers += [(b"set-cookie", f"c{i}={'v' * 100}; Path=/".encode()) for i in range(200)]
    await _answer(send, 200, b"{}", headers)


async def echo_in_reason(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A redirect whose Location carries the credential in its query (followed inside)."""
    token = _request_headers(scope).get("x-api-key", "")
    from urllib.parse import quote

    location = f"/api/echo_link?k={quote(token, safe='')}".encode()
    await _answer(send, 302, b"", [(b"location", location)])


async def echo_link(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await _answer(send, 200, b"\x00\x01", [(b"content-type", b"application/octet-stream")])


async def deep_json(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 JSON nested 800 deep."""
    await _answer(send, 200, b"[" * 800 + b"]" * 800)


@functools.cache
def bomb_body() -> bytes:
    """64 MiB of zeros, gzip-compressed twice over (a few hundred bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1024 * 1024)
    once = b"".join(packer.compress(zeros) for _ in range(64)) + packer.flush()
    return gzip.compress(once, compresslevel=9)


async def gzip_bomb(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 text, gzip-encoded twice over: a few hundred bytes that inflate to 64 MiB."""
    headers = [(b"content-type", b"text/plain"), (b"content-encoding", b"gzip, gzip")]
    await _answer(send, 200, bomb_body(), headers)


async def endless(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 text that does not end before the client stops reading (8 MB, 4 KB a ms)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    # uvicorn ignores a send after the client left: bounded, so it stops on its own
    for _ in range(2_000):
        await send({"type": "http.response.body", "body": b"y" * 4096, "more_body": True})
        await asyncio.sleep(0.001)


async def drip(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 text, one byte a second (for ten seconds: longer than the client waits)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    for _ in range(10):
        await send({"type": "http.response.body", "body": b"z", "more_body": True})
        await asyncio.sleep(1)


def redirect_to(location: str, status: int = 302) -> Route:
    """A route answering ``status`` with ``Location: location`` (``{origin}`` filled in)."""

    async def redirect(scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope["server"]
        target = location.replace("{origin}", f"http://{server[0]}:{server[1]}")
        target = target.replace("{port}", str(server[1]))
        await _answer(send, status, b"", [(b"location", target.encode("latin-1"))])

    return redirect


#: Redirects that leave ``/api`` once decoded, or the origin, or carry userinfo.
ESCAPES = {
    "dots_encoded": "/api/%2e%2e/admin/secret",
    "dots_upper": "/api/%2E%2E/admin/secret",
    "dots_half": "/api/.%2e/admin/secret",
    "slash_encoded": "/api/..%2fadmin/secret",
    "slash_upper": "/api/..%2Fadmin/secret",
    "prefix_slash": "/api%2F..%2Fadmin/secret",
    "double_encoded": "/api/%252e%252e/admin/secret",
    "backslashes": "/api\\..\\admin/secret",
    "backslash_encoded": "/api/..%5cadmin/secret",
    "matrix_dots": "/api/..;/admin/secret",
    "overlong_dots": "/api/%c0%ae%c0%ae/admin/secret",
    "nul_after_dots": "/api/..%00/admin/secret",
    "dots_and_space": "/api/..%20/admin/secret",
    "three_dots": "/api/.../admin/secret",
    "fullwidth_dots": "/api/%ef%bc%8e%ef%bc%8e/admin/secret",
    "two_dot_leader": "/api/%e2%80%a5/admin/secret",
    "slash_after_prefix": "/api%2fsecret",
    "iis_unicode": "/api/%u002e%u002e/admin/secret",
    "dots_tab": "/api/..%09/admin/secret",
    "dots_hash": "/api/%2e%2e%23/admin/secret",
    "dots_question": "/api/..%3f/admin/secret",
    "network_path": "//localhost:{port}/api/echo",
    "other_host": "http://localhost:{port}/api/echo",
    "userinfo": "http://user:pw@127.0.0.1:{port}/api/echo",
    "userinfo_relative": "//user@127.0.0.1:{port}/api/echo",
    "other_scheme": "https://127.0.0.1:{port}/api/echo",
    "other_port": "http://127.0.0.1:1/api/echo",
    "prefix_only": "/apiary/secret",
}


ROUTES: dict[str, Route] = {
    "echo": echo,
    "echo_error": echo_error,
    "echo_encoded": echo_encoded,
    "echo_escaped": echo_escaped,
    "set_cookie": set_cookie,
    "echo_in_reason": echo_in_reason,
    "echo_link": echo_link,
    "deep_json": deep_json,
    "gzip_bomb": gzip_bomb,
    "endless": endless,
    "drip": drip,
    "loop": redirect_to("/api/loop"),
    "inside": redirect_to("/api/echo"),
    **{f"escape_{name}": redirect_to(location) for name, location in ESCAPES.items()},
}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    raw_path = scope.get("raw_path", b"").decode("latin-1")
    RECEIVED.append(Received(scope["method"], raw_path, _request_headers(scope)))
    path = scope["path"]
    if path.startswith("/api/"):
        route = ROUTES.get(path[len("/api/") :])
        if route is not None:
            await route(scope, receive, send)
            return
        if path.startswith("/api/files/"):
            await echo(scope, receive, send)
            return
        if path == "/api/transfer" and scope["method"] == "POST":
            await deep_json(scope, receive, send)
            return
    await _answer(send, 404, b'{"detail":"not here"}')


def document() -> dict[str, Any]:
    """One ``GET /<name>`` per route, and ``POST /transfer`` (answers 800-deep JSON)."""
    paths: dict[str, Any] = {
        f"/{name}": {"get": {"operationId": name, "responses": {"200": {"description": "ok"}}}}
        for name in ROUTES
    }
    paths["/files/{name}"] = {
        "get": {
            "operationId": "files",
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {"200": {"description": "ok"}},
        }
    }
    paths["/transfer"] = {
        "post": {
            "operationId": "transfer",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            "responses": {"200": {"description": "ok"}},
        }
    }
    return {"openapi": "3.1.0", "info": {"title": "hostile", "version": "1"}, "paths": paths}


@dataclass
class Hostile:
    base_url: str
    origin: str
    received: list[Received] = field(default_factory=lambda: RECEIVED)


@contextmanager
def serve_hostile() -> Iterator[Hostile]:
    """Run the hostile app with uvicorn in a thread."""
    with serve_asgi(app, "the hostile app", force=True) as port:
        origin = f"http://127.0.0.1:{port}"
        yield Hostile(f"{origin}/api", origin)


@contextmanager
def serve_raw(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that reads a request and lets ``answer`` write raw bytes;
    yields its base URL (``http://127.0.0.1:PORT/api``)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    answer(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
