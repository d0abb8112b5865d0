"""Load and soak: concurrent official MCP clients against 1 and 3 replicas on one Redis.

``python benchmarks/load_replicas.py [--replicas 1 3] [--clients 8] [--duration 30]
[--warmup 5] [--lifetime 60] [--redis URL]``

For each replica count it starts that many ``opgate serve replica_app:build_registry
--http`` processes sharing a secret and a Redis ledger (a ``redis-server`` on a free
loopback port, unless ``--redis`` names one; tests/redis_server.py), then runs
``--clients`` official ``mcp.Client``s in the 2026-07-28 era for ``--warmup`` +
``--duration`` seconds. Each client's HTTP requests go round-robin over the replicas
(benchmarks/replicas.py). Every client loops over a mix:

* ``search`` (50%): a query, then one or two more pages with the cursor;
* ``invoke`` (30%): a plain call (``util.echo``);
* ``form chain`` (20%): ``orders.chain`` — the call, two ``InputRequiredResult``s
  answered by retries (``invoke prompt`` and ``invoke resume`` requests), the result.

It prints requests per second, p50/p99 latency per request kind, errors (any
exception or ``isError`` result; 0 expected), each replica's RSS and Redis's
``used_memory`` after the warm-up and at the end, and the machine's load average.
Prompts live ``--lifetime`` seconds (60 by default, through
``$OPGATE_REPLICA_LIFETIME``): records expire, are swept and give their bytes back
many times within a run, so a leak of records or of accounted bytes shows as growth
or as ``busy`` errors. (With the default 600 s all eight clients — one principal —
retain ten minutes of chains, which outgrows the default per-principal budget of
8 MiB after about six minutes: the ledger then answers ``busy``, as designed.) The
long soak is ``--duration 600``; CI runs a bounded one (tests/test_load.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp.types as types
import redis

from common import Table, format_table, machine_info
from replicas import ReplicaSet, RoundRobinTransport, client

ROOT = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
KINDS = ("search", "invoke", "invoke prompt", "invoke resume")
MIB = 1024 * 1024


@dataclass
class Stats:
    """Latencies (seconds) per request kind, errors, and whether we are past warm-up."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    errors: list[str] = field(default_factory=list)
    recording: bool = False

    def record(self, kind: str, seconds: float) -> None:
        if self.recording:
            self.latencies[kind].append(seconds)

    def error(self, what: str) -> None:
        if self.recording:
            self.errors.append(what)


async def _timed(stats: Stats, kind: str, call: Any) -> Any:
    begin = time.perf_counter()
    result = await call
    stats.record(kind, time.perf_counter() - begin)
    if isinstance(result, types.CallToolResult) and result.is_error:
        code = (result.structured_content or {}).get("error", {}).get("code", "?")
        stats.error(f"{kind}: {code}")
    return result


async def _one_client(ports: Sequence[int], index: int, stats: Stats, stop: float) -> None:
    rng = random.Random(index)
    transport = RoundRobinTransport(ports, start=index)

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": 1})

    async with client(transport, MODERN, elicitation=answer) as session:
        call = session.session.call_tool
        while time.monotonic() < stop:
            roll = rng.random()
            try:
                if roll < 0.5:
                    query = rng.choice(["filler", "item", "order", ""])
                    page = await _timed(stats, "search", call("search", {"query": query}))
                    for _ in range(rng.randint(0, 2)):
                        cursor = (page.structured_content or {}).get("next_cursor")
                        if not cursor:
                            break
                        arguments = {"query": query, "cursor": cursor}
                        page = await _timed(stats, "search", call("search", arguments))
                elif roll < 0.8:
                    arguments = {"name": "util.echo", "arguments": {"text": f"c{index}"}}
                    await _timed(stats, "invoke", call("invoke", arguments))
                else:
                    arguments = {"name": "orders.chain", "arguments": {"n": rng.randrange(10**9)}}
                    outcome = await _timed(
                        stats, "invoke prompt", call("invoke", arguments, allow_input_required=True)
                    )
                    while isinstance(outcome, types.InputRequiredResult):
                        responses = {
                            "opgate": types.ElicitResult(action="accept", content={"value": 1})
                        }
                        outcome = await _timed(
                            stats,
                            "invoke resume",
                            call(
                                "invoke",
                                arguments,
                                request_state=outcome.request_state,
                                input_responses=responses,
                                allow_input_required=True,
                            ),
                        )
                    if not (isinstance(outcome, types.CallToolResult) and not outcome.is_error):
                        stats.error("form chain did not finish")
            except Exception as exc:  # every failure is counted, the run goes on
                stats.error(f"{type(exc).__name__}")


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


@dataclass
class RunResult:
    replicas: int
    clients: int
    seconds: float
    stats: Stats
    rss_start: list[int]
    rss_end: list[int]
    redis_start: int = 0
    redis_end: int = 0
    load_start: float = 0.0
    load_end: float = 0.0

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.stats.latencies.values())


def _redis_memory(url: str) -> int:
    """Redis's ``used_memory`` in bytes."""
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


async def _drive(
    replicas: ReplicaSet, clients: int, warmup: float, duration: float, redis_url: str
) -> RunResult:
    stats = Stats()
    stop = time.monotonic() + warmup + duration

    async def mark() -> tuple[list[int], int, float, float]:
        await asyncio.sleep(warmup)
        stats.recording = True
        load = os.getloadavg()[0]
        return replicas.rss(), _redis_memory(redis_url), load, time.monotonic()

    marker = asyncio.create_task(mark())
    await asyncio.gather(*(_one_client(replicas.ports, i, stats, stop) for i in range(clients)))
    rss_start, redis_start, load_start, started = await marker
    return RunResult(
        len(replicas.ports), clients, time.monotonic() - started, stats, rss_start,
        replicas.rss(), redis_start, _redis_memory(redis_url), load_start, os.getloadavg()[0],
    )  # fmt: skip


def run(
    counts: Sequence[int],
    *,
    clients: int,
    duration: float,
    warmup: float,
    lifetime: float = 60.0,
    redis_url: str | None = None,
) -> list[RunResult]:
    """Run the load once per replica count; returns the measurements."""
    sys.path.insert(0, str(ROOT / "tests"))
    from redis_server import RedisServer

    results: list[RunResult] = []
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        server = None
        if redis_url is None:
            server = RedisServer(directory)
            server.start()
            redis_url = server.url
        try:
            for count in counts:
                prefix = f"load{count}-{time.time_ns()}"
                with ReplicaSet(
                    count,
                    ledger_url=redis_url,
                    prefix=prefix,
                    log_dir=directory,
                    environment={"OPGATE_REPLICA_LIFETIME": str(lifetime)},
                ) as replicas:
                    results.append(
                        asyncio.run(_drive(replicas, clients, warmup, duration, redis_url))
                    )
        finally:
            if server is not None:
                server.stop()
    return results


def tables(results: Sequence[RunResult]) -> list[Table]:
    throughput = Table(
        "Load: official 2026-07-28 clients, requests round-robin over replicas, one Redis ledger",
        (
            "replicas",
            "clients",
            "seconds",
            "requests",
            "requests/s",
            "errors",
            "RSS start MiB",
            "RSS end MiB",
            "Redis MiB start/end",
            "load avg start/end",
        ),
    )
    latency = Table(
        "Latency per request kind (ms)",
        ("replicas", "kind", "requests", "p50 ms", "p99 ms"),
    )
    for result in results:
        throughput.add(
            replicas=result.replicas,
            clients=result.clients,
            seconds=round(result.seconds, 1),
            requests=result.requests,
            **{"requests/s": result.requests / result.seconds if result.seconds else 0.0},
            errors=len(result.stats.errors),
            **{
                "RSS start MiB": " / ".join(f"{r / MIB:.0f}" for r in result.rss_start),
                "RSS end MiB": " / ".join(f"{r / MIB:.0f}" for r in result.rss_end),
                "Redis MiB start/end": f"{result.redis_start / MIB:.1f} / "
                f"{result.redis_end / MIB:.1f}",
                "load avg start/end": f"{result.load_start:.1f} / {result.load_end:.1f}",
            },
        )
        for kind in KINDS:
            values = result.stats.latencies[kind]
            latency.add(
                replicas=result.replicas,
                kind=kind,
                requests=len(values),
                **{
                    "p50 ms": _percentile(values, 0.5) * 1000,
                    "p99 ms": _percentile(values, 0.99) * 1000,
                },
            )
    errors = sorted({e for r in results for e in r.stats.errors})
    if errors:
        throughput.notes.append("errors seen: " + ", ".join(errors[:10]))
    throughput.notes.append(
        "RSS per replica and Redis used_memory after warm-up and at the end; 1-minute load "
        "average of the machine then; the load driver (all clients) is one extra Python "
        "process on the same machine."
    )
    return [throughput, latency]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument(
        "--lifetime", type=float, default=60.0, help="the prompts' input lifetime, seconds"
    )
    parser.add_argument("--redis", help="use this redis:// URL instead of starting redis-server")
    arguments = parser.parse_args(argv)
    print(machine_info())
    results = run(
        arguments.replicas,
        clients=arguments.clients,
        duration=arguments.duration,
        warmup=arguments.warmup,
        lifetime=arguments.lifetime,
        redis_url=arguments.redis,
    )
    for table in tables(results):
        print()
        print(format_table(table))
    return 1 if any(r.stats.errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
