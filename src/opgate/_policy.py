"""The policy protocol, its two request kinds, and calling policy callbacks safely.

A host's policy has two methods, each sync or async:

* ``scope_key(ctx) -> str``: a nonempty opaque key naming the principal and its
  authorization revision; it must contain no credentials and must change when the
  principal's effective authorization scope changes.
* ``authorize(ctx, request) -> None``: ``request`` is ``Discover(name)`` (search,
  inspect) or ``Execute(name, arguments)`` (invoke, with detached and validated
  arguments). Returning ``None`` allows; raising or returning
  ``Failure(FailureCode.UNAVAILABLE)`` denies.

Optionally, ``discovery_scope(ctx) -> DiscoveryScope | None`` (sync or async) narrows
discovery up front: the groups and name prefixes outside of which the principal may
discover nothing at all. Search then never considers an operation outside the scope
(and never asks ``authorize`` about it); inspect and invoke treat such a name as
undiscoverable. Inside the scope ``authorize`` is still asked for every item. ``None``
(or a policy without the method) narrows nothing.

Anything else — another exception (a ``BaseException`` subclass, an exception group,
``GeneratorExit`` or an ``asyncio.CancelledError`` of the policy's own included),
another return value, a ``Failure`` of another code, an empty or non-string scope
key — fails the request as ``internal`` with the original kept on ``Failure.cause``.
``KeyboardInterrupt``, ``SystemExit`` and real cancellation of the calling task
propagate (``_execution.must_propagate``). A failing policy never yields a successful
authorization. Sync methods are called inline on the caller's thread (search asks
for every item it places, so they must be fast); a policy that does I/O should be
async.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ._execution import is_own_close, must_propagate
from ._failures import Failure, FailureCode, internal_failure
from ._json import JSONValue, detach
from ._sealed import Frozen

__all__ = [
    "Discover",
    "DiscoveryScope",
    "Execute",
    "Policy",
    "PolicyError",
    "PolicyRequest",
    "authorize",
    "discovery_scope",
    "judge_exception",
    "judge_verdict",
    "scope_key",
]


@dataclass(frozen=True, slots=True)
class Discover:
    """Authorization request for seeing an operation (search results, inspect).

    ``name`` is the operation's name.
    """

    name: str


@dataclass(frozen=True, slots=True)
class DiscoveryScope:
    """What a principal may discover at all: an upper bound on ``authorize(Discover)``.

    ``groups``: operations whose group, case-folded, equals one of these, case-folded;
    ``prefixes``: operations whose name starts with one of these (case-sensitive).
    An operation matching neither is never a search candidate and is unavailable to
    inspect and invoke. Both empty: nothing is discoverable.
    """

    groups: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        groups = self.groups
        if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
            raise TypeError("DiscoveryScope.groups must be a collection of str")
        prefixes = self.prefixes
        if isinstance(prefixes, str) or not all(isinstance(p, str) for p in prefixes):
            raise TypeError("DiscoveryScope.prefixes must be a collection of str")
        object.__setattr__(self, "groups", frozenset(groups))
        object.__setattr__(self, "prefixes", tuple(dict.fromkeys(prefixes)))

    def admits(self, name: str, group: str) -> bool:
        """Whether an operation of this name and group is inside the scope."""
        if group.casefold() in {g.casefold() for g in self.groups}:
            return True
        return name.startswith(self.prefixes) if self.prefixes else False


class Execute(Frozen):
    """Authorization request for running an operation.

    ``name`` is the operation's name; ``arguments`` is a detached copy of the
    validated argument object (the policy may read or even mutate it freely).

    A value type like ``Discover`` (immutable attributes, equality by name and
    arguments). The registry's requests make the copy when ``arguments`` is first
    read, and keep it: a policy that never reads the arguments costs no copy (a
    deep copy of 64 KiB of small containers is milliseconds, issue 9).
    """

    __slots__ = ("_arguments", "_validated", "name")
    __match_args__ = ("name", "arguments")

    name: str
    _arguments: dict[str, JSONValue] | None
    _validated: dict[str, JSONValue] | None

    def __init__(self, name: str, arguments: dict[str, JSONValue]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_arguments", arguments)
        object.__setattr__(self, "_validated", None)

    @classmethod
    def _of_validated(cls, name: str, validated: dict[str, JSONValue]) -> Execute:
        """The registry's request: ``arguments`` is detached from ``validated`` (which
        nobody mutates) when first read."""
        request = cls.__new__(cls)
        object.__setattr__(request, "name", name)
        object.__setattr__(request, "_arguments", None)
        object.__setattr__(request, "_validated", validated)
        return request

    @property
    def arguments(self) -> dict[str, JSONValue]:
        """The validated arguments, a copy no one else holds."""
        if self._validated is not None:  # not copied yet
            with _FIRST_READ:  # threads reading at once get the one copy
                validated = self._validated
                if validated is not None:
                    copy = detach(validated)
                    assert isinstance(copy, dict)
                    object.__setattr__(self, "_arguments", copy)
                    object.__setattr__(self, "_validated", None)
        return self._arguments  # type: ignore[return-value]  # set by now

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Execute)
        return (self.name, self.arguments) == (other.name, other.arguments)

    __hash__ = None  # type: ignore[assignment]  # the arguments are a dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, arguments={self.arguments!r})"

    def __reduce__(self) -> tuple[type[Execute], tuple[str, dict[str, JSONValue]]]:
        # pickle and copy rebuild it from its value (the default sets the slots
        # through __setattr__, which refuses).
        return (self.__class__, (self.name, self.arguments))


# A lock only for first reads of ``Execute.arguments`` (reentrant: a finalizer run
# by the collector during the copy may read another request's arguments).
_FIRST_READ = threading.RLock()


PolicyRequest: TypeAlias = Discover | Execute


class Policy(Protocol):
    """What a host provides to authorize requests; each method may be sync or async."""

    def scope_key(self, ctx: Any, /) -> Any:
        """Return the principal's nonempty, opaque, credential-free scope key."""

    def authorize(self, ctx: Any, request: PolicyRequest, /) -> Any:
        """Return ``None`` to allow, raise/return ``Failure(UNAVAILABLE)`` to deny."""

    # Optional: ``discovery_scope(ctx) -> DiscoveryScope | None`` (see the module docstring).


#: The one public answer for unknown, undiscoverable and denied names.
def unavailable() -> Failure:
    """A fresh, byte-identical ``unavailable`` failure."""
    return Failure(FailureCode.UNAVAILABLE)


class PolicyError(Exception):
    """Internal: a policy callback failed; ``failure`` is what the request returns."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _broken(cause: BaseException | None) -> PolicyError:
    return PolicyError(internal_failure(cause))


async def scope_key(policy: Policy, ctx: Any) -> str:
    """Call ``policy.scope_key``; raise ``PolicyError`` unless it gives a nonempty ``str``.

    The key is returned as a plain ``str`` (a subclass's overrides never run later).
    """
    try:
        key = policy.scope_key(ctx)
        if type(key) is not str and inspect.isawaitable(key):
            key = await key
    except BaseException as exc:
        raise _broken(_callback_exception(exc)) from None
    if not isinstance(key, str) or not key:
        raise _broken(TypeError(f"scope_key returned {type(key).__name__}, not a nonempty str"))
    return str.__str__(key)


async def discovery_scope(policy: Policy, ctx: Any) -> DiscoveryScope | None:
    """Call the optional ``policy.discovery_scope``: ``None`` when absent or unnarrowed.

    Anything but a ``DiscoveryScope`` or ``None``, or an exception, raises
    ``PolicyError`` (the request fails ``internal``): a broken scope never widens
    discovery.
    """
    method = getattr(policy, "discovery_scope", None)
    if method is None:
        return None
    try:
        scope = method(ctx)
        if inspect.isawaitable(scope):
            scope = await scope
    except Exception as exc:
        raise _broken(exc) from None
    if scope is None or isinstance(scope, DiscoveryScope):
        return scope
    raise _broken(TypeError(f"discovery_scope returned {type(scope).__name__}"))


async def authorize(policy: Policy, ctx: Any, request: PolicyRequest) -> bool:
    """Call ``policy.authorize``: ``True`` allowed, ``False`` denied, ``PolicyError`` broken."""
    try:
        verdict = policy.authorize(ctx, request)
        if verdict is not None and inspect.isawaitable(verdict):
            verdict = await verdict
    except BaseException as exc:
        return judge_exception(_callback_exception(exc))
    return verdict is None or judge_verdict(verdict)


def _callback_exception(exc: BaseException) -> BaseException:
    """``exc`` if it is the callback's to judge; re-raise what must propagate."""
    if must_propagate(exc) or is_own_close(exc):
        raise exc
    return exc


def judge_verdict(verdict: object) -> bool:
    """Judge what ``authorize`` returned: ``None`` allows, ``Failure(UNAVAILABLE)`` denies.

    Anything else raises ``PolicyError`` (the request fails ``internal``).
    """
    if verdict is None:
        return True
    if isinstance(verdict, Failure) and verdict.code is FailureCode.UNAVAILABLE:
        return False
    raise _broken(TypeError(f"authorize returned {type(verdict).__name__}, not None"))


def judge_exception(exc: BaseException) -> bool:
    """Judge what ``authorize`` raised: ``Failure(UNAVAILABLE)`` denies, anything else breaks.

    ``KeyboardInterrupt``, ``SystemExit`` and real cancellation are re-raised as they are.
    """
    if isinstance(exc, Failure) and exc.code is FailureCode.UNAVAILABLE:
        return False
    if must_propagate(exc):
        raise exc
    raise _broken(exc) from None
