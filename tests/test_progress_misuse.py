"""Progress hardening (issue 9, item 14): clocks and misuse never change an outcome.

Throttling runs on a monotonic clock, so a wall-clock step back cannot suppress
progress; a stepped-back injected clock allows a delivery too. Calling the sync
progress method from an async handler, forgetting to await the async one, awaiting it
twice or reporting from a foreign thread is a diagnostic, never a changed outcome.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import anyio
import pytest

from opgate import Completed, Invocation, Operation, ProgressUpdate, Registry, Result, Text, finish
from opgate._progress import Diagnostics, ProgressChannel

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def registry(handler: Any, **kwargs: Any) -> Registry:
    return Registry([Operation("work", "does work", handler)], AllowAll(), **kwargs)


async def test_a_wall_clock_step_back_does_not_suppress_progress() -> None:
    wall = Clock()
    steady = Clock(50.0)
    delivered: list[Any] = []

    async def work(inv: Invocation) -> Any:
        await inv.report_progress(1)
        wall.now -= 3600  # NTP steps the wall clock back an hour
        steady.now += 0.1  # while 100 ms pass
        await inv.report_progress(2)
        return finish(Result([Text("done")]))

    reg = registry(work, clock=wall, monotonic=steady)
    sink = lambda u: delivered.append(u.completed)  # noqa: E731
    outcome = await reg.invoke(Ctx(), "work", "{}", progress=sink)
    assert isinstance(outcome, Completed)
    assert delivered == [1, 2]


async def test_progress_is_paced_by_the_monotonic_clock_by_default() -> None:
    wall = Clock()
    delivered: list[Any] = []

    async def work(inv: Invocation) -> Any:
        await inv.report_progress(1)
        wall.now -= 3600
        await anyio.sleep(0.12)  # more than the 100 ms interval on any monotonic clock
        await inv.report_progress(2)
        return finish(Result([Text("done")]))

    outcome = await registry(work, clock=wall).invoke(
        Ctx(), "work", "{}", progress=lambda u: delivered.append(u.completed)
    )
    assert isinstance(outcome, Completed)
    assert delivered == [1, 2]


async def test_a_channel_clock_stepping_back_allows_a_delivery() -> None:
    clock = Clock(100.0)
    delivered: list[Any] = []
    channel = ProgressChannel(lambda u: delivered.append(u.completed), Diagnostics(), clock=clock)
    await channel.report(1)
    clock.now -= 3600
    await channel.report(2)
    clock.now += 0.05  # inside the interval after the step: suppressed
    await channel.report(3)
    assert delivered == [1, 2]


async def test_sync_report_from_an_async_handler_is_a_diagnostic() -> None:
    delivered: list[ProgressUpdate] = []

    async def work(inv: Invocation) -> Any:
        inv.report_progress_sync(1, 2)
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(Ctx(), "work", "{}", progress=delivered.append)
    assert isinstance(outcome, Completed), outcome
    assert delivered == []
    assert any("report_progress_sync" in entry for entry in outcome.diagnostics)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_an_unawaited_report_is_a_diagnostic(kind: str) -> None:
    delivered: list[ProgressUpdate] = []

    async def async_work(inv: Invocation) -> Any:
        inv.report_progress(1, 2)  # forgot the await
        inv.report_progress(2, 2)
        return finish(Result([Text("done")]))

    def sync_work(inv: Invocation) -> Any:
        inv.report_progress(1, 2)  # the async method from a sync handler
        return finish(Result([Text("done")]))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" either
        outcome = await registry(async_work if kind == "async" else sync_work).invoke(
            Ctx(), "work", "{}", progress=delivered.append
        )
    assert isinstance(outcome, Completed), outcome
    assert delivered == []
    missing = 2 if kind == "async" else 1
    assert any(f"{missing} report_progress" in entry for entry in outcome.diagnostics)


async def test_awaiting_a_report_twice_is_a_diagnostic() -> None:
    delivered: list[Any] = []

    async def work(inv: Invocation) -> Any:
        report = inv.report_progress(1)
        await report
        await report
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(
        Ctx(), "work", "{}", progress=lambda u: delivered.append(u.completed)
    )
    assert isinstance(outcome, Completed), outcome
    assert delivered == [1]
    assert any("awaited twice" in entry for entry in outcome.diagnostics)


async def test_reports_from_a_foreign_thread_are_diagnostics() -> None:
    delivered: list[Any] = []

    async def work(inv: Invocation) -> Any:
        def foreign() -> None:
            inv.report_progress_sync(1)  # a thread anyio did not start

        thread = threading.Thread(target=foreign)
        thread.start()
        await anyio.to_thread.run_sync(thread.join)
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(
        Ctx(), "work", "{}", progress=lambda u: delivered.append(u.completed)
    )
    assert isinstance(outcome, Completed), outcome
    assert delivered == []
    assert any("worker thread" in entry for entry in outcome.diagnostics)


async def test_a_sync_handler_still_reports_from_its_worker_thread() -> None:
    delivered: list[Any] = []

    def work(inv: Invocation) -> Any:
        inv.report_progress_sync(1)
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(
        Ctx(), "work", "{}", progress=lambda u: delivered.append(u.completed)
    )
    assert isinstance(outcome, Completed)
    assert delivered == [1]
    assert outcome.diagnostics == ()


async def test_a_report_awaited_on_another_event_loop_is_a_diagnostic() -> None:
    import asyncio

    delivered: list[Any] = []

    async def work(inv: Invocation) -> Any:
        async def elsewhere() -> None:
            await inv.report_progress(1)

        await anyio.to_thread.run_sync(asyncio.run, elsewhere())
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(
        Ctx(), "work", "{}", progress=lambda u: delivered.append(u.completed)
    )
    assert isinstance(outcome, Completed), outcome
    assert delivered == []
    assert any("outside the invocation's event loop" in entry for entry in outcome.diagnostics)
