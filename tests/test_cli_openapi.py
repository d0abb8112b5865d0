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
    command = serve_command(
        url, spec, "--confirm", "none", "--http", f"127.0.0.1:{port}",
        "--token-verifier", "tests.mcp_catalog:TokenVerifier",
    )  # fmt: skip
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
            httpx2.AsyncClient(timeout=30, headers={"Authorization": "Bearer alice-token"}) as http,
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


# -- the import report ----------------------------------------------------------------------

OK = {"200": {"description": "ok"}}


def flawed_document(skips: int = 1) -> dict[str, Any]:
    """One clean operation, ``skips`` skipped ones, an undeclared path parameter whose
    path holds a terminal escape, and two warnings (the second found by the registry)."""
    upload = {
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": {"type": "object"}}},
        },
        "responses": OK,
    }
    paths: dict[str, Any] = {"/fine": {"get": {"responses": OK}}}
    paths.update({f"/upload{i}": {"post": upload} for i in range(skips)})
    paths["/evil\x1b[2J/{id}"] = {"get": {"responses": OK}}
    cookie = {"name": "s", "in": "cookie", "schema": {"type": "string"}}
    paths["/cookie"] = {"get": {"parameters": [cookie], "responses": OK}}
    pattern = {"name": "q", "in": "query", "schema": {"type": "string", "pattern": "(unclosed"}}
    paths["/pattern"] = {"get": {"parameters": [pattern], "responses": OK}}
    return {"openapi": "3.1.0", "info": {"title": "Flawed", "version": "1"}, "paths": paths}


FLAWED_REPORT = [
    "opgate: Flawed (3.1.0): 3 operations imported, 2 skipped, 2 warnings",
    "  skipped POST /upload0: request body is multipart/form-data",
    "  skipped GET /evil\\x1b[2J/{id}: path parameter {id} is not declared",
    "  warning GET /cookie: optional cookie parameter 's' dropped",
]


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(document))
    return spec


def test_check_prints_every_skip_and_warning_and_serves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, flawed_document())
    assert main(["serve", "--openapi", str(spec), "--base-url", "http://h", "--check"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:4] == FLAWED_REPORT
    assert lines[4].startswith("  warning GET /pattern: ")
    assert "pattern" in lines[4]
    assert len(lines) == 5
    assert captured.err == ""


def test_check_fails_when_nothing_can_be_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = flawed_document()
    document["paths"] = {"/upload": document["paths"]["/upload0"]}
    spec = write(tmp_path, document)
    assert main(["serve", "--openapi", str(spec), "--base-url", "http://h", "--check"]) == 1
    out = capsys.readouterr().out
    assert "0 operations imported, 1 skipped, 0 warnings" in out
    assert f"no operation of {spec} can be served" in out


def test_check_refuses_a_document_that_is_not_openapi(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, {"swagger": "2.0", "info": {}, "paths": {}})
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--openapi", str(spec), "--base-url", "http://h", "--check"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "opgate serve: " in captured.err
    assert "OpenAPI 3" in captured.err
    assert captured.out == ""


def served_stderr(spec: Path) -> str:
    """``opgate serve --openapi spec`` over stdio at the default log level, its stdin
    closed at once: what it wrote to stderr before it stopped."""
    completed = subprocess.run(
        [sys.executable, "-m", "opgate", "serve", "--openapi", str(spec), "--base-url", "http://h"],
        cwd=ROOT,
        env={k: v for k, v in serve_environment().items() if k != "OPGATE_LOG_LEVEL"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stderr


def test_serve_reports_skips_and_warnings_at_the_default_level(tmp_path: Path) -> None:
    stderr = served_stderr(write(tmp_path, flawed_document()))
    lines = stderr.splitlines()
    assert lines[:4] == FLAWED_REPORT
    assert lines[4].startswith("  warning GET /pattern: ")


def test_serve_shows_the_first_issues_and_check_all_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, flawed_document(skips=60))
    lines = served_stderr(spec).splitlines()
    assert lines[0] == "opgate: Flawed (3.1.0): 3 operations imported, 61 skipped, 2 warnings"
    assert lines[1:51] == [
        f"  skipped POST /upload{i}: request body is multipart/form-data" for i in range(50)
    ]
    assert lines[51] == "  … and 13 more: --check lists every one"
    assert len(lines) == 52
    assert main(["serve", "--openapi", str(spec), "--base-url", "http://h", "--check"]) == 0
    checked = capsys.readouterr().out.splitlines()
    assert len(checked) == 1 + 61 + 2
    assert checked[1:51] == lines[1:51]
