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
``Failure.cause``, which is never part of ``str()``, ``repr()`` or any encoding.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ConfigurationError", "Failure", "FailureCode", "short_prefix"]


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
    FailureCode.BUSY: "busy: try again shortly",
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


def internal_failure(cause: BaseException | None = None) -> Failure:
    """A sanitized ``internal`` failure that keeps ``cause`` privately."""
    failure = Failure(FailureCode.INTERNAL)
    failure.cause = cause
    return failure


class ConfigurationError(ValueError):
    """A programmer error found while constructing a library object.

    The message names what is wrong (operation, field or JSON pointer) and the rule.
    """
