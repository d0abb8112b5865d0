"""``RedisLedger``: the continuation ledger kept in Redis, shared by every replica.

The contract is the in-memory ledger's (``opgate._ledger``: the same state table,
the same capacity rules and public answers); what differs is where records live
and who may run a transition:

* Each transition is one run of ``SCRIPT`` (``_script.py``), atomic on the Redis
  server: two replicas answering the same prompt at once see one ``ANSWER`` and
  one ``busy``. No lock is held while a policy, handler or progress callback runs:
  a record *in flight* is a state plus a **lease**, which its replica renews every
  ``lease / 3`` while the handler runs. A replica that dies stops renewing; when
  its lease has run out the record is broken (``needs_recovery``; a replay goes
  back to ``answered``) and the identical answer, on any replica, runs a
  recovery-only call. Reservations carry the same lease, so a dead replica's
  reserved bytes come back too.
* Keys in Redis are SHA-256 hashes of tokens (never tokens). Prompts (message,
  form schema or URL, private state) and the child tokens a parent keeps for
  replay are sealed with AES-256-GCM under a key derived from the registry's
  shared secret, bound to the record's key; bindings (revision, operation,
  canonical arguments hash, scope-key HMAC, lifetime) and answers are kept only as
  HMACs. A read of Redis shows sizes, states, deadlines and counters, never
  application data.
* Deadlines are the registry clock's (every replica must keep time: NTP); a
  record's payload is ``PEXPIRE``'d once when it is committed, at its deadline plus
  ``lease + RETENTION_GRACE``, and never extended. The accounting is swept on
  every call, so charged bytes come back even when Redis dropped a payload first.
* Lifetimes: every replica's ``open_lifetime()`` stands for the one *deployment*
  lifetime (see ``Lifetime``): a prompt issued on one replica is answerable on all
  of them, and a replica's shutdown expires nothing. Direct ``Registry.invoke``
  calls without ``lifetime=`` share a second, ``direct`` lifetime.
* When Redis cannot be reached, admissions (``find``, ``claim``, ``commit``,
  ``child_of``) answer ``busy``, and ``begin`` raises ``LedgerUnavailable`` (a first
  call then runs without input support); settling calls are logged and left to the
  lease.
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
import hmac
import logging
import math
import os
import secrets
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import anyio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis.exceptions import RedisError

from .._failures import Failure, FailureCode
from .._forms import InputMode, StoredPrompt
from .._keys import RegistryKeys
from .._ledger import (
    ANSWER_DIFFERS,
    LEDGER_FULL,
    PRINCIPAL_FULL,
    RECORD_BUSY,
    STORE_DOWN,
    Binding,
    Event,
    Ledger,
    LedgerStatistics,
    LedgerUnavailable,
    Lifetime,
    token_hash,
)
from .._limits import CHAIN_FIXED_BYTES, Limits
from ._script import SCRIPT
from ._wire import ScriptWire

__all__ = ["DEFAULT_LEASE", "RETENTION_GRACE", "RedisLedger"]

logger = logging.getLogger("opgate.redis")

#: How long a record stays in flight without its replica renewing the lease: after a
#: replica dies, its transitions are recoverable (and its reservations free) this late.
DEFAULT_LEASE = timedelta(seconds=15)

#: Shortest lease accepted: renewals every third of it must fit round trips.
MIN_LEASE = timedelta(milliseconds=300)

#: Extra life of a record's payload in Redis beyond its deadline and lease, so the
#: sweep (not the TTL) is what normally removes it.
RETENTION_GRACE = timedelta(seconds=60)

#: Longest a ledger call may take before it counts as Redis being unavailable.
CALL_TIMEOUT = 10.0

#: While Redis is unreachable, how often a call tries it again (the others fail at once).
RETRY_INTERVAL = 1.0

#: While Redis is unreachable, how often the log says it still is.
HEALTH_REMINDER = 60.0

#: What a store failure is (``AuthenticationError`` and ``NoPermissionError`` among them).
_STORE_ERRORS = (RedisError, TimeoutError, OSError)

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
    ``lease`` is how long a transition survives its replica (default 15 s). Every
    replica must use the same URL, prefix, secret, definitions and ``Limits``. Needs
    the ``redis`` extra.
    """

    __slots__ = ("_lease", "_password", "_prefix", "_url")

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "opgate",
        lease: timedelta = DEFAULT_LEASE,
        password: str | None = None,
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
            revision=revision, password=self._password,
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
    expires_at: float
    prompt: object  # StoredPrompt
    binding: bytes = b""
    lifetime: Lifetime | None = None
    claim: str = ""

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
        password: str | None = None,
    ) -> None:
        self._url = url
        self._password = password
        self.health = _Health(redacted_url(url))
        self._key_prefix = f"{{{prefix}}}:"
        self._lease_ms = int(lease.total_seconds() * 1000)
        self._grace_ms = self._lease_ms + int(RETENTION_GRACE.total_seconds() * 1000)
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
        )
        self._wire: ScriptWire | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._key = self._key_prefix.encode("utf-8")
        self._known = _Known()
        self._leases: dict[str, int] = {}
        self._renewer: asyncio.Task[None] | None = None
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
            self._renewer = None
        return self._wire

    async def aclose(self) -> None:
        """Close this replica's connections (a later call reconnects)."""
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        wire, self._wire = self._wire, None
        if wire is not None:
            with anyio.CancelScope(shield=True):
                await wire.aclose()

    def _now_ms(self) -> int:
        return math.floor(self._clock() * 1000)

    async def _run(self, op: str, now_ms: int, *args: str | int | bytes) -> list[Any]:
        """One shielded, bounded script run; ``RedisError`` for an unreachable store."""
        wire = self._connection()
        argv = (op, now_ms, *self._limit_args, *args)
        reply: Any = None
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CALL_TIMEOUT):
            reply = await wire.run(self._key, argv)
        if reply is None:
            raise TimeoutError(f"ledger {op}: no reply from Redis in {CALL_TIMEOUT} s")
        assert isinstance(reply, list)
        reply[0] = reply[0].decode("ascii")
        return reply

    async def _admit(self, op: str, now_ms: int, *args: str | int | bytes) -> list[Any]:
        """``_run`` for a call that admits work: an unreachable store is ``busy``
        (``LedgerUnavailable`` for ``begin``)."""
        if self.health.skip():
            raise LedgerUnavailable() if op == "begin" else Failure(FailureCode.BUSY, STORE_DOWN)
        probe = self.health.probing  # set by skip() for this call only (no await between)
        try:
            reply = await self._run(op, now_ms, *args)
        except _STORE_ERRORS as exc:
            self.health.failed(op, exc)
            if op == "begin":
                raise LedgerUnavailable() from None
            raise Failure(FailureCode.BUSY, STORE_DOWN) from None
        finally:
            if probe:
                self.health.done()
        self.health.ok()
        return reply

    async def _settle_run(self, op: str, *args: str | int | bytes) -> None:
        """``_run`` for a settling call: failures are logged and left to the lease."""
        try:
            await self._run(op, self._now_ms(), *args)
        except _STORE_ERRORS as exc:
            self.health.failed(op, exc)
            logger.warning(
                "ledger %s not recorded (%s); the lease expires it", op, type(exc).__name__
            )
        else:
            self.health.ok()

    async def check(self) -> BaseException | None:
        """Try Redis once (no log line): ``None`` when it answers, else the error."""
        try:
            await self._run("stats", self._now_ms())
        except _STORE_ERRORS as exc:
            self.health.failed("check", exc, quiet=True)
            return exc
        self.health.ok()
        return None

    # -- leases -----------------------------------------------------------------------

    def _hold(self, *members: str) -> None:
        for member in members:
            self._leases[member] = self._leases.get(member, 0) + 1
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew())

    def _drop(self, *members: str) -> None:
        for member in members:
            count = self._leases.pop(member, 0) - 1
            if count > 0:
                self._leases[member] = count
        # The renewer is left to find no leases when it wakes and end by itself: one
        # task serves a replica's back-to-back transitions, none is made per transition.

    async def _renew(self) -> None:
        """Extend every lease this replica holds, every third of a lease, while it holds any."""
        interval = self._lease_ms / 3000
        while self._leases:
            await asyncio.sleep(interval)
            members = list(self._leases)
            if not members:
                return
            now = self._now_ms()
            try:
                await self._run("renew", now, now + self._lease_ms, *members)
            except _STORE_ERRORS as exc:
                self.health.failed("renew", exc)
                logger.warning("ledger leases not renewed (%s)", type(exc).__name__)

    # -- sealing ----------------------------------------------------------------------

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
        nbytes = Ledger.initial_charge(arguments_bytes, self.limits)
        now = self._now_ms()
        reply = await self._admit(
            "begin", now, binding.scope_hash.hex(), chain, res, nbytes,
            CHAIN_FIXED_BYTES + arguments_bytes, now + self._lease_ms,
        )  # fmt: skip
        _raise_refusal(reply[0])
        self._hold("s:" + res)
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
        wanted = now + math.floor(seconds * 1000)
        sealed_token = b""
        if parent is not None:
            sealed_token = self._seal(token.encode("ascii"), _TOKEN_AAD + bytes.fromhex(parent.key))
        reply = await self._admit(
            "commit", now, reservation.id, reservation.chain,
            "" if parent is None else parent.key, "" if parent is None else parent.claim,
            key, charge, wanted, self._grace_ms, reservation.binding,
            self._seal_prompt(prompt, raw_key), sealed_token,
        )  # fmt: skip
        if reply[0] != "ok":
            return Failure(FailureCode.EXPIRED)
        reservation.open = False
        self._drop("s:" + reservation.id)
        if parent is not None:
            self._drop(_in_flight(parent))
        round_, deadline = int(reply[1]), int(reply[2])
        if parent is not None:
            self._known.drop(parent.key)
        self._known.add(key, reservation.chain, round_, deadline, reservation.binding, prompt)
        record = RedisRecord(
            key, reservation.chain, round_, deadline / 1000, prompt, reservation.binding,
            reservation.lifetime,
        )  # fmt: skip
        return record, token

    async def find(self, token: str, binding: Binding) -> RedisRecord | None:
        """The live record for ``token`` if it is bound to ``binding``, else ``None``.

        A record this replica committed or found before is found without a round trip
        (``_Known``): its prompt and binding cannot have changed, and whether it is
        still live is checked by ``claim``, which takes it atomically. (So a record
        that Redis lost before its deadline — a restart — is ``expired`` at the claim,
        after the answer was checked, instead of before.)
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
            return RedisRecord(
                key, chain, round_, deadline / 1000, prompt, expected, binding.lifetime
            )
        reply = await self._admit("find", now, key)
        if reply[0] != "ok":
            return None
        chain_bytes, _state, round_bytes, deadline_bytes, stored_binding, sealed = reply[1:]
        if not hmac.compare_digest(stored_binding, expected):
            return None
        found = self._open_prompt(sealed, raw_key)
        if found is None:
            return None
        chain, round_, deadline = chain_bytes.decode("ascii"), int(round_bytes), int(deadline_bytes)
        self._known.add(key, chain, round_, deadline, expected, found)
        return RedisRecord(key, chain, round_, deadline / 1000, found, expected, binding.lifetime)

    async def claim(
        self, record: RedisRecord, answer_key: bytes, answer_charge: int, charge: int
    ) -> tuple[Event, RedisReservation | None] | Failure:
        """Take the record for this answer, atomically across replicas."""
        claim, res = secrets.token_hex(8), secrets.token_hex(8)
        answer = hmac.new(
            self._mac, b"answer\0" + bytes.fromhex(record.key) + answer_key, "sha256"
        ).hexdigest()
        now = self._now_ms()
        reply = await self._admit(
            "claim", now, record.key, record.chain, answer, answer_charge, charge, res, claim,
            now + self._lease_ms,
        )  # fmt: skip
        status = reply[0]
        if status == "expired":
            self._known.drop(record.key)
            return Failure(FailureCode.EXPIRED)
        if status == "busy":
            return Failure(FailureCode.BUSY, RECORD_BUSY)
        if status == "differs":
            return Failure(FailureCode.INVALID_REQUEST, ANSWER_DIFFERS)
        _raise_refusal(status)
        record.claim = claim
        self._hold(_in_flight(record))
        event = reply[1].decode("ascii")
        if event == "answer":
            self._hold("s:" + res)
            assert record.lifetime is not None
            return Event.ANSWER, RedisReservation(
                res, record.chain, record.binding, record.lifetime
            )
        return (Event.REPLAY if event == "replay" else Event.RECOVER), None

    async def settle(
        self, record: RedisRecord, event: Event, reservation: RedisReservation | None = None
    ) -> None:
        """Apply ``event`` to the claimed record; release the rest of ``reservation``."""
        res = ""
        if reservation is not None and reservation.open:
            reservation.open = False
            res = reservation.id
        await self._settle_run("settle", record.key, record.chain, event.value, record.claim, res)
        if event in _DONE:
            self._known.drop(record.key)  # a recovery finds it in Redis again
        self._drop(_in_flight(record))
        if res:
            self._drop("s:" + res)

    async def child_of(self, record: RedisRecord) -> tuple[RedisRecord, str] | None:
        """The live next prompt of an answered record, and its token."""
        reply = await self._admit("child", self._now_ms(), record.key)
        if reply[0] != "ok":
            return None
        child_key, chain, round_, deadline, sealed, sealed_token = reply[1:]
        token = self._open(sealed_token, _TOKEN_AAD + bytes.fromhex(record.key))
        prompt = self._open_prompt(sealed, bytes.fromhex(child_key.decode("ascii")))
        if token is None or prompt is None:
            return None
        child = RedisRecord(
            child_key.decode("ascii"), chain.decode("ascii"), int(round_), int(deadline) / 1000,
            prompt, record.binding, record.lifetime,
        )  # fmt: skip
        return child, token.decode("ascii")

    async def release(self, reservation: RedisReservation) -> None:
        """Give back what the reservation still holds; idempotent."""
        if not reservation.open:
            return
        reservation.open = False
        await self._settle_run("release", reservation.id)
        self._drop("s:" + reservation.id)

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
