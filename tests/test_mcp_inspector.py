"""The MCP Inspector CLI (a real third-party client) against ``opgate serve``.

Over stdio and over streamable HTTP it lists the three tools and calls ``search`` and
``invoke``. The Inspector's CLI declares no elicitation capability, so an operation
that needs confirmation must answer ``confirmation_required`` at once (exit status 5:
the tool result has ``isError``), never hang. The node tools are installed once into a
cache outside the clone by ``tests/node_tools.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, SERVE, serve_environment
from node_tools import ensure_node_tools

#: The Inspector starts node and the server for every call; generous for a loaded CI.
CALL_TIMEOUT = 120


def inspector(target: list[str], *options: str, home: Path) -> tuple[int, dict[str, Any]]:
    tools = ensure_node_tools()
    environment = tools.env(serve_environment(), home=home)  # it writes ~/.mcp-inspector/
    completed = subprocess.run(
        [str(tools.inspector), "--cli", *target, *options, "--format", "json"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the Inspector: {completed.stdout[-500:]} {completed.stderr[-500:]}"
    return completed.returncode, json.loads(lines[0])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_inspector_over_stdio(home: Path) -> None:
    status, listing = inspector(SERVE, "--method", "tools/list", home=home)
    assert status == 0
    assert [tool["name"] for tool in listing["result"]["tools"]] == ["search", "inspect", "invoke"]

    status, page = inspector(
        SERVE,
        "--method",
        "tools/call",
        "--tool-name",
        "search",
        "--tool-arg",
        "query=confirm",
        home=home,
    )
    assert status == 0
    assert page["result"]["structuredContent"]["items"][0]["name"] == "orders.confirm"

    arguments = json.dumps({"name": "util.echo", "arguments": {"text": "hi"}})
    status, echoed = inspector(
        SERVE,
        "--method",
        "tools/call",
        "--tool-name",
        "invoke",
        "--tool-args-json",
        arguments,
        home=home,
    )
    assert status == 0
    assert echoed["result"]["structuredContent"] == {"text": "hi"}

    arguments = json.dumps({"name": "orders.confirm", "arguments": {"id": 1}})
    status, refused = inspector(
        SERVE,
        "--method",
        "tools/call",
        "--tool-name",
        "invoke",
        "--tool-args-json",
        arguments,
        home=home,
    )
    assert status == 5  # isError: the Inspector cannot answer a prompt
    assert refused["result"]["structuredContent"]["error"]["code"] == "confirmation_required"


def test_inspector_over_http(http_server: str, home: Path) -> None:
    bearer = ["--header", "Authorization: Bearer bob-token"]
    status, listing = inspector([http_server], *bearer, "--method", "tools/list", home=home)
    assert status == 0
    assert [tool["name"] for tool in listing["result"]["tools"]] == ["search", "inspect", "invoke"]

    status, page = inspector(
        [http_server],
        *bearer,
        "--method",
        "tools/call",
        "--tool-name",
        "search",
        "--tool-arg",
        "group=admin",
        home=home,
    )
    assert status == 0
    assert [item["name"] for item in page["result"]["structuredContent"]["items"]] == [
        "admin.reset"
    ]

    arguments = json.dumps({"name": "admin.reset", "arguments": {}})
    status, done = inspector(
        [http_server],
        *bearer,
        "--method",
        "tools/call",
        "--tool-name",
        "invoke",
        "--tool-args-json",
        arguments,
        home=home,
    )
    assert status == 0
    assert done["result"]["content"][0]["text"] == "reset"
