"""``Ledger``: the in-memory continuation store of one registry (the default backend).

It honours the contract of ``opgate.ledger`` (the state table, the charges, the
public answers) with plain bookkeeping under a lock: its ``LedgerBackend`` calls are
coroutines that never suspend, and the lock is only held for bookkeeping, never
across a callback. Records are kept by ``token_hash``; a chain holds its binding and
what it retains.

Capacity: every byte retained is charged against ``Limits.ledger_bytes``, the
principal's share ``Limits.principal_bytes`` (per scope-key hash) and the chain's
``Limits.chain_bytes`` (``_reserve``); the answer room of every principal holding
data is kept per scope hash (``answer_room``) and summed in ``rooms``, so
``used + rooms <= ledger_bytes``. Expired records leave on admission and access, and
when their serving lifetime closes.

Memory follows the accounting: a record that leaves the ledger (expiry, a closed
lifetime, settling after either) is referenced by nothing the ledger keeps. The
expiry heap holds record *keys*, not records, and is rebuilt whenever stale keys
outnumber live records (``HEAP_SLACK``); a parent drops its link to a child that
leaves, and a removed record drops its own.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ._failures import Failure, FailureCode
from ._limits import Limits
from .ledger import (
    ANSWER_DIFFERS,
    IN_FLIGHT,
    LEDGER_FULL,
    PRINCIPAL_FULL,
    RECORD_BUSY,
    Binding,
    Event,
    LedgerStatistics,
    Lifetime,
    RecordState,
    answer_room,
    chain_charge,
    initial_charge,
    returned_room,
    token_hash,
    transition,
)

__all__ = ["HEAP_SLACK", "Chain", "Ledger", "Record", "Reservation"]

#: Stale expiry-heap entries tolerated beyond the live records before a rebuild; the
#: heap never holds more than ``2 * live + HEAP_SLACK`` keys (32-byte hashes, no records).
HEAP_SLACK = 64


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

    # -- records -----------------------------------------------------------------

    async def begin(self, binding: Binding, arguments_bytes: int) -> Reservation:
        """Reserve a chain and a maximum prompt for an initial call with input support."""
        nbytes = initial_charge(arguments_bytes, self.limits)
        with self._lock:
            reservation = self._reserve(nbytes, None, binding.scope_hash)
            chain = Chain(binding, retained=nbytes)
            chain.arguments_charge = chain_charge(arguments_bytes)
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
