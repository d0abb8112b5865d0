"""HTTP attack figures: a session flood and slow connections against ``opgate serve --http``.

``python benchmarks/bench_http_attacks.py [--sessions 10000] [--drippers 1100]
[--descriptors 1024]``

* **Session flood** (issue 19, item 9): principal A sends ``--sessions`` initialize-only
  2025-11-25 requests (20 at a time); the server's RSS before and after, how many
  were accepted, and principal B's initialize and ``search`` latency afterwards.
* **Memory per session**: RSS growth over 30 sessions opened with a minimal
  initialize, and over 30 with the largest accepted one (16 KiB of small members).
* **Slow connections** (item 10): ``--drippers`` connections dripping a request head
  one byte per 10 s (reconnecting when closed) against a server whose descriptor
  limit is ``--descriptors`` (soft and hard); the latency of an authenticated
  official client's initialize, ``search`` and ``invoke`` meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import free_port

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def initialize(capabilities: dict[str, Any] | None = None) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
    return json.dumps(message).encode()


class Server:
    def __init__(self, *options: str, descriptors: int | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

        def limit() -> None:
            if descriptors is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

        environment = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry"),
                *("--http", f"127.0.0.1:{self.port}"),
                *("--token-verifier", "tests.mcp_catalog:TokenVerifier", *options),
            ],
            cwd=ROOT,
            env=environment,
            stderr=subprocess.DEVNULL,
            preexec_fn=limit,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


async def legit(url: str, token: str) -> list[float]:
    """Seconds for: initialize, search, invoke (official client, 2025-11-25)."""
    taken = []
    started = time.monotonic()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
        taken.append(time.monotonic() - started)
        for name, arguments in (
            ("search", {"query": "confirm"}),
            ("invoke", {"name": "util.echo", "arguments": {"text": "hi"}}),
        ):
            started = time.monotonic()
            result = await c.call_tool(name, arguments)
            assert not result.is_error
            taken.append(time.monotonic() - started)
    return taken


def ms(values: list[float]) -> str:
    return " / ".join(f"{value * 1000:.0f}" for value in values)


async def flood(sessions: int) -> None:
    server = Server()
    try:
        before = server.rss_mib()
        statuses: dict[int, int] = {}
        body = initialize()
        started = time.monotonic()
        async with httpx2.AsyncClient(
            headers={**HEADERS, "Authorization": "Bearer alice-token"}, timeout=60
        ) as http:
            gate = asyncio.Semaphore(20)

            async def one() -> None:
                async with gate:
                    response = await http.post(server.url, content=body)
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

            await asyncio.gather(*(one() for _ in range(sessions)))
        seconds = time.monotonic() - started
        after = server.rss_mib()
        b = await legit(server.url, "bob-token")
        print(
            f"session flood: {sessions} initialize in {seconds:.0f} s, statuses {statuses}; "
            f"RSS {before:.0f} -> {after:.0f} MiB; B initialize/search/invoke {ms(b)} ms"
        )
    finally:
        server.stop()


async def per_session() -> None:
    server = Server("--principal-sessions", "64")
    try:
        big = {"experimental": {"x": {f"k{i}": i for i in range(1100)}}}
        async with httpx2.AsyncClient(
            headers={**HEADERS, "Authorization": "Bearer alice-token"}, timeout=60
        ) as http:
            for label, body in (("minimal", initialize()), ("largest", initialize(big))):
                await http.post(server.url, content=body)
                before = server.rss_mib()
                for _ in range(30):
                    response = await http.post(server.url, content=body)
                    assert response.status_code == 200, response.status_code
                growth = (server.rss_mib() - before) * 1024 / 30
                size = len(body)
                print(f"memory per session ({label} initialize, {size} bytes): {growth:.0f} KiB")
    finally:
        server.stop()


async def drip(port: int, stop: asyncio.Event, closed: list[float]) -> None:
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(1)
            continue
        started = time.monotonic()
        try:
            writer.write(head)
            while not stop.is_set() and not reader.at_eof():
                try:
                    await asyncio.wait_for(reader.read(1024), 10)
                except TimeoutError:
                    writer.write(b"a")
                    await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()
        if not stop.is_set():
            closed.append(time.monotonic() - started)
            await asyncio.sleep(1)


async def slow(drippers: int, descriptors: int) -> None:
    server = Server(descriptors=descriptors)
    try:
        baseline = await legit(server.url, "alice-token")
        stop = asyncio.Event()
        closed: list[float] = []
        tasks = [asyncio.create_task(drip(server.port, stop, closed)) for _ in range(drippers)]
        await asyncio.sleep(5)
        under = [await legit(server.url, "bob-token") for _ in range(5)]
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        flat = [value for calls in under for value in calls]
        print(
            f"slow connections: {drippers} dripping, descriptor limit {descriptors}; "
            f"baseline {ms(baseline)} ms; under attack median {statistics.median(flat) * 1000:.0f} "
            f"ms, max {max(flat) * 1000:.0f} ms (initialize/search/invoke x5); "
            f"{len(closed)} dripping connections closed by the server"
        )
    finally:
        server.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--drippers", type=int, default=1100)
    parser.add_argument("--descriptors", type=int, default=1024)
    arguments = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    await flood(arguments.sessions)
    await per_session()
    await slow(arguments.drippers, arguments.descriptors)


if __name__ == "__main__":
    asyncio.run(main())
