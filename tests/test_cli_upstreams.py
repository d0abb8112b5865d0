"""``opgate serve --upstreams FILE``: an mcpServers file served, checked, or refused.

Served over stdio and over HTTP (with a token verifier) as a subprocess and driven with
the official ``mcp.Client``: search spans the upstreams, and ``invoke`` reaches one.
``--check`` starts the upstreams, prints the whole report and exits 0 (or 1 when nothing
can be served); a file that is not a usable config is a usage error naming the member.
A served gateway follows its upstreams: a ``list_changed`` swaps the served catalog,
seen by the client connected across it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from opgate.cli import main

from conftest import ROOT, await_port, free_port, run_main, serve_environment, stop_process
from relay_servers import changing_entry
from upstream_servers import stdio_entry


def write(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    return path


@pytest.mark.anyio
async def test_serve_over_stdio(tmp_path: Path) -> None:
    path = write(tmp_path, {"kit": stdio_entry("kit"), "raw": stdio_entry("raw")})
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(path)],
        cwd=str(ROOT),
        env=serve_environment(),
    )
    with anyio.fail_after(120):
        async with Client(parameters, mode="legacy") as client:
            page = await client.call_tool("search", {"query": "read_file"})
            assert page.structured_content is not None
            found = [item["name"] for item in page.structured_content["items"]]
            assert found == ["raw.read_file", "raw.read_file_2", "raw.read_file_3"]
            echoed = await client.call_tool(
                "invoke", {"name": "kit.echo", "arguments": {"text": "through the gateway"}}
            )
            assert not echoed.is_error
            assert echoed.structured_content == {"result": "through the gateway"}


@pytest.mark.anyio
async def test_a_served_gateway_swaps_in_what_list_changed_announces(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(["first"]), "utf-8")
    path = write(tmp_path, {"shifty": changing_entry("legacy", tools)})
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "--upstreams", str(path)],
        cwd=str(ROOT),
        env=serve_environment(),
    )

    async def names(client: Client, query: str) -> list[str]:
        page = await client.call_tool("search", {"query": query})
        assert page.structured_content is not None
        return [item["name"] for item in page.structured_content["items"]]

    with anyio.fail_after(120):
        async with Client(parameters, mode="2026-07-28") as client:
            assert await names(client, "second") == []
            tools.write_text(json.dumps(["first", "second"]), "utf-8")
            announced = await client.call_tool(
                "invoke", {"name": "shifty.announce", "arguments": {"count": 5}}
            )
            assert not announced.is_error
            while await names(client, "second") != ["shifty.second"]:
                await anyio.sleep(0.1)
            called = await client.call_tool("invoke", {"name": "shifty.second", "arguments": {}})
            assert called.content[0].text == "second called"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_serve_over_http_with_a_token_verifier(tmp_path: Path) -> None:
    path = write(tmp_path, {"kit": stdio_entry("kit")})
    port = free_port()
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "opgate", "serve", "--upstreams", str(path)),
                *("--http", f"127.0.0.1:{port}"),
                *("--token-verifier", "tests.mcp_catalog:TokenVerifier"),
            ],
            cwd=ROOT,
            env=serve_environment(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        await_port(process, port, lambda: log.read_text()[-2000:])
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(
                    timeout=30, headers={"Authorization": "Bearer alice-token"}
                ) as http,
                Client(
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                ) as client,
            ):
                echoed = await client.call_tool(
                    "invoke", {"name": "kit.echo", "arguments": {"text": "over HTTP"}}
                )
                assert not echoed.is_error
                assert echoed.structured_content == {"result": "over HTTP"}
            async with httpx2.AsyncClient(timeout=30) as anonymous:
                refused = await anonymous.post(f"http://127.0.0.1:{port}/mcp", json={})
                assert refused.status_code == 401
    finally:
        stop_process(process)
    # The upstream's stderr is the gateway's: keep the gateway's own lines.
    written = [line for line in log.read_text().splitlines() if line.startswith("opgate: ")]
    assert written[0].startswith("opgate: 1 of 1 upstream connected, 10 operations imported")
    assert written[-1] == f"opgate: serving 10 operations at http://127.0.0.1:{port}/mcp"


def test_check_prints_the_report_and_exits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path, {"raw": stdio_entry("raw"), "missing": {"command": "/nonexistent/upstream"}}
    )
    assert main(["serve", "--upstreams", str(path), "--check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("opgate: 1 of 2 upstreams connected, ")
    assert "  upstream missing (stdio): not connected: could not run" in "\n".join(out)
    assert any(line.startswith("  skipped raw/lookbehind: ") for line in out)
    assert any(
        line.startswith("  warning raw/read file: offered as 'raw.read_file'") for line in out
    )


def test_check_prints_the_files_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = stdio_entry("raw")
    entry["args"] = [*entry["args"], "${NOT_EXPANDED}"]
    path = write(tmp_path, {"raw": entry})
    main(["serve", "--upstreams", str(path), "--check"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"opgate: warning: {path}: /mcpServers/raw/args/{len(entry['args']) - 1}: "
        "${...} is passed as it is here: only env and headers values are expanded"
    )


def test_check_fails_when_nothing_can_be_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"missing": {"command": "/nonexistent/upstream"}})
    assert main(["serve", "--upstreams", str(path), "--check"]) == 1
    assert "no tool of" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ({"a": {"command": "x", "header": {}}}, "/mcpServers/a/header: unknown member"),
        (
            {"a": {"url": "https://h/mcp", "headers": {"K": "${OPGATE_NOT_SET_ANYWHERE}"}}},
            "OPGATE_NOT_SET_ANYWHERE",
        ),
        ({"a": {"command": "x", "type": ["stdio"]}}, "/mcpServers/a/type: type must be a string"),
    ],
)
def test_a_bad_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], servers: dict[str, Any], words: str
) -> None:
    path = write(tmp_path, servers)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--upstreams", str(path)])
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(
    ("servers", "shown"),
    [
        (
            {"a": {"url": "https://h/mcp", "headers": {"X\x1b[2J\x1b[31m": "v"}}},
            "/mcpServers/a/headers/X\\x1b[2J\\x1b[31m: a header name must be an HTTP token",
        ),
        (
            {"a\x1b]0;pwned\x07\n": {"command": "x"}},
            "/mcpServers/a\\x1b]0;pwned\\x07\\x0a: an upstream name must be",
        ),
    ],
    ids=["header name", "upstream name"],
)
def test_a_bad_files_member_names_cannot_drive_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], servers: dict[str, Any], shown: str
) -> None:
    # The file may come from elsewhere (a project's mcp.json): the names it quotes in an
    # error are escaped as its warnings are.
    path = write(tmp_path, servers)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--upstreams", str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert shown in err
    assert not {"\x1b", "\x07"} & set(err)
    assert err.count("\n") == 1


def test_upstreams_and_another_source_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {})
    with pytest.raises(SystemExit):
        main(["serve", "app:registry", "--upstreams", str(path)])
    assert "give one of MODULE:ATTR, --openapi SPEC or --upstreams FILE" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--start-timeout", "--call-timeout", "--hold-timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    path = write(tmp_path, {"kit": stdio_entry("kit")})
    status, _, err = run_main(capsys, "serve", "--upstreams", str(path), f"{option}={value}")
    assert status == 2
    if value == "soon":
        assert f"argument {option}: invalid float value: 'soon'" in err
    else:
        assert f"{option} must be a positive, finite number of seconds" in err


def test_the_timeouts_reach_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import opgate.upstream

    seen: dict[str, Any] = {}
    opened = opgate.upstream.open_catalog

    def recording(config: Any, **options: Any) -> Any:
        seen.update(options)
        return opened(config, **options)

    monkeypatch.setattr(opgate.upstream, "open_catalog", recording)
    path = write(tmp_path, {"kit": stdio_entry("kit")})
    options = ["--start-timeout", "45", "--call-timeout", "7.5", "--hold-timeout", "90"]
    status, out, _ = run_main(capsys, "serve", "--upstreams", str(path), "--check", *options)
    assert status == 0, out
    assert seen == {"start_timeout": 45.0, "call_timeout": 7.5, "hold_timeout": 90.0, "lock": None}
    seen.clear()
    assert run_main(capsys, "serve", "--upstreams", str(path), "--check")[0] == 0
    assert seen == {
        "start_timeout": 30.0,
        "call_timeout": 120.0,
        "hold_timeout": None,
        "lock": None,
    }


def test_an_upstream_slower_than_the_start_timeout_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(30)"]}
    path = write(tmp_path, {"silent": silent, "kit": stdio_entry("kit")})
    status, out, _ = run_main(
        capsys, "serve", "--upstreams", str(path), "--check", "--start-timeout", "3"
    )
    assert status == 0, out
    assert "  upstream silent (stdio): not connected: did not start within 3 s" in out
