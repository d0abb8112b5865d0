"""The continuation ledger: every prompt state and transition, and the capacity budget.

This module owns the life of a continuation. Each prompt issued to a person is a
*record*; the records of one operation call form a *chain*. A record's states and
the events that move it are listed once, in ``TRANSITIONS``; ``transition`` is the
only way a state changes, and it refuses anything not in the table::

    PENDING ──ANSWER──▶ ANSWERING ──PROMPTED──▶ ANSWERED ──REPLAY──▶ REPLAYING
       ▲                    │                      ▲                     │
       └──────REVERT────────┤                      └─────REPLAYED────────┘
                            ├──FINISHED──▶ COMPLETED ──RECOVER──▶ RECOVERING
                            └──BROKEN────▶ NEEDS_RECOVERY ─RECOVER─▶ RECOVERING
            RECOVERING ──RECOVERED──▶ COMPLETED,  RECOVERING ──BROKEN──▶ NEEDS_RECOVERY

* ``ANSWERING``, ``REPLAYING`` and ``RECOVERING`` are in flight: a request holds the
  record across its policy and handler callbacks, and any other request on the
  same continuation gets ``busy``. The ledger lock itself is only held for
  bookkeeping, never across a callback.
* ``REVERT``: the answer was refused before dispatch (execution denied), so nothing
  was accepted and the prompt is pending again.
* Expiry is not a state: an expired record leaves the ledger (on admission and
  access, and when its serving lifetime closes), and an unknown token, an expired
  one and one bound to another operation, argument set, principal or lifetime all
  get the same ``expired`` answer.

Tokens are 256 random bits (``secrets.token_urlsafe(32)``, 43 characters). Records
are keyed by a SHA-256 hash of the token; a parent keeps its child's token (it must
hand it out again on an identical replay), never in a ``repr``.

Capacity: every byte the ledger retains is charged against ``Limits.ledger_bytes``,
the principal's share ``Limits.principal_bytes`` (per scope-key hash) and the
chain's ``Limits.chain_bytes``, through reservations taken before a handler runs;
unused reservation is released when the call returns. When a reservation cannot be
had the request gets ``interaction_limit`` (its chain is full) or ``busy`` (its
principal's share or the ledger is full) and nothing is evicted. New calls leave the
last ``Limits.answer_headroom()`` bytes of a principal's share to its answers, and
every principal holding data keeps as much of the ledger for its answers
(``answer_room``), so a principal whose pending prompts fill its share, or whose
prompts and others' fill the ledger, can still answer them.

Memory follows the accounting: a record that leaves the ledger (expiry, a closed
lifetime, settling after either) is referenced by nothing the ledger keeps. The
expiry heap holds record *keys*, not records, and is rebuilt whenever stale keys
outnumber live records (``HEAP_SLACK``); a parent drops its link to a child that
leaves, and a removed record drops its own.
"""

from __future__ import annotations

import enum
import hashlib
import heapq
import itertools
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ._failures import Failure, FailureCode
from ._limits import CHAIN_FIXED_BYTES, Limits

__all__ = [
    "TOKEN_LENGTH",
    "TRANSITIONS",
    "Binding",
    "Chain",
    "Event",
    "Ledger",
    "LedgerBackend",
    "LedgerRecord",
    "LedgerStateError",
    "LedgerStatistics",
    "LedgerUnavailable",
    "Lifetime",
    "Record",
    "RecordState",
    "Reservation",
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

#: Stale expiry-heap entries tolerated beyond the live records before a rebuild; the
#: heap never holds more than ``2 * live + HEAP_SLACK`` keys (32-byte hashes, no records).
HEAP_SLACK = 64


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

    def __repr__(self) -> str:
        return f"<Lifetime {'closed' if self.closed else 'open'}>"


@dataclass(slots=True)  # internal and never mutated after construction
class Binding:
    """What a continuation is bound to; any difference makes a token unusable."""

    operation: str
    arguments_hash: bytes
    scope_hash: bytes
    lifetime: Lifetime


@dataclass(eq=False, slots=True)
class Chain:
    """The records of one operation call that asked for input."""

    binding: Binding
    retained: int = 0  # bytes charged for this chain, records included
    prompts: int = 0  # prompts committed so far
    live_records: int = 0
    arguments_charge: int = 0


@dataclass(eq=False, slots=True)
class Record:
    """One prompt issued to a person, and what became of its answer."""

    key: bytes
    chain: Chain
    round: int
    prompt: object  # FormInput | URLInput (immutable)
    expires_at: float
    charge: int
    state: RecordState = RecordState.PENDING
    answer_key: bytes | None = None  # action + canonical answer bytes, once accepted
    answer_charge: int = 0
    child: Record | None = field(default=None, repr=False)
    child_token: str | None = field(default=None, repr=False)
    parent_key: bytes | None = field(default=None, repr=False)
    removed: bool = False

    def move(self, event: Event) -> None:
        """Apply ``event`` through the transition table."""
        self.state = transition(self.state, event)


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
    makes one atomic server-side step per call. Every call is one transition of the
    table above, or a read; none holds anything across a callback. A backend's
    settling calls (``settle``, ``release``, ``commit``) complete even when the
    calling task is being cancelled.

    * ``begin``: reserve a chain and a maximum prompt for an initial call with input
      support (``Failure(BUSY)`` when the principal's share or the ledger is full).
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


class Reservation:
    """Bytes set aside in the ledger, a principal's share (and optionally a chain)
    until settled or released; ``credit`` is what it took of the principal's answer room."""

    __slots__ = ("_ledger", "chain", "credit", "nbytes", "scope")

    def __init__(self, ledger: Ledger, nbytes: int, chain: Chain | None, scope: bytes) -> None:
        self._ledger = ledger
        self.nbytes = nbytes
        self.chain = chain
        self.scope = scope
        self.credit = 0


class Ledger:
    """The in-memory store of continuations of one registry (the default backend).

    Thread-safe; its ``LedgerBackend`` calls are coroutines that never suspend.
    """

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock
        self.used = 0  # bytes retained or reserved
        self._lock = threading.Lock()
        self._records: dict[bytes, Record] = {}
        self._by_scope: dict[bytes, int] = {}  # bytes retained or reserved per principal
        self._rooms: dict[bytes, int] = {}  # the ledger kept for each principal's answers
        self.rooms = 0  # their sum: used + rooms <= ledger_bytes (see answer_room)
        self._expiry: list[tuple[float, int, bytes]] = []  # (deadline, sequence, record key)
        self._sequence = itertools.count()
        self.default_lifetime = Lifetime(self)

    def open_lifetime(self) -> Lifetime:
        """A new serving lifetime; closing it expires only its own continuations."""
        return Lifetime(self)

    # -- capacity ----------------------------------------------------------------

    def _reserve(self, nbytes: int, chain: Chain | None, scope: bytes) -> Reservation:
        """Reserve ``nbytes`` for the principal ``scope`` and charge ``chain`` (locked).

        Raises ``Failure(INTERACTION_LIMIT)`` when the chain is full, ``Failure(BUSY)``
        when the principal's share or the whole ledger is.
        """
        limits = self.limits
        self._sweep(self.clock())
        if chain is not None and chain.retained + nbytes > limits.chain_bytes:
            raise Failure(
                FailureCode.INTERACTION_LIMIT,
                "this operation's input prompts reached their retained-data limit",
            )
        held = self._by_scope.get(scope, 0)
        share = limits.principal_bytes
        if chain is None:  # a new call: leave room for answering the prompts already made
            share -= limits.answer_headroom()
        if held + nbytes > share:
            raise Failure(FailureCode.BUSY, PRINCIPAL_FULL)
        kept = self._rooms.get(scope, 0)
        room = answer_room(chain is None, nbytes, kept, limits.answer_headroom())
        if self.used + self.rooms + nbytes + room - kept > limits.ledger_bytes:
            raise Failure(FailureCode.BUSY, LEDGER_FULL)
        self.used += nbytes
        self._by_scope[scope] = held + nbytes
        self._rooms[scope] = room
        self.rooms += room - kept
        if chain is not None:
            chain.retained += nbytes
        reservation = Reservation(self, nbytes, chain, scope)
        reservation.credit = max(0, kept - room)
        return reservation

    async def release(self, reservation: Reservation) -> None:
        """Return a reservation's remaining bytes; idempotent."""
        if reservation.nbytes:
            with self._lock:
                self._release(reservation)

    def _release(self, reservation: Reservation) -> None:
        if reservation.credit and reservation.nbytes:
            kept = self._rooms.get(reservation.scope, 0)
            room = returned_room(kept, reservation.credit, reservation.nbytes, self.limits)
            self._rooms[reservation.scope] = room
            self.rooms += room - kept
        reservation.credit = 0
        self._uncharge(reservation.scope, reservation.nbytes)
        if reservation.chain is not None:
            reservation.chain.retained -= reservation.nbytes
        reservation.nbytes = 0

    def _uncharge(self, scope: bytes, nbytes: int) -> None:
        """Return ``nbytes`` to the ledger and to the principal ``scope``."""
        if nbytes == 0:
            return
        self.used -= nbytes
        held = self._by_scope[scope] - nbytes
        if held:
            self._by_scope[scope] = held
        else:
            del self._by_scope[scope]  # no bookkeeping is kept for principals without data
            self.rooms -= self._rooms.pop(scope, 0)

    @staticmethod
    def initial_charge(arguments_bytes: int, limits: Limits) -> int:
        """What an initial call with input support reserves: a chain and a maximum prompt."""
        return CHAIN_FIXED_BYTES + arguments_bytes + Ledger.max_prompt_charge(limits)

    @staticmethod
    def max_prompt_charge(limits: Limits) -> int:
        """The charge of the largest prompt a handler may issue."""
        return limits.max_prompt_charge()

    # -- records -----------------------------------------------------------------

    async def begin(self, binding: Binding, arguments_bytes: int) -> Reservation:
        """Reserve a chain and a maximum prompt for an initial call with input support."""
        nbytes = self.initial_charge(arguments_bytes, self.limits)
        with self._lock:
            reservation = self._reserve(nbytes, None, binding.scope_hash)
            chain = Chain(binding, retained=nbytes)
            chain.arguments_charge = CHAIN_FIXED_BYTES + arguments_bytes
            reservation.chain = chain
            return reservation

    async def commit(
        self,
        reservation: Reservation,
        parent: Record | None,
        prompt: object,
        charge: int,
        seconds: float,
    ) -> tuple[Record, str] | Failure:
        """Commit the next prompt of the reservation's chain, paid from it.

        Returns the record and its token, or a ``Failure`` (``expired`` when the
        lifetime closed or the deadline already passed). Once committed, whatever the
        reservation has left is released; after a failure it is left as it was.
        """
        chain = reservation.chain
        assert chain is not None
        with self._lock:
            committed = self._commit(chain, parent, prompt, charge, seconds, reservation)
            if not isinstance(committed, Failure):
                self._release(reservation)
            return committed

    def _commit(
        self,
        chain: Chain,
        parent: Record | None,
        prompt: object,
        prompt_charge: int,
        lifetime_seconds: float,
        reservation: Reservation,
    ) -> tuple[Record, str] | Failure:
        now = self.clock()
        self._sweep(now)
        expires_at = now + lifetime_seconds
        if parent is not None:
            expires_at = min(expires_at, parent.expires_at)
        if chain.binding.lifetime.closed or expires_at <= now:
            return Failure(FailureCode.EXPIRED)
        if prompt_charge > reservation.nbytes:  # pragma: no cover - checked by the caller
            return Failure(FailureCode.INVALID_RESULT, "the prompt exceeds its budget")
        token = secrets.token_urlsafe(32)
        record = Record(
            key=token_hash(token),
            chain=chain,
            round=chain.prompts + 1,
            prompt=prompt,
            expires_at=expires_at,
            charge=prompt_charge,
            parent_key=None if parent is None else parent.key,
        )
        reservation.nbytes -= prompt_charge  # now retained by the record
        if parent is None:
            # The chain's own charge (fixed + arguments) moves from the reservation too.
            reservation.nbytes -= chain.arguments_charge
        chain.prompts += 1
        chain.live_records += 1
        self._records[record.key] = record
        heapq.heappush(self._expiry, (expires_at, next(self._sequence), record.key))
        self._compact()
        if parent is not None:
            # The accepted answer is retained with its record from now on.
            reservation.nbytes -= parent.answer_charge
            parent.charge += parent.answer_charge
            parent.child = record
            parent.child_token = token
            parent.move(Event.PROMPTED)
        return record, token

    async def find(self, token: str, binding: Binding) -> Record | None:
        """The live record for ``token`` under ``binding``, else ``None`` (one answer for all)."""
        key = token_hash(token)
        with self._lock:
            self._sweep(self.clock())
            record = self._records.get(key)
            if record is None or record.chain.binding != binding:
                return None
            return record

    async def claim(
        self, record: Record, answer_key: bytes, answer_charge: int, charge: int
    ) -> tuple[Event, Reservation | None] | Failure:
        """Take ``record`` for a request answering it with ``answer_key``.

        Returns the event applied (``ANSWER`` with a reservation of ``charge`` bytes,
        ``REPLAY`` or ``RECOVER``) or the failure to return: ``busy`` while another
        request holds it, ``expired`` once it left the ledger, ``invalid_request``
        for an answer that differs from the one already accepted (a chain never
        forks). Raises ``Failure`` when a new answer's reservation cannot be had.
        """
        with self._lock:
            if record.removed or record.expires_at <= self.clock():
                return Failure(FailureCode.EXPIRED)
            if record.state in IN_FLIGHT:
                return Failure(FailureCode.BUSY, RECORD_BUSY)
            if record.state is RecordState.PENDING:
                reservation = self._reserve(charge, record.chain, record.chain.binding.scope_hash)
                record.answer_key = answer_key
                record.answer_charge = answer_charge
                record.move(Event.ANSWER)
                return Event.ANSWER, reservation
            if record.answer_key != answer_key:
                return Failure(FailureCode.INVALID_REQUEST, ANSWER_DIFFERS)
            event = Event.REPLAY if record.state is RecordState.ANSWERED else Event.RECOVER
            record.move(event)
            return event, None

    async def settle(
        self, record: Record, event: Event, reservation: Reservation | None = None
    ) -> None:
        """Apply ``event`` to a claimed record; move the answer's charge onto it and
        release the rest of ``reservation``."""
        with self._lock:
            if event is Event.REVERT:
                record.answer_key = None
                record.answer_charge = 0
            elif reservation is not None and record.state is RecordState.ANSWERING:
                # FINISHED or BROKEN: the accepted answer stays for recovery.
                reservation.nbytes -= record.answer_charge
                record.charge += record.answer_charge
            record.move(event)
            if reservation is not None:
                self._release(reservation)
            if record.removed:
                return
            if record.expires_at <= self.clock() or record.chain.binding.lifetime.closed:
                self._remove(record)

    async def child_of(self, record: Record) -> tuple[Record, str] | None:
        """The live child prompt of an answered record and its token, else ``None``."""
        with self._lock:
            child, token = record.child, record.child_token
            if child is None or token is None or child.removed:
                return None
            if child.expires_at <= self.clock():
                self._remove(child)
                return None
            return child, token

    # -- expiry ------------------------------------------------------------------

    def _sweep(self, now: float) -> None:
        # self._expiry is re-read each time: a removal may rebuild it (_compact)
        while self._expiry and self._expiry[0][0] <= now:
            record = self._records.get(heapq.heappop(self._expiry)[2])
            if record is None:
                continue  # already left the ledger (closed lifetime, settled)
            if record.state in IN_FLIGHT:
                continue  # charged until its handler returns; settle() removes it
            self._remove(record)

    def _compact(self) -> None:
        """Rebuild the expiry heap once stale keys outnumber the live records.

        Amortized constant time: a rebuild of ``n`` entries follows at least
        ``n / 2`` removals or insertions since the last one.
        """
        if len(self._expiry) > 2 * len(self._records) + HEAP_SLACK:
            records = self._records
            self._expiry = [entry for entry in self._expiry if entry[2] in records]
            heapq.heapify(self._expiry)

    def _remove(self, record: Record) -> None:
        """Take ``record`` out of the ledger: its charge, and every reference kept to it."""
        if record.removed:
            return
        record.removed = True
        self._records.pop(record.key, None)
        chain = record.chain
        scope = chain.binding.scope_hash
        self._uncharge(scope, record.charge)
        chain.retained -= record.charge
        chain.live_records -= 1
        if chain.live_records == 0:
            self._uncharge(scope, chain.arguments_charge)
            chain.retained -= chain.arguments_charge
        # Nothing the ledger keeps may hold a removed record (or its token) alive.
        record.child = None
        record.child_token = None
        if record.parent_key is not None:
            parent = self._records.get(record.parent_key)
            if parent is not None and parent.child is record:
                parent.child = None
                parent.child_token = None
        self._compact()

    def close_lifetime(self, lifetime: Lifetime) -> None:
        """Expire every record committed under ``lifetime`` that is not in flight."""
        with self._lock:
            lifetime.closed = True
            for record in list(self._records.values()):
                if record.chain.binding.lifetime is lifetime and record.state not in IN_FLIGHT:
                    self._remove(record)

    def sweep(self) -> None:
        """Remove expired records now."""
        with self._lock:
            self._sweep(self.clock())

    async def statistics(self) -> LedgerStatistics:
        """A snapshot of the accounting."""
        with self._lock:
            return LedgerStatistics(self.used, len(self._records), len(self._by_scope))

    async def aclose(self) -> None:
        """Nothing to close in memory."""

    @property
    def live(self) -> int:
        """Number of live prompt records."""
        return len(self._records)
