"""A person's reply to a prompt: ``InputResponse``, and how the registry reads its answers.

``InputResponse.accept(answers=None)``, ``.decline()`` and ``.cancel()`` are the only
replies. Decline and cancel never carry answers (they take none). The response does
not know which prompt it answers, so the shape rules that depend on the prompt —
form acceptance needs object answers (``{}`` when nothing is required), URL
acceptance carries none — are checked by ``check_response_shape`` when the registry
pairs it with its pending prompt.

Answers are kept as given but detached: JSON text as its UTF-8 bytes, *not parsed*
(the registry first bounds their raw size, then ``decode_answers`` parses them
strictly with the numeric work profile and bounds their canonical size); a mapping
converted once to a detached JSON value.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, final

from ._failures import ConfigurationError
from ._forms import InputMode
from ._json import (
    WRITTEN_PER_CANONICAL,
    JSONError,
    JSONValue,
    canonical_bytes,
    check_profile,
    detach,
    from_python,
    parse,
    parsed_canonical_bytes,
    written_size,
)
from ._sealed import Seal, Sealed, is_genuine

__all__ = [
    "AnswerError",
    "InputAction",
    "InputResponse",
    "check_response_shape",
    "decode_answers",
    "decode_answers_canonical",
    "is_genuine_response",
]


class InputAction(enum.StrEnum):
    """What the person did: accepted, explicitly declined, or dismissed the prompt."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


class AnswerError(ValueError):
    """Answers that cannot be used: too large, invalid JSON, out of profile, not an object.

    The message says what was wrong (with a JSON pointer where known) and never quotes
    more than a short prefix of the answers.
    """


_Raw = bytes | dict[str, JSONValue] | None


# Stamped only at the end of the constructor; an instance without it is a forgery.
_SEAL: Final = Seal()


def is_genuine_response(response: object) -> bool:
    """Whether ``response`` is an ``InputResponse`` its constructor completed."""
    return type(response) is InputResponse and is_genuine(response)


@final
@_SEAL.mints
class InputResponse(Sealed):
    """A reply to a prompt; build it with ``accept``, ``decline`` or ``cancel``.

    ``InputResponse(action, answers=None)`` is the one constructor behind them:
    ``answers`` is JSON text (``str``, ``bytes``, ``bytearray``) or a mapping of JSON
    values, and only an ``ACCEPT`` may carry any. ``None`` means no answers (a URL
    acceptance). Text is kept unparsed; a mapping is converted and detached at once.
    Raises ``TypeError`` for a wrong type and ``ConfigurationError`` for a decline or
    cancel with answers, or a mapping that is not JSON (NaN, non-string keys, ...).
    ``repr`` shows the action and the size of the answers, never their content.
    The class is final; copies are the object itself and pickles rebuild it through
    the constructor. The registry refuses anything its constructor did not complete.
    """

    __slots__ = ("_raw", "action")

    action: InputAction
    _raw: _Raw

    _refusal = "InputResponse cannot be subclassed; use accept, decline or cancel"
    _immutable = "{type} is immutable"

    def __init__(self, action: InputAction | str, answers: object = None) -> None:
        if not isinstance(action, str):
            raise TypeError(f"InputResponse action must be an InputAction, not {type(action)}")
        try:
            action = InputAction(action)
        except ValueError:
            raise ConfigurationError(
                "InputResponse action must be accept, decline or cancel"
            ) from None
        raw: _Raw
        if answers is None:
            raw = None
        elif action is not InputAction.ACCEPT:
            raise ConfigurationError(f"a {action.value} response carries no answers")
        elif isinstance(answers, str):
            # surrogatepass: a lone surrogate then fails in decode_answers, as a bad request.
            raw = str.encode(answers, "utf-8", "surrogatepass")  # not a subclass's own
        elif isinstance(answers, bytes | bytearray):
            raw = bytes(answers)
        elif isinstance(answers, Mapping):
            try:
                value = from_python(answers)
            except JSONError as exc:
                raise ConfigurationError(f"InputResponse answers are not JSON: {exc}") from None
            assert isinstance(value, dict)
            raw = value
        else:
            raise TypeError(
                "InputResponse answers must be JSON text or a mapping, "
                f"not {type(answers).__name__}"
            )
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "_raw", raw)
        _SEAL.stamp(self)

    def _rebuild(self) -> tuple[Any, ...]:
        return (InputResponse, (self.action, self._raw))

    @classmethod
    def accept(cls, answers: object = None) -> InputResponse:
        """The person accepted; ``answers`` for a form (JSON text or mapping), None for a URL."""
        return cls(InputAction.ACCEPT, answers)

    @classmethod
    def decline(cls) -> InputResponse:
        """The person explicitly declined."""
        return cls(InputAction.DECLINE)

    @classmethod
    def cancel(cls) -> InputResponse:
        """The person dismissed the prompt without choosing."""
        return cls(InputAction.CANCEL)

    @property
    def has_answers(self) -> bool:
        """Whether answers were given (they are checked only by ``decode_answers``)."""
        return self._raw is not None

    def __repr__(self) -> str:
        if not is_genuine_response(self):
            return "InputResponse(<not constructed>)"
        if self._raw is None:
            return f"InputResponse({self.action.value!r})"
        if isinstance(self._raw, bytes):
            return f"InputResponse({self.action.value!r}, answers=<{len(self._raw)} bytes>)"
        return f"InputResponse({self.action.value!r}, answers=<{len(self._raw)} fields>)"


def decode_answers(response: InputResponse, *, max_bytes: int) -> JSONValue | None:
    """The response's answers as a fresh JSON object, or None when it carries none.

    Text is bounded to ``max_bytes`` raw bytes before it is parsed, then parsed
    strictly (duplicate names, invalid UTF-8 and lone surrogates fail) with the
    numeric work profile; a mapping is checked against the profile. The canonical
    encoding must also fit ``max_bytes``, and the value must be an object. Any
    problem raises ``AnswerError``.
    """
    return decode_answers_canonical(response, max_bytes=max_bytes)[0]


def decode_answers_canonical(
    response: InputResponse, *, max_bytes: int
) -> tuple[JSONValue | None, bytes]:
    """``decode_answers`` and the answers' canonical bytes (``b""`` when there are none)."""
    raw = response._raw
    if raw is None:
        return None, b""
    if isinstance(raw, bytes):
        if len(raw) > max_bytes:
            raise AnswerError(f"answers exceed {max_bytes} bytes")
        try:
            value = parse(raw, profile=True)
        except JSONError as exc:
            raise AnswerError(f"answers are not valid JSON: {exc}") from None
        encode = parsed_canonical_bytes  # a value parse returned: the C encoder, mostly
    else:
        written = written_size(raw)  # a bound in C before the copy (see _json)
        if written is not None and written > WRITTEN_PER_CANONICAL * max_bytes:
            raise AnswerError(f"answers exceed {max_bytes} bytes once encoded")
        try:
            check_profile(raw)
        except JSONError as exc:
            raise AnswerError(f"answers are outside the numeric profile: {exc}") from None
        value = detach(raw)
        encode = canonical_bytes
    if not isinstance(value, dict):
        raise AnswerError("answers must be a JSON object")
    canonical = encode(value)
    if len(canonical) > max_bytes:
        raise AnswerError(f"answers exceed {max_bytes} bytes once encoded")
    return value, canonical


def check_response_shape(
    prompt_mode: InputMode, response: InputResponse, answers: JSONValue | None
) -> str | None:
    """Why ``response`` (with its decoded ``answers``) cannot answer a prompt, or None.

    A form acceptance needs object answers (``{}`` when nothing is required); a URL
    acceptance, and every decline or cancel, carries none.
    """
    mode = prompt_mode if type(prompt_mode) is InputMode else InputMode(prompt_mode)
    if response.action is InputAction.ACCEPT and mode is InputMode.FORM:
        if not isinstance(answers, dict):
            return "a form acceptance needs object answers ({} when no field is required)"
        return None
    if answers is not None or response.has_answers:
        if mode is InputMode.URL and response.action is InputAction.ACCEPT:
            return "a URL acceptance carries no answers"
        return f"a {response.action.value} response carries no answers"
    return None
