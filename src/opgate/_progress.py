"""Progress: ``ProgressUpdate``, the throttled ``ProgressChannel`` and ``Diagnostics``.

The rules (spec 000, "Progress"), as this module applies them to one invocation:

* An update is ``completed``, an optional ``total`` and a ``message``. Numbers are
  exact: ``int``, ``Decimal``, or ``float`` taken at its shortest repr; ``bool`` and
  other types are rejected. They must be finite (no NaN or infinity, and no larger
  than the largest finite IEEE double, so every reader can represent them) and
  nonnegative, and a ``Decimal`` must fit the numeric work profile of ``_json``.
  ``total``, when given, must be at least ``completed``. The message must be a
  ``str`` without lone surrogates (so valid UTF-8) of at most ``MAX_MESSAGE_BYTES``
  UTF-8 bytes. Numbers are copied into plain ``int``/``Decimal`` values (a negative
  zero becomes ``Decimal(0)``) before anything is delivered, so nothing the caller
  passed in, such as a subclass instance, reaches the sink.
* ``completed`` is nondecreasing across the invocation: each valid update raises
  the floor, whether it is delivered or suppressed; a lower value is invalid.
* Delivery is synchronous in the reporting task: a sync sink is called inline, an
  async sink is awaited. The first valid update is delivered at once; after that,
  a delivery starts only when at least ``interval`` (100 ms) has passed, on the
  injected monotonic clock, since the previous delivery started (a clock reading
  earlier than that start, as a stepped-back clock gives, also allows a delivery:
  progress is never suppressed for the size of a clock step). Updates that arrive during
  a delivery (concurrent or reentrant) or inside the interval are suppressed, not
  queued: there is no timer and no guaranteed final update.
* Invalid updates, sink exceptions (``BaseException`` subclasses included) and sinks
  returning a value are recorded in the invocation's bounded ``Diagnostics`` and
  never change its outcome: ``report`` raises only when the reporting task itself is
  cancelled (a sink must honor cancellation; it is never shielded), and for
  ``KeyboardInterrupt`` and ``SystemExit``.
* Misuse is a diagnostic too: reporting from another thread or event loop than the
  invocation's (``report_progress_sync`` from an async handler; ``report`` awaited
  elsewhere), and reports that were made but never awaited (counted with
  ``made``/``awaited`` and recorded at ``close``).
* ``close`` stops new deliveries at once, then waits for one already running.

``report`` and ``close`` run on the invocation's event loop (the thread that built
the channel); a handler in a worker thread reaches ``report`` through
``anyio.from_thread``. The state is guarded by a plain lock, never held while the
sink runs.
"""

from __future__ import annotations

import inspect
import math
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, TypeAlias

import anyio

from ._execution import is_own_close, must_propagate
from ._failures import ConfigurationError
from ._json import JSONError, check_profile

__all__ = [
    "MAX_DIAGNOSTICS",
    "MAX_DIAGNOSTIC_CHARS",
    "MAX_MESSAGE_BYTES",
    "PROGRESS_INTERVAL",
    "Diagnostics",
    "ProgressChannel",
    "ProgressSink",
    "ProgressUpdate",
]

#: Spec 000: a progress message is at most 1 KiB of UTF-8.
MAX_MESSAGE_BYTES: Final = 1024

#: Spec 000: at most one delivered update per 100 ms.
PROGRESS_INTERVAL: Final = 0.1
_DEFAULT_INTERVAL = float(PROGRESS_INTERVAL)  # what __init__ stores for the default

#: Entries kept per request: enough to show a pattern, bounded so a looping handler
#: cannot grow a request's memory.
MAX_DIAGNOSTICS: Final = 16

#: Longest entry kept: one log line, never a payload.
MAX_DIAGNOSTIC_CHARS: Final = 200

# Progress numbers must survive conversion to an IEEE double on the wire.
_MAX_INT: Final = int(sys.float_info.max)
_MAX_DECIMAL: Final = Decimal(sys.float_info.max)


def _number(value: object, where: str) -> int | Decimal:
    """Validate one progress number and return a plain exact copy."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise TypeError(f"{where} must be an int, float or Decimal, not {type(value).__name__}")
    if isinstance(value, int):
        number = int(value)
        if number < 0:
            raise ConfigurationError(f"{where} must not be negative")
        if number > _MAX_INT:
            raise ConfigurationError(f"{where} is larger than the largest finite double")
        return number
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where} must be finite, not NaN or an infinity")
        exact = Decimal(repr(value))
    else:
        exact = Decimal(value)  # a plain Decimal even for a subclass instance
        if not exact.is_finite():
            raise ConfigurationError(f"{where} must be finite, not NaN or an infinity")
    if exact.is_zero():
        return Decimal(0)
    if exact < 0:
        raise ConfigurationError(f"{where} must not be negative")
    if exact > _MAX_DECIMAL:
        raise ConfigurationError(f"{where} is larger than the largest finite double")
    try:
        check_profile(exact)
    except JSONError as exc:
        raise ConfigurationError(f"{where}: {exc.reason}") from None
    return exact


def _message(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"progress message must be a str, not {type(value).__name__}")
    text = str.__str__(value)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"progress message contains a lone surrogate at index {exc.start}"
        ) from None
    if size > MAX_MESSAGE_BYTES:
        raise ConfigurationError(
            f"progress message is {size} UTF-8 bytes; at most {MAX_MESSAGE_BYTES} are allowed"
        )
    return text


@dataclass(frozen=True, slots=True)
class ProgressUpdate:
    """One advisory progress snapshot, as a sink receives it.

    ``ProgressUpdate(completed, total=None, message="")`` validates and copies its
    values by the rules in the module docstring: ``TypeError`` for a wrong type,
    ``ConfigurationError`` (a ``ValueError``) for a bad value.
    """

    completed: int | Decimal
    total: int | Decimal | None = None
    message: str = ""

    def __post_init__(self) -> None:
        completed = _number(self.completed, "progress completed")
        total = None if self.total is None else _number(self.total, "progress total")
        if total is not None and total < completed:
            raise ConfigurationError("progress total must be at least completed")
        object.__setattr__(self, "completed", completed)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "message", _message(self.message))


ProgressSink: TypeAlias = (
    Callable[[ProgressUpdate], None] | Callable[[ProgressUpdate], Awaitable[None]]
)


class Diagnostics:
    """A request's bounded private diagnostic slot (for host logs, never the model).

    Keeps the first ``MAX_DIAGNOSTICS`` entries, each cut to ``MAX_DIAGNOSTIC_CHARS``
    characters with line breaks and other control characters replaced by spaces,
    and counts the entries dropped after that. Safe to share between threads.
    """

    __slots__ = ("_dropped", "_entries", "_lock")

    def __init__(self) -> None:
        self._entries: list[str] = []
        self._dropped = 0
        self._lock = threading.Lock()

    def record(self, entry: str) -> None:
        """Keep ``entry`` (shortened) if there is room, else count it as dropped."""
        text = "".join(ch if ch.isprintable() else " " for ch in str(entry)[:MAX_DIAGNOSTIC_CHARS])
        text = text.encode("utf-8", "replace").decode("utf-8")
        if len(str(entry)) > MAX_DIAGNOSTIC_CHARS:
            text = text[: MAX_DIAGNOSTIC_CHARS - 1] + "…"
        with self._lock:
            if len(self._entries) < MAX_DIAGNOSTICS:
                self._entries.append(text)
            else:
                self._dropped += 1

    @property
    def entries(self) -> tuple[str, ...]:
        """The kept entries, oldest first."""
        with self._lock:
            return tuple(self._entries)

    @property
    def dropped(self) -> int:
        """How many entries did not fit."""
        with self._lock:
            return self._dropped

    def __repr__(self) -> str:
        return f"Diagnostics(entries={len(self.entries)}, dropped={self.dropped})"


class ProgressChannel:
    """Validates, throttles and delivers one invocation's progress updates.

    ``ProgressChannel(sink, diagnostics, *, clock=time.monotonic, interval=0.1)``:
    ``sink`` may be ``None`` (updates are still validated, so mistakes are recorded).
    ``clock`` returns seconds on a monotonic scale; ``interval`` is the shortest gap
    between the starts of two deliveries. See the module docstring for the rules.
    """

    __slots__ = (
        "_awaited",
        "_clock",
        "_closed",
        "_diagnostics",
        "_floor",
        "_interval",
        "_last_start",
        "_lock",
        "_made",
        "_running",
        "_sink",
        "_thread",
    )

    def __init__(
        self,
        sink: ProgressSink | None,
        diagnostics: Diagnostics,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        if sink is not None and not callable(sink):
            raise TypeError(f"progress sink must be callable, not {type(sink).__name__}")
        if not isinstance(diagnostics, Diagnostics):
            raise TypeError("diagnostics must be a Diagnostics")
        if not callable(clock):
            raise TypeError("clock must be callable")
        if isinstance(interval, bool) or not isinstance(interval, int | float):
            raise TypeError(f"interval must be a number of seconds, not {type(interval).__name__}")
        if not (math.isfinite(interval) and interval >= 0):
            raise ConfigurationError("interval must be finite and not negative")
        self._sink = sink
        self._diagnostics = diagnostics
        self._clock = clock
        self._interval = float(interval)
        self._lock = threading.Lock()
        self._floor: int | Decimal | None = None
        self._last_start: float | None = None
        self._running: anyio.Event | None = None
        self._closed = False
        self._thread = threading.get_ident()  # the invocation's event loop thread
        self._made = 0  # report_progress(...) awaitables handed out
        self._awaited = 0  # ... and awaited

    @property
    def diagnostics(self) -> Diagnostics:
        """The invocation's diagnostic slot."""
        return self._diagnostics

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the invocation's event loop thread."""
        return threading.get_ident() == self._thread

    def made(self) -> None:
        """Count a report awaitable handed to the handler."""
        with self._lock:
            self._made += 1

    def awaited(self) -> None:
        """Count a report awaitable that was awaited."""
        with self._lock:
            self._awaited += 1

    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
        return self._closed

    async def report(self, completed: object, total: object = None, message: object = "") -> None:
        """Validate one update, then deliver it unless it is suppressed.

        Never raises for a bad update or a failing sink (both are recorded); only
        cancellation of the calling task propagates.
        """
        if not self.on_loop_thread():
            self._diagnostics.record(
                "progress: update ignored: reported outside the invocation's event loop "
                "(a worker thread uses report_progress_sync)"
            )
            return
        try:
            update = ProgressUpdate(completed, total, message)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            self._diagnostics.record(f"progress: invalid update ignored: {exc}")
            return
        try:
            now = self._clock()
        except Exception as exc:
            self._diagnostics.record(f"progress: clock raised {type(exc).__name__}")
            return
        done: anyio.Event | None = None
        with self._lock:
            decreased = self._floor is not None and update.completed < self._floor
            if not decreased:
                self._floor = update.completed  # suppressed updates raise the floor too
                if self._may_start(now):
                    self._last_start = now
                    done = self._running = anyio.Event()
        if decreased:
            self._diagnostics.record(
                "progress: invalid update ignored: completed decreased below an earlier update"
            )
        if done is None:
            return
        try:
            await self._deliver(update)
        finally:
            with self._lock:
                self._running = None
            done.set()

    def _may_start(self, now: float) -> bool:
        """Whether a delivery may start now (called with the lock held)."""
        if self._closed or self._sink is None or self._running is not None:
            return False  # closed, nowhere to deliver, or suppressed during a delivery
        last = self._last_start
        # A reading before the last start means the clock stepped back: deliver.
        return last is None or now - last >= self._interval or now < last

    async def _deliver(self, update: ProgressUpdate) -> None:
        sink = self._sink
        assert sink is not None
        try:
            returned = sink(update)
            if inspect.isawaitable(returned):
                await returned
            elif returned is not None:
                self._diagnostics.record(
                    f"progress: sink returned {type(returned).__name__}; sinks return None"
                )
        except BaseException as exc:
            if must_propagate(exc) or is_own_close(exc):
                raise  # real cancellation, KeyboardInterrupt, SystemExit
            self._diagnostics.record(f"progress: sink raised {type(exc).__name__}")

    async def close(self) -> None:
        """Stop deliveries: none starts after this call begins; a running one is awaited.

        If the caller is cancelled while waiting, the channel stays closed.
        """
        with self._lock:
            first = not self._closed
            self._closed = True
            running = self._running
            missing = self._made - self._awaited
        if first and missing > 0:
            self._diagnostics.record(
                f"progress: {missing} report_progress(...) call(s) were never awaited; "
                "await them (a sync handler uses report_progress_sync)"
            )
        if running is not None:
            await running.wait()
