"""The continuation-ledger contract: what a backend must honour, and what it may use.

A registry keeps the continuations of its prompts (the *ledger*) in a backend: the
in-memory ``Ledger`` by default (``opgate._ledger``), or a shared store that every
replica reaches (``opgate.redis.RedisLedger``). A third store implements the
protocols of this module: a ``LedgerFactory`` (what ``Registry(..., ledger=...)``
takes; ``bind`` is called once per registry with its limits, clock, ``RegistryKeys``
and revision) returning a ``LedgerBackend`` (what the registry calls), whose records
are ``LedgerRecord``s. Everything a
backend needs is here: the state table, the charge arithmetic, the token rules, the
public answers and the compact ``StoredPrompt`` it retains. See
``docs/ledger-backends.md``.

**States.** Each prompt issued to a person is a *record*; the records of one
operation call form a *chain*. A record's states and the events that move it are
listed once, in ``TRANSITIONS``; ``transition`` is the only way a state changes, and
it refuses anything not in the table (``LedgerStateError``)::

    PENDING ──ANSWER──▶ ANSWERING ──PROMPTED──▶ ANSWERED ──REPLAY──▶ REPLAYING
       ▲                    │                      ▲                     │
       └──────REVERT────────┤                      └─────REPLAYED────────┘
                            ├──FINISHED──▶ COMPLETED ──RECOVER──▶ RECOVERING
                            └──BROKEN────▶ NEEDS_RECOVERY ─RECOVER─▶ RECOVERING
            RECOVERING ──RECOVERED──▶ COMPLETED,  RECOVERING ──BROKEN──▶ NEEDS_RECOVERY

* ``ANSWERING``, ``REPLAYING`` and ``RECOVERING`` are in flight (``IN_FLIGHT``): a
  request holds the record across its policy and handler callbacks, and any other
  request on the same continuation gets ``busy`` (``RECORD_BUSY``). A backend holds
  no lock across a callback: every call is one transition of the table, or a read.
* ``REVERT``: the answer was refused before dispatch (execution denied), so nothing
  was accepted and the prompt is pending again.
* Expiry is not a state: an expired record leaves the ledger, and an unknown token,
  an expired one and one bound to another operation, argument set, principal or
  lifetime (another ``Binding``) all get the same answer (``find`` returns ``None``).
* A chain never forks: an answer that differs from the one already accepted gets
  ``invalid_request`` (``ANSWER_DIFFERS``); the identical answer replays or recovers.

**Tokens.** A backend mints tokens of 256 random bits (``secrets.token_urlsafe(32)``,
``TOKEN_LENGTH`` characters, ``is_token_shaped``) and keys records by ``token_hash``,
never by the token; a parent keeps its child's token (it must hand it out again on
an identical replay), never in a ``repr``, and a shared store keeps it sealed.

**Capacity.** Every byte a backend retains is charged against
``Limits.ledger_bytes``, the principal's share ``Limits.principal_bytes`` (per
scope-key hash) and the chain's ``Limits.chain_bytes``, through reservations taken
before a handler runs; unused reservation is released when the call returns. The
charges are computed here, once, for every backend: ``begin`` reserves
``initial_charge`` (the chain's own ``chain_charge`` plus a maximum prompt), a claim
for an answer reserves the ``charge`` the registry passes (the answer and the next
maximum prompt), and a committed prompt retains the ``charge`` it was given. When a
reservation cannot be had the request gets ``interaction_limit`` (its chain is full)
or ``busy`` (``PRINCIPAL_FULL``, ``LEDGER_FULL``) and nothing is evicted. New calls
leave the last ``Limits.answer_headroom()`` bytes of a principal's share to its
answers, and every principal holding data keeps as much of the ledger for its
answers (``answer_room``, ``returned_room``).

**Lifetimes.** A backend makes ``Lifetime`` objects (``open_lifetime``, and its
``default_lifetime`` for direct calls); a prompt is bound to one, and a closed
lifetime commits nothing more (``commit`` returns ``Failure(EXPIRED)``).

**Outages.** A shared store that cannot be reached makes ``begin`` raise
``LedgerUnavailable`` (the call runs as for a host that cannot show prompts), and
``commit``, ``find``, ``claim`` and ``child_of`` raise ``Failure(BUSY, STORE_DOWN)``.
Settling calls (``settle``, ``release``, ``commit``) complete even when the calling
task is being cancelled.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ._failures import Failure
from ._forms import StoredPrompt
from ._keys import RegistryKeys
from ._limits import CHAIN_FIXED_BYTES, Limits

__all__ = [
    "ANSWER_DIFFERS",
    "CHAIN_FIXED_BYTES",
    "IN_FLIGHT",
    "LEDGER_FULL",
    "PRINCIPAL_FULL",
    "RECORD_BUSY",
    "STORE_DOWN",
    "TOKEN_LENGTH",
    "TRANSITIONS",
    "Binding",
    "Event",
    "LedgerBackend",
    "LedgerFactory",
    "LedgerRecord",
    "LedgerStateError",
    "LedgerStatistics",
    "LedgerUnavailable",
    "Lifetime",
    "RecordState",
    "RegistryKeys",
    "StoredPrompt",
    "answer_room",
    "chain_charge",
    "initial_charge",
    "is_token_shaped",
    "returned_room",
    "token_hash",
    "transition",
]

#: Length of a continuation token: 32 random bytes in unpadded URL-safe base64.
TOKEN_LENGTH = 43
_TOKEN_SHAPE = re.compile(rf"[A-Za-z0-9_-]{{{TOKEN_LENGTH}}}")

#: Public messages shared by every backend (a client sees them after the code: "busy: ...").
#: (Answering does not free the share: an answered prompt is kept for replay until it expires.)
PRINCIPAL_FULL = "you have too many pending inputs; try again once some of them expire"
LEDGER_FULL = "too many pending inputs on this server; try again once some of them expire"
RECORD_BUSY = "this input is being processed; try again"
STORE_DOWN = "the continuation store is unavailable; try again shortly"
ANSWER_DIFFERS = "this prompt was already answered differently; an answer cannot be changed"


class RecordState(enum.Enum):
    """Where one prompt record is in its life."""

    PENDING = "pending"
    ANSWERING = "answering"
    ANSWERED = "answered"
    REPLAYING = "replaying"
    COMPLETED = "completed"
    NEEDS_RECOVERY = "needs_recovery"
    RECOVERING = "recovering"


class Event(enum.Enum):
    """What happens to a record."""

    ANSWER = "answer"  # a valid, new answer is accepted for processing
    REVERT = "revert"  # processing stopped before dispatch; nothing was accepted
    PROMPTED = "prompted"  # the handler issued the next prompt, now committed
    FINISHED = "finished"  # the handler finished with a valid result
    BROKEN = "broken"  # failure, exception, cancellation or rejected outcome after acceptance
    REPLAY = "replay"  # an identical answer arrives again after the next prompt was issued
    REPLAYED = "replayed"  # that replay returned (whatever its verdict)
    RECOVER = "recover"  # an identical answer arrives again after completion or breakage
    RECOVERED = "recovered"  # the recovery call finished with a valid result


S, E = RecordState, Event

#: The whole state machine: state → event → next state.
TRANSITIONS: dict[RecordState, dict[Event, RecordState]] = {
    S.PENDING: {E.ANSWER: S.ANSWERING},
    S.ANSWERING: {
        E.REVERT: S.PENDING,
        E.PROMPTED: S.ANSWERED,
        E.FINISHED: S.COMPLETED,
        E.BROKEN: S.NEEDS_RECOVERY,
    },
    S.ANSWERED: {E.REPLAY: S.REPLAYING},
    S.REPLAYING: {E.REPLAYED: S.ANSWERED},
    S.COMPLETED: {E.RECOVER: S.RECOVERING},
    S.NEEDS_RECOVERY: {E.RECOVER: S.RECOVERING},
    S.RECOVERING: {E.RECOVERED: S.COMPLETED, E.BROKEN: S.NEEDS_RECOVERY},
}

IN_FLIGHT = frozenset({S.ANSWERING, S.REPLAYING, S.RECOVERING})


class LedgerUnavailable(Exception):
    """A shared store cannot be reached now: what ``begin`` raises then (a first call
    runs as for a host that cannot show prompts). The other admitting calls return or
    raise ``Failure(BUSY, STORE_DOWN)``."""


class LedgerStateError(RuntimeError):
    """An event that the table does not allow in the record's state (a library bug)."""


def transition(state: RecordState, event: Event) -> RecordState:
    """The state after ``event`` in ``state``; ``LedgerStateError`` if not allowed."""
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        raise LedgerStateError(
            f"event {event.value!r} is not allowed in state {state.value!r}"
        ) from None


def token_hash(token: str) -> bytes:
    """The ledger's key for a token."""
    return hashlib.sha256(token.encode("ascii")).digest()


def is_token_shaped(token: object) -> bool:
    """Whether ``token`` looks like a continuation token (43 URL-safe characters)."""
    return isinstance(token, str) and _TOKEN_SHAPE.fullmatch(token) is not None


class Lifetime:
    """A serving lifetime (one per MCP server); ``close()`` expires its continuations.

    With the in-memory ledger, closing expires every continuation committed under
    this lifetime and stops new pending replies from committing; other lifetimes
    and direct calls are untouched. Handlers already running stay charged until
    they return.

    With a shared ledger (``opgate.redis``) every replica's lifetime stands for the
    same *deployment* lifetime (``id``): a prompt issued by one replica is answerable
    on all of them, and closing one replica's lifetime only stops that replica from
    committing new prompts; it expires nothing its peers can still answer.
    """

    __slots__ = ("_ledger", "closed", "id")

    def __init__(self, ledger: LedgerBackend[Any, Any], id: bytes = b"") -> None:
        self._ledger = ledger
        self.closed = False
        self.id = id

    async def close(self) -> None:
        """Expire this lifetime's continuations (in memory; see above); idempotent."""
        self._ledger.close_lifetime(self)

    def opened_by(self, ledger: object) -> bool:
        """Whether ``ledger`` (a backend) opened this lifetime: a registry accepts only
        the lifetimes of its own ledger."""
        return self._ledger is ledger

    def __repr__(self) -> str:
        return f"<Lifetime {'closed' if self.closed else 'open'}>"


@dataclass(slots=True)  # never mutated after construction
class Binding:
    """What a continuation is bound to; any difference makes a token unusable."""

    operation: str
    arguments_hash: bytes
    scope_hash: bytes
    lifetime: Lifetime


R = TypeVar("R")  # a backend's record
V = TypeVar("V")  # a backend's reservation


class LedgerRecord(Protocol):
    """What the registry reads of a record a backend returns."""

    @property
    def prompt(self) -> object: ...  # StoredPrompt
    @property
    def round(self) -> int: ...
    @property
    def expires_at(self) -> float: ...


class LedgerBackend(Protocol, Generic[R, V]):
    """The seam between the registry and a continuation store.

    The registry awaits every call; the in-memory ``Ledger`` never suspends (its
    calls are plain bookkeeping under a lock), a shared store (``opgate.redis``)
    makes one atomic server-side step per call. Every call is one transition of
    ``TRANSITIONS``, or a read; none holds anything across a callback. A backend's
    settling calls (``settle``, ``release``, ``commit``) complete even when the
    calling task is being cancelled.

    * ``begin``: reserve a chain and a maximum prompt (``initial_charge``) for an
      initial call with input support (``Failure(BUSY)`` when the principal's share
      or the ledger is full).
    * ``commit``: commit the next prompt of the reservation's chain (``parent`` is
      the answered record, or ``None``), then release whatever the reservation has
      left; returns the record and its token, or ``Failure(EXPIRED)`` (the
      reservation untouched).
    * ``find``: the live record for a token under a binding, else ``None``.
    * ``claim``: take a record for an answer: ``(ANSWER, reservation)`` with
      ``charge`` reserved for the answer and the next prompt, ``(REPLAY, None)``,
      ``(RECOVER, None)``, or a ``Failure`` (``busy``, ``expired``,
      ``invalid_request`` for a different answer); raises ``Failure`` when the
      reservation cannot be had.
    * ``settle``: apply ``REVERT``/``FINISHED``/``BROKEN``/``REPLAYED``/``RECOVERED``
      to a claimed record; with a reservation, move the accepted answer's charge
      onto the record and release the rest.
    * ``child_of``: the live next prompt of an answered record, and its token.
    * ``release``: give back what a reservation still holds; idempotent.
    * ``statistics``: a ``LedgerStatistics`` snapshot; ``aclose``: drop connections
      (a later call reconnects).

    A shared store that cannot be reached makes ``begin`` raise ``LedgerUnavailable``,
    and ``commit``, ``find``, ``claim`` and ``child_of`` raise ``Failure(BUSY, STORE_DOWN)``.
    """

    default_lifetime: Lifetime

    def open_lifetime(self) -> Lifetime: ...
    def close_lifetime(self, lifetime: Lifetime) -> None: ...
    async def begin(self, binding: Binding, arguments_bytes: int) -> V: ...
    async def commit(
        self, reservation: V, parent: R | None, prompt: object, charge: int, seconds: float
    ) -> tuple[R, str] | Failure: ...
    async def find(self, token: str, binding: Binding) -> R | None: ...
    async def claim(
        self, record: R, answer_key: bytes, answer_charge: int, charge: int
    ) -> tuple[Event, V | None] | Failure: ...
    async def settle(self, record: R, event: Event, reservation: V | None = None) -> None: ...
    async def child_of(self, record: R) -> tuple[R, str] | None: ...
    async def release(self, reservation: V) -> None: ...
    async def statistics(self) -> LedgerStatistics: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LedgerStatistics:
    """A snapshot of a ledger: ``used`` bytes (retained and reserved), ``live`` prompt
    records, ``principals`` holding bytes."""

    used: int
    live: int
    principals: int


class LedgerFactory(Protocol):
    """A shared continuation store's configuration, bound to one registry when it is
    built (``opgate.redis.RedisLedger``): ``bind`` returns the store's backend.

    ``keys`` are the registry's subkeys of its shared secret (a store seals what it
    keeps under ``keys.seal`` and authenticates it with ``keys.mac``); ``revision``
    names the catalog, so replicas with other definitions never share a record.
    """

    def bind(
        self,
        *,
        limits: Limits,
        clock: Callable[[], float],
        keys: RegistryKeys,
        revision: str,
    ) -> LedgerBackend[Any, Any]: ...


def chain_charge(arguments_bytes: int) -> int:
    """What a chain itself retains while any of its records lives: its fixed
    bookkeeping (``CHAIN_FIXED_BYTES``) and its canonical arguments."""
    return CHAIN_FIXED_BYTES + arguments_bytes


def initial_charge(arguments_bytes: int, limits: Limits) -> int:
    """What ``begin`` reserves for an initial call with input support: its chain and a
    maximum prompt (``Limits.max_prompt_charge()``)."""
    return chain_charge(arguments_bytes) + limits.max_prompt_charge()


def answer_room(new_call: bool, nbytes: int, kept: int, headroom: int) -> int:
    """The part of the ledger kept for one principal's answers after it reserves ``nbytes``.

    Every principal holding data keeps up to ``headroom`` (``Limits.answer_headroom()``)
    of the *ledger* for its answers, as it does of its own share: a new call sets it
    to ``headroom`` (new calls are admitted only with room for it), an answer's
    reservation is paid from it first (``kept`` is what is kept now). Others' new calls
    and answers never use it, so a principal whose pending prompts fill its share can
    answer them however full the ledger is.
    """
    if new_call:
        return headroom
    return kept - min(kept, nbytes)


def returned_room(kept: int, credit: int, released: int, limits: Limits) -> int:
    """The principal's answer room after ``released`` bytes of a reservation that took
    ``credit`` of it come back (what the answer did not retain is kept again)."""
    return min(limits.answer_headroom(), kept + min(credit, released))
