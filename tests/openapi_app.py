"""A FastAPI app with its own generated OpenAPI (3.1), served by uvicorn on 127.0.0.1.

It exercises what ``opgate.openapi`` must handle end to end: parameters in the path,
query and headers, JSON and form-encoded bodies, errors, slow answers, redirects
inside and outside the base URL, text and binary responses, and a record of every
request it received (to prove a confirmed change is sent at most once, and that
path parameters never change the path).

``serve_app()`` runs it in a background thread and yields its base URL
(``http://127.0.0.1:PORT/api``: everything lives under ``/api`` so that a path
leaving the base URL is observable).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Form, Header, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.routing import Mount

from asgi_thread import serve_asgi

__all__ = ["ITEMS", "LOG", "app", "document", "serve_app"]

#: Every request the app received: (method, raw path, query string).
LOG: list[tuple[str, str, str]] = []


class ItemIn(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    price: float = Field(ge=0)
    tags: list[str] = []
    note: str | None = None


class Item(ItemIn):
    id: int


ITEMS: dict[int, Item] = {}

shop = FastAPI(title="Shop", version="1.0.0")
router = APIRouter()


@router.get("/items/{item_id}", tags=["items"], operation_id="items/get", summary="Get an item")
async def get_item(
    item_id: int,
    verbose: bool = False,
    fields: Annotated[list[str] | None, Query()] = None,
    x_trace: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    item = ITEMS.get(item_id)
    if item is None:
        return JSONResponse({"detail": f"item {item_id} not found"}, status_code=404)  # type: ignore[return-value]
    return {
        "item": item.model_dump(),
        "verbose": verbose,
        "fields": fields,
        "trace": x_trace,
    }


@router.post("/items", tags=["items"], operation_id="items/create", status_code=201)
async def create_item(body: ItemIn) -> Item:
    """Create an item (changes data: confirmed by default)."""
    item = Item(id=len(ITEMS) + 1, **body.model_dump())
    ITEMS[item.id] = item
    return item


@router.delete("/items/{item_id}", tags=["items"], operation_id="items/delete", status_code=204)
async def delete_item(item_id: int) -> Response:
    ITEMS.pop(item_id, None)
    return Response(status_code=204)


@router.post("/login", tags=["forms"], operation_id="forms/login")
async def login(
    username: Annotated[str, Form()], remember: Annotated[bool, Form()] = False
) -> dict[str, Any]:
    return {"username": username, "remember": remember}


@router.get("/files/{name}", tags=["files"], operation_id="files/get")
async def get_file(name: str, request: Request) -> dict[str, Any]:
    return {"name": name, "raw_path": request.scope["raw_path"].decode()}


@router.get("/headers", tags=["meta"], operation_id="meta/headers")
async def headers(
    request: Request, x_mode: Annotated[str | None, Header()] = None
) -> dict[str, Any]:
    authorization = request.headers.get("authorization")
    return {
        "authorization": authorization,
        # what opgate redacts from the answer, as a digest a test can compare
        "authorization_sha256": authorization
        and hashlib.sha256(authorization.encode()).hexdigest(),
        "x_mode": x_mode,
        "host": request.headers.get("host"),
    }


@router.get("/status/{code}", tags=["meta"], operation_id="meta/status")
async def status(code: int, secret: str = "") -> Response:
    body = {"error": f"failure {code}", "detail": "line one\nline two\x07", "echo": secret}
    return JSONResponse(body, status_code=code)


@router.get("/slow", tags=["meta"], operation_id="meta/slow")
async def slow(seconds: float = 0) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


@router.get("/redirect/inside", tags=["meta"], operation_id="meta/redirect_inside")
async def redirect_inside() -> Response:
    return RedirectResponse("/api/files/redirected", status_code=302)


@router.get("/redirect/outside", tags=["meta"], operation_id="meta/redirect_outside")
async def redirect_outside() -> Response:
    return RedirectResponse("http://attacker.invalid/steal", status_code=302)


@router.get("/redirect/up", tags=["meta"], operation_id="meta/redirect_up")
async def redirect_up() -> Response:
    return RedirectResponse("/outside-the-api", status_code=302)


@router.get("/text", tags=["meta"], operation_id="meta/text")
async def text(size: int = 10) -> Response:
    return PlainTextResponse("x" * size)


@router.get("/binary", tags=["meta"], operation_id="meta/binary")
async def binary() -> Response:
    return Response(b"\x00\x01\x02" * 100, media_type="application/octet-stream")


@router.get("/big", tags=["meta"], operation_id="meta/big")
async def big(count: int = 10) -> list[dict[str, Any]]:
    return [{"index": i, "text": "y" * 100} for i in range(count)]


@router.get("/echo", tags=["meta"], operation_id="meta/echo")
async def echo(request: Request) -> dict[str, Any]:
    return {"query": request.url.query, "path": request.scope["raw_path"].decode()}


shop.include_router(router)
_mounted = Starlette(routes=[Mount("/api", app=shop)])


async def app(scope: Any, receive: Any, send: Any) -> None:
    """The served app: the shop mounted at /api, every request recorded in ``LOG``
    (so that a request leaving the base URL would be observable)."""
    if scope["type"] == "http":
        query = scope.get("query_string", b"").decode()
        LOG.append((scope["method"], scope.get("raw_path", b"").decode(), query))
    await _mounted(scope, receive, send)


def document() -> dict[str, Any]:
    """The shop's own generated OpenAPI document (paths relative to /api)."""
    return shop.openapi()


@contextmanager
def serve_app() -> Iterator[str]:
    """Run the app with uvicorn in a thread; yield ``http://127.0.0.1:PORT/api``."""
    with serve_asgi(app, "the test app") as port:
        yield f"http://127.0.0.1:{port}/api"
