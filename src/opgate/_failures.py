"""Failure codes, the request-level ``Failure`` and the construction-time ``ConfigurationError``.

The exception tree::

    Exception
    ├── Failure              a request-level outcome (also raised by policies to deny);
    │                        requests return it inside ``Failed``, they never raise it
    └── ValueError
        └── ConfigurationError   a programmer error while building Operation, Limits,
                                 FormInput, InputResponse or Registry

Public messages never contain a token, a scope key, an exception's text or a
stack trace. The original exception of an ``internal`` failure is kept on
``Failure.cause``, which is never part of ``str()``, ``repr()``, a pickle or a copy.
A failure a request returns holds no traceback frames (frames keep the locals of the
call, argument values among them): neither its own traceback and chained exceptions
nor its cause's, whose stack survives only as a text note (file, line, function).
"""

from __future__ import annotations

import enum
import traceback
from typing import Any, Final

__all__ = [
    "ConfigurationError",
    "Failure",
    "FailureCode",
    "internal_failure",
    "returned",
    "short_prefix",
]


class FailureCode(enum.StrEnum):
    """Why a request failed. The values are the wire spellings."""

    UNAVAILABLE = "unavailable"
    INVALID_REQUEST = "invalid_request"
    INVALID_CURSOR = "invalid_cursor"
    INVALID_ARGUMENTS = "invalid_arguments"
    INVALID_RESULT = "invalid_result"
    OPERATION_FAILED = "operation_failed"
    CONFIRMATION_REQUIRED = "confirmation_required"
    BUSY = "busy"
    INTERACTION_LIMIT = "interaction_limit"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    INTERNAL = "internal"

    def __str__(self) -> str:
        return self.value


DEFAULT_MESSAGES: dict[FailureCode, str] = {
    FailureCode.UNAVAILABLE: "operation unavailable",
    FailureCode.INVALID_REQUEST: "invalid request",
    FailureCode.INVALID_CURSOR: "invalid cursor: start the search again without a cursor",
    FailureCode.INVALID_ARGUMENTS: "invalid arguments",
    FailureCode.INVALID_RESULT: "the operation produced an invalid result",
    FailureCode.OPERATION_FAILED: "the operation failed",
    FailureCode.CONFIRMATION_REQUIRED: (
        "this operation needs confirmation from a person; "
        "use the application's own authorized interface to complete it"
    ),
    FailureCode.BUSY: "try again shortly",
    FailureCode.INTERACTION_LIMIT: "too many input prompts for one operation",
    FailureCode.EXPIRED: (
        "the continuation expired; use the application's own intent or job key "
        "to find the outcome of the original request"
    ),
    FailureCode.CANCELLED: "the request was cancelled",
    FailureCode.INTERNAL: "internal error",
}

#: How much of hostile input a message may quote.
PREFIX_CHARS = 32


def short_prefix(text: str, limit: int = PREFIX_CHARS) -> str:
    """Quote at most ``limit`` characters of ``text``, marking a cut with an ellipsis."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + "…"


class Failure(Exception):
    """A request-level failure: a code, a public message and optional diagnostics.

    ``Failure(code, message="", *, diagnostics=None)``: an empty message takes the
    code's default. ``diagnostics`` are structured JSON details an operation's
    ``fail(...)`` may attach (validated against its output schema). ``cause`` is the
    private original exception, set by the library; it never appears in ``str()``.
    A policy denies a request by raising or returning ``Failure(FailureCode.UNAVAILABLE)``.
    """

    code: FailureCode
    message: str
    diagnostics: Any
    cause: BaseException | None

    def __init__(
        self, code: FailureCode | str, message: str = "", *, diagnostics: Any = None
    ) -> None:
        code = FailureCode(code)
        if not isinstance(message, str):
            raise TypeError("Failure message must be a str")
        self.code = code
        self.message = message or DEFAULT_MESSAGES[code]
        self.diagnostics = diagnostics
        self.cause = None
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"

    def __repr__(self) -> str:
        return f"Failure({self.code.value!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Failure):
            return NotImplemented
        return (self.code, self.message, self.diagnostics) == (
            other.code,
            other.message,
            other.diagnostics,
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles and copies keep code, message and diagnostics; never the private cause."""
        return (Failure, (self.code.value, self.message), {"diagnostics": self.diagnostics})


#: Frames of a cause's traceback kept as text (the innermost ones).
CAUSE_FRAMES: Final = 32

#: Exceptions of one cause's chain and groups whose frames are summarized.
CAUSE_EXCEPTIONS: Final = 64


def internal_failure(cause: BaseException | None = None) -> Failure:
    """A sanitized ``internal`` failure that keeps ``cause`` privately, without frames.

    What a transport adapter answers for an error of its own: the public message is
    the code's default; ``cause`` stays on ``Failure.cause`` for the host's log, its
    tracebacks (and those of its chain and groups) replaced by text notes.
    """
    failure = Failure(FailureCode.INTERNAL)
    if cause is not None:
        _drop_frames(cause)
    failure.cause = cause
    return failure


def returned(failure: Failure) -> Failure:
    """``failure`` made fit to return: no traceback, no chained exceptions."""
    failure.__traceback__ = None
    failure.__context__ = None
    failure.__cause__ = None
    return failure


# The base classes' own attribute descriptors (typeshed types them as plain values).
_TRACEBACK: Any = BaseException.__dict__["__traceback__"]
_CAUSE: Any = BaseException.__dict__["__cause__"]
_CONTEXT: Any = BaseException.__dict__["__context__"]
_GROUP_EXCEPTIONS: Any = BaseExceptionGroup.__dict__["exceptions"]


def _drop_frames(cause: BaseException) -> None:
    """Replace the tracebacks in ``cause``'s chain and groups by text notes.

    The note is the stack as ``traceback`` prints it (file, line, function, source
    line; never locals), so a host's log still shows where the error came from. Only
    the base class's own accessors are used: an exception class that overrides them
    cannot make this raise or keep its frames.
    """
    seen: set[int] = set()
    todo = [cause]
    while todo and len(seen) < CAUSE_EXCEPTIONS:
        exc = todo.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        tb = _TRACEBACK.__get__(exc)
        if tb is not None:
            _TRACEBACK.__set__(exc, None)
            try:
                stack = traceback.extract_tb(tb, limit=-CAUSE_FRAMES).format()
                BaseException.add_note(
                    exc, "Traceback (most recent call last):\n" + "".join(stack).rstrip()
                )
            except Exception:  # a note is a courtesy; the frames go regardless
                pass
            del tb
        todo.extend(e for e in (_CAUSE.__get__(exc), _CONTEXT.__get__(exc)) if e is not None)
        if issubclass(type(exc), BaseExceptionGroup):
            todo.extend(_GROUP_EXCEPTIONS.__get__(exc))


class ConfigurationError(ValueError):
    """A programmer error found while constructing a library object.

    The message names what is wrong (operation, field or JSON pointer) and the rule.
    """
