"""Tests of ``opgate._progress`` through ``Registry.invoke``: sinks, throttling, diagnostics,
closing (spec 000).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anyio
import pytest

from opgate import (
    Completed,
    Invocation,
    Operation,
    ProgressUpdate,
    Registry,
    Result,
    Text,
    finish,
)

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def registry(handler: Any, clock: Clock | None = None) -> Registry:
    """``clock`` paces progress: it is the registry's monotonic clock."""
    return Registry([Operation("work", "does work", handler)], AllowAll(), monotonic=clock)


async def test_updates_are_throttled_and_validated_without_changing_outcome() -> None:
    clock = Clock()
    delivered: list[ProgressUpdate] = []

    async def work(inv: Invocation) -> Any:
        await inv.report_progress(1, 10, "start")  # delivered: the first valid update
        await inv.report_progress(2, 10)  # inside 100 ms: suppressed
        clock.now += 0.1
        await inv.report_progress(1, 10)  # decreasing below the suppressed 2: invalid
        await inv.report_progress(3, 2)  # total below completed: invalid
        await inv.report_progress(float("nan"))  # not finite: invalid
        await inv.report_progress(-1)  # negative: invalid
        await inv.report_progress(4, message="x" * 1025)  # message over 1 KiB: invalid
        await inv.report_progress(Decimal("4.5"), 10, "é" * 512)  # 1024 bytes: delivered
        return finish(Result([Text("done")]))

    outcome = await registry(work, clock).invoke(Ctx(), "work", "{}", progress=delivered.append)
    assert isinstance(outcome, Completed)
    assert [(u.completed, u.total) for u in delivered] == [(1, 10), (Decimal("4.5"), 10)]
    assert len(outcome.diagnostics) == 5
    assert all(len(entry) <= 200 for entry in outcome.diagnostics)


async def test_sink_errors_are_recorded_and_never_change_the_outcome() -> None:
    def broken_sink(update: ProgressUpdate) -> None:
        raise RuntimeError("sink secret")

    async def work(inv: Invocation) -> Any:
        await inv.report_progress(1)
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(Ctx(), "work", "{}", progress=broken_sink)
    assert isinstance(outcome, Completed)
    assert len(outcome.diagnostics) == 1
    assert "RuntimeError" in outcome.diagnostics[0]


async def test_completion_waits_for_running_delivery_and_nothing_after_close() -> None:
    finished_delivery = anyio.Event()
    delivered: list[Any] = []
    leaked: list[Invocation] = []

    async def slow_sink(update: ProgressUpdate) -> None:
        await anyio.sleep(0.05)
        delivered.append(update.completed)
        finished_delivery.set()

    async def work(inv: Invocation) -> Any:
        leaked.append(inv)

        async def report() -> None:
            await inv.report_progress(1)

        # The delivery runs in a task the handler does not wait for.
        task_group_holder.start_soon(report)
        await anyio.sleep(0.01)
        return finish(Result([Text("done")]))

    async with anyio.create_task_group() as task_group_holder:
        outcome = await registry(work).invoke(Ctx(), "work", "{}", progress=slow_sink)
        assert finished_delivery.is_set()  # invoke waited for the running delivery
    assert isinstance(outcome, Completed)
    await leaked[0].report_progress(5)  # after the invocation closed progress
    assert delivered == [1]


async def test_sync_handler_reports_from_worker_thread() -> None:
    delivered: list[ProgressUpdate] = []

    def work(inv: Invocation) -> Any:
        inv.report_progress_sync(3, 4, "from a thread")
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(Ctx(), "work", "{}", progress=delivered.append)
    assert isinstance(outcome, Completed)
    assert [(u.completed, u.total, u.message) for u in delivered] == [(3, 4, "from a thread")]


async def test_reentrant_update_from_sink_is_suppressed() -> None:
    delivered: list[Any] = []
    holder: list[Invocation] = []

    async def sink(update: ProgressUpdate) -> None:
        delivered.append(update.completed)
        await holder[0].report_progress(update.completed + 1)

    async def work(inv: Invocation) -> Any:
        holder.append(inv)
        await inv.report_progress(1)
        return finish(Result([Text("done")]))

    outcome = await registry(work).invoke(Ctx(), "work", "{}", progress=sink)
    assert isinstance(outcome, Completed)
    assert delivered == [1]
