"""docs/quickstart.md, run as written: every code block on the page is run here.

Each block carries a title (```python title="app.py"```); a block without one, or one this
module does not run, fails ``test_every_block_is_run``. The app, the HTTP server and the
client script are written to a folder as the page names them and served with
``opgate serve app.py`` (and ``server.py --http``) exactly as the page's commands say; the
official MCP client drives them over stdio in both protocol eras and over HTTP with the
page's ``TokenVerifier`` (search, inspect, invoke of the four operations, the form answered,
the URL hand-off received, progress notifications seen); the Claude Desktop configuration
starts the server with the reduced environment a client gives; the Inspector CLI runs the
page's commands. This is issue 22's done-when: a four-operation app in about thirty lines,
served by ``opgate serve app.py``, called from the official client and the Inspector.

The folder's ``.venv/bin/opgate`` stands in for the console script ``pip install`` writes:
it runs this checkout's ``opgate.cli`` with the test's Python, whatever environment the
client gives it. ``test_the_install_commands_install_opgate`` runs the install blocks
themselves in a fresh virtual environment (pip fetches the build backend from PyPI).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client

from opgate._proven_patterns import CACHE_ENV
from opgate.cli._parser import build_parser

from conftest import ROOT, await_port, free_port, serve_environment
from node_tools import INSPECTOR, ensure_node_tools

pytestmark = pytest.mark.anyio

PAGE = ROOT / "docs" / "quickstart.md"

#: One MCP session's budget, generous for a loaded machine (the export alone takes 0.6 s).
SESSION_TIMEOUT = 60

#: The Inspector starts node and the server for every call.
INSPECTOR_TIMEOUT = 120

#: The page's block titles; each is run by the test named beside it.
RUN_BY = {
    "install": "test_the_install_commands_install_opgate",
    "install with extras": "test_the_install_commands_install_opgate",
    "install from a wheel": "test_the_install_commands_install_opgate",
    "app.py": "test_the_app_over_stdio_with_the_official_client",
    "serve": "test_the_app_over_stdio_with_the_official_client",
    "client.py": "test_the_client_script_prints_what_the_page_shows",
    "client output": "test_the_client_script_prints_what_the_page_shows",
    "server.py": "test_the_shop_over_http_with_bearer_tokens",
    "serve over HTTP": "test_the_shop_over_http_with_bearer_tokens",
    "claude_desktop_config.json": "test_the_claude_desktop_configuration_starts_the_server",
    "inspector": "test_the_inspector_commands",
}

FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'^(?P<language>\w+) title="(?P<title>[^"]+)"$')


@dataclass(frozen=True)
class Block:
    language: str
    title: str
    text: str


def page_blocks() -> dict[str, Block]:
    found: dict[str, Block] = {}
    for match in FENCE.finditer(PAGE.read_text(encoding="utf-8")):
        titled = TITLE.match(match["info"])
        assert titled, f"a code block without a title: ```{match['info']}"
        assert titled["title"] not in found, f"two blocks titled {titled['title']!r}"
        found[titled["title"]] = Block(titled["language"], titled["title"], match["body"])
    return found


BLOCKS = page_blocks()


def commands(title: str) -> list[list[str]]:
    """The commands of a shell block, continuation lines joined."""
    text = BLOCKS[title].text.replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def test_every_block_is_run() -> None:
    assert set(BLOCKS) == set(RUN_BY)
    assert all(name in globals() for name in RUN_BY.values())


def test_the_app_is_four_operations_in_about_thirty_lines() -> None:
    source = BLOCKS["app.py"].text
    tree = ast.parse(source)
    decorated = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("operation" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert decorated == ["lookup", "cancel", "pay", "export"]
    own = [
        line
        for line in source.splitlines()
        if line.strip() and not line.startswith(("import ", "from "))
    ]
    assert len(own) <= 30, len(own)


# -- the folder the page builds ----------------------------------------------------------

STAND_IN = '''#!{python}
"""Stands in for the opgate console script (tests/test_quickstart.py)."""
import sys

sys.path.insert(0, {source!r})
from opgate.cli import main

sys.exit(main())
'''


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("quickstart") / "shop"
    (folder / ".venv" / "bin").mkdir(parents=True)
    for name in ("app.py", "server.py", "client.py"):
        (folder / name).write_text(BLOCKS[name].text, encoding="utf-8")
    script = folder / ".venv" / "bin" / "opgate"
    script.write_text(STAND_IN.format(python=sys.executable, source=str(ROOT / "src")))
    script.chmod(0o755)
    return folder


@dataclass
class Person:
    """The client's side of the prompts: what it was asked, and how it answers."""

    form_answer: str = "accept"
    asked: list[Any] = field(default_factory=list)
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def answer(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if params.mode == "url":
            return types.ElicitResult(action="accept")
        if self.form_answer == "accept":
            return types.ElicitResult(action="accept", content={"ok": True})
        return types.ElicitResult(action="decline")

    async def report(self, done: float, total: float | None, message: str | None) -> None:
        self.progress.append((done, total, message))


async def invoke(client: Client, person: Person, name: str, **arguments: Any) -> Any:
    return await client.call_tool(
        "invoke", {"name": name, "arguments": arguments}, progress_callback=person.report
    )


def error_code(result: Any) -> str:
    assert result.is_error, result
    return str(result.structured_content["error"]["code"])


async def use_the_shop(client: Client, person: Person, *, names: list[str]) -> None:
    """Search, inspect and invoke each of the four operations, as the page describes."""
    listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == ["search", "inspect", "invoke"]
    found = await client.call_tool("search", {"query": "order"})
    assert [item["name"] for item in found.structured_content["items"]] == names
    spec = (await client.call_tool("inspect", {"name": "orders.lookup"})).structured_content
    assert spec["summary"] == "Look up an order by its number."
    assert spec["input_schema"]["properties"] == {"number": {"type": "integer"}}
    assert spec["input_schema"]["required"] == ["number"]
    assert spec["output_schema"]["properties"]["status"] == {"type": "string"}

    looked = await invoke(client, person, "orders.lookup", number=7)
    assert looked.structured_content == {"number": 7, "status": "shipped"}
    assert error_code(await invoke(client, person, "orders.lookup", number="7")) == (
        "invalid_arguments"
    )

    cancelled = await invoke(client, person, "orders.cancel", number=7)
    assert cancelled.structured_content == {"number": 7, "status": "cancelled"}
    form = person.asked.pop()
    assert form.mode in (None, "form")
    assert form.message == "Cancel order 7?"
    assert form.requested_schema["properties"] == {"ok": {"type": "boolean"}}
    person.form_answer = "decline"
    declined = await invoke(client, person, "orders.cancel", number=7)
    assert error_code(declined) == "operation_failed"
    assert declined.content[0].text == "operation_failed: not cancelled"
    person.asked.pop()
    person.form_answer = "accept"

    if "billing.pay" in names:
        paid = await invoke(client, person, "billing.pay", number=7)
        assert paid.content[0].text == "checkout of order 7: accept"
        [handoff] = person.asked
        person.asked.clear()
        assert handoff.mode == "url"
        assert handoff.url == "https://pay.example.com/7"
        assert handoff.message == "Pay order 7"
    else:
        assert error_code(await invoke(client, person, "billing.pay", number=7)) == "unavailable"
    assert person.asked == []

    exported = await invoke(client, person, "reports.export", rows=3)
    assert exported.content[0].text == "number,status\n1,shipped\n2,shipped\n3,shipped"
    assert person.progress == [(1, 3, "row 1 of 3"), (2, 3, "row 2 of 3"), (3, 3, "row 3 of 3")]
    person.progress.clear()
    assert error_code(await invoke(client, person, "reports.export", rows=0)) == (
        "invalid_arguments"
    )


EVERYTHING = ["orders.cancel", "orders.lookup", "billing.pay", "reports.export"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_app_over_stdio_with_the_official_client(shop: Path, mode: str) -> None:
    [command] = commands("serve")
    assert command == [".venv/bin/opgate", "serve", "app.py"]
    # The environment a client gives a server it spawns (the SDK's default), with this
    # run's pattern memory rather than the user's (conftest.py)
    environment = {**get_default_environment(), CACHE_ENV: os.environ[CACHE_ENV]}
    server = StdioServerParameters(
        command=str(shop / command[0]), args=command[1:], cwd=shop, env=environment
    )
    person = Person()
    with anyio.fail_after(SESSION_TIMEOUT):
        async with Client(server, mode=mode, elicitation_callback=person.answer) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await use_the_shop(client, person, names=EVERYTHING)


def test_the_client_script_prints_what_the_page_shows(shop: Path) -> None:
    run = subprocess.run(
        [sys.executable, "client.py"],
        cwd=shop,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == BLOCKS["client output"].text


# -- over HTTP ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HTTPShop:
    url: str
    port: int
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def http_shop(shop: Path) -> Iterator[HTTPShop]:
    """The page's ``serve over HTTP`` command, on a free port instead of 8000."""
    text = BLOCKS["serve over HTTP"].text
    assert "--http 8000 " in text
    tokens = dict(re.findall(r"\b(SHOP_\w+_TOKEN)=(\S+)", text))
    assert set(tokens) == {"SHOP_AGENT_TOKEN", "SHOP_VIEWER_TOKEN"}
    port = free_port()
    log = (shop.parent / "http.log").open("w+b")
    process = subprocess.Popen(
        ["bash", "-c", text.replace("--http 8000 ", f"--http {port} ")],
        cwd=shop,
        env={"PATH": os.environ["PATH"], "HOME": str(shop.parent)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,  # its own process group: bash and the server it starts
    )

    def log_tail() -> str:
        log.seek(0)
        return log.read().decode()[-2000:]

    try:
        await_port(process, port, log_tail)
        yield HTTPShop(f"http://127.0.0.1:{port}/mcp", port, tokens)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def bearer(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_shop_over_http_with_bearer_tokens(http_shop: HTTPShop, mode: str) -> None:
    for variable, names in [
        ("SHOP_AGENT_TOKEN", EVERYTHING),
        ("SHOP_VIEWER_TOKEN", ["orders.cancel", "orders.lookup", "reports.export"]),
    ]:
        person = Person()
        with anyio.fail_after(SESSION_TIMEOUT):
            async with bearer(http_shop.tokens[variable]) as http:
                transport = streamable_http_client(http_shop.url, http_client=http)
                async with Client(
                    transport, mode=mode, elicitation_callback=person.answer
                ) as client:
                    await use_the_shop(client, person, names=names)
    async with httpx2.AsyncClient(timeout=30) as http:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        anonymous = await http.post(http_shop.url, json=initialize)
        assert anonymous.status_code == 401
        forged = await http.post(
            http_shop.url, json=initialize, headers={"Authorization": "Bearer viewer-secreT"}
        )
        assert forged.status_code == 401


# -- Claude Desktop ----------------------------------------------------------------------


@pytest.mark.parametrize("honours_cwd", [True, False])
async def test_the_claude_desktop_configuration_starts_the_server(
    shop: Path, honours_cwd: bool
) -> None:
    config = json.loads(BLOCKS["claude_desktop_config.json"].text)
    [(name, entry)] = config["mcpServers"].items()
    assert name == "shop"
    assert set(entry) == {"command", "args", "cwd", "env"}
    assert entry["command"] == entry["cwd"] + "/.venv/bin/opgate"  # absolute, no activation
    assert entry["args"] == ["serve", entry["cwd"] + "/app.py"]  # the serve command, absolute
    assert commands("serve") == [[".venv/bin/opgate", *entry["args"][:1], "app.py"]]
    parsed = build_parser().parse_args(entry["args"])
    assert (parsed.command, parsed.target) == ("serve", entry["cwd"] + "/app.py")

    placed = json.loads(json.dumps(entry).replace(entry["cwd"], str(shop)))
    # The SDK's stdio client gives the server what clients give: a reduced environment
    # (PATH, HOME, ...) plus the entry's env.
    server = StdioServerParameters(
        command=placed["command"],
        args=placed["args"],
        cwd=placed["cwd"] if honours_cwd else "/",
        env=placed["env"],
    )
    with anyio.fail_after(SESSION_TIMEOUT):
        async with Client(server) as client:
            found = await client.call_tool("search", {"query": "lookup"})
            assert [item["name"] for item in found.structured_content["items"]] == ["orders.lookup"]


# -- the MCP Inspector -------------------------------------------------------------------


def inspector_json(stdout: str) -> Any:
    start = stdout.index("{")
    value, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return value


def test_the_inspector_commands(shop: Path, http_shop: HTTPShop) -> None:
    tools = ensure_node_tools()
    npx = ["npx", INSPECTOR.spec]  # the version the page names is the one tested
    results: list[tuple[int, Any]] = []
    for command in commands("inspector"):
        assert command[:2] == npx
        arguments = [
            argument.replace("127.0.0.1:8000", f"127.0.0.1:{http_shop.port}")
            for argument in command[2:]
        ]
        run = subprocess.run(
            [str(tools.inspector), *arguments],
            cwd=shop,
            env=tools.env(serve_environment(), home=shop.parent),  # it writes ~/.mcp-inspector/
            capture_output=True,
            text=True,
            timeout=INSPECTOR_TIMEOUT,
        )
        results.append((run.returncode, inspector_json(run.stdout)))
    listed, looked, cancelled, searched = results
    assert listed[0] == 0
    assert [tool["name"] for tool in listed[1]["tools"]] == ["search", "inspect", "invoke"]
    assert looked == (0, looked[1])
    assert looked[1]["structuredContent"] == {"number": 7, "status": "shipped"}
    assert cancelled[0] == 5  # isError: the CLI cannot show the form
    assert cancelled[1]["structuredContent"]["error"]["code"] == "confirmation_required"
    assert searched[0] == 0
    assert [item["name"] for item in searched[1]["structuredContent"]["items"]] == [
        "orders.cancel",
        "orders.lookup",
        "reports.export",
    ]


# -- installing --------------------------------------------------------------------------


def test_the_install_commands_install_opgate(tmp_path: Path) -> None:
    """The install blocks, run by bash against a copy of this checkout: ``install`` and
    ``install with extras`` in one empty folder, ``install from a wheel`` in another
    after the ``.venv`` lines of ``install``. Once a block has made ``.venv``, the test
    makes this environment's packages visible to it (a ``.pth`` file), so that pip finds
    opgate's dependencies installed instead of downloading them; pip still fetches the
    build backend (setuptools, from PyPI) to build opgate in isolation, as it would for
    a user."""
    checkout = tmp_path / "opgate"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, checkout / name)
    shutil.copytree(ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("__pycache__"))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = next(path for path in sys.path if path.endswith("site-packages"))
    visible = f"echo {shlex.quote(site)} > .venv/lib/{version}/site-packages/dependencies.pth"

    def script(*titles: str, only: int | None = None) -> str:
        lines: list[str] = ["set -euo pipefail"]
        for title in titles:
            text = BLOCKS[title].text.replace("/path/to/opgate", str(checkout))
            for line in text.splitlines()[:only]:
                lines.append(line)
                if line.strip() == "python3 -m venv .venv":
                    lines.append(visible)
        return "\n".join(lines)

    def run(commands: str, folder: Path) -> str:
        folder.mkdir()
        done = subprocess.run(
            ["bash", "-c", commands],
            cwd=folder,
            env={
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
                "HOME": os.environ.get("HOME", str(tmp_path)),  # pip's cache
                "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    assert BLOCKS["install"].text.splitlines()[:2] == [
        "mkdir shop && cd shop",
        "python3 -m venv .venv",
    ]
    printed = run(script("install", "install with extras"), tmp_path / "from-checkout")
    assert "pystemmer" in printed  # pip resolved the extras
    assert "redis" in printed
    run(script("install", only=2) + "\n" + script("install from a wheel"), tmp_path / "wheel")
    [wheel] = (checkout / "dist").glob("opgate-*-py3-none-any.whl")
    for folder, source in [
        (tmp_path / "from-checkout" / "shop", checkout.as_uri()),
        (tmp_path / "wheel" / "shop", wheel.as_uri()),
    ]:
        assert installed_from(folder) == (str(folder / ".venv"), source)
        served = subprocess.run(
            [str(folder / ".venv" / "bin" / "opgate"), "serve", "missing.py"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert served.returncode == 2  # the installed console script, this checkout's code
        assert served.stderr == (
            f"opgate serve: no such file: missing.py (working directory: {folder})\n"
        )


def installed_from(folder: Path) -> tuple[str, str]:
    """Where the project's ``opgate`` is imported from (the prefix of its environment),
    and the URL pip installed it from."""
    probe = (
        "import importlib.metadata as m, json, opgate, sys; print(json.dumps([sys.prefix, "
        "opgate.__file__, json.loads(m.distribution('opgate').read_text('direct_url.json'))"
        "['url']]))"
    )
    done = subprocess.run(
        [str(folder / ".venv" / "bin" / "python"), "-c", probe],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    prefix, module, url = json.loads(done.stdout)
    assert module.startswith(prefix)  # a copy in the environment, not the checkout
    return prefix, url
