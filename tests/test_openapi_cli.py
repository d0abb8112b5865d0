"""``opgate serve --openapi``: the test app's document served over stdio and HTTP."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from opgate.cli import main

from conftest import ROOT, free_port, serve_environment
from openapi_app import ITEMS, LOG, document, serve_app

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    spec = tmp_path_factory.mktemp("openapi") / "shop.json"
    spec.write_text(json.dumps(document()))
    with serve_app() as url:
        yield url, spec


def serve_command(url: str, spec: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "opgate", "serve", "--openapi", str(spec), "--base-url", url,
        "--header", "Authorization=SHOP_TOKEN", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    env = serve_environment()
    env["SHOP_TOKEN"] = "Bearer from-the-environment"
    return env


async def accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_stdio(shop: tuple[str, Path]) -> None:
    url, spec = shop
    ITEMS.clear()
    LOG.clear()
    command = serve_command(url, spec)
    parameters = StdioServerParameters(
        command=command[0], args=command[1:], cwd=str(ROOT), env=environment()
    )
    with anyio.fail_after(60):
        async with Client(parameters, mode="legacy", elicitation_callback=accept) as client:
            page = await client.call_tool("search", {"query": "headers"})
            assert page.structured_content["items"][0]["name"] == "meta.headers"
            got = await client.call_tool("invoke", {"name": "meta.headers", "arguments": {}})
            sent = hashlib.sha256(b"Bearer from-the-environment").hexdigest()
            assert got.structured_content["authorization_sha256"] == sent
            assert got.structured_content["authorization"] == "[redacted]"
            made = await client.call_tool(
                "invoke",
                {"name": "items.create", "arguments": {"body": {"name": "mug", "price": 3}}},
            )
            assert made.structured_content["name"] == "mug"
    assert LOG.count(("POST", "/api/items", "")) == 1


async def test_http_with_confirmation_off(shop: tuple[str, Path]) -> None:
    url, spec = shop
    ITEMS.clear()
    port = free_port()
    command = serve_command(url, spec, "--confirm", "none", "--http", f"127.0.0.1:{port}")
    process = subprocess.Popen(
        command, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket_to(port):
                    break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                await anyio.sleep(0.1)
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            ) as client,
        ):
            made = await client.call_tool(
                "invoke",
                {"name": "items.create", "arguments": {"body": {"name": "pot", "price": 4}}},
            )
            assert made.structured_content["name"] == "pot"  # no elicitation needed
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stderr is not None
        stderr = process.stderr.read().decode()
        process.stderr.close()
    assert "Shop (3.1.0): 15 operations imported, 0 skipped, 0 warnings" in stderr


def socket_to(port: int) -> Any:
    import socket

    return socket.create_connection(("127.0.0.1", port), timeout=0.2)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--openapi", "x.json"], "--base-url"),
        (["mod:attr", "--openapi", "x.json", "--base-url", "http://h"], "not both"),
        ([], "--openapi SPEC"),
        (["--openapi", "missing.json", "--base-url", "http://h"], "cannot read"),
        (["--openapi", "SPEC", "--base-url", "http://h", "--header", "A=NOPE_UNSET"], "NOPE_UNSET"),
        (["--openapi", "SPEC", "--base-url", "http://h", "--confirm", "FETCH"], "confirm"),
        # a blank list (an unset variable in a script) must not turn the human gate off
        (["--openapi", "SPEC", "--base-url", "http://h", "--confirm", ""], "'none'"),
        (["--openapi", "SPEC", "--base-url", "http://h", "--confirm", " , "], "'none'"),
        (["--openapi", "SPEC", "--base-url", "ftp://h"], "base_url"),
    ],
)
def test_usage_errors(
    shop: tuple[str, Path], arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, spec = shop
    arguments = [str(spec) if a == "SPEC" else a for a in arguments]
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *arguments])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""
