"""What handlers return (``finish``, ``fail``, ``await_input``, ``unsupported_input``) and
what ``invoke`` returns.

A handler's return value must be one of the four outcome constructors' results;
anything else — ``None``, a bare dict, a ``Result``, an outcome not made by these
functions — is a failure, never a success. ``Registry.invoke`` returns exactly one
of ``Completed``, ``Failed`` or ``Pending``; each carries ``diagnostics``, the
bounded private slot of progress problems (for the host's logs, never the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

from ._failures import Failure
from ._sealed import Seal, Sealed, is_genuine

if TYPE_CHECKING:
    from ._forms import FormInput, FormPrompt, URLInput, URLPrompt
    from ._results import Result

__all__ = [
    "Completed",
    "Failed",
    "InvokeOutcome",
    "Outcome",
    "Pending",
    "await_input",
    "fail",
    "finish",
    "unsupported_input",
]

_SEAL: Final = Seal()  # only this module's constructors can make an Outcome

#: The kinds the constructors make; any other kind is a forgery.
KINDS = frozenset({"finish", "fail", "await_input", "unsupported_input"})


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True, eq=False)
class Outcome(Sealed):
    """A handler's decision; build it with ``finish``, ``fail``, ``await_input`` or
    ``unsupported_input`` only.

    The seal that marks a genuine outcome is stamped after construction and is not an
    ``__init__`` field, so ``dataclasses.replace`` (which rebuilds through
    ``__init__``) makes a forgery, rejected as ``invalid_result``; so is an outcome
    whose kind was altered afterwards. The class is final; copies are the outcome
    itself and pickles rebuild it through its constructor function.
    """

    kind: str
    payload: Any = field(repr=False)
    message: str = ""

    _refusal = "Outcome cannot be subclassed; use finish, fail, await_input or unsupported_input"

    def is_genuine(self) -> bool:
        """Whether this outcome came from one of the constructor functions, unaltered."""
        return is_genuine(self) and type(self.kind) is str and self.kind in KINDS

    def _rebuild(self) -> tuple[Any, ...]:
        return (_minted, (self.kind, self.payload, self.message))


def _minted(kind: str, payload: Any, message: str = "") -> Outcome:
    outcome = Outcome(kind, payload, message)
    _SEAL.stamp(outcome)
    return outcome


def finish(result: Result) -> Outcome:
    """Finish successfully with ``result`` (a ``Result`` built with its constructor)."""
    return _minted("finish", result)


def fail(message: str, diagnostics: object = None) -> Outcome:
    """Fail with a public ``message`` and optional structured ``diagnostics``.

    With an output schema, diagnostics must match it, otherwise they are withheld
    (the failure is still returned, with its message).
    """
    return _minted("fail", diagnostics, message)


def await_input(prompt: FormInput | URLInput) -> Outcome:
    """Stop and ask a person for input: a form (``FormInput``) or an HTTPS hand-off."""
    return _minted("await_input", prompt)


def unsupported_input(message: str = "") -> Outcome:
    """Stop without asking: the call needs a person's input that no prompt can carry here.

    For input a handler cannot put into a ``FormInput`` or ``URLInput`` (a relayed
    form outside the form profile, say). ``invoke`` returns ``confirmation_required``,
    as for a prompt the host cannot show, with ``message`` (public; empty takes the
    code's guidance to use the application's own authorized interface).
    """
    return _minted("unsupported_input", None, message)


@dataclass(frozen=True, slots=True)
class Completed:
    """The operation finished: ``result`` passed every check."""

    result: Result
    diagnostics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed:
    """The request failed; ``failure`` says why (its ``cause`` stays private)."""

    failure: Failure
    diagnostics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pending:
    """The operation waits for a person.

    Show ``prompt`` (a ``FormPrompt`` or ``URLPrompt``) to the user, then call
    ``invoke`` again with the same operation and arguments and
    ``resume=(pending.continuation, response)`` before ``expires_at`` (aware UTC).
    ``continuation`` is a bearer secret for this principal: never log it.
    """

    prompt: FormPrompt | URLPrompt
    continuation: str = field(repr=False)
    expires_at: datetime
    diagnostics: tuple[str, ...] = ()

    def __reduce__(self) -> Any:
        # A continuation is a bearer secret: it never travels inside a pickle by
        # accident. A host that persists one stores ``pending.continuation`` itself.
        raise TypeError(
            "a Pending carries a bearer continuation and is not pickled; "
            "store pending.continuation deliberately if you must"
        )

    def __copy__(self) -> Pending:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Pending:
        return self


InvokeOutcome: TypeAlias = Completed | Failed | Pending
