"""``opgate serve --http`` as a subprocess on loopback, and official clients of it.

Used by tests/test_mcp_http.py (the HTTP limits) and tests/test_cli_logging.py (what
stderr shows). The served catalog is tests/serving_catalog.py.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import ROOT, await_port, free_port, serve_environment, stop_process

SERVE = ["-m", "opgate", "serve", "tests.serving_catalog:build_registry"]


@dataclass
class Served:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")


@contextmanager
def serving(tmp_path: Path, *options: str, descriptors: int | None = None) -> Iterator[Served]:
    """``opgate serve --http`` on a free loopback port with ``options``; stderr to a file."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"

    def limit_descriptors() -> None:
        if descriptors is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, *SERVE, "--http", f"127.0.0.1:{port}", *options],
            cwd=ROOT,
            env=serve_environment(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=limit_descriptors,
        )
    served = Served(f"http://127.0.0.1:{port}/mcp", port, process, log)
    try:
        await_port(process, port, lambda: served.stderr()[-2000:])
        yield served
    finally:
        stop_process(process)


@asynccontextmanager
async def client(
    url: str, token: str | None = None, era: str = "legacy", timeout: float = 30
) -> AsyncIterator[Client]:
    """An official MCP client of ``url`` (with ``token`` as its bearer token, if any)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    http = httpx2.AsyncClient(headers=headers, timeout=timeout)
    async with http, Client(streamable_http_client(url, http_client=http), mode=era) as session:
        yield session
