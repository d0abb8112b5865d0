"""``Registry``: the public facade over the catalog, search, inspect and invoke.

A ``Registry`` is built once from the host's operations (``_catalog`` snapshots and
compiles them) and serves three requests: ``search`` (sequenced here, its steps in
the ``_search`` package), ``inspect`` and ``invoke`` (sequenced by ``_invoke``). The
rules they apply live in their own modules (``_search``, ``_request``, ``_answers``,
``_conclusion``, ``_json``, ``_schema``, ``_policy``, ``_results``, ``_forms``,
``_responses``, ``_ledger``, ``_progress``); this module turns every request-level
problem into a returned ``Failed``. Requests never raise for bad input, nor for anything a callback
raises (``BaseException`` included); real cancellation of the calling task,
``KeyboardInterrupt`` and ``SystemExit`` propagate (``_execution``). A returned
failure holds no traceback frames.

No lock is held while a policy, handler or progress callback runs.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import timedelta
from typing import Any, Final

from ._catalog import catalog_revision, snapshot_catalog
from ._collector import paused_collector
from ._execution import must_propagate
from ._failures import ConfigurationError, Failure, FailureCode, internal_failure, returned
from ._forms import FormChecks, InputMode
from ._invoke import Invoker
from ._keys import RegistryKeys, ScopeHashes
from ._ledger import Ledger
from ._limits import DEFAULT_LIMITS, SEARCH_DEFAULT_LIMIT, Limits
from ._operation import Operation, OperationSpec, SearchPage
from ._outcomes import Failed, InvokeOutcome
from ._policy import Policy, PolicyError, discovery_scope, scope_key, unavailable
from ._progress import Diagnostics, ProgressSink
from ._responses import InputResponse
from ._search import (
    CursorBinding,
    CursorError,
    CursorSealer,
    Ranking,
    Scorer,
    build_ranker,
    discoverable,
    exact_page,
    fold_group,
    normalize_query,
    operation_spec,
    ranked_page,
    search_index,
    search_problem,
)
from .ledger import LedgerBackend, LedgerFactory, Lifetime

__all__ = ["Registry"]


class _Keep(enum.Enum):
    KEEP = "keep"

    def __repr__(self) -> str:
        return "KEEP"


#: What ``Registry.replace`` takes for "keep this registry's own".
KEEP: Final = _Keep.KEEP


class Registry:
    """A fixed catalog of operations behind search, inspect and invoke.

    ``Registry(operations, policy, *, limits=None, clock=None, monotonic=None,
    regex_backtrack_limit=None, secret=None, ledger=None)`` snapshots every definition,
    validates names (unique), summaries, handlers and the definition budget, and fully
    checks every schema before returning (each distinct schema once; validators are
    compiled on first use); it raises ``ConfigurationError`` (or ``TypeError``)
    naming the operation and field. ``clock`` returns POSIX seconds (``time.time`` by
    default) for expiry times; ``monotonic`` returns seconds on a monotonic scale
    (``time.monotonic`` by default) and paces progress, so a wall-clock step never
    suppresses it. Tests inject either.

    Schema patterns run on a linear-time regex engine, and a pattern that needs
    lookaround or backreferences fails construction. ``regex_backtrack_limit`` (an
    ``int`` in ``1..1,000,000``) opts this registry's operation schemas in to the
    backtracking engine instead, each match attempt bounded by that many steps; see
    ``docs/security.md`` for the worst case. Form schemas never need it (their
    profile has no patterns).

    ``secret`` (bytes, at least 32) is the key material replicas share: registries
    built with the same secret and the same definitions (the same *revision*, a hash
    of the definitions) open each other's cursors. Without it each registry makes a
    random key. ``ledger`` selects a shared continuation store (for example
    ``opgate.redis.RedisLedger(url)``, which needs ``secret``); by default
    continuations live in this registry's memory.

    ``ranking`` orders search results: ``Ranking.RULE`` (the default: every term
    matches as a substring, name matches first, ties by name), ``Ranking.RELEVANCE``
    (field-weighted BM25 over stemmed words, best first) or a host's ``Scorer``; see
    ``docs/search.md``. Exact names, browsing, group filters, policy, page budgets and
    cursors work the same under every ranking; a cursor is bound to its ranking.

    The registry is safe to share between asyncio tasks and threads. Search,
    inspect and invoke return a ``Failed`` for every request-level problem.
    """

    def __init__(
        self,
        operations: Iterable[Operation],
        policy: Policy,
        *,
        limits: Limits | None = None,
        clock: Callable[[], float] | None = None,
        monotonic: Callable[[], float] | None = None,
        regex_backtrack_limit: int | None = None,
        secret: bytes | None = None,
        ledger: LedgerFactory | None = None,
        ranking: Ranking | Scorer = Ranking.RULE,
    ) -> None:
        if limits is None:
            limits = DEFAULT_LIMITS
        if not isinstance(limits, Limits):
            raise TypeError("limits must be an opgate.Limits")
        for method in ("scope_key", "authorize"):
            if not callable(getattr(policy, method, None)):
                raise TypeError(f"policy must provide a callable {method}(ctx, ...)")
        if isinstance(operations, Operation) or not isinstance(operations, Iterable):
            raise TypeError("operations must be an iterable of opgate.Operation")
        self._limits = limits
        self._policy = policy
        self._clock = clock or time.time
        self._monotonic = monotonic or time.monotonic
        if not callable(self._clock) or not callable(self._monotonic):
            raise TypeError("clock and monotonic must be callables returning seconds")
        with paused_collector():
            self._entries = snapshot_catalog(operations, limits, regex_backtrack_limit)
            self._positions = {entry.name: index for index, entry in enumerate(self._entries)}
            self._index = search_index(self._entries)
            self._rank_by(ranking)
            # Inside the paused collector too: 20,000 Definition objects would trigger passes.
            self._revision = catalog_revision(self._entries)
        self._form_checks = FormChecks()
        self._bind_state(_keys(secret), ledger)

    def replace(
        self,
        *,
        secret: bytes | _Keep | None = KEEP,
        ledger: LedgerFactory | _Keep | None = KEEP,
        ranking: Ranking | Scorer | _Keep = KEEP,
    ) -> Registry:
        """A registry serving this one's compiled catalog (the same operations, policy,
        limits and clocks, nothing compiled again) with another ``secret``, ``ledger``
        or ``ranking``; an argument left out keeps this registry's own.

        The arguments mean what they mean to ``Registry(...)`` and raise the same
        errors (``ledger=None`` is the in-memory ledger). With ``secret`` and ``ledger``
        both kept, the new registry shares this one's keys and continuations;
        otherwise it has its own (none of this registry's continuations). This is how
        ``opgate serve`` applies ``OPGATE_SECRET``, ``--ledger`` and ``--ranking`` to a
        host's registry.
        """
        copy = Registry._sharing_catalog(self)
        if ranking is KEEP:
            copy._ranking, copy._ranker = self._ranking, self._ranker
            copy._search_method = self._search_method
        else:
            copy._rank_by(ranking)
        if secret is KEEP and ledger is KEEP:
            copy._keys, copy._ledger_factory = self._keys, self._ledger_factory
            copy._secret, copy._cursors = self._secret, self._cursors
            copy._scope_hashes, copy._ledger = self._scope_hashes, self._ledger
            copy._invoker = self._invoker
        else:
            copy._bind_state(
                self._keys if secret is KEEP else _keys(secret),
                self._ledger_factory if ledger is KEEP else ledger,
            )
        return copy

    @classmethod
    def _sharing_catalog(cls, source: Registry) -> Registry:
        """A registry holding ``source``'s compiled catalog, its ranking and state not
        yet set: the construction path of ``replace``, which compiles nothing."""
        registry = cls.__new__(cls)
        registry._limits = source._limits
        registry._policy = source._policy
        registry._clock = source._clock
        registry._monotonic = source._monotonic
        registry._entries = source._entries
        registry._positions = source._positions
        registry._index = source._index
        registry._revision = source._revision
        registry._form_checks = source._form_checks
        return registry

    def _rank_by(self, ranking: Ranking | Scorer) -> None:
        """Set the search order (see _search._ranking): the rule's index itself by default."""
        self._ranker, self._search_method = build_ranker(ranking, self._index, self._entries)
        self._ranking = ranking

    def _bind_state(self, keys: RegistryKeys, ledger: LedgerFactory | None) -> None:
        """Take the keys, open the continuation ledger, and build the invoke sequence
        over them."""
        self._keys = keys
        self._ledger_factory = ledger
        self._secret = keys.scope
        self._cursors = CursorSealer(clock=self._clock, key=keys.cursor)
        self._scope_hashes = ScopeHashes(keys.scope)
        self._ledger: LedgerBackend[Any, Any]
        if ledger is None:
            self._ledger = Ledger(self._limits, self._clock)
        else:
            if not callable(getattr(ledger, "bind", None)):
                raise TypeError("ledger must be a shared ledger such as opgate.redis.RedisLedger")
            if not keys.shared:
                raise ConfigurationError(
                    "a shared ledger needs a shared secret: "
                    "pass secret= (the same on every replica)"
                )
            self._ledger = ledger.bind(
                limits=self._limits, clock=self._clock, keys=keys, revision=self._revision
            )
        self._invoker = Invoker(
            entries=self._entries,
            positions=self._positions,
            policy=self._policy,
            limits=self._limits,
            ledger=self._ledger,
            monotonic=self._monotonic,
            form_checks=self._form_checks,
            scope_hashes=self._scope_hashes,
        )

    async def aclose(self) -> None:
        """Close a shared ledger's connections (a later call reconnects); idempotent."""
        await self._ledger.aclose()

    @property
    def limits(self) -> Limits:
        """The registry's limits, defaults resolved."""
        return self._limits

    @property
    def ranking(self) -> Ranking | Scorer:
        """How search orders its results: the ``ranking`` given (``Ranking.RULE`` by
        default)."""
        return self._ranking

    @property
    def ledger(self) -> LedgerBackend[Any, Any]:
        """The continuation store in use: the in-memory ledger, or the backend the
        ``ledger=`` factory bound (see ``opgate.ledger``)."""
        return self._ledger

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        """Whether an operation of that exact name is registered (no policy is asked)."""
        return isinstance(name, str) and name in self._positions

    def __repr__(self) -> str:
        return f"<Registry: {len(self._entries)} operations>"

    @property
    def revision(self) -> str:
        """The hash of the definitions (32 hex digits); replicas must agree on it."""
        return self._revision

    def open_lifetime(self) -> Lifetime:
        """A serving lifetime for one server; ``await lifetime.close()`` expires its prompts
        (with a shared ledger: stops this server committing new ones, see ``Lifetime``)."""
        return self._ledger.open_lifetime()

    # -- search ------------------------------------------------------------------

    async def search(
        self,
        ctx: Any,
        query: str = "",
        *,
        group: str = "",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> SearchPage | Failed:
        """One page of the operations ``ctx``'s principal may discover.

        Under the default ``Ranking.RULE``, all whitespace-separated terms of ``query``
        must match (case-insensitive substring) the name, group, summary or other
        documentation; results rank name matches first, then group, summary, other
        documentation, ties by name (other rankings: ``docs/search.md``). A query
        equal to an authorized operation's name returns it alone; an empty query lists
        by name. ``limit`` defaults to 5, at most 20; ``query`` and
        ``group`` are at most 256 UTF-8 bytes. Continue with ``next_cursor`` and the
        same query and group (the limit may change).
        """
        try:
            return await self._search(ctx, query, group, limit, cursor)
        except BaseException as exc:
            return _failed(exc)

    async def _search(
        self, ctx: Any, query: str, group: str, limit: int | None, cursor: str | None
    ) -> SearchPage | Failed:
        problem = search_problem(query, group, limit, cursor, self._limits.token_bytes)
        if problem is not None:
            return Failed(Failure(FailureCode.INVALID_REQUEST, problem))
        size = SEARCH_DEFAULT_LIMIT if limit is None else limit
        try:
            key = await scope_key(self._policy, ctx)
            binding = CursorBinding(
                method=self._search_method,
                revision=self._revision,
                query=normalize_query(query),
                group=fold_group(group),
                scope_hash=self._scope_hashes.of(key),
            )
            scope = await discovery_scope(self._policy, ctx)
            after: tuple[int, str] | None = None
            if cursor is not None:
                try:
                    tier, position = self._cursors.open(cursor, binding)
                except CursorError:
                    return Failed(Failure(FailureCode.INVALID_CURSOR))
                if position >= len(self._entries):  # pragma: no cover - sealed by this revision
                    return Failed(Failure(FailureCode.INVALID_CURSOR))
                # the position is bound to this registry's revision, so its name is stable
                after = (tier, self._entries[position].name)
            else:
                exact = await exact_page(
                    self._policy, self._entries, self._index, ctx, binding, scope
                )
                if exact is not None:
                    return exact
            return await ranked_page(
                self._policy,
                self._entries,
                self._index,
                self._ranker,
                self._cursors,
                ctx,
                binding,
                after,
                size,
                scope,
            )
        except PolicyError as exc:
            return Failed(exc.failure)

    # -- inspect -----------------------------------------------------------------

    async def inspect(self, ctx: Any, name: str) -> OperationSpec | Failed:
        """The full definition of an operation the principal may discover, schemas included."""
        try:
            await scope_key(self._policy, ctx)
            entry = await discoverable(self._policy, self._entries, self._positions, ctx, name)
        except BaseException as exc:
            return _failed(exc)
        if entry is None:
            return Failed(unavailable())
        return operation_spec(entry)

    # -- invoke ------------------------------------------------------------------

    async def invoke(
        self,
        ctx: Any,
        name: str,
        arguments: str | bytes | Mapping[str, Any],
        *,
        input_support: Collection[InputMode] = (),
        resume: tuple[str, InputResponse] | None = None,
        progress: ProgressSink | None = None,
        input_expiry: timedelta | None = None,
        lifetime: Lifetime | None = None,
    ) -> InvokeOutcome:
        """Run an operation for ``ctx``'s principal; see the docs for the full pipeline.

        ``arguments`` is JSON text (``str``/``bytes``) or a mapping of JSON values.
        ``input_support`` names the prompt kinds the host can show now; without it a
        handler asking for input gets ``confirmation_required``. ``resume`` answers
        an earlier ``Pending``: pass the same operation and arguments. ``progress``
        receives throttled ``ProgressUpdate``s. ``input_expiry`` shortens how long a
        prompt stays answerable; ``lifetime`` is the serving lifetime (from
        ``open_lifetime``) prompts are bound to.
        """
        diagnostics = Diagnostics()
        try:
            return await self._invoker.invoke(
                ctx,
                name,
                arguments,
                input_support,
                resume,
                progress,
                input_expiry,
                lifetime,
                diagnostics,
            )
        except BaseException as exc:
            return _failed(exc, diagnostics.entries)


def _keys(secret: bytes | None) -> RegistryKeys:
    """The subkeys of ``secret`` (random without one); ``ConfigurationError`` for a
    secret of the wrong length."""
    try:
        return RegistryKeys.from_secret(secret)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def _failed(exc: BaseException, diagnostics: tuple[str, ...] = ()) -> Failed:
    """What a request returns for an exception that reached its top level.

    Request-level failures are returned as they are, policy breakage as its failure,
    anything else as a sanitized ``internal`` failure; ``KeyboardInterrupt``,
    ``SystemExit``, real cancellation and the closing of the request's own coroutine
    are re-raised. The failure is returned without traceback frames.
    """
    kind = type(exc)  # never exc's own (overridable) attributes: this must not raise
    if kind is PolicyError:
        failure = exc.failure  # type: ignore[attr-defined]
    elif kind is Failure:  # the registry's own; a callback's subclass is unexpected
        failure = exc
    elif must_propagate(exc) or issubclass(kind, GeneratorExit):
        raise exc
    else:
        failure = internal_failure(exc)
    return Failed(returned(failure), diagnostics)
