"""Several ``opgate serve --http`` replicas of one catalog, and clients that spread over them.

Used by tests/test_replicas.py and benchmarks/load_replicas.py:

* ``ReplicaSet(count, ledger_url=..., ...)`` starts ``count`` processes of
  ``opgate serve replica_app:build_registry --http 127.0.0.1:PORT`` (or other
  ``serve=`` arguments) sharing one secret (``OPGATE_SECRET``) and, with
  ``ledger_url``, one Redis ledger; it can kill one (SIGKILL, mid-handler) and
  reports each one's RSS.
* ``RoundRobinTransport`` — an ``httpx2`` transport that sends each HTTP request to
  the next replica: what a load balancer without affinity does. The 2026-07-28 HTTP
  wire is stateless (no session), so every request may land anywhere.
* ``StickyTransport`` — affinity by ``Mcp-Session-Id``: a request without a session
  goes round-robin, a request with one goes to the replica that issued it. The
  2025-11-25 era needs it: its ``elicitation/create`` travels on the open request's
  own stream, and its session lives in one process.
* ``client(ports, era, ...)`` — an official ``mcp.Client`` over one of them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import free_port, reap

__all__ = ["ReplicaSet", "RoundRobinTransport", "StickyTransport", "client", "free_port"]

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = Path(__file__).resolve().parent

#: The secret every replica of a set shares (test and load use only).
SECRET = "opgate replicas: a shared secret, 32 bytes or more"


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class ReplicaSet:
    """``count`` replicas on free loopback ports; ``stop()`` ends them all."""

    def __init__(
        self,
        count: int,
        *,
        ledger_url: str | None = None,
        prefix: str = "replicas",
        lease: float | None = None,
        log_dir: Path,
        environment: dict[str, str] | None = None,
        serve: Sequence[str] = ("replica_app:build_registry",),
        arguments: Sequence[str] = (),
    ) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        environment = {**os.environ, **(environment or {}), "OPGATE_SECRET": SECRET}
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(BENCHMARKS), str(ROOT / "src"), environment.get("PYTHONPATH")])
        )
        for index, port in enumerate(self.ports):
            command = [sys.executable, "-m", "opgate", "serve", *serve]
            command += ["--http", f"127.0.0.1:{port}"]
            if ledger_url is not None:
                command += ["--ledger", ledger_url, "--ledger-prefix", prefix]
                if lease is not None:
                    command += ["--ledger-lease", str(lease)]
            command += arguments
            log = (log_dir / f"replica-{index}.log").open("ab")
            self.processes.append(
                subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env=environment,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                )
            )
            log.close()
        self.log_dir = log_dir
        try:
            for index in range(count):
                self._wait(index)
        except BaseException:
            self.stop()
            raise

    def _wait(self, index: int) -> None:
        deadline = time.monotonic() + 60
        while True:
            if self.processes[index].poll() is not None:
                raise RuntimeError(f"replica {index} exited: {self.log(index)}")
            try:
                with socket.create_connection(("127.0.0.1", self.ports[index]), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"replica {index} did not start: {self.log(index)}"
                    ) from None
                time.sleep(0.1)

    def log(self, index: int) -> str:
        return (self.log_dir / f"replica-{index}.log").read_text(errors="replace")[-3000:]

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp" for port in self.ports]

    def rss(self) -> list[int]:
        """Each replica's resident set size in bytes (0 once it has exited)."""
        return [_rss(process.pid) for process in self.processes]

    def kill(self, index: int) -> None:
        """SIGKILL one replica: no shutdown, no settling — a crash."""
        process = self.processes[index]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            reap(process)

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RoundRobinTransport(httpx2.AsyncBaseTransport):
    """Sends each request to the next of ``ports`` on 127.0.0.1 (no affinity)."""

    def __init__(self, ports: Sequence[int], *, start: int = 0) -> None:
        self.ports = list(ports)
        self.turn = start
        self.sent: list[int] = []  # the port of every request, in order
        self._inner = httpx2.AsyncHTTPTransport()

    def choose(self, request: httpx2.Request) -> int:
        port = self.ports[self.turn % len(self.ports)]
        self.turn += 1
        return port

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.choose(request)
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        response = await self._inner.handle_async_request(request)
        self.seen(response, port)
        return response

    def seen(self, response: httpx2.Response, port: int) -> None:
        """A hook for subclasses: the response ``port`` sent."""

    async def aclose(self) -> None:
        await self._inner.aclose()


class StickyTransport(RoundRobinTransport):
    """Round-robin for requests without a session; by ``Mcp-Session-Id`` for the rest."""

    def __init__(self, ports: Sequence[int], *, start: int = 0) -> None:
        super().__init__(ports, start=start)
        self.sessions: dict[str, int] = {}

    def choose(self, request: httpx2.Request) -> int:
        session = request.headers.get("mcp-session-id")
        if session is not None and session in self.sessions:
            return self.sessions[session]
        return super().choose(request)

    def seen(self, response: httpx2.Response, port: int) -> None:
        session = response.headers.get("mcp-session-id")
        if session is not None:
            self.sessions.setdefault(session, port)


@asynccontextmanager
async def client(
    transport: RoundRobinTransport,
    era: str,
    *,
    elicitation: Callable[..., Any] | None = None,
    timeout: float = 60,
    bearer: str | None = None,
) -> AsyncIterator[Client]:
    """An official MCP client whose HTTP requests go through ``transport``."""
    url = f"http://127.0.0.1:{transport.ports[0]}/mcp"
    headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else None
    http = httpx2.AsyncClient(transport=transport, timeout=timeout, headers=headers)
    async with (
        http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=era,
            elicitation_callback=elicitation,
        ) as session,
    ):
        yield session
