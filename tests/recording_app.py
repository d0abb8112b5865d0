"""A recording upstream on 127.0.0.1: every request exactly as it arrived, and its OpenAPI.

``serve_recorder()`` runs a raw ASGI app with uvicorn in a thread and yields a
``Recorder``: its base URL (``http://127.0.0.1:PORT/api``) and the list of requests
it received, each a ``Received`` (method, the raw request target, the header lines
as they came, the body bytes). It answers every request ``200 {"ok": true}``.

``DOCUMENT`` describes what the confirmation tests send: a JSON body with a query
and a header parameter, a form-encoded body, and a path parameter.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

__all__ = ["DOCUMENT", "Received", "Recorder", "serve_recorder"]


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

    return app


@contextmanager
def serve_recorder() -> Iterator[Recorder]:
    """Run the recording app with uvicorn in a thread; yield its ``Recorder``."""
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    recorder = Recorder(f"{origin}/api", origin)
    config = uvicorn.Config(
        _app(recorder), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the recording app did not start")
        time.sleep(0.05)
    try:
        yield recorder
    finally:
        server.should_exit = True
        thread.join(timeout=10)
