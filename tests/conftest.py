"""Shared fixtures: the anyio backend, a principal context, simple policies, a served catalog."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from opgate import Discover, Execute, Failure, FailureCode

# Property tests assert behaviour, not speed: a loaded CI machine must not fail them on
# hypothesis's per-example deadline (speed targets live in benchmarks/).
settings.register_profile("opgate", deadline=None)
settings.load_profile("opgate")


def pytest_configure(config: pytest.Config) -> None:
    """The patterns builds prove are remembered in a directory of this run's own, not in
    the user's cache (servers the tests start inherit it). A cold npm install
    (``tests/node_tools.py``: the MCP tools, the OpenAPI corpus) is announced on the
    terminal as it starts, not kept in the captured output of the test whose fixture
    triggered it."""
    import node_tools

    cache = tempfile.mkdtemp(prefix="opgate-test-cache-")
    os.environ["OPGATE_CACHE_DIR"] = cache
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))

    def announce(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
            reporter.flush()

    node_tools.announce = announce


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Ctx:
    """What a host passes as ``ctx``: here, a principal and its grants."""

    principal: str = "alice"
    admin: bool = False


@dataclass
class TeamPolicy:
    """Allows everything except ``admin.*`` for non-admins; records every request."""

    calls: list[Any] = field(default_factory=list)
    deny_execute: set[str] = field(default_factory=set)

    def scope_key(self, ctx: Ctx) -> str:
        return f"{ctx.principal}:{'admin' if ctx.admin else 'user'}"

    def authorize(self, ctx: Ctx, request: Discover | Execute) -> None:
        self.calls.append(request)
        if request.name.startswith("admin.") and not ctx.admin:
            raise Failure(FailureCode.UNAVAILABLE)
        if isinstance(request, Execute) and request.name in self.deny_execute:
            raise Failure(FailureCode.UNAVAILABLE, "you may not run this")


class AllowAll:
    def scope_key(self, ctx: Any) -> str:
        return "everyone"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


ROOT = Path(__file__).resolve().parents[1]
#: ``opgate serve`` of the MCP test catalog (tests/mcp_catalog.py), from the repository root.
SERVE = [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry"]


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``opgate.cli.main(argv)``: its exit status (from ``SystemExit`` too), stdout and stderr."""
    from opgate.cli import main

    try:
        status: int | str | None = main(list(argv))
    except SystemExit as exit_info:
        status = exit_info.code
    captured = capsys.readouterr()
    assert isinstance(status, int), status
    return status, captured.out, captured.err


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_environment() -> dict[str, str]:
    """This environment, with the checkout's root and every ``PYTHONPATH`` entry made
    absolute, so a server started in another working directory imports the same code."""
    environment = dict(os.environ)
    entries = environment.get("PYTHONPATH", "").split(os.pathsep)
    absolute = [str(Path(entry).resolve()) for entry in entries if entry]
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), *absolute])
    return environment


def await_port(process: subprocess.Popen[bytes], port: int, log_tail: Callable[[], str]) -> None:
    """Wait until ``port`` on loopback accepts connections (30 s at most); an
    ``AssertionError`` with ``log_tail()`` if the process exits first."""
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError("server did not start in 30 s") from None
            time.sleep(0.1)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``opgate serve --http`` with bearer authentication; yields its URL."""
    port = free_port()
    log = (tmp_path_factory.mktemp("serve") / "stderr.log").open("w+b")
    process = subprocess.Popen(
        [
            *SERVE,
            "--http",
            f"127.0.0.1:{port}",
            "--token-verifier",
            "tests.mcp_catalog:TokenVerifier",
        ],
        cwd=ROOT,
        env=serve_environment(),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )

    def log_tail() -> str:
        log.seek(0)
        return log.read().decode()[-2000:]

    try:
        await_port(process, port, log_tail)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
        log.close()


# -- a real Redis, and the ledger contract suite's two backends ----------------------

#: The shared secret of every test registry that uses a shared ledger.
SECRET = b"opgate tests: a shared secret of 32+ bytes"

#: The ledgers the contract suite runs against.
LEDGER_KINDS = ("memory", "redis")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``redis-server`` on a free loopback port for the whole session (see redis_server.py)."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class LedgerChoice:
    """Registry options for one ledger kind; each shared-ledger registry gets its own prefix
    (its own deployment) unless ``prefix`` is given, and is closed after the test."""

    _counter = 0

    def __init__(self, kind: str, url: str | None = None) -> None:
        self.kind = kind
        self.url = url
        self.registries: list[Any] = []

    def options(self, prefix: str | None = None, **ledger: Any) -> dict[str, Any]:
        if self.kind == "memory":
            return {}
        from opgate.redis import RedisLedger

        if prefix is None:
            LedgerChoice._counter += 1
            prefix = f"t{os.getpid()}-{LedgerChoice._counter}"
        assert self.url is not None
        return {"secret": SECRET, "ledger": RedisLedger(self.url, prefix=prefix, **ledger)}

    def track(self, registry: Any) -> Any:
        self.registries.append(registry)
        return registry

    async def close(self) -> None:
        for registry in self.registries:
            await registry._ledger.aclose()


#: The choice in force for module-level helpers (``make``) of the contract suite.
CURRENT_LEDGER: list[LedgerChoice] = [LedgerChoice("memory")]


def ledger_choice(request: pytest.FixtureRequest) -> LedgerChoice:
    kind = request.param
    url = request.getfixturevalue("redis_server").url if kind == "redis" else None
    return LedgerChoice(kind, url)


async def ledger_stats(registry: Any) -> Any:
    """The registry's ledger statistics after a sweep (either backend)."""
    from opgate._ledger import Ledger

    ledger = registry._ledger
    if isinstance(ledger, Ledger):
        ledger.sweep()
    return await ledger.statistics()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``memory_only`` test is about the in-memory ledger's internals: it is not part
    of the contract suite, so its Redis variant is never collected (deselected, not
    skipped)."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_redis = callspec is not None and callspec.params.get("ledger") == "redis"
        (dropped if on_redis and item.get_closest_marker("memory_only") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
