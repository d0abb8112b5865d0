"""What a handler receives: ``Invocation`` and, when resumed, a verified ``Resume``.

Only ``Registry.invoke`` can make either: their constructors take a private key.
Every accessor that returns JSON hands out a fresh detached copy, so a handler may
mutate what it gets without touching what the registry keeps.
"""

from __future__ import annotations

from collections.abc import Generator, Set
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import anyio.from_thread

from ._json import JSONValue, detach

if TYPE_CHECKING:
    from ._forms import InputMode
    from ._progress import ProgressChannel
    from ._responses import InputAction

__all__ = ["Invocation", "Resume"]

_KEY = object()


class Resume:
    """A verified answer to the prompt this operation issued earlier.

    * ``action``: ``InputAction.ACCEPT``, ``DECLINE`` or ``CANCEL`` — check it, and
      the answers, yourself: nothing is coerced or confirmed automatically.
    * ``answers``: the accepted form answers (a fresh copy of a JSON object), or
      ``None`` for URL prompts and for decline/cancel.
    * ``state``: the private state given with the prompt (a fresh copy).
    * ``recovery_only``: ``True`` when this answer was already processed once (the
      earlier call completed, failed or was interrupted). Use your own intent/job
      key in ``state`` to find the existing outcome; a recovery may only finish.
    """

    __slots__ = ("_answers", "_state", "action", "recovery_only")

    action: InputAction
    recovery_only: bool

    def __init__(
        self,
        key: object,
        action: InputAction,
        answers: JSONValue,
        state: JSONValue,
        recovery_only: bool,
    ) -> None:
        if key is not _KEY:
            raise TypeError("Resume is created by Registry.invoke only")
        self.action = action
        self._answers = answers
        self._state = state
        self.recovery_only = recovery_only

    @property
    def answers(self) -> JSONValue:
        """The accepted answers (fresh detached copy), or ``None``."""
        return detach(self._answers)

    @property
    def state(self) -> JSONValue:
        """The prompt's private state (fresh detached copy)."""
        return detach(self._state)

    def __repr__(self) -> str:
        return f"Resume(action={self.action.value!r}, recovery_only={self.recovery_only})"


class Invocation:
    """One call of an operation, as its handler sees it.

    * ``name``: the operation's name.
    * ``arguments``: the validated argument object (a fresh detached copy each access).
    * ``supports(mode)``: whether the host can show that kind of prompt now.
    * ``resume``: the verified ``Resume`` when this call answers a prompt, else ``None``.
    * ``await report_progress(completed, total=None, message="")``: advisory progress;
      invalid updates and sink problems never raise here (they go to diagnostics).
      Sync handlers (which run in a worker thread) use ``report_progress_sync``.
      Misuse never changes the outcome either: a report that is never awaited, or
      ``report_progress_sync`` called on the event loop (from an async handler), is
      recorded in the diagnostics and otherwise ignored.
    """

    __slots__ = ("_arguments", "_channel", "_modes", "name", "resume")

    name: str
    resume: Resume | None

    def __init__(
        self,
        key: object,
        name: str,
        arguments: dict[str, JSONValue],
        modes: Set[InputMode],
        resume: Resume | None,
        channel: ProgressChannel,
    ) -> None:
        if key is not _KEY:
            raise TypeError("Invocation is created by Registry.invoke only")
        self.name = name
        self._arguments = arguments
        self._modes = frozenset(modes)
        self.resume = resume
        self._channel = channel

    @property
    def arguments(self) -> dict[str, JSONValue]:
        """The validated arguments (a fresh detached copy)."""
        copy = detach(self._arguments)
        assert isinstance(copy, dict)
        return copy

    def supports(self, mode: InputMode) -> bool:
        """Whether the host declared it can show prompts of ``mode`` for this call."""
        return mode in self._modes

    def report_progress(
        self,
        completed: int | float | Decimal,
        total: int | float | Decimal | None = None,
        message: str = "",
    ) -> _Report:
        """Report advisory progress: ``await`` the result (see the progress rules in the docs).

        Forgetting to await it only records a diagnostic (no coroutine is left
        un-awaited, so no warning either).
        """
        return _Report(self._channel, completed, total, message)

    def report_progress_sync(
        self,
        completed: int | float | Decimal,
        total: int | float | Decimal | None = None,
        message: str = "",
    ) -> None:
        """``report_progress`` for sync handlers running in the registry's worker thread.

        Called on the event loop thread (from an async handler), or from a thread anyio
        did not start, it records a diagnostic and returns: it never blocks the loop
        and never raises.
        """
        channel = self._channel
        if channel.closed:
            return
        if channel.on_loop_thread():
            channel.diagnostics.record(
                "progress: report_progress_sync called on the event loop; "
                "an async handler awaits report_progress"
            )
            return
        try:
            anyio.from_thread.run(channel.report, completed, total, message)
        except RuntimeError:
            channel.diagnostics.record(
                "progress: report_progress_sync called outside the handler's worker thread"
            )

    def __repr__(self) -> str:
        return f"Invocation(name={self.name!r}, resumed={self.resume is not None})"


class _Report:
    """The awaitable ``Invocation.report_progress`` returns; counts whether it was awaited."""

    __slots__ = ("_args", "_awaited", "_channel")

    def __init__(self, channel: ProgressChannel, *args: Any) -> None:
        self._channel = channel
        self._args = args
        self._awaited = False
        channel.made()

    def __await__(self) -> Generator[Any, None, None]:
        if self._awaited:
            self._channel.diagnostics.record("progress: a report_progress(...) was awaited twice")
            return
        self._awaited = True
        self._channel.awaited()
        yield from self._channel.report(*self._args).__await__()

    def __repr__(self) -> str:
        return "<report_progress awaitable>"


def new_invocation(
    name: str,
    arguments: dict[str, JSONValue],
    modes: Set[InputMode],
    resume: Resume | None,
    channel: ProgressChannel,
) -> Invocation:
    """Registry-internal constructor."""
    return Invocation(_KEY, name, arguments, modes, resume, channel)


def new_resume(
    action: InputAction, answers: JSONValue, state: JSONValue, recovery_only: bool
) -> Resume:
    """Registry-internal constructor; ``answers`` and ``state`` are copied on access."""
    return Resume(_KEY, action, answers, state, recovery_only)
