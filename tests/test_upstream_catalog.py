"""``opgate.upstream.open_catalog``: real upstreams on the official SDK behind a ``Registry``.

Two upstreams run as subprocesses over stdio (``tests/upstream_servers.py``): ``kit``
(the SDK's ``MCPServer``, typed tools) and ``raw`` (the low-level ``Server``, tool
definitions and answers written by hand). Through the registry: search across both,
inspect, invoke; a schema outside the compiler profile, a duplicate and filtered
tools left out with reasons; renamed tools reported and still reaching their own
tool; ``isError`` mapped; hostile answers (too deep, not base64, over budget, against
the tool's own output schema, an input request no one can answer, a JSON-RPC error)
failing only their call; a slow call timing out and a call its caller cancels, both
cancelled upstream; an upstream crashing mid-call while the rest serve, restarted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from opgate import (
    Completed,
    Failed,
    FailureCode,
    Image,
    LocalPolicy,
    OperationSpec,
    Registry,
    ScopePolicy,
    SearchPage,
    Text,
)
from opgate.upstream import Backoff, Catalog, load_config, open_catalog

from upstream_servers import PIXEL, stdio_entry

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def catalog() -> AsyncIterator[Catalog]:
    config = load_config({"mcpServers": {"kit": stdio_entry("kit"), "raw": stdio_entry("raw")}})
    async with open_catalog(config, start_timeout=60, call_timeout=60) as opened:
        yield opened


@pytest.fixture(scope="module")
def registry(catalog: Catalog) -> Registry:
    return catalog.registry(LocalPolicy())


async def names(registry: Registry, query: str = "", *, group: str = "") -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        page = await registry.search(None, query, group=group, limit=20, cursor=cursor)
        assert isinstance(page, SearchPage)
        found.extend(item.name for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return found


async def completed(registry: Registry, name: str, arguments: dict[str, Any]) -> Completed:
    outcome = await registry.invoke(None, name, arguments)
    assert isinstance(outcome, Completed), outcome
    return outcome


async def failed(registry: Registry, name: str, arguments: dict[str, Any]) -> Failed:
    outcome = await registry.invoke(None, name, arguments)
    assert isinstance(outcome, Failed), outcome
    return outcome


async def test_both_upstreams_connect_and_report(catalog: Catalog) -> None:
    kit, raw = catalog.report.upstreams
    assert (kit.name, kit.transport, kit.connected, kit.tools) == ("kit", "stdio", True, 10)
    assert (raw.name, raw.connected) == ("raw", True)
    assert kit.server == "kit 1.0"
    assert kit.protocol_version
    assert catalog.report.failed == ()
    assert "kit.echo" in catalog.report.operations
    assert catalog.report.summary().startswith("2 of 2 upstreams connected")


async def test_search_spans_the_upstreams(registry: Registry) -> None:
    everything = await names(registry)
    assert {"kit.echo", "kit.add", "raw.deep", "raw.read_file"} <= set(everything)
    assert await names(registry, "echo") == ["kit.echo"]
    assert set(await names(registry, group="raw")) == {
        n for n in everything if n.startswith("raw.")
    }
    assert await names(registry, "integers") == ["kit.add"]  # the description is searched


async def test_inspect_keeps_the_definition(registry: Registry, catalog: Catalog) -> None:
    spec = await registry.inspect(None, "kit.add")
    assert isinstance(spec, OperationSpec)
    assert spec.group == "kit"
    assert spec.summary == "Add two integers."
    assert spec.description.startswith("Add two integers. The sum comes back as structured")
    assert spec.description.endswith(
        "Annotations declared by the upstream: readOnlyHint=true, idempotentHint=true."
    )
    schema = spec.input_schema
    assert isinstance(schema, dict)
    assert schema["required"] == ["a", "b"]
    assert spec.output_schema is not None
    plan = catalog.tools["kit.add"]
    assert (plan.upstream, plan.tool) == ("kit", "add")
    assert plan.annotations == {"readOnlyHint": True, "idempotentHint": True}


async def test_the_title_is_the_summary(registry: Registry) -> None:
    spec = await registry.inspect(None, "kit.echo")
    assert isinstance(spec, OperationSpec)
    assert spec.summary == "Echo a text back"
    assert spec.description == "Returns the text it was given. Nothing else."


async def test_invoke_forwards_and_maps_the_result(registry: Registry) -> None:
    echoed = await completed(registry, "kit.echo", {"text": "héllo"})
    assert echoed.result.content == (Text("héllo"),)
    assert echoed.result.structured == {"result": "héllo"}
    added = await completed(registry, "kit.add", {"a": 2, "b": 40})
    assert added.result.structured == {"result": 42}
    image = await completed(registry, "kit.pixel", {})
    assert image.result.content == (Image(PIXEL, "image/png"),)


async def test_arguments_are_validated_before_the_upstream_sees_them(registry: Registry) -> None:
    outcome = await failed(registry, "kit.add", {"a": "two", "b": 1})
    assert outcome.failure.code is FailureCode.INVALID_ARGUMENTS


async def test_is_error_is_an_operation_failure(registry: Registry) -> None:
    outcome = await failed(registry, "kit.refuse", {"reason": "no stock"})
    assert outcome.failure.code is FailureCode.OPERATION_FAILED
    assert "refused: no stock" in outcome.failure.message


async def test_a_schema_outside_the_profile_is_left_out_with_the_reason(
    catalog: Catalog, registry: Registry
) -> None:
    (issue,) = [i for i in catalog.report.skipped if i.tool == "lookbehind"]
    assert (issue.upstream, issue.kind) == ("raw", "definition")
    assert "lookaround" in issue.reason
    assert "raw.lookbehind" not in catalog.tools
    refused = await failed(registry, "raw.lookbehind", {})
    assert refused.failure.code is FailureCode.UNAVAILABLE


async def test_a_tool_listed_twice_is_left_out_once(catalog: Catalog) -> None:
    twice = [i for i in catalog.report.skipped if i.tool == "twice"]
    assert [i.kind for i in twice] == ["duplicate"]
    assert catalog.tools["raw.twice"].description == "Listed two times."


async def test_renamed_tools_are_reported_and_reach_their_own_tool(
    catalog: Catalog, registry: Registry
) -> None:
    renamed = {i.tool: i.reason for i in catalog.report.warnings if i.kind == "renamed"}
    assert renamed["read file"] == (
        "offered as 'raw.read_file' (characters outside [A-Za-z0-9_.-] replaced)"
    )
    # ' ' and '?' sort before '_', yet the unchanged "read_file_2" keeps its own name:
    # a renamed newcomer never takes it (and the pins and policy on it)
    assert "'raw.read_file_3'" in renamed["read?file"]
    assert "number added" in renamed["read?file"]
    assert "read_file_2" not in renamed
    long = next(name for name in catalog.tools if name.startswith("raw.ttt"))
    assert len(long) == 128
    first = await completed(registry, "raw.read_file", {})
    second = await completed(registry, "raw.read_file_3", {})
    plain = await completed(registry, "raw.read_file_2", {})
    assert first.result.content == (Text("called read file"),)
    assert second.result.content == (Text("called read?file"),)
    assert plain.result.content == (Text("called read_file_2"),)
    assert (await completed(registry, long, {})).result.content == (Text(f"called {'t' * 200}"),)


@pytest.mark.parametrize(
    ("tool", "code", "words"),
    [
        ("raw.deep", FailureCode.OPERATION_FAILED, "outside opgate's JSON profile"),
        ("raw.bad_image", FailureCode.OPERATION_FAILED, "content block 0 data is not base64"),
        ("raw.huge", FailureCode.INVALID_RESULT, "result budget"),
        ("raw.wrong_shape", FailureCode.INVALID_RESULT, "structured result"),
        ("raw.ask", FailureCode.CONFIRMATION_REQUIRED, "confirmation from a person"),
        ("raw.protocol_error", FailureCode.OPERATION_FAILED, "error -32602: no such thing second"),
    ],
)
async def test_hostile_answers_fail_only_their_call(
    registry: Registry, tool: str, code: FailureCode, words: str
) -> None:
    outcome = await failed(registry, tool, {})
    assert outcome.failure.code is code
    assert words in outcome.failure.message
    assert "\n" not in outcome.failure.message
    after = await completed(registry, "kit.echo", {"text": "still here"})
    assert after.result.content == (Text("still here"),)


async def test_a_principal_sees_the_upstreams_its_scopes_name(catalog: Catalog) -> None:
    @dataclass
    class Caller:
        scopes: frozenset[str]
        scope_key: str

    policy = ScopePolicy({"kit.use": {"kit"}}, scopes=lambda ctx: ctx.scopes)
    registry = catalog.registry(policy)
    caller = Caller(frozenset({"kit.use"}), "caller")
    page = await registry.search(caller, "", limit=20)
    assert isinstance(page, SearchPage)
    assert {item.group for item in page.items} == {"kit"}
    denied = await registry.invoke(caller, "raw.read_file", {})
    assert isinstance(denied, Failed)
    assert denied.failure.code is FailureCode.UNAVAILABLE
    allowed = await registry.invoke(caller, "kit.echo", {"text": "x"})
    assert isinstance(allowed, Completed)


async def test_a_host_combines_the_operations_with_its_own(catalog: Catalog) -> None:
    from opgate import Operation, Result, finish

    own = Operation("local.ping", "Ping", lambda inv: finish(Result([Text("pong")])))
    registry = Registry([*catalog.operations, own], LocalPolicy())
    assert "local.ping" in await names(registry)
    assert isinstance(await registry.invoke(None, "kit.echo", {"text": "x"}), Completed)


async def test_open_catalog_checks_its_arguments() -> None:
    config = load_config({"mcpServers": {}})
    with pytest.raises(TypeError, match="load_config"):
        async with open_catalog({"mcpServers": {}}):  # type: ignore[arg-type]
            pass
    inf, nan = float("inf"), float("nan")
    for bad in (
        {"start_timeout": 0},
        {"call_timeout": -1.0},
        {"call_timeout": True},
        {"start_timeout": inf},
        {"call_timeout": nan},
        {"hold_timeout": inf},
        {"call_timeout": 10**400},  # an int past every float
    ):
        with pytest.raises(ValueError, match="positive, finite number of seconds"):
            async with open_catalog(config, **bad):  # type: ignore[arg-type]
                pass
    for settle in (-1, inf, nan, 10**400):
        with pytest.raises(ValueError, match="settle must be a finite number"):
            async with open_catalog(config, settle=settle):
                pass
    async with open_catalog(config) as empty:
        assert empty.operations == ()
        assert empty.report.summary().startswith("0 of 0 upstreams connected")


async def test_filters_offer_only_the_allowed_tools() -> None:
    config = load_config(
        {
            "mcpServers": {
                "a": stdio_entry("kit", tools={"allow": ["echo", "missing"]}),
                "d": stdio_entry("kit", tools={"deny": ["crash", "slow", "absent"]}),
            }
        }
    )
    async with open_catalog(config, start_timeout=60) as catalog:
        assert sorted(n for n in catalog.tools if n.startswith("a.")) == ["a.echo"]
        denied = {n for n in catalog.tools if n.startswith("d.")}
        assert "d.crash" not in denied
        assert "d.slow" not in denied
        assert "d.echo" in denied
        kinds = {(i.upstream, i.tool): i.kind for i in catalog.report.skipped}
        assert kinds[("a", "add")] == "filtered"
        assert kinds[("d", "crash")] == "filtered"
        listed = {(i.upstream, i.tool) for i in catalog.report.warnings if i.kind == "not listed"}
        assert listed == {("a", "missing"), ("d", "absent")}


async def cancelled_upstream(marker: Path) -> bool:
    """Whether the upstream's ``slow`` call wrote its cancellation marker (waits up to 30 s)."""
    with anyio.move_on_after(30):
        while not marker.exists():
            await anyio.sleep(0.05)
    return marker.exists() and marker.read_text() == "cancelled"


async def test_a_slow_call_times_out_and_the_upstream_goes_on(tmp_path: Path) -> None:
    config = load_config({"mcpServers": {"kit": stdio_entry("kit"), "raw": stdio_entry("raw")}})
    async with open_catalog(config, start_timeout=60, call_timeout=2) as catalog:
        registry = catalog.registry(LocalPolicy())
        marker = tmp_path / "slow"
        slow = await failed(registry, "kit.slow", {"seconds": 60, "marker": str(marker)})
        assert slow.failure.code is FailureCode.OPERATION_FAILED
        assert slow.failure.message == "upstream 'kit' did not answer within 2 s"
        assert await cancelled_upstream(marker)
        # A message the SDK cannot parse never completes its request: the timeout ends it.
        deeper = await failed(registry, "raw.deeper", {})
        assert deeper.failure.message == "upstream 'raw' did not answer within 2 s"
        after = await completed(registry, "kit.echo", {"text": "next"})
        assert after.result.content == (Text("next"),)


async def test_a_call_the_caller_cancels_is_cancelled_upstream(
    registry: Registry, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    with anyio.move_on_after(1) as scope:
        await registry.invoke(None, "kit.slow", {"seconds": 60, "marker": str(marker)})
    assert scope.cancelled_caught
    assert await cancelled_upstream(marker)
    after = await completed(registry, "kit.echo", {"text": "after"})
    assert after.result.content == (Text("after"),)


async def test_a_crash_mid_call_fails_that_upstream_only_until_it_is_restarted() -> None:
    config = load_config({"mcpServers": {"kit": stdio_entry("kit"), "raw": stdio_entry("raw")}})
    backoff = Backoff(first=1.0, cap=1.0)
    async with open_catalog(config, start_timeout=60, call_timeout=60, backoff=backoff) as catalog:
        registry = catalog.registry(LocalPolicy())
        crashed = await failed(registry, "kit.crash", {})
        assert crashed.failure.code is FailureCode.OPERATION_FAILED
        assert crashed.failure.message == "upstream 'kit' closed the connection during the call"
        status = catalog.sessions["kit"].status()
        assert (status.connected, status.reason, status.retrying) == (
            False,
            "the connection closed",
            True,
        )
        again = await failed(registry, "kit.echo", {"text": "x"})
        assert again.failure.message == (
            "upstream 'kit' is not connected (the connection closed); the gateway is "
            "restarting it, try again shortly"
        )
        other = await completed(registry, "raw.read_file", {})
        assert other.result.content == (Text("called read file"),)
        # Search still lists the crashed upstream's operations while it restarts.
        assert "kit.echo" in await names(registry, "echo")
        await connected(catalog, "kit")
        after = await completed(registry, "kit.echo", {"text": "after the restart"})
        assert after.result.structured == {"result": "after the restart"}
        status = catalog.sessions["kit"].status()
        assert (status.connected, status.restarts) == (True, 1)
        assert "restarted 1 time, up since" in str(status)
        assert catalog.report.rebuilds == 0  # the same tools: the same operations serve


async def connected(catalog: Catalog, name: str, seconds: float = 60) -> None:
    """Wait until upstream ``name`` of ``catalog`` is connected."""
    with anyio.fail_after(seconds):
        while not catalog.sessions[name].status().connected:
            await anyio.sleep(0.05)


async def test_upstreams_that_fail_to_start_are_reported_and_the_rest_serve() -> None:
    config = load_config(
        {
            "mcpServers": {
                "missing": {"command": "/nonexistent/opgate-upstream"},
                "quits": {"command": sys.executable, "args": ["-c", "pass"]},
                "silent": {
                    "command": sys.executable,
                    "args": ["-c", "import time; time.sleep(60)"],
                },
                "refused": {"url": "http://127.0.0.1:9/mcp"},
                "kit": stdio_entry("kit"),
            }
        }
    )
    async with open_catalog(config, start_timeout=8, call_timeout=60) as catalog:
        status = {s.name: s for s in catalog.report.upstreams}
        assert status["kit"].connected
        assert status["missing"].reason == (
            "could not run '/nonexistent/opgate-upstream': No such file or directory"
        )
        assert status["quits"].reason.startswith("the handshake failed: error -32000")
        assert status["silent"].reason == "did not start within 8 s"
        assert status["refused"].reason.startswith("could not reach the upstream")
        assert [s.name for s in catalog.report.failed] == ["missing", "quits", "silent", "refused"]
        assert all(name.startswith("kit.") for name in catalog.tools)
        registry = catalog.registry(LocalPolicy())
        assert isinstance(await registry.invoke(None, "kit.echo", {"text": "x"}), Completed)
        assert repr(catalog) == "Catalog(10 operations from 1 of 5 upstreams)"
    kit = catalog.sessions["kit"].status()
    assert (kit.connected, kit.reason) == (False, "closed")


def test_refused_finds_each_bad_definition_among_many() -> None:
    from opgate import Operation, fail
    from opgate.upstream._catalog import _refused

    def operation(index: int) -> Operation:
        pattern = "(?<=a)b" if index in (3, 17, 49) else "^a+$"
        schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
        return Operation(f"u.t{index}", "s", lambda inv: fail("x"), input_schema=schema)

    refused = _refused([operation(index) for index in range(50)], None)
    assert sorted(refused) == ["u.t17", "u.t3", "u.t49"]
    assert all("lookaround" in reason for reason in refused.values())
    assert _refused([operation(0), operation(1)], None) == {}


def test_a_description_shows_its_controls_and_bidi_characters() -> None:
    import mcp.types as types

    from opgate.upstream._catalog import description_of

    tool = types.Tool(
        name="ctl",
        description="Normal.\x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c \x00nul\u2028\nnext\tline",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    assert description_of(tool) == (
        "Normal.\\u001b[2J\\u001b]0;pwned\\u0007 \\u202eevil\\u202c \\u0000nul\\u2028\n"
        "next\tline\n\nAnnotations declared by the upstream: readOnlyHint=true."
    )
    plain = types.Tool(name="p", description="Café\nau lait", input_schema={"type": "object"})
    assert description_of(plain) == "Café\nau lait"


#: An upstream that answers every request with an error quoting its credential.
ECHOES_ITS_KEY = """
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        error = {"code": -32000, "message": "key " + os.environ["UPSTREAM_KEY"] + " refused"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
"""


async def test_a_start_failure_that_quotes_a_credential_is_redacted() -> None:
    secret = "sk-live-0123456789abcdef"
    entry = {
        "command": sys.executable,
        "args": ["-c", ECHOES_ITS_KEY],
        "env": {"UPSTREAM_KEY": secret},
    }
    config = load_config({"mcpServers": {"echoer": entry}})
    async with open_catalog(config, start_timeout=20, call_timeout=20) as catalog:
        (status,) = catalog.report.upstreams
        assert status.reason.startswith("the handshake failed: error -32000"), status.reason
        assert secret not in status.reason
        assert "key [redacted] refused" in status.reason
        assert secret not in "\n".join(catalog.report.lines())


#: An upstream whose serverInfo version is its credential; it lists no tools.
NAMES_ITSELF_BY_ITS_KEY = """
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, answer = message["method"], {}
    if method == "initialize":
        version = "1.0+" + os.environ["UPSTREAM_KEY"]
        answer = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "leaky", "version": version},
        }
    elif method == "tools/list":
        answer = {"tools": []}
    elif method != "ping":
        error = {"code": -32601, "message": "Method not found"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}), flush=True)
"""


async def test_a_server_version_that_quotes_a_credential_is_redacted() -> None:
    secret = "sk-live-0123456789abcdef"
    entry = {
        "command": sys.executable,
        "args": ["-c", NAMES_ITSELF_BY_ITS_KEY],
        "env": {"UPSTREAM_KEY": secret},
    }
    config = load_config({"mcpServers": {"leaky": entry}})
    async with open_catalog(config, start_timeout=20, call_timeout=20) as catalog:
        (status,) = catalog.report.upstreams
        assert status.connected, status.reason
        assert status.server == "leaky 1.0+[redacted]"
        assert secret not in "\n".join(catalog.report.lines())


async def test_an_entrys_settings_never_drop_a_tool_or_change_its_schema(
    tmp_path: Path,
) -> None:
    # The redactor counts every env value of 8 characters or more as a secret, which is
    # right for what an upstream sends back, where a false hit only hides text. Applied
    # to the tools it lists it dropped list_pull_requests and served the enum as
    # ["staging", "[redacted]"]: tool definitions stay as the upstream lists them.
    schema = {
        "type": "object",
        "properties": {"target": {"type": "string", "enum": ["staging", "production"]}},
        "required": ["target"],
    }
    tools = [
        {
            "name": "list_pull_requests",
            "description": "Lists pull_requests.",
            "inputSchema": schema,
        },
        {"name": "deploy", "description": "Deploys to production.", "inputSchema": schema},
    ]
    (tmp_path / "tools.json").write_text(json.dumps(tools), "utf-8")
    env = {"GITHUB_TOOLSETS": "repos,issues,pull_requests", "DEPLOY_TARGET": "production"}
    entry = stdio_entry("shifty", str(tmp_path / "tools.json"), env=env)
    config = load_config({"mcpServers": {"shifty": entry}})
    async with open_catalog(config, start_timeout=20, call_timeout=20) as catalog:
        assert sorted(catalog.tools) == ["shifty.deploy", "shifty.list_pull_requests"]
        assert catalog.report.skipped == ()
        registry = catalog.registry(LocalPolicy())
        spec = registry.spec("shifty.deploy")
        assert spec.description == "Deploys to production."
        assert spec.input_schema == schema
        called = await registry.invoke(None, "shifty.deploy", {"target": "production"})
        assert isinstance(called, Completed), called
