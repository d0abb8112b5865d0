"""The checks of an invoke request before anything runs: its options and its arguments.

``call_options`` checks ``input_support``, ``progress``, ``input_expiry`` and
``lifetime`` and returns what the call needs of them; ``validated_arguments``
applies the argument budget, the strict parse, the object check and the operation's
input schema, and makes sure the output schema's validator compiles. Each raises a
``Failure`` whose message states the rule; the invoke sequence (``_invoke``) calls them
in that order. Neither runs a callback or awaits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta
from itertools import repeat
from typing import Any

from ._catalog import Entry
from ._failures import Failure, FailureCode
from ._forms import InputMode
from ._json import (
    WRITTEN_PER_CANONICAL,
    JSONError,
    JSONValue,
    from_python,
    parse,
    parsed_canonical_bytes,
    written_size,
)
from ._limits import Limits
from .ledger import LedgerBackend, Lifetime

__all__ = ["LIFETIME_CLOSED", "call_options", "validated_arguments"]

#: Collection types accepted for ``input_support`` without the slower ABC check.
_PLAIN_COLLECTIONS = (frozenset, set, tuple, list)
_NO_TIME = timedelta(0)

#: The public message for a call on a closed serving lifetime.
LIFETIME_CLOSED = (
    "the serving lifetime is closed: this server no longer accepts calls; "
    "use the application's own intent or job key to find the outcome of earlier requests"
)


def call_options(
    limits: Limits,
    ledger: LedgerBackend[Any, Any],
    input_support: object,
    progress: object,
    input_expiry: object,
    lifetime: object,
) -> tuple[frozenset[InputMode], float, Lifetime]:
    """The input modes, prompt lifetime in seconds and serving lifetime of a call."""
    if type(input_support) not in _PLAIN_COLLECTIONS and (
        isinstance(input_support, str | bytes) or not isinstance(input_support, Collection)
    ):
        raise Failure(FailureCode.INVALID_REQUEST, "input_support must be a set of InputMode")
    modes = frozenset(input_support)  # type: ignore[call-overload]  # a Collection, checked
    if modes and not all(map(isinstance, modes, repeat(InputMode))):
        raise Failure(FailureCode.INVALID_REQUEST, "input_support must contain InputMode values")
    if progress is not None and not callable(progress):
        raise Failure(FailureCode.INVALID_REQUEST, "progress must be a callable sink")
    seconds = limits.input_lifetime.total_seconds()
    if input_expiry is not None:
        if not isinstance(input_expiry, timedelta) or input_expiry <= _NO_TIME:
            raise Failure(FailureCode.INVALID_REQUEST, "input_expiry must be a positive timedelta")
        seconds = min(seconds, input_expiry.total_seconds())
    if lifetime is None:
        serving = ledger.default_lifetime
    elif isinstance(lifetime, Lifetime) and lifetime.opened_by(ledger):
        serving = lifetime
    else:
        raise Failure(
            FailureCode.INVALID_REQUEST,
            "lifetime must come from this registry's open_lifetime()",
        )
    if serving.closed:
        raise Failure(FailureCode.EXPIRED, LIFETIME_CLOSED)
    return modes, seconds, serving


def validated_arguments(
    entry: Entry, arguments: object, limit: int
) -> tuple[dict[str, JSONValue], bytes | None]:
    """Budget, strict parse, object check, schema validation: the validated arguments.

    Also returns their canonical bytes when the budget check had to compute them
    (mapping arguments), so they are not computed twice.
    """
    canonical: bytes | None = None
    try:
        # Sizes are measured in C (str.encode, the buffer), never by a subclass's own
        # encode or __len__, and parse reads the characters the same way.
        if isinstance(arguments, str):
            raw = str.encode(arguments, "utf-8", "surrogatepass")
            if len(raw) > limit:
                raise _too_large(len(raw), limit)
            values = parse(arguments, profile=True)
        elif isinstance(arguments, bytes | bytearray):
            size = len(arguments) if type(arguments) is bytes else memoryview(arguments).nbytes
            if size > limit:
                raise _too_large(size, limit)
            values = parse(arguments, profile=True)
        elif isinstance(arguments, Mapping):
            written = written_size(arguments)  # a bound in C before converting
            if written is not None and written > WRITTEN_PER_CANONICAL * limit:
                raise _too_large(written, limit)
            values = from_python(arguments, profile=True)
            canonical = parsed_canonical_bytes(values)  # the C encoder, mostly
            size = len(canonical)
            if size > limit:
                raise _too_large(size, limit)
        else:
            raise Failure(
                FailureCode.INVALID_ARGUMENTS,
                "arguments must be a JSON object (JSON text or a mapping)",
            )
    except JSONError as exc:
        raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {exc}") from None
    if not isinstance(values, dict):
        raise Failure(
            FailureCode.INVALID_ARGUMENTS,
            f"arguments must be a JSON object, not {_json_kind(values)}",
        )
    violation = entry.input_schema.first_violation(values)
    if violation is not None:
        raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {violation}")
    if entry.output_schema is not None:
        # Its validator must compile before the handler acts, not only after it returned.
        entry.output_schema.prepare()
    return values, canonical


def _too_large(size: int, limit: int) -> Failure:
    return Failure(
        FailureCode.INVALID_ARGUMENTS,
        f"arguments are {size} bytes, over the limit of {limit} bytes",
    )


def _json_kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a number"
