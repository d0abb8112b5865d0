"""What the shared Redis ledger adds per transition, against the in-memory ledger.

``python benchmarks/bench_ledger_redis.py [--runs 2000] [--redis URL]``

Two registries over the same catalog in one process: one with the in-memory ledger,
one with ``RedisLedger`` on a ``redis-server`` on a free loopback port (or
``--redis``). Each measures, interleaved, the two transitions of a one-prompt form
chain: the *prompt* (an initial call with form support that commits a prompt:
``begin`` + ``commit``, two script runs) and the *resume* (the answer that finishes:
``claim`` + ``settle``, two script runs; ``find`` needs no round trip on the replica
that issued the prompt). Added = median(Redis) - median(memory) per transition;
target <= 1 ms on loopback. Beside it, the client CPU time added per transition (the
steadier figure on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis import asyncio as redis_asyncio

from common import AllowAll, Table, format_table, machine_info, time_async_interleaved
from opgate import (
    Completed,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate.redis import RedisLedger

ROOT = Path(__file__).resolve().parents[1]

#: The added median per transition the shared ledger should stay under, in ms.
TARGET_MS = 1.0

#: Room for every prompt the run leaves pending (one principal).
LEDGER_BYTES = 512 * 1024 * 1024

SECRET = b"bench_ledger_redis: a shared secret of 32+ bytes"
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SUPPORT = {InputMode.FORM}
YES = InputResponse.accept({"ok": True})


async def confirm(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(FormInput("Confirm?", FORM, state={"job": 1}))
    return finish(Result([Text("done")]))


async def measure(redis_url: str, runs: int) -> dict[str, Any]:
    operations = [Operation("orders.confirm", "Confirm an order", confirm)]
    limits = Limits(ledger_bytes=LEDGER_BYTES, principal_bytes=LEDGER_BYTES)
    memory = Registry(operations, AllowAll(), limits=limits)
    shared = Registry(
        operations,
        AllowAll(),
        limits=limits,
        secret=SECRET,
        ledger=RedisLedger(redis_url, prefix="bench"),
    )
    counter = iter(range(10**9))

    def prompt(registry: Registry) -> Any:
        async def call() -> None:
            outcome = await registry.invoke(
                None, "orders.confirm", {"n": next(counter)}, input_support=SUPPORT
            )
            assert isinstance(outcome, Pending), outcome

        return call

    # resumes need pending prompts with their arguments: make them first
    pending: dict[str, list[tuple[int, str]]] = {"memory": [], "redis": []}
    for label, registry in (("memory", memory), ("redis", shared)):
        for n in range(runs + runs // 10 + 10):
            outcome = await registry.invoke(
                None, "orders.confirm", {"n": -n - 1}, input_support=SUPPORT
            )
            assert isinstance(outcome, Pending)
            pending[label].append((-n - 1, outcome.continuation))

    def resume(registry: Registry, label: str) -> Any:
        async def call() -> None:
            n, token = pending[label].pop()
            outcome = await registry.invoke(
                None, "orders.confirm", {"n": n}, input_support=SUPPORT, resume=(token, YES)
            )
            assert isinstance(outcome, Completed), outcome

        return call

    probe = redis_asyncio.Redis.from_url(redis_url)

    async def ping() -> None:
        await probe.ping()

    # CPU time of this process per call (the client side), beside the wall clock: on
    # a shared machine it is the steadier figure.
    cpu: dict[str, list[int]] = {}

    def on_cpu(label: str, fn: Any) -> Any:
        samples = cpu.setdefault(label, [])

        async def call() -> None:
            begin = time.process_time_ns()
            await fn()
            samples.append(time.process_time_ns() - begin)

        return call

    try:
        await probe.config_resetstat()
        timings: dict[str, Any] = await time_async_interleaved(
            {
                "prompt memory": on_cpu("prompt memory", prompt(memory)),
                "prompt redis": on_cpu("prompt redis", prompt(shared)),
                "resume memory": on_cpu("resume memory", resume(memory, "memory")),
                "resume redis": on_cpu("resume redis", resume(shared, "redis")),
                "ping": ping,
            },
            runs=runs,
        )
        stats = (await probe.info("commandstats")).get("cmdstat_evalsha", {})
        timings["server µs per script"] = float(stats.get("usec_per_call", 0.0))
        timings["scripts"] = int(stats.get("calls", 0))
        for label, samples in cpu.items():
            timings[f"cpu {label}"] = statistics.mean(samples) / 1000
    finally:
        await shared.aclose()
        await probe.aclose()
    return timings


def run(runs: int, redis_url: str | None = None) -> Table:
    sys.path.insert(0, str(ROOT / "tests"))
    from redis_server import RedisServer

    with tempfile.TemporaryDirectory() as temporary:
        server = None
        if redis_url is None:
            server = RedisServer(Path(temporary))
            server.start()
            redis_url = server.url
        try:
            timings = asyncio.run(measure(redis_url, runs))
        finally:
            if server is not None:
                server.stop()
    table = Table(
        "Shared Redis ledger: added latency per transition (loopback)",
        (
            "transition",
            "scripts",
            "memory µs",
            "redis µs",
            "added ms",
            "target ms",
            "ok",
            "client CPU added µs",
        ),
    )
    for transition, scripts in (("prompt", 2), ("resume", 2)):
        memory, redis = timings[f"{transition} memory"], timings[f"{transition} redis"]
        added = (redis.median_ns - memory.median_ns) / 1e6
        cpu_added = timings[f"cpu {transition} redis"] - timings[f"cpu {transition} memory"]
        table.add(
            transition=transition,
            scripts=scripts,
            **{
                "memory µs": memory.median_us,
                "redis µs": redis.median_us,
                "added ms": added,
                "target ms": TARGET_MS,
                "ok": added <= TARGET_MS,
                "client CPU added µs": cpu_added,
            },
        )
    table.notes.append(
        "medians of interleaved runs; prompt = begin + commit (2 scripts), resume on the "
        "replica that issued the prompt = claim + settle (2 scripts: the record is known, "
        "find makes no round trip; on another replica find adds one)"
    )
    table.notes.append(
        "client CPU added = mean CPU time of this process per transition, Redis minus memory "
        "(the steadier figure on a shared machine)"
    )
    table.notes.append(
        f"in the same run: PING round trip {timings['ping'].median_us:.0f} µs (median); "
        f"Redis server time {timings['server µs per script']:.0f} µs per script (mean of "
        f"{timings['scripts']:,} scripts, INFO commandstats): what a transition adds is its "
        "scripts' round trips"
    )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--redis", help="use this redis:// URL instead of starting redis-server")
    arguments = parser.parse_args(argv)
    print(machine_info())
    print()
    print(format_table(run(arguments.runs, arguments.redis)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
