"""Progress updates, throttled delivery and the diagnostics slot (spec 000, "Progress")."""

from __future__ import annotations

import sys
import threading
from decimal import Decimal
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._failures import ConfigurationError
from opgate._progress import (
    MAX_DIAGNOSTIC_CHARS,
    MAX_DIAGNOSTICS,
    MAX_MESSAGE_BYTES,
    PROGRESS_INTERVAL,
    Diagnostics,
    ProgressChannel,
    ProgressUpdate,
)

pytestmark = pytest.mark.anyio


class Clock:
    """An injected monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = PROGRESS_INTERVAL) -> None:
        self.now += seconds


class Recorder:
    """A sync sink that keeps what it receives."""

    def __init__(self) -> None:
        self.updates: list[ProgressUpdate] = []

    def __call__(self, update: ProgressUpdate) -> None:
        self.updates.append(update)

    @property
    def completed(self) -> list[int | Decimal]:
        return [update.completed for update in self.updates]


def channel_with(sink: Any) -> tuple[ProgressChannel, Diagnostics, Clock]:
    diagnostics = Diagnostics()
    clock = Clock()
    return ProgressChannel(sink, diagnostics, clock=clock), diagnostics, clock


# --- ProgressUpdate -------------------------------------------------------------------


def test_update_keeps_exact_numbers() -> None:
    update = ProgressUpdate(3, Decimal("10.50"), "working")
    assert (update.completed, update.total, update.message) == (3, Decimal("10.50"), "working")
    assert ProgressUpdate(0.1).completed == Decimal("0.1")
    assert ProgressUpdate(1e308).completed == Decimal("1E+308")
    assert ProgressUpdate(5) == ProgressUpdate(5, None, "")


def test_update_copies_numbers_into_plain_values() -> None:
    class Counter(int):
        mutable: list[int]

    class Exact(Decimal):
        pass

    completed = Counter(2)
    completed.mutable = [1]
    total = Counter(9)
    update = ProgressUpdate(completed, total)
    assert type(update.completed) is int
    assert type(update.total) is int
    assert update.total is not total
    assert (update.completed, update.total) == (2, 9)
    exact = ProgressUpdate(Exact("1.5"), Exact("2"))
    assert type(exact.completed) is Decimal
    assert type(exact.total) is Decimal


def test_negative_zero_becomes_zero() -> None:
    for zero in (-0.0, Decimal("-0"), Decimal("-0E+5")):
        update = ProgressUpdate(zero)
        assert update.completed == 0
        assert not update.completed.is_signed()  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [True, False, "1", [1], 1j])
def test_update_numbers_must_be_numbers(value: object) -> None:
    with pytest.raises(TypeError, match="progress completed must be an int, float or Decimal"):
        ProgressUpdate(value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress total must be an int, float or Decimal"):
        ProgressUpdate(0, value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress completed must be"):
        ProgressUpdate(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), Decimal("NaN"), Decimal("sNaN"), Decimal("-Infinity")],
)
def test_update_numbers_must_be_finite(value: object) -> None:
    with pytest.raises(ConfigurationError, match="must be finite"):
        ProgressUpdate(value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must be finite"):
        ProgressUpdate(0, value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, -0.5, Decimal("-1E-9")])
def test_update_numbers_must_not_be_negative(value: object) -> None:
    with pytest.raises(ConfigurationError, match="must not be negative"):
        ProgressUpdate(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [int(sys.float_info.max) + 1, 10**400, Decimal("1e309")])
def test_update_numbers_must_fit_a_finite_double(value: object) -> None:
    with pytest.raises(ConfigurationError, match="largest finite double"):
        ProgressUpdate(value)  # type: ignore[arg-type]
    assert ProgressUpdate(int(sys.float_info.max)).completed == int(sys.float_info.max)
    assert ProgressUpdate(Decimal(sys.float_info.max)).completed == Decimal(sys.float_info.max)


def test_update_decimals_must_fit_the_numeric_work_profile() -> None:
    with pytest.raises(ConfigurationError, match="numeric work profile"):
        ProgressUpdate(Decimal("1e-5000"))
    with pytest.raises(ConfigurationError, match="numeric work profile"):
        ProgressUpdate(Decimal("0." + "1" * 5000))


def test_total_must_be_at_least_completed() -> None:
    with pytest.raises(ConfigurationError, match="total must be at least completed"):
        ProgressUpdate(5, 4)
    with pytest.raises(ConfigurationError, match="total must be at least completed"):
        ProgressUpdate(Decimal("0.3"), 0.2)
    assert ProgressUpdate(5, 5).total == 5
    assert ProgressUpdate(Decimal("5.0"), 5).total == 5


def test_message_may_be_one_kib_of_utf8() -> None:
    assert len(ProgressUpdate(0, message="a" * MAX_MESSAGE_BYTES).message) == 1024
    multibyte = "é" * 512  # 1,024 UTF-8 bytes in 512 characters
    assert ProgressUpdate(0, message=multibyte).message == multibyte
    assert ProgressUpdate(0, message="🌍" * 256).message == "🌍" * 256


@pytest.mark.parametrize("message", ["a" * 1025, "é" * 512 + "a", "🌍" * 256 + "x"])
def test_message_over_one_kib_is_rejected_without_echo(message: str) -> None:
    with pytest.raises(ConfigurationError, match="1025 UTF-8 bytes; at most 1024") as caught:
        ProgressUpdate(0, message=message)
    assert message[:10] not in str(caught.value)


def test_message_must_be_valid_unicode_text() -> None:
    with pytest.raises(ConfigurationError, match="lone surrogate at index 3"):
        ProgressUpdate(0, message="abc\udc80")
    with pytest.raises(TypeError, match="progress message must be a str, not bytes"):
        ProgressUpdate(0, message=b"abc")  # type: ignore[arg-type]

    class Label(str):
        pass

    assert type(ProgressUpdate(0, message=Label("x")).message) is str


finite = st.integers(0, 10**20) | st.decimals(0, 10**20, places=6) | st.floats(0, 1e20)


def exact(value: int | float | Decimal) -> int | Decimal:
    return Decimal(repr(value)) if isinstance(value, float) else value


@given(finite, finite)
def test_valid_numbers_are_kept_exactly(completed: Any, total: Any) -> None:
    if exact(total) < exact(completed):
        completed, total = total, completed
    update = ProgressUpdate(completed, total)
    assert (update.completed, update.total) == (exact(completed), exact(total))
    assert type(update.completed) in (int, Decimal)
    assert type(update.total) in (int, Decimal)


# --- Diagnostics ----------------------------------------------------------------------


def test_diagnostics_are_bounded_and_count_what_they_drop() -> None:
    diagnostics = Diagnostics()
    for index in range(MAX_DIAGNOSTICS + 9):
        diagnostics.record(f"entry {index}")
    assert diagnostics.entries == tuple(f"entry {index}" for index in range(MAX_DIAGNOSTICS))
    assert diagnostics.dropped == 9
    assert repr(diagnostics) == "Diagnostics(entries=16, dropped=9)"


def test_diagnostic_entries_are_short_single_lines() -> None:
    diagnostics = Diagnostics()
    diagnostics.record("x" * 1000)
    diagnostics.record("line one\nline two\x00\ud800")
    long, multi = diagnostics.entries
    assert len(long) == MAX_DIAGNOSTIC_CHARS
    assert long.endswith("…")
    assert multi == "line one line two  "
    assert "\n" not in multi


def test_diagnostics_accept_records_from_many_threads() -> None:
    diagnostics = Diagnostics()

    def record_many() -> None:
        for _ in range(50):
            diagnostics.record("x")

    threads = [threading.Thread(target=record_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(diagnostics.entries) + diagnostics.dropped == 400


# --- construction ---------------------------------------------------------------------


def test_channel_checks_its_configuration() -> None:
    diagnostics = Diagnostics()
    with pytest.raises(TypeError, match="progress sink must be callable"):
        ProgressChannel("sink", diagnostics)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="diagnostics must be a Diagnostics"):
        ProgressChannel(None, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock must be callable"):
        ProgressChannel(None, diagnostics, clock=1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="interval must be a number"):
        ProgressChannel(None, diagnostics, interval=True)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="interval must be finite"):
            ProgressChannel(None, diagnostics, interval=bad)


# --- delivery and throttling ----------------------------------------------------------


async def test_first_valid_update_is_delivered_at_once() -> None:
    sink = Recorder()
    channel, diagnostics, _ = channel_with(sink)
    await channel.report(1, 10, "started")
    assert sink.updates == [ProgressUpdate(1, 10, "started")]
    assert diagnostics.entries == ()


async def test_updates_inside_the_interval_are_suppressed() -> None:
    sink = Recorder()
    channel, _, clock = channel_with(sink)
    await channel.report(1)  # at 0 ms
    clock.now = 0.05
    await channel.report(2)
    clock.now = 0.099
    await channel.report(3)
    clock.now = 0.1
    await channel.report(4)  # 100 ms after the first delivery started: delivered
    clock.now = 0.199
    await channel.report(5)
    clock.now = 0.2
    await channel.report(6)
    clock.now = 0.25
    await channel.report(7)
    assert sink.completed == [1, 4, 6]


async def test_no_timer_delivers_a_suppressed_update_later() -> None:
    sink = Recorder()
    channel, _, clock = channel_with(sink)
    await channel.report(1)
    await channel.report(2, message="last")  # suppressed; nothing will send it later
    clock.advance(10)
    await anyio.sleep(0.01)
    await channel.close()
    assert sink.completed == [1]


async def test_decreasing_completed_is_invalid_even_after_a_suppressed_update() -> None:
    sink = Recorder()
    channel, diagnostics, clock = channel_with(sink)
    await channel.report(1)
    clock.advance(0.01)
    await channel.report(5)  # valid, suppressed: still raises the floor
    clock.advance(1)
    await channel.report(3)  # below 5: invalid, not delivered
    assert sink.completed == [1]
    assert diagnostics.entries == (
        "progress: invalid update ignored: completed decreased below an earlier update",
    )
    await channel.report(5)  # equal is nondecreasing
    assert sink.completed == [1, 5]


async def test_invalid_updates_do_not_raise_the_floor() -> None:
    sink = Recorder()
    channel, diagnostics, _ = channel_with(sink)
    await channel.report(10, 5)  # total below completed: invalid
    await channel.report(7)
    assert sink.completed == [7]
    assert len(diagnostics.entries) == 1


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((float("nan"),), "must be finite"),
        ((float("inf"),), "must be finite"),
        ((1, float("inf")), "must be finite"),
        ((-1,), "must not be negative"),
        ((5, 4), "total must be at least completed"),
        ((True,), "must be an int, float or Decimal"),
        ((1, None, "x" * 1025), "1025 UTF-8 bytes"),
        ((1, None, "\ud800"), "lone surrogate"),
        ((1, None, None), "message must be a str"),
    ],
)
async def test_invalid_updates_are_recorded_not_raised(args: tuple[Any, ...], reason: str) -> None:
    sink = Recorder()
    channel, diagnostics, _ = channel_with(sink)
    assert await channel.report(*args) is None
    assert sink.updates == []
    (entry,) = diagnostics.entries
    assert entry.startswith("progress: invalid update ignored: ")
    assert reason in entry


async def test_messages_of_one_kib_are_delivered() -> None:
    sink = Recorder()
    channel, diagnostics, _ = channel_with(sink)
    await channel.report(1, message="é" * 512)
    assert sink.updates[0].message == "é" * 512
    assert diagnostics.entries == ()


async def test_the_sink_receives_a_copied_total() -> None:
    class Total(int):
        pass

    sink = Recorder()
    channel, _, _ = channel_with(sink)
    total = Total(10)
    await channel.report(Total(1), total)
    (update,) = sink.updates
    assert type(update.total) is int
    assert type(update.completed) is int
    assert update.total is not total


async def test_async_sinks_are_awaited() -> None:
    received: list[ProgressUpdate] = []

    async def sink(update: ProgressUpdate) -> None:
        await anyio.lowlevel.checkpoint()
        received.append(update)

    channel, _, _ = channel_with(sink)
    await channel.report(1)
    assert [update.completed for update in received] == [1]


async def test_without_a_sink_updates_are_still_validated() -> None:
    channel, diagnostics, _ = channel_with(None)
    await channel.report(2)
    await channel.report(1)
    assert len(diagnostics.entries) == 1


async def test_reentrant_updates_from_inside_the_sink_are_suppressed() -> None:
    received: list[int | Decimal] = []
    clock = Clock()
    diagnostics = Diagnostics()

    async def sink(update: ProgressUpdate) -> None:
        received.append(update.completed)
        clock.advance(1)  # the interval is no reason to suppress these
        await channel.report(update.completed + 1)

    channel = ProgressChannel(sink, diagnostics, clock=clock)
    await channel.report(1)
    assert received == [1]
    clock.advance(1)
    await channel.report(2)  # the reentrant 2 raised the floor; 2 is still allowed
    assert received == [1, 2]
    assert diagnostics.entries == ()


async def test_concurrent_updates_during_a_slow_async_sink_are_suppressed() -> None:
    received: list[int | Decimal] = []
    release = anyio.Event()
    started = anyio.Event()

    async def slow_sink(update: ProgressUpdate) -> None:
        received.append(update.completed)
        started.set()
        await release.wait()

    channel, diagnostics, clock = channel_with(slow_sink)
    async with anyio.create_task_group() as group:
        group.start_soon(channel.report, 1)
        await started.wait()
        clock.advance(5)
        with anyio.fail_after(1):  # a suppressed update never waits for the delivery
            await channel.report(2)
            await channel.report(3)
        release.set()
    assert received == [1]
    clock.advance(5)
    await channel.report(3)
    assert received == [1, 3]
    assert diagnostics.entries == ()


async def test_close_waits_for_the_running_delivery_then_delivers_nothing() -> None:
    events: list[str] = []
    release = anyio.Event()
    started = anyio.Event()

    async def slow_sink(update: ProgressUpdate) -> None:
        events.append(f"start {update.completed}")
        started.set()
        await release.wait()
        events.append(f"end {update.completed}")

    async def close() -> None:
        await channel.close()
        events.append("closed")

    channel, _, clock = channel_with(slow_sink)
    async with anyio.create_task_group() as group:
        group.start_soon(channel.report, 1)
        await started.wait()
        group.start_soon(close)
        await anyio.wait_all_tasks_blocked()
        assert events == ["start 1"]  # close is still waiting
        assert channel.closed
        clock.advance(5)
        await channel.report(2)  # closed: never delivered, even before close returns
        release.set()
    assert events == ["start 1", "end 1", "closed"]
    clock.advance(5)
    await channel.report(3)
    assert events == ["start 1", "end 1", "closed"]


async def test_close_without_a_running_delivery_returns_and_repeats() -> None:
    sink = Recorder()
    channel, diagnostics, clock = channel_with(sink)
    await channel.report(1)
    await channel.close()
    await channel.close()
    clock.advance(5)
    await channel.report(2)
    await channel.report(1)  # still validated after close
    assert sink.completed == [1]
    assert len(diagnostics.entries) == 1


async def test_sink_exceptions_are_recorded_without_their_text() -> None:
    calls = 0

    def failing_sink(update: ProgressUpdate) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("secret token abc123")

    channel, diagnostics, clock = channel_with(failing_sink)
    assert await channel.report(1) is None
    clock.advance(1)
    assert await channel.report(2) is None  # the failure did not jam the channel
    assert calls == 2
    assert diagnostics.entries == ("progress: sink raised RuntimeError",) * 2
    await channel.close()


async def test_async_sink_exceptions_are_recorded() -> None:
    async def failing_sink(update: ProgressUpdate) -> None:
        await anyio.lowlevel.checkpoint()
        raise KeyError("private")

    channel, diagnostics, _ = channel_with(failing_sink)
    await channel.report(1)
    assert diagnostics.entries == ("progress: sink raised KeyError",)


async def test_a_sink_returning_a_value_is_recorded() -> None:
    channel, diagnostics, _ = channel_with(lambda update: 42)
    await channel.report(1)
    assert diagnostics.entries == ("progress: sink returned int; sinks return None",)


async def test_a_failing_clock_is_recorded() -> None:
    def broken_clock() -> float:
        raise OSError("no clock")

    diagnostics = Diagnostics()
    sink = Recorder()
    channel = ProgressChannel(sink, diagnostics, clock=broken_clock)
    await channel.report(1)
    assert sink.updates == []
    assert diagnostics.entries == ("progress: clock raised OSError",)


async def test_diagnostics_stay_bounded_under_a_flood_of_invalid_updates() -> None:
    channel, diagnostics, _ = channel_with(Recorder())
    for _ in range(100):
        await channel.report(-1)
    assert len(diagnostics.entries) == MAX_DIAGNOSTICS
    assert diagnostics.dropped == 100 - MAX_DIAGNOSTICS
    assert all(len(entry) <= MAX_DIAGNOSTIC_CHARS for entry in diagnostics.entries)


async def test_cancellation_during_an_async_sink_propagates() -> None:
    started = anyio.Event()

    async def hanging_sink(update: ProgressUpdate) -> None:
        started.set()
        await anyio.sleep_forever()

    channel, diagnostics, _ = channel_with(hanging_sink)

    async def report(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await channel.report(1)
        pytest.fail("report returned although its task was cancelled")

    async with anyio.create_task_group() as group:
        await group.start(report)
        await started.wait()
        group.cancel_scope.cancel()
    assert diagnostics.entries == ()  # cancellation is not a sink error
    with anyio.fail_after(1):
        await channel.close()  # the cancelled delivery no longer counts as running


async def test_a_caller_cancelled_while_closing_leaves_the_channel_closed() -> None:
    release = anyio.Event()
    started = anyio.Event()

    async def slow_sink(update: ProgressUpdate) -> None:
        started.set()
        await release.wait()

    channel, _, _ = channel_with(slow_sink)
    async with anyio.create_task_group() as group:
        group.start_soon(channel.report, 1)
        await started.wait()
        with anyio.move_on_after(0.01):
            await channel.close()
        assert channel.closed
        release.set()


async def test_reports_from_worker_threads_never_overlap_the_sink() -> None:
    active = 0
    overlaps = 0
    delivered = 0

    def sink(update: ProgressUpdate) -> None:
        nonlocal active, overlaps, delivered
        active += 1
        overlaps += active > 1
        delivered += 1
        active -= 1

    diagnostics = Diagnostics()
    channel = ProgressChannel(sink, diagnostics, interval=0)

    def worker() -> None:
        for _ in range(20):
            anyio.from_thread.run(channel.report, 1, 2, "same value from every thread")

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(anyio.to_thread.run_sync, worker)
    assert overlaps == 0
    assert 1 <= delivered <= 80
    assert diagnostics.entries == ()


# --- the throttling rule as a property ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 0.02, 0.05, 0.1, 0.15, 1.0]), st.integers(-2, 3)),
        max_size=25,
    )
)
def test_throttling_matches_the_rule(steps: list[tuple[float, int]]) -> None:
    """First valid update at once; then only when ≥ 100 ms after the last delivery start."""
    expected: list[int] = []
    floor: int | None = None
    last: float | None = None
    now = 0.0
    value = 0
    for gap, change in steps:
        now += gap
        value += change
        if value < 0 or (floor is not None and value < floor):
            continue
        floor = value
        if last is None or now - last >= PROGRESS_INTERVAL:
            expected.append(value)
            last = now

    async def run() -> list[int | Decimal]:
        sink = Recorder()
        channel, _, clock = channel_with(sink)
        clock.now = 0.0
        value = 0
        for gap, change in steps:
            clock.advance(gap)
            value += change
            await channel.report(value)
        await channel.close()
        return sink.completed

    assert anyio.run(run) == expected
