"""``RedisLedger``: the continuation ledger kept in Redis, shared by every replica.

The contract is ``opgate.ledger``'s, which the in-memory ledger honours too (the
same state table, the same capacity rules and public answers); what differs is where records live
and who may run a transition:

* Each transition is one run of ``SCRIPT`` (``_script.py``), atomic on the Redis
  server: two replicas answering the same prompt at once see one ``ANSWER`` and
  one ``busy``. No lock is held while a policy, handler or progress callback runs:
  a record *in flight* is a state plus a **lease**, which its replica renews every
  quarter lease from a thread of its own (``_Keeper``), so a handler that blocks its
  event loop keeps its record. Leases are measured by Redis (``TIME``, through the
  script's lease clock), never by a replica's clock. A replica that dies stops
  renewing; when its lease has run out the record is broken (``needs_recovery``; a
  replay goes back to ``answered``) and the identical answer, on any replica, runs
  a recovery-only call. Reservations carry the same lease, so a dead replica's
  reserved bytes come back too.
* A script that Redis runs after the replica gave up on it does nothing: ``begin``,
  ``commit`` and ``claim`` carry a deadline in Redis time (``late_ms``: the
  replica's estimate of Redis's clock, from the time every reply carries, plus
  half the call timeout), so a claim queued in a stopped Redis cannot take a record
  for an answer nobody will run. A claim whose reply never arrived is given back
  (``abandon``) by the keeper, which retries it (and renews the record meanwhile)
  until Redis answers; so is a ``REVERT`` that could not be recorded.
* Records are authenticated with the shared secret: an identity MAC (key, chain,
  round, deadline, binding) and a state MAC (key, state, answer), each computed by
  the replica that asks for the write (for the state a lease expiry moves to, in
  advance, at the claim) and verified before a replica acts on what it reads. A
  Redis writer without the secret can delete records, make them busy or exhaust
  the budget; a record it altered is refused (``expired``) and removed at the
  claim. (A writer who also read a record earlier can put back what it saw, which
  no MAC can tell from the original: see docs/security.md, "Shared ledger".)
* Keys in Redis are SHA-256 hashes of tokens (never tokens). Prompts (message,
  form schema or URL, private state) and the child tokens a parent keeps for
  replay are sealed with AES-256-GCM under a key derived from the registry's
  shared secret, bound to the record's key; bindings (revision, operation,
  canonical arguments hash, scope-key HMAC, lifetime) and answers are kept only as
  HMACs. A read of Redis shows sizes, states, deadlines and counters, never
  application data.
* Record deadlines are the registry clock's (a skewed replica shifts expiry, never
  exclusivity: leases are Redis's); a record's payload is ``PEXPIRE``'d once when it
  is committed, at its deadline plus ``lease + RETENTION_GRACE``, and never
  extended. The accounting is swept on every call, so charged bytes come back even
  when Redis dropped a payload first.
* Lifetimes: every replica's ``open_lifetime()`` stands for the one *deployment*
  lifetime (see ``Lifetime``): a prompt issued on one replica is answerable on all
  of them, and a replica's shutdown expires nothing. Direct ``Registry.invoke``
  calls without ``lifetime=`` share a second, ``direct`` lifetime.
* When Redis cannot be reached, admissions (``find``, ``claim``, ``commit``,
  ``child_of``) answer ``busy``, and ``begin`` raises ``LedgerUnavailable`` (a first
  call then runs without input support); settling calls are logged and left to the
  lease, except the give-backs above, which the keeper delivers.
  ``_Health`` says so in the log when it starts and ends (and every
  ``HEALTH_REMINDER`` while it lasts); while it lasts, one call per
  ``RETRY_INTERVAL`` tries Redis and the others do not wait for it.
* Round trips: a prompt is ``begin`` + ``commit``; a resume on the replica that
  issued the prompt is ``claim`` + ``settle`` (``find`` answers from ``_Known``),
  on another replica ``find`` + ``claim`` + ``settle``. Scripts go through
  ``ScriptWire`` (``_wire.py``), which retries a dropped connection once; every
  script recognizes its own earlier run, so the retry is exact.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import os
import secrets
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import anyio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis import Redis
from redis.exceptions import NoScriptError, RedisError

from .. import Failure, FailureCode, InputMode, Limits
from ..ledger import (
    ANSWER_DIFFERS,
    LEDGER_FULL,
    PRINCIPAL_FULL,
    RECORD_BUSY,
    STORE_DOWN,
    Binding,
    Event,
    LedgerStatistics,
    LedgerUnavailable,
    Lifetime,
    RecordState,
    RegistryKeys,
    StoredPrompt,
    chain_charge,
    initial_charge,
    token_hash,
    transition,
)
from ._script import SCRIPT
from ._wire import CONNECT_TIMEOUT, ScriptWire

__all__ = ["DEFAULT_LEASE", "RETENTION_GRACE", "RedisLedger"]

logger = logging.getLogger("opgate.redis")

#: How long a record stays in flight without its replica renewing the lease: after a
#: replica dies, its transitions are recoverable (and its reservations free) this late.
DEFAULT_LEASE = timedelta(seconds=15)

#: Shortest lease accepted: renewals every quarter of it must fit round trips.
MIN_LEASE = timedelta(milliseconds=300)

#: Extra life of a record's payload in Redis beyond its deadline and lease, so the
#: sweep (not the TTL) is what normally removes it.
RETENTION_GRACE = timedelta(seconds=60)

#: Longest a ledger call may take before it counts as Redis being unavailable; a
#: script that Redis runs later than half of it after it was sent does nothing.
CALL_TIMEOUT = timedelta(seconds=10)

#: While Redis is unreachable, how often a call tries it again (the others fail at once).
RETRY_INTERVAL = 1.0

#: While Redis is unreachable, how often the log says it still is.
HEALTH_REMINDER = 60.0

_PROMPT_AAD = b"opgate/ledger/prompt/v1"
_TOKEN_AAD = b"opgate/ledger/child-token/v1"
_NONCE = 12
_LENGTHS = struct.Struct(">IIII")

#: Lifetime ids: every replica's serving lifetime is the deployment's.
SERVING = b"serving"
DIRECT = b"direct"


class RedisLedger:
    """A continuation ledger in Redis: ``Registry(..., secret=..., ledger=RedisLedger(url))``.

    ``url`` is a ``redis://HOST:PORT/DB`` (or ``rediss://``, ``unix://``) URL;
    ``password`` is Redis's password when the URL holds none (give it once: in the
    URL or here, not both); ``prefix`` names the deployment's keys (one hash tag, so
    one cluster slot; deployments sharing a Redis need different prefixes);
    ``lease`` is how long a transition survives its replica (default 15 s), measured
    by Redis; ``timeout`` how long a call may wait for Redis before it answers
    ``busy`` (default 10 s). Every replica must use the same URL, prefix, lease,
    secret, definitions and ``Limits``. Needs the ``redis`` extra.
    """

    __slots__ = ("_lease", "_password", "_prefix", "_timeout", "_url")

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "opgate",
        lease: timedelta = DEFAULT_LEASE,
        password: str | None = None,
        timeout: timedelta = CALL_TIMEOUT,
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError("RedisLedger needs a redis://HOST:PORT/DB URL")
        try:
            holds_password = url_has_password(url)
        except ValueError:
            raise ValueError(
                "RedisLedger needs a redis://HOST:PORT/DB, rediss:// or unix:// URL"
            ) from None
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{} "):
            raise ValueError("RedisLedger prefix must be a nonempty name without braces or spaces")
        if not isinstance(lease, timedelta) or lease < MIN_LEASE:
            raise ValueError(f"RedisLedger lease must be a timedelta of at least {MIN_LEASE}")
        if not isinstance(timeout, timedelta) or timeout < MIN_LEASE:
            raise ValueError(f"RedisLedger timeout must be a timedelta of at least {MIN_LEASE}")
        if password is not None:
            if not isinstance(password, str) or not password:
                raise ValueError("RedisLedger password must be a nonempty str")
            if holds_password:
                raise ValueError(
                    "RedisLedger got a password twice: in the URL and as password=; give one"
                )
        self._url = url
        self._prefix = prefix
        self._lease = lease
        self._timeout = timeout
        self._password = password

    def __repr__(self) -> str:
        # no URL: it may hold a password
        return f"RedisLedger(prefix={self._prefix!r}, lease={self._lease!r})"

    def __reduce__(self) -> NoReturn:
        # a pickle or copy would carry the URL and the password
        raise TypeError("a RedisLedger cannot be pickled (it holds Redis's credentials)")

    def bind(
        self,
        *,
        limits: Limits,
        clock: Callable[[], float],
        keys: RegistryKeys,
        revision: str,
    ) -> RedisBackend:
        """The backend one registry uses."""
        return RedisBackend(
            self._url, self._prefix, self._lease, limits=limits, clock=clock, keys=keys,
            revision=revision, timeout=self._timeout, password=self._password,
        )  # fmt: skip


def url_has_password(url: str) -> bool:
    """Whether a Redis URL carries a password (``:PASS@`` or a ``password=`` query
    option, as redis-py reads it); ``ValueError`` for a URL redis-py cannot read."""
    from redis.asyncio.connection import parse_url

    return any("password" in name for name in parse_url(url))


def redacted_url(url: str) -> str:
    """``url`` without its credentials and query options, fit for a log line."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<an unreadable Redis URL>"
    if ":" in host:
        host = f"[{host}]"
    user = "***@" if parts.username or parts.password else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


@dataclass(slots=True, eq=False)
class RedisRecord:
    """A record as one request sees it (a snapshot, plus the claim it holds)."""

    key: str  # hex SHA-256 of the token
    chain: str
    round: int
    deadline: int  # ms, the registry clock
    prompt: object  # StoredPrompt
    binding: bytes = b""
    lifetime: Lifetime | None = None
    claim: str = ""
    claimed: RecordState | None = None  # the in-flight state this request's claim holds
    answer: str = ""  # the answer MAC of the claim

    @property
    def expires_at(self) -> float:
        return self.deadline / 1000

    def __repr__(self) -> str:
        return f"<RedisRecord round={self.round}>"


@dataclass(slots=True, eq=False)
class RedisReservation:
    """Bytes reserved in Redis for one request, until committed, settled or released."""

    id: str
    chain: str
    binding: bytes
    lifetime: Lifetime
    open: bool = True


#: The prompts a replica keeps of records it committed or found (see ``_Known``).
KNOWN_RECORDS = 4096
KNOWN_BYTES = 8 * 1024 * 1024


class _Known:
    """What a replica already knows of records it committed or found, to find them again
    without a round trip.

    Everything kept is immutable for a record's life (its chain, round, deadline,
    binding HMAC and prompt), so an entry is never stale; whether the record is still
    live is what ``claim`` asks Redis, atomically with taking it. Entries leave when
    their deadline passes, when their chain moves past them, and oldest first beyond
    ``KNOWN_RECORDS`` entries or ``KNOWN_BYTES`` of prompts.
    """

    __slots__ = ("_bytes", "_entries")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, int, int, bytes, StoredPrompt]] = {}
        self._bytes = 0

    def add(
        self, key: str, chain: str, round_: int, deadline: int, binding: bytes, prompt: object
    ) -> None:
        assert isinstance(prompt, StoredPrompt)
        if key in self._entries:
            return
        self._entries[key] = (chain, round_, deadline, binding, prompt)
        self._bytes += prompt.size
        while len(self._entries) > KNOWN_RECORDS or self._bytes > KNOWN_BYTES:
            self.drop(next(iter(self._entries)))

    def get(self, key: str, now_ms: int) -> tuple[str, int, int, bytes, StoredPrompt] | None:
        entry = self._entries.get(key)
        if entry is not None and entry[2] <= now_ms:
            self.drop(key)
            return None
        return entry

    def drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[4].size

    def __len__(self) -> int:
        return len(self._entries)


class _Health:
    """Whether this replica reaches Redis; a change is said once in the log.

    ``where`` is the URL without credentials. While Redis is down, ``skip()`` lets
    one call per ``RETRY_INTERVAL`` try it and fails the others at once, so that an
    outage does not make every call wait for a connection attempt.
    """

    __slots__ = ("_last_said", "_last_try", "down_since", "probing", "where")

    def __init__(self, where: str) -> None:
        self.where = where
        self.down_since: float | None = None
        self.probing = False  # a call is trying Redis while it is down
        self._last_try = 0.0
        self._last_said = 0.0

    def skip(self) -> bool:
        """Whether to fail this call without trying Redis: it is down, and another call
        is trying it or just did. (A call let through must end with ``done()``.)"""
        if self.down_since is None:
            return False
        now = time.monotonic()
        if self.probing or now - self._last_try < RETRY_INTERVAL:
            return True
        self._last_try = now
        self.probing = True
        return False

    def done(self) -> None:
        """The call ``skip()`` let through has its answer (whatever it was)."""
        self.probing = False

    def failed(self, op: str, exc: BaseException, *, quiet: bool = False) -> None:
        """Redis failed ``op``: say so if it was up (or a reminder is due)."""
        now = time.monotonic()
        self._last_try = now
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        if self.down_since is None:
            self.down_since = now
            self._last_said = now
            if not quiet:
                logger.warning(
                    "ledger %s: the continuation store at %s is unavailable (%s); calls run "
                    "without input prompts and answers get busy until it is back",
                    op, self.where, reason,
                )  # fmt: skip
        elif now - self._last_said >= HEALTH_REMINDER:
            self._last_said = now
            logger.warning(
                "ledger: the continuation store at %s is still unavailable after %.0f s (%s)",
                self.where, now - self.down_since, reason,
            )  # fmt: skip

    def ok(self) -> None:
        """Redis answered: say so if it was down."""
        if self.down_since is not None:
            logger.warning(
                "ledger: the continuation store at %s is available again after %.0f s",
                self.where, time.monotonic() - self.down_since,
            )  # fmt: skip
            self.down_since = None


#: Give-backs a replica keeps for delivery at most; beyond, the oldest is dropped (its
#: record, if the claim did run, breaks when its lease runs out).
MAX_OWED = 4096

#: Exceptions that mean Redis could not be reached (or did not answer in time).
_STORE_ERRORS = (RedisError, TimeoutError, OSError)


class _Keeper:
    """Keeps a replica's leases and owed give-backs, from a thread of its own.

    The thread renews every lease the replica holds each quarter lease, on its own
    (synchronous) connection, so neither a handler that blocks the event loop nor a
    busy loop delays a renewal. Each exchange of the thread waits at most a quarter
    lease (or the call timeout, if shorter), so a connection that stopped answering
    costs one renewal, not the lease: the next one goes out on a fresh connection.
    It also delivers *give-backs* that must reach Redis
    (a claim whose reply never arrived, a ``REVERT`` that failed), retrying until
    Redis answers, while it keeps renewing their records. The thread ends when
    nothing is held or owed, and starts again on the next ``hold``.
    """

    def __init__(
        self,
        url: str,
        key: bytes,
        lease_ms: int,
        timeout: float,
        argv: Callable[[str, tuple[str | int | bytes, ...]], tuple[str | int | bytes, ...]],
        password: str | None = None,
    ) -> None:
        self._url = url
        self._password = password
        self._key = key
        self._interval = lease_ms / 4000
        self._timeout = min(timeout, self._interval)
        self._connect_timeout = min(CONNECT_TIMEOUT, self._interval)
        self._argv = argv
        self._sha = hashlib.sha1(SCRIPT.encode(), usedforsecurity=False).hexdigest()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._held: dict[str, int] = {}
        self._owed: list[tuple[tuple[str | int | bytes, ...], tuple[str, ...]]] = []
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None

    def hold(self, *members: str) -> None:
        with self._lock:
            for member in members:
                self._held[member] = self._held.get(member, 0) + 1
            self._start()

    def drop(self, *members: str) -> None:
        with self._lock:
            self._release(members)

    def _release(self, members: tuple[str, ...]) -> None:  # locked
        for member in members:
            count = self._held.pop(member, 0) - 1
            if count > 0:
                self._held[member] = count

    def owe(self, args: tuple[str | int | bytes, ...], *members: str) -> None:
        """Deliver the script run ``args`` (``op, *arguments``) until Redis answers it;
        ``members`` stay renewed until then."""
        with self._lock:
            for member in members:
                self._held[member] = self._held.get(member, 0) + 1
            self._owed.append((args, members))
            if len(self._owed) > MAX_OWED:
                _, dropped = self._owed.pop(0)
                self._release(dropped)
                logger.warning("ledger: too many give-backs owed to Redis; the oldest dropped")
            self._start()
            self._wake.notify()

    def close(self) -> None:
        """Stop the thread (it ends at its next wake-up) and give up what it holds and
        owes: those records are no longer renewed (they are left to their leases; the
        log says how many). A later ``hold`` or ``owe`` starts a new thread that keeps
        only its own records."""
        with self._lock:
            if self._held or self._owed:
                logger.warning(
                    "ledger closed with %d lease(s) held and %d give-back(s) owed; they "
                    "are no longer renewed and run out after the lease",
                    len(self._held), len(self._owed),
                )  # fmt: skip
            self._held.clear()
            self._owed.clear()
            if self._stop is not None:
                self._stop.set()
            self._thread = self._stop = None
            self._wake.notify_all()

    @property
    def owed(self) -> int:
        with self._lock:
            return len(self._owed)

    def _start(self) -> None:  # locked
        if self._thread is None:
            self._stop = stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(stop,), name="opgate-ledger-keeper", daemon=True
            )
            self._thread.start()

    def _run(self, stop: threading.Event) -> None:
        client = Redis.from_url(
            self._url,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._connect_timeout,
            password=self._password,
        )
        try:
            while True:
                with self._lock:
                    if not self._owed:
                        self._wake.wait(self._interval)
                    if stop.is_set():
                        return
                    if not self._held and not self._owed:
                        self._thread = self._stop = None
                        return
                    members = list(self._held)
                    owed = list(self._owed)
                self._renew(client, members)
                delivered = [item for item in owed if self._deliver(client, item[0])]
                with self._lock:
                    for item in delivered:
                        if item in self._owed:
                            self._owed.remove(item)
                            self._release(item[1])
                    retry = bool(self._owed)
                if retry and not delivered:
                    stop.wait(min(self._interval, 0.2))
        finally:
            client.close()

    def _call(self, client: Redis, op: str, args: tuple[str | int | bytes, ...]) -> Any:
        argv = self._argv(op, args)
        try:
            return client.evalsha(self._sha, 1, self._key, *argv)
        except NoScriptError:
            client.script_load(SCRIPT)
            return client.evalsha(self._sha, 1, self._key, *argv)

    def _renew(self, client: Redis, members: list[str]) -> None:
        if not members:
            return
        try:
            reply = self._call(client, "renew", tuple(members))
        except _STORE_ERRORS as exc:
            logger.warning("ledger leases not renewed (%s)", type(exc).__name__)
            return
        lost = [member.decode("ascii") for member in reply[2:]]
        with self._lock:  # (one settled meanwhile is not lost)
            lost = [member for member in lost if member.startswith("r:") and member in self._held]
        if lost:
            logger.warning(
                "ledger: %d transition(s) this replica still runs lost their lease; a "
                "recovery may run elsewhere (was Redis unreachable for a lease?)",
                len(lost),
            )

    def _deliver(self, client: Redis, args: tuple[str | int | bytes, ...]) -> bool:
        try:
            self._call(client, str(args[0]), args[1:])
        except _STORE_ERRORS as exc:
            logger.warning("ledger %s not delivered yet (%s)", args[0], type(exc).__name__)
            return False
        return True


class RedisBackend:
    """The ``LedgerBackend`` of one registry on a shared Redis (see the module docstring)."""

    def __init__(
        self,
        url: str,
        prefix: str,
        lease: timedelta,
        *,
        limits: Limits,
        clock: Callable[[], float],
        keys: RegistryKeys,
        revision: str,
        timeout: timedelta = CALL_TIMEOUT,
        password: str | None = None,
    ) -> None:
        self._url = url
        self._password = password
        self.health = _Health(redacted_url(url))
        self._key_prefix = f"{{{prefix}}}:"
        self._lease_ms = int(lease.total_seconds() * 1000)
        self._grace_ms = self._lease_ms + int(RETENTION_GRACE.total_seconds() * 1000)
        self._timeout = timeout.total_seconds()
        self._window_ms = int(self._timeout * 500)  # half the call timeout
        self.limits = limits
        self._clock = clock
        self._aead = AESGCM(keys.seal)
        self._mac = keys.mac
        self._revision = revision.encode("ascii")
        self._limit_args = (
            limits.chain_bytes,
            limits.principal_bytes,
            limits.ledger_bytes,
            limits.principal_bytes - limits.answer_headroom(),
            self._lease_ms,
        )
        self._wire: ScriptWire | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._key = self._key_prefix.encode("utf-8")
        self._known = _Known()
        # Redis's clock as last seen: (its time in ms, time.monotonic() when the reply came)
        self._redis_time: tuple[int, float] | None = None
        self._keeper = _Keeper(
            url, self._key, self._lease_ms, self._timeout, self._keeper_argv, password
        )
        #: Records refused because they failed authentication (diagnostics and tests).
        self.forged = 0
        self.default_lifetime = Lifetime(self, DIRECT)

    def __repr__(self) -> str:
        return f"<RedisBackend {self._key_prefix!r}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a RedisBackend cannot be pickled (it holds keys and credentials)")

    # -- lifetimes ------------------------------------------------------------------

    def open_lifetime(self) -> Lifetime:
        """This replica's handle on the deployment lifetime."""
        return Lifetime(self, SERVING)

    def close_lifetime(self, lifetime: Lifetime) -> None:
        """Stop committing prompts through this handle; peers' prompts stay answerable."""
        lifetime.closed = True

    # -- the connection -------------------------------------------------------------

    def _connection(self) -> ScriptWire:
        loop = asyncio.get_running_loop()
        if self._wire is None or self._loop is not loop:
            # connections belong to the event loop that opened them
            self._wire = ScriptWire(self._url, SCRIPT, password=self._password)
            self._loop = loop
        return self._wire

    async def aclose(self) -> None:
        """Close this replica's connections (a later call reconnects).

        Leases still held are no longer renewed; give-backs not yet delivered are
        dropped (their records break when their leases run out).
        """
        self._keeper.close()
        wire, self._wire = self._wire, None
        if wire is not None:
            with anyio.CancelScope(shield=True):
                await wire.aclose()

    def _now_ms(self) -> int:
        return math.floor(self._clock() * 1000)

    def _late_ms(self) -> int:
        """The Redis time after which a script sent now must do nothing (``-1``: none).

        Redis's time at the last reply was read before that reply arrived, so it plus
        the local time elapsed since is at most Redis's time now: a script that runs
        at Redis time ``late`` or earlier runs at most half the call timeout after it
        was sent, and its reply has the other half to arrive.
        """
        seen = self._redis_time
        if seen is None:
            return -1
        redis_ms, at = seen
        return redis_ms + math.floor((time.monotonic() - at) * 1000) + self._window_ms

    def _keeper_argv(
        self, op: str, args: tuple[str | int | bytes, ...]
    ) -> tuple[str | int | bytes, ...]:
        return (op, self._now_ms(), *self._limit_args, -1, *args)

    async def _run(
        self, op: str, now_ms: int, *args: str | int | bytes, late: bool = False
    ) -> list[Any]:
        """One shielded, bounded script run; ``RedisError`` for an unreachable store."""
        wire = self._connection()
        if late and self._redis_time is None:
            await self._run("time", now_ms)
        argv = (op, now_ms, *self._limit_args, self._late_ms() if late else -1, *args)
        reply: Any = None
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + self._timeout):
            reply = await wire.run(self._key, argv)
        if reply is None:
            raise TimeoutError(f"ledger {op}: no reply from Redis in {self._timeout} s")
        assert isinstance(reply, list)
        self._redis_time = (int(reply[1]), time.monotonic())
        del reply[1]
        reply[0] = reply[0].decode("ascii")
        return reply

    async def _admit(
        self, op: str, now_ms: int, *args: str | int | bytes, late: bool = False
    ) -> list[Any]:
        """``_run`` for a call that admits work: an unreachable store (or a script Redis
        ran too late) is ``busy`` (``LedgerUnavailable`` for ``begin``)."""
        if self.health.skip():
            raise LedgerUnavailable() if op == "begin" else Failure(FailureCode.BUSY, STORE_DOWN)
        probe = self.health.probing  # set by skip() for this call only (no await between)
        try:
            reply = await self._run(op, now_ms, *args, late=late)
        except _STORE_ERRORS as exc:
            self.health.failed(op, exc)
            if op == "begin":
                raise LedgerUnavailable() from None
            raise Failure(FailureCode.BUSY, STORE_DOWN) from None
        finally:
            if probe:
                self.health.done()
        self.health.ok()
        if reply[0] == "late":
            logger.warning("ledger %s: Redis ran it too late; nothing was done", op)
            raise Failure(FailureCode.BUSY, STORE_DOWN)
        return reply

    async def _settle_run(self, op: str, *args: str | int | bytes) -> list[Any] | None:
        """``_run`` for a settling call: failures are logged (``None``) and left to the lease."""
        try:
            reply = await self._run(op, self._now_ms(), *args)
        except _STORE_ERRORS as exc:
            self.health.failed(op, exc)
            logger.warning(
                "ledger %s not recorded (%s); the lease expires it", op, type(exc).__name__
            )
            return None
        self.health.ok()
        return reply

    async def check(self) -> BaseException | None:
        """Try Redis once (no log line): ``None`` when it answers, else the error."""
        try:
            await self._run("stats", self._now_ms())
        except _STORE_ERRORS as exc:
            self.health.failed("check", exc, quiet=True)
            return exc
        self.health.ok()
        return None

    # -- sealing and authentication -----------------------------------------------------

    def _seal(self, data: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._aead.encrypt(nonce, data, aad)

    def _open(self, sealed: bytes, aad: bytes) -> bytes | None:
        try:
            return self._aead.decrypt(sealed[:_NONCE], sealed[_NONCE:], aad)
        except (InvalidTag, ValueError):
            return None  # another secret, or altered: the record is unusable

    def _binding_mac(self, binding: Binding) -> bytes:
        parts = (
            self._revision,
            binding.operation.encode("utf-8", "surrogatepass"),
            binding.arguments_hash,
            binding.scope_hash,
            binding.lifetime.id,
        )
        message = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
        return hmac.new(self._mac, b"binding\0" + message, "sha256").digest()

    def _identity_mac(
        self, key: str, chain: str, round_: int, deadline: int, binding: bytes
    ) -> bytes:
        """What a record is, for its whole life: authenticated at find and replay."""
        k, c = key.encode("latin-1"), chain.encode("latin-1")
        message = b"record %d:%b %d:%b %d %d " % (len(k), k, len(c), c, round_, deadline)
        return hmac.digest(self._mac, message + binding, "sha256")

    def _state_mac(self, key: str, state: RecordState | str, answer: str) -> bytes:
        """Where a record is (its state and accepted answer): authenticated at the claim."""
        name = state.value if isinstance(state, RecordState) else state
        k, n, a = key.encode("latin-1"), name.encode("latin-1"), answer.encode("latin-1")
        message = b"state %d:%b %d:%b %d:%b" % (len(k), k, len(n), n, len(a), a)
        return hmac.digest(self._mac, message, "sha256")

    def _refuse_forged(self, key: str, what: str) -> None:
        self.forged += 1
        self._known.drop(key)
        logger.warning(
            "ledger: a record failed authentication (%s); refused as expired. "
            "Something other than opgate wrote to Redis: check its access control",
            what,
        )

    def _seal_prompt(self, prompt: object, key: bytes) -> bytes:
        assert isinstance(prompt, StoredPrompt)
        message = prompt.message.encode("utf-8", "surrogatepass")
        url = prompt.url.encode("utf-8")
        head = b"f" if prompt.mode is InputMode.FORM else b"u"
        lengths = _LENGTHS.pack(
            len(message), len(prompt.schema_bytes), len(prompt.state_bytes), len(url)
        )
        data = head + lengths + message + prompt.schema_bytes + prompt.state_bytes + url
        return self._seal(data, _PROMPT_AAD + key)

    def _open_prompt(self, sealed: bytes, key: bytes) -> StoredPrompt | None:
        data = self._open(sealed, _PROMPT_AAD + key)
        if data is None:
            return None
        sizes = _LENGTHS.unpack_from(data, 1)
        offset = 1 + _LENGTHS.size
        fields = []
        for size in sizes:
            fields.append(data[offset : offset + size])
            offset += size
        message, schema, state, url = fields
        mode = InputMode.FORM if data[:1] == b"f" else InputMode.URL
        return StoredPrompt(
            mode, message.decode("utf-8", "surrogatepass"), schema, state, url.decode()
        )

    # -- the backend ------------------------------------------------------------------

    async def begin(self, binding: Binding, arguments_bytes: int) -> RedisReservation:
        """Reserve a chain and a maximum prompt (``Failure(BUSY)`` when there is no room)."""
        chain, res = secrets.token_hex(8), secrets.token_hex(8)
        nbytes = initial_charge(arguments_bytes, self.limits)
        reply = await self._admit(
            "begin", self._now_ms(), binding.scope_hash.hex(), chain, res, nbytes,
            chain_charge(arguments_bytes), late=True,
        )  # fmt: skip
        _raise_refusal(reply[0])
        self._keeper.hold("s:" + res)
        return RedisReservation(res, chain, self._binding_mac(binding), binding.lifetime)

    async def commit(
        self,
        reservation: RedisReservation,
        parent: RedisRecord | None,
        prompt: object,
        charge: int,
        seconds: float,
    ) -> tuple[RedisRecord, str] | Failure:
        """Commit the chain's next prompt; release the rest of the reservation."""
        if reservation.lifetime.closed or not reservation.open:
            return Failure(FailureCode.EXPIRED)
        token = secrets.token_urlsafe(32)
        raw_key = token_hash(token)
        key = raw_key.hex()
        now = self._now_ms()
        deadline = now + math.floor(seconds * 1000)
        round_ = 1
        sealed_token = parent_mac = b""
        if parent is not None:
            deadline = min(deadline, parent.deadline)
            round_ = parent.round + 1
            sealed_token = self._seal(token.encode("ascii"), _TOKEN_AAD + bytes.fromhex(parent.key))
            parent_mac = self._state_mac(
                parent.key, transition(RecordState.ANSWERING, Event.PROMPTED), parent.answer
            )
        binding = reservation.binding
        if parent is not None:
            # The commit ends the parent's lease (or fails, and its settle follows at once).
            self._keeper.drop(_in_flight(parent))
        reply = await self._admit(
            "commit", now, reservation.id, reservation.chain,
            "" if parent is None else parent.key, "" if parent is None else parent.claim,
            key, charge, round_, deadline, self._grace_ms, binding,
            self._seal_prompt(prompt, raw_key), sealed_token,
            self._identity_mac(key, reservation.chain, round_, deadline, binding),
            self._state_mac(key, RecordState.PENDING, ""), parent_mac, late=True,
        )  # fmt: skip
        if reply[0] != "ok":
            return Failure(FailureCode.EXPIRED)
        reservation.open = False
        self._keeper.drop("s:" + reservation.id)
        if parent is not None:
            self._known.drop(parent.key)
        self._known.add(key, reservation.chain, round_, deadline, binding, prompt)
        record = RedisRecord(
            key, reservation.chain, round_, deadline, prompt, binding, reservation.lifetime
        )
        return record, token

    async def find(self, token: str, binding: Binding) -> RedisRecord | None:
        """The live record for ``token`` if it is bound to ``binding``, else ``None``.

        A record this replica committed or found before is found without a round trip
        (``_Known``): its prompt and binding cannot have changed, and whether it is
        still live is checked by ``claim``, which takes it atomically. (So a record
        that Redis lost before its deadline — a restart — is ``expired`` at the claim,
        after the answer was checked, instead of before.) A record read from Redis is
        used only when its identity MAC and sealed prompt are authentic.
        """
        raw_key = token_hash(token)
        key = raw_key.hex()
        now = self._now_ms()
        expected = self._binding_mac(binding)
        known = self._known.get(key, now)
        if known is not None:
            chain, round_, deadline, stored, prompt = known
            if not hmac.compare_digest(stored, expected):
                return None
            return RedisRecord(key, chain, round_, deadline, prompt, expected, binding.lifetime)
        reply = await self._admit("find", now, key)
        if reply[0] != "ok":
            return None
        chain_bytes, round_bytes, deadline_bytes, stored_binding, sealed, identity = reply[1:]
        if not hmac.compare_digest(stored_binding or b"", expected):
            return None
        try:
            chain = chain_bytes.decode("ascii")
            round_, deadline = int(round_bytes), int(deadline_bytes)
        except (TypeError, ValueError):
            self._refuse_forged(key, "malformed")
            return None
        if not hmac.compare_digest(
            identity or b"", self._identity_mac(key, chain, round_, deadline, expected)
        ):
            self._refuse_forged(key, "identity")
            return None
        found = self._open_prompt(sealed or b"", raw_key)
        if found is None:
            self._refuse_forged(key, "prompt")
            return None
        if deadline <= now:
            return None
        self._known.add(key, chain, round_, deadline, expected, found)
        return RedisRecord(key, chain, round_, deadline, found, expected, binding.lifetime)

    async def claim(
        self, record: RedisRecord, answer_key: bytes, answer_charge: int, charge: int
    ) -> tuple[Event, RedisReservation | None] | Failure:
        """Take the record for this answer, atomically across replicas.

        The state the claim started from is authenticated before anything runs: a
        record whose state MAC does not match is given back as ``forged`` (removed)
        and answered ``expired``. A claim whose reply never came is given back by the
        keeper (``abandon``), so that it cannot hold the record for nobody.
        """
        now = self._now_ms()
        if record.deadline <= now:
            self._known.drop(record.key)
            return Failure(FailureCode.EXPIRED)
        claim, res = secrets.token_hex(8), secrets.token_hex(8)
        answer = hmac.new(
            self._mac, b"answer\0" + bytes.fromhex(record.key) + answer_key, "sha256"
        ).hexdigest()
        member = f"r:{record.chain}:{record.key}:{claim}"
        if self.health.skip():
            return Failure(FailureCode.BUSY, STORE_DOWN)
        probe = self.health.probing
        try:
            reply = await self._run(
                "claim", now, record.key, record.chain, answer, answer_charge, charge, res,
                claim, self._state_mac(record.key, RecordState.NEEDS_RECOVERY, answer),
                self._state_mac(record.key, RecordState.ANSWERED, answer), late=True,
            )  # fmt: skip
        except _STORE_ERRORS as exc:
            # It may have run (or may still run) on Redis: give it back, whatever it did.
            pending_mac = self._state_mac(record.key, RecordState.PENDING, "")
            self._keeper.owe(
                ("settle", record.key, record.chain, "abandon", claim, res, pending_mac), member
            )
            self.health.failed("claim", exc)
            return Failure(FailureCode.BUSY, STORE_DOWN)
        finally:
            if probe:
                self.health.done()
        self.health.ok()
        status = reply[0]
        if status == "late":
            logger.warning("ledger claim: Redis ran it too late; nothing was done")
            return Failure(FailureCode.BUSY, STORE_DOWN)
        if status == "expired":
            self._known.drop(record.key)
            return Failure(FailureCode.EXPIRED)
        if status == "busy":
            return Failure(FailureCode.BUSY, RECORD_BUSY)
        if status == "differs":
            return Failure(FailureCode.INVALID_REQUEST, ANSWER_DIFFERS)
        if status == "illegal":  # a state outside the table: not opgate's write
            self._refuse_forged(record.key, "state")
            return Failure(FailureCode.EXPIRED)
        _raise_refusal(status)
        event = Event(reply[1].decode("ascii"))
        prior, prior_mac = reply[2].decode("latin-1"), reply[3]
        record.claim = claim
        record.answer = answer
        # (a replay or recovery matched the stored answer MAC; a pending record has none)
        prior_answer = "" if event is Event.ANSWER else answer
        if not hmac.compare_digest(prior_mac, self._state_mac(record.key, prior, prior_answer)):
            self._refuse_forged(record.key, "state")
            await self._settle_run(
                "settle", record.key, record.chain, "forged", claim,
                res if event is Event.ANSWER else "", b"",
            )  # fmt: skip
            return Failure(FailureCode.EXPIRED)
        record.claimed = transition(RecordState(prior), event)
        self._keeper.hold(member)
        if event is Event.ANSWER:
            self._keeper.hold("s:" + res)
            assert record.lifetime is not None
            return Event.ANSWER, RedisReservation(
                res, record.chain, record.binding, record.lifetime
            )
        return event, None

    async def settle(
        self, record: RedisRecord, event: Event, reservation: RedisReservation | None = None
    ) -> None:
        """Apply ``event`` to the claimed record; release the rest of ``reservation``."""
        assert record.claimed is not None
        after = transition(record.claimed, event)  # LedgerStateError: a library bug
        res = ""
        if reservation is not None and reservation.open:
            reservation.open = False
            res = reservation.id
        answer = "" if event is Event.REVERT else record.answer
        args = (
            record.key, record.chain, event.value, record.claim, res,
            self._state_mac(record.key, after, answer),
        )  # fmt: skip
        member = _in_flight(record)
        self._keeper.drop(member)  # the settle ends the lease (a failed revert is owed)
        reply = await self._settle_run("settle", *args)
        if reply is None and event is Event.REVERT:
            # Left to the lease, a revert would break into needs_recovery: a recovery
            # for an answer that never ran. The keeper records it once Redis answers.
            self._keeper.owe(("settle", *args), member)
        elif reply is not None and reply[0] == "illegal":
            logger.error(
                "ledger settle refused: %s is not allowed in state %s",
                event.value,
                reply[1].decode("ascii"),
            )
        if event in _DONE:
            self._known.drop(record.key)  # a recovery finds it in Redis again
        record.claimed = None
        if res:
            self._keeper.drop("s:" + res)

    async def child_of(self, record: RedisRecord) -> tuple[RedisRecord, str] | None:
        """The live next prompt of an answered record, and its token (authenticated)."""
        reply = await self._admit("child", self._now_ms(), record.key)
        if reply[0] != "ok":
            return None
        child_bytes, chain, round_, deadline, binding, sealed, identity, sealed_token = reply[1:]
        child_key = child_bytes.decode("ascii")
        opened = self._open(sealed_token or b"", _TOKEN_AAD + bytes.fromhex(record.key))
        if opened is None or token_hash(opened.decode("ascii")).hex() != child_key:
            self._refuse_forged(record.key, "child token")
            return None
        try:
            child_chain, child_round, child_deadline = (
                chain.decode("ascii"),
                int(round_),
                int(deadline),
            )
        except (TypeError, ValueError):
            self._refuse_forged(child_key, "malformed")
            return None
        if not (
            hmac.compare_digest(binding or b"", record.binding)
            and hmac.compare_digest(
                identity or b"",
                self._identity_mac(
                    child_key, child_chain, child_round, child_deadline, record.binding
                ),
            )
        ):
            self._refuse_forged(child_key, "identity")
            return None
        prompt = self._open_prompt(sealed or b"", bytes.fromhex(child_key))
        if prompt is None:
            self._refuse_forged(child_key, "prompt")
            return None
        child = RedisRecord(
            child_key, child_chain, child_round, child_deadline, prompt, record.binding,
            record.lifetime,
        )  # fmt: skip
        return child, opened.decode("ascii")

    async def release(self, reservation: RedisReservation) -> None:
        """Give back what the reservation still holds; idempotent."""
        if not reservation.open:
            return
        reservation.open = False
        await self._settle_run("release", reservation.id)
        self._keeper.drop("s:" + reservation.id)

    async def statistics(self) -> LedgerStatistics:
        """The shared accounting, after a sweep (``used``, ``live``, ``principals``)."""
        reply = await self._run("stats", self._now_ms())
        return LedgerStatistics(int(reply[1]), int(reply[3]), int(reply[2]))

    async def reservations(self) -> int:
        """Open reservations in the whole ledger (for tests and diagnostics)."""
        reply = await self._run("stats", self._now_ms())
        return int(reply[4])


#: Settling events after which a record is only ever recovered, not answered.
_DONE = frozenset({Event.FINISHED, Event.RECOVERED, Event.BROKEN})


def _in_flight(record: RedisRecord) -> str:
    return f"r:{record.chain}:{record.key}:{record.claim}"


def _raise_refusal(status: str) -> None:
    """Raise the capacity failure a script refused with; nothing for ``ok``."""
    if status == "busy_principal":
        raise Failure(FailureCode.BUSY, PRINCIPAL_FULL)
    if status == "busy_ledger":
        raise Failure(FailureCode.BUSY, LEDGER_FULL)
    if status == "limit":
        raise Failure(
            FailureCode.INTERACTION_LIMIT,
            "this operation's input prompts reached their retained-data limit",
        )
    if status != "ok":  # pragma: no cover - the script has no other status here
        raise Failure(FailureCode.INTERNAL)
