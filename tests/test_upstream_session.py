"""``opgate.upstream._session``: what an upstream's process and requests are given.

Env isolation is asserted from inside the upstream (``KIT``'s ``environment`` and
``variable`` tools, over stdio): the process sees the variables its entry names and
``INHERITED_ENV``, and nothing else of the gateway's environment. Over streamable
HTTP the upstream receives its entry's headers (``${VAR}`` resolved); through a real
gateway served over HTTP with bearer authentication, the client's token never reaches
the upstream.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from opgate import (
    Completed,
    Failed,
    InputMode,
    LocalPolicy,
    Pending,
    Registry,
    ScopePolicy,
    Text,
    URLPrompt,
)
from opgate.mcp import GatewayServer, uvicorn_config
from opgate.redact import Redactor
from opgate.upstream import (
    DEFAULT_BACKOFF,
    DUMPABLE_ENV,
    INHERITED_ENV,
    Backoff,
    Catalog,
    HTTPServer,
    StdioServer,
    child_environment,
    load_config,
    open_catalog,
)
from opgate.upstream._session import MAX_STDERR_LINE, MIN_ENV_SECRET, StderrRelay, redactor_for

from conftest import free_port
from relay_servers import HANDOFF_URL
from relay_servers import entry as relay_entry
from upstream_servers import serve_kit_http, stdio_entry

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parent.parent / "src"
TESTS = Path(__file__).resolve().parent


async def invoke(registry: Registry, name: str, arguments: dict[str, Any]) -> Any:
    outcome = await registry.invoke(None, name, arguments)
    assert isinstance(outcome, Completed), outcome
    return outcome.result.structured


def test_child_environment_keeps_the_inherited_list_and_the_entry() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "SECRET": "x", "TERM": "() { :; }", "LANG": "C"}
    server = StdioServer("a", "cmd", env={"OWN": "1", "PATH": "/opt/bin"})
    assert child_environment(server, environ) == {
        "PATH": "/opt/bin",
        "HOME": "/h",
        "LANG": "C",
        "OWN": "1",
    }


def test_the_backoff_doubles_to_its_cap_less_its_jitter() -> None:
    backoff = Backoff(first=0.5, factor=2, cap=4, jitter=0.25)
    assert [backoff.delay(n, lambda: 0.0) for n in range(6)] == [0.5, 1, 2, 4, 4, 4]
    assert backoff.delay(1, lambda: 0.999999) == pytest.approx(0.75, rel=1e-5)
    assert backoff.delay(10_000, lambda: 0.0) == 4  # no overflow far along
    assert all(3 < backoff.delay(9) <= 4 for _ in range(100))
    assert (
        Backoff(first=0.5, factor=2, cap=30, jitter=0.25, heartbeat=15, stable=60)
        == DEFAULT_BACKOFF
    )


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"first": 0}, "first must be a positive"),
        ({"heartbeat": float("inf")}, "heartbeat must be a positive"),
        ({"factor": 0.5}, "factor must be at least 1"),
        ({"first": 5, "cap": 1}, "cap must be at least"),
        ({"jitter": 1}, "jitter must be at least 0 and under 1"),
    ],
)
def test_a_backoff_out_of_range_is_refused(members: dict[str, float], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Backoff(**members)


def test_the_inherited_list_is_what_a_process_needs_to_start() -> None:
    assert "PATH" in INHERITED_ENV
    assert not {"PYTHONPATH", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"} & set(INHERITED_ENV)


async def test_a_stdio_upstream_sees_only_its_named_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPGATE_GATEWAY_SECRET", "must-not-leak")
    monkeypatch.setenv("OPGATE_FOR_UPSTREAM", "handed-over")
    config = load_config(
        {
            "mcpServers": {
                "kit": stdio_entry(
                    "kit", env={"NAMED": "${OPGATE_FOR_UPSTREAM}", "LITERAL": "plain"}
                )
            }
        }
    )
    async with open_catalog(config, start_timeout=60) as catalog:
        registry = catalog.registry(LocalPolicy())
        seen = (await invoke(registry, "kit.environment", {}))["result"]
        assert {"NAMED", "LITERAL"} <= set(seen)
        assert set(seen) - {"NAMED", "LITERAL"} <= set(INHERITED_ENV)
        assert "OPGATE_GATEWAY_SECRET" not in seen
        named = await invoke(registry, "kit.variable", {"name": "NAMED"})
        # the whole value reached the upstream: it is redacted on the way back
        assert named == {"result": "[redacted]"}
        literal = await invoke(registry, "kit.variable", {"name": "LITERAL"})
        assert literal == {"result": "plain"}  # under MIN_ENV_SECRET: not a secret
        leaked = await invoke(registry, "kit.variable", {"name": "OPGATE_GATEWAY_SECRET"})
        assert leaked == {"result": ""}


async def test_an_http_upstream_gets_its_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGATE_UPSTREAM_KEY", "upstream-key")
    with serve_kit_http() as url:
        config = load_config(
            {
                "mcpServers": {
                    "web": {
                        "url": url,
                        "headers": {
                            "Authorization": "Bearer ${OPGATE_UPSTREAM_KEY}",
                            "X-Team": "a",
                        },
                    }
                }
            }
        )
        async with open_catalog(config, start_timeout=60) as catalog:
            (status,) = catalog.report.upstreams
            assert (status.transport, status.connected) == ("http", True)
            registry = catalog.registry(LocalPolicy())
            headers = await invoke(registry, "web.request_headers", {})
            # the whole value reached the upstream: it is redacted on the way back
            assert headers["authorization"] == "[redacted]"
            assert headers["x-team"] == "a"
            echoed = await invoke(registry, "web.echo", {"text": "over http"})
            assert echoed == {"result": "over http"}


@asynccontextmanager
async def serve_gateway(registry: Registry) -> AsyncIterator[str]:
    """``registry`` behind opgate's MCP server over HTTP with bearer authentication."""
    from mcp_catalog import TokenVerifier

    port = free_port()
    app = GatewayServer(registry).http_app(token_verifier=TokenVerifier())
    server = uvicorn.Server(uvicorn_config(app, port=port))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(30):
            while not server.started:
                await anyio.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True


async def test_the_clients_bearer_token_never_reaches_the_upstream(catalog_http: Catalog) -> None:
    registry = catalog_http.registry(ScopePolicy({}, everyone={"web"}))
    async with serve_gateway(registry) as url:
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool(
                "invoke", {"name": "web.request_headers", "arguments": {}}
            )
    assert not result.is_error, result
    seen = json.dumps(result.structured_content)
    assert "alice-token" not in seen
    assert '"authorization": "[redacted]"' in seen  # the gateway's own, redacted back


@pytest.fixture
async def catalog_http(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Catalog]:
    monkeypatch.setenv("OPGATE_UPSTREAM_KEY", "upstream-key")
    with serve_kit_http() as url:
        entry = {"url": url, "headers": {"Authorization": "Bearer ${OPGATE_UPSTREAM_KEY}"}}
        config = load_config({"mcpServers": {"web": entry}})
        async with open_catalog(config, start_timeout=60) as catalog:
            yield catalog


_PEEKING_GATEWAY = """
import sys, anyio
from opgate import LocalPolicy
from opgate.upstream import load_config, open_catalog
from upstream_servers import stdio_entry

async def main():
    config = load_config({"mcpServers": {"kit": stdio_entry("kit")}})
    async with open_catalog(config, start_timeout=60) as catalog:
        outcome = await catalog.registry(LocalPolicy()).invoke(
            None, "kit.parent_environment", {}
        )
        print(repr(outcome))

anyio.run(main)
"""


def _as_another_user() -> dict[str, Any]:
    """Run as ``nobody`` when the tests run as root: root's ``CAP_SYS_PTRACE`` reads
    any process's ``/proc`` files, dumpable or not, so only a same-user reader that is
    not root shows the protection."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("dumpable", [False, True])
def test_a_stdio_upstream_cannot_read_the_gateways_proc_environ(dumpable: bool) -> None:
    # The gateway is a subprocess so that its dumpable flag, and its user, are its own.
    env = {
        "PATH": os.environ["PATH"],
        "HOME": "/",
        "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)]),
        "OPGATE_GATEWAY_SECRET": "must-not-leak",
    }
    if dumpable:
        env[DUMPABLE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _PEEKING_GATEWAY],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **_as_another_user(),
    )
    assert done.returncode == 0, done.stderr
    if dumpable:  # the control: without the protection, the upstream reads it all
        assert "OPGATE_GATEWAY_SECRET" in done.stdout, done.stdout
    else:
        assert "OPGATE_GATEWAY_SECRET" not in done.stdout, done.stdout
        assert "refused: Permission denied" in done.stdout, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_protect_gateway_makes_the_process_non_dumpable_unless_opted_out() -> None:
    script = (
        "import ctypes, json, os\n"
        "from opgate.upstream import protect_gateway\n"
        "libc = ctypes.CDLL(None)\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"
        "kept = protect_gateway({'OPGATE_DUMPABLE': '1'})\n"
        "middle = libc.prctl(3, 0, 0, 0, 0)\n"
        "done = protect_gateway({})\n"
        "after = libc.prctl(3, 0, 0, 0, 0)\n"
        "owner = os.stat(f'/proc/{os.getpid()}/environ').st_uid\n"
        "print(json.dumps([before, kept, middle, done, after, owner]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [1, False, 1, True, 0, 0]


async def test_an_http_upstreams_echoed_credentials_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "ghp_SECRETSECRETSECRET"
    monkeypatch.setenv("OPGATE_GH_TOKEN", token)
    with serve_kit_http() as url:
        config = load_config(
            {
                "mcpServers": {
                    "gh": {
                        "url": url,
                        "headers": {
                            "Authorization": "Bearer ${OPGATE_GH_TOKEN}",
                            "Accept": "application/json, text/event-stream",
                        },
                    }
                }
            }
        )
        async with open_catalog(config, start_timeout=60) as catalog:
            registry = catalog.registry(LocalPolicy())
            outcome = await registry.invoke(None, "gh.request_headers", {})
            assert isinstance(outcome, Completed), outcome
            seen = outcome.result.structured
            assert isinstance(seen, dict)
            assert seen["authorization"] == "[redacted]"
            assert "event-stream" in seen["accept"]  # not a credential: kept
            assert token not in repr(outcome)
            echoed = await registry.invoke(None, "gh.echo", {"text": f"the key is {token}"})
            assert isinstance(echoed, Completed), echoed
            assert echoed.result.content == (Text("the key is [redacted]"),)
            assert token not in repr(echoed)
            refused = await registry.invoke(None, "gh.refuse", {"reason": f"Bearer {token}"})
            assert isinstance(refused, Failed), refused
            assert token not in repr(refused)
            assert "[redacted]" in refused.failure.message


async def test_a_stdio_upstreams_echoed_environment_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("OPGATE_API_KEY", secret)
    env = {"API_KEY": "${OPGATE_API_KEY}", "ROOT": "/srv/a/long/data/path", "TZ": "UTC"}
    config = load_config({"mcpServers": {"kit": stdio_entry("kit", env=env)}})
    async with open_catalog(config, start_timeout=60) as catalog:
        registry = catalog.registry(LocalPolicy())
        assert await invoke(registry, "kit.variable", {"name": "API_KEY"}) == {
            "result": "[redacted]"
        }
        # paths, short settings and the inherited variables are not secrets
        assert await invoke(registry, "kit.variable", {"name": "ROOT"}) == {
            "result": "/srv/a/long/data/path"
        }
        assert await invoke(registry, "kit.variable", {"name": "TZ"}) == {"result": "UTC"}
        path = await invoke(registry, "kit.variable", {"name": "PATH"})
        assert path == {"result": os.environ["PATH"]}


async def test_the_hand_offs_of_a_url_elicitation_required_error_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A -32042 error's URL hand-offs go to the agent as prompts, as an elicitation's do:
    # the upstream's credential in one (its URL here) is redacted the same way.
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("OPGATE_API_KEY", secret)
    entry = relay_entry("modern", env={"API_KEY": "${OPGATE_API_KEY}"})
    config = load_config({"mcpServers": {"gated": entry}})
    async with open_catalog(config, start_timeout=60, call_timeout=60) as catalog:
        registry = catalog.registry(LocalPolicy())
        outcome = await registry.invoke(
            None, "gated.gated", {"key": secret}, input_support={InputMode.URL}
        )
        assert isinstance(outcome, Pending), outcome
        assert outcome.prompt == URLPrompt(
            "upstream 'gated' asks: Authorize step 1", f"{HANDOFF_URL}?gate=[redacted]&step=1"
        )
        assert secret not in repr(outcome)


def test_redactor_for_takes_the_entrys_own_secrets_only() -> None:
    stdio = StdioServer(
        "a",
        "cmd",
        env={"K": "s3cr3t-value", "SHORT": "abc1234", "HOME": "/h/o/m/e/x", "PATH": "x" * 20},
    )
    redactor = redactor_for(stdio)
    assert redactor.text("s3cr3t-value abc1234 xxxxxxxxxxxxxxxxxxxx") == (
        "[redacted] abc1234 xxxxxxxxxxxxxxxxxxxx"
    )
    assert len("abc1234") < MIN_ENV_SECRET
    http = HTTPServer(
        "b",
        "https://u:pa55word@h/mcp?key=query-secret-1&x=1",
        headers={"X-Api-Key": "key-1234", "User-Agent": "agent/1.0"},
    )
    redactor = redactor_for(http)
    assert redactor.text("key-1234 pa55word query-secret-1 agent/1.0 x=1") == (
        "[redacted] [redacted] [redacted] agent/1.0 x=1"
    )
    assert not redactor_for(StdioServer("c", "cmd"))


async def test_an_upstreams_stderr_is_prefixed_and_escaped(tmp_path: Path) -> None:
    forged = "\\x1b[2J\\x1b[31mopgate: serving 0 operations\\r\\u202eevil\\tend"
    # the escapes are the child's: its source text holds them as Python escapes
    script = f"import sys; sys.stderr.write('{forged}\\nsecond line\\n'); sys.exit(3)"
    config = load_config(
        {"mcpServers": {"noisy": {"command": sys.executable, "args": ["-c", script]}}}
    )
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        async with open_catalog(config, start_timeout=30, stderr=stderr) as catalog:
            assert not catalog.report.upstreams[0].connected
        with anyio.fail_after(10):
            while log.read_text().count("\n") < 2:
                await anyio.sleep(0.05)
    assert log.read_text().splitlines() == [
        "[noisy] \\x1b[2J\\x1b[31mopgate: serving 0 operations\\r\\u202eevil\tend",
        "[noisy] second line",
    ]


async def test_an_upstreams_stderr_is_redacted_of_its_entrys_credentials(
    tmp_path: Path,
) -> None:
    # A server that logs its configuration at start writes the key it was given into
    # the gateway's own log, which may be shipped and kept far from the entry.
    secret = "sk-live-0123456789abcdef"
    script = "import os, sys; sys.stderr.write('config: key=' + os.environ['KEY'] + '\\n')"
    entry = {"command": sys.executable, "args": ["-c", script], "env": {"KEY": secret}}
    config = load_config({"mcpServers": {"chatty": entry}})
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        async with open_catalog(config, start_timeout=30, stderr=stderr):
            pass
        with anyio.fail_after(10):
            while "\n" not in log.read_text():
                await anyio.sleep(0.05)
    assert log.read_text().splitlines() == ["[chatty] config: key=[redacted]"]


def _relayed(redactor: Redactor, written: bytes) -> list[str]:
    """What a ``StderrRelay`` copies of ``written`` (then the pipe's end), line by line."""
    target = io.StringIO()
    relay = StderrRelay("long", target, redactor)
    relay.file.buffer.write(written)
    relay.close()
    deadline = 100
    while not target.getvalue().endswith("[long] end\n") and deadline:
        deadline -= 1
        time.sleep(0.05)
    return target.getvalue().splitlines()


@pytest.mark.parametrize("offset", [-20, -9, -1, 0, 1, 7])
def test_a_secret_across_the_cut_of_a_long_stderr_line_is_redacted(offset: int) -> None:
    # A line longer than MAX_STDERR_LINE is relayed in pieces; a credential the cut
    # falls inside must not come out as two halves, each too short to be recognised.
    secret = "sk-live-0123456789abcdef"
    start = MAX_STDERR_LINE - len(secret) // 2 + offset
    line = "x" * start + "key=" + secret + " rest"
    lines = _relayed(Redactor([secret]), (line + "\nend\n").encode())
    assert lines[-1] == "[long] end"
    pieces = [shown.removeprefix("[long] ") for shown in lines[:-1]]
    assert all(shown.startswith("[long] ") for shown in lines)
    assert "".join(pieces) == "x" * start + "key=[redacted] rest"
    longest = MAX_STDERR_LINE + Redactor([secret]).tail
    assert all(len(piece.encode()) <= longest for piece in pieces)


@pytest.mark.parametrize("offset", [-3, -1, 0, 1, 3])
def test_a_credential_of_words_across_the_cut_is_redacted_whole(offset: int) -> None:
    # The cut falls just after the long word of a credential of several words: that
    # word alone is a secret, but redacting it before the next piece arrives would
    # leave the value's other words (" x9") to be relayed in clear.
    value = "Token abcdefghijkl x9"
    start = MAX_STDERR_LINE - len("auth: Token abcdefghijkl") + offset
    line = "x" * start + "auth: " + value + " rest"
    lines = _relayed(Redactor({"Authorization": value}), (line + "\nend\n").encode())
    assert lines[-1] == "[long] end"
    assert "".join(shown.removeprefix("[long] ") for shown in lines[:-1]) == (
        "x" * start + "auth: [redacted] rest"
    )


def test_a_character_across_the_cut_of_a_long_stderr_line_is_kept_whole() -> None:
    line = "x" * (MAX_STDERR_LINE - 1) + "é" + "y"
    lines = _relayed(Redactor(()), (line + "\nend\n").encode())
    assert "".join(shown.removeprefix("[long] ") for shown in lines[:-1]) == line
