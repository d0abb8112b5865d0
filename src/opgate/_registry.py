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
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from ._catalog import Entry, catalog_revision, snapshot_catalog
from ._collector import paused_collector
from ._execution import must_propagate
from ._failures import ConfigurationError, Failure, FailureCode, internal_failure, returned
from ._forms import FormChecks, InputMode
from ._heap import trim_heap
from ._invoke import Invoker
from ._keys import RegistryKeys, ScopeHashes
from ._ledger import Ledger
from ._limits import DEFAULT_LIMITS, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, Limits
from ._operation import Operation, OperationSpec, SearchPage
from ._outcomes import Failed, InvokeOutcome
from ._policy import Policy, PolicyError, discovery_scope, scope_key, unavailable
from ._progress import Diagnostics, ProgressSink
from ._responses import InputResponse
from ._search import (
    CursorBinding,
    CursorError,
    CursorSealer,
    GroupMembers,
    Hybrid,
    Ranker,
    Ranking,
    Scorer,
    SearchIndex,
    begin_index,
    build_ranker,
    discoverable,
    discoverable_groups,
    exact_page,
    fold_group,
    group_members,
    normalize_query,
    operation_spec,
    pending_ranker,
    ranked_page,
    search_index,
    search_problem,
    start_ranker,
)
from .ledger import LedgerBackend, LedgerFactory, Lifetime

if TYPE_CHECKING:
    from ._search._index_build import RelevanceBuild, RuleBuild

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
    (field-weighted BM25 over stemmed words, best first), a host's ``Scorer``, or a
    ``Hybrid`` (relevance and a host ``Embedder``'s vectors, fused by rank; a bad
    embedder is a ``ConfigurationError`` here); see ``docs/search.md``. Exact names,
    browsing, group filters, policy, page budgets and cursors work the same under every
    ranking; a cursor is bound to its ranking.

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
        ranking: Ranking | Scorer | Hybrid = Ranking.RULE,
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
        clock = clock or time.time
        monotonic = monotonic or time.monotonic
        if not callable(clock) or not callable(monotonic):
            raise TypeError("clock and monotonic must be callables returning seconds")
        with paused_collector():
            entries, (index, revision, started) = snapshot_catalog(
                operations, limits, regex_backtrack_limit, begin_index, _derive(ranking)
            )
            compiled = _Compiled(
                limits=limits,
                policy=policy,
                clock=clock,
                monotonic=monotonic,
                entries=entries,
                positions={entry.name: position for position, entry in enumerate(entries)},
                index=index,
                groups=group_members(entries),
                revision=revision,
                form_checks=FormChecks(),
                regex_backtrack_limit=regex_backtrack_limit,
            )
            order = _order(compiled, ranking, started)
        trim_heap()  # the build's freed memory, back to the system
        self._assemble(compiled, order, _state(compiled, _keys(secret), ledger))

    def with_operations(self, operations: Iterable[Operation]) -> Registry:
        """A registry of ``operations`` that carries on this one's service: the same
        policy, limits, clocks, regex setting and ranking, and the same keys and
        continuation ledger (the same object), compiled and checked as
        ``Registry(...)`` does (and raising what it raises).

        Its revision is the new definitions' own, so this registry's search cursors do
        not open on it (``invalid_cursor``), as the seed binds them. The ledger being
        shared, a prompt pending on this registry stays answerable on the new one for an
        operation of the same name, arguments and principal (the arguments are checked
        again against the new definition), and serving lifetimes opened on this one
        stay valid. This is what ``GatewayServer.swap`` takes: a catalog that changed
        while served.
        """
        old = self._compiled
        limits = old.limits
        with paused_collector():
            entries, (index, revision, started) = snapshot_catalog(
                operations,
                limits,
                old.regex_backtrack_limit,
                begin_index,
                _derive(self._order.ranking),
            )
            compiled = _Compiled(
                limits=limits,
                policy=old.policy,
                clock=old.clock,
                monotonic=old.monotonic,
                entries=entries,
                positions={entry.name: position for position, entry in enumerate(entries)},
                index=index,
                groups=group_members(entries),
                revision=revision,
                form_checks=old.form_checks,
                regex_backtrack_limit=old.regex_backtrack_limit,
            )
            order = _order(compiled, self._order.ranking, started)
        state = self._state
        invoker = Invoker(
            entries=compiled.entries,
            positions=compiled.positions,
            policy=compiled.policy,
            limits=compiled.limits,
            ledger=state.ledger,
            monotonic=compiled.monotonic,
            form_checks=compiled.form_checks,
            scope_hashes=state.scope_hashes,
        )
        successor = Registry.__new__(Registry)
        successor._assemble(
            compiled,
            order,
            _State(
                state.keys,
                state.ledger_factory,
                state.cursors,
                state.scope_hashes,
                state.ledger,
                invoker,
            ),
        )
        return successor

    def continues(self, other: Registry) -> bool:
        """Whether this registry carries on ``other``'s service: it shares ``other``'s
        keys and continuation ledger (one is ``with_operations`` of the other, or a
        ``replace`` keeping both), so ``other``'s serving lifetimes and pending prompts
        are valid here."""
        return isinstance(other, Registry) and other._state.ledger is self._state.ledger

    def replace(
        self,
        *,
        secret: bytes | _Keep | None = KEEP,
        ledger: LedgerFactory | _Keep | None = KEEP,
        ranking: Ranking | Scorer | Hybrid | _Keep = KEEP,
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
        compiled = self._compiled
        if ranking is KEEP:
            order = self._order
        else:
            ranker, method = pending_ranker(ranking, compiled.index, compiled.entries)
            order = _Order(ranking, ranker, method)
            trim_heap()
        if secret is KEEP and ledger is KEEP:
            state = self._state
        else:
            state = _state(
                compiled,
                self._state.keys if secret is KEEP else _keys(secret),
                self._state.ledger_factory if ledger is KEEP else ledger,
            )
        copy = Registry.__new__(Registry)
        copy._assemble(compiled, order, state)
        return copy

    def _assemble(self, compiled: _Compiled, order: _Order, state: _State) -> None:
        """Hold the three parts (every path that makes a registry ends here) and keep
        their fields as attributes, which the request paths read directly."""
        self._compiled, self._order, self._state = compiled, order, state
        self._limits = compiled.limits
        self._policy = compiled.policy
        self._clock = compiled.clock
        self._monotonic = compiled.monotonic
        self._entries = compiled.entries
        self._positions = compiled.positions
        self._index = compiled.index
        self._revision = compiled.revision
        self._form_checks = compiled.form_checks
        self._ranking = order.ranking
        self._ranker = order.ranker
        self._search_method = order.method
        self._secret = state.keys.scope
        self._cursors = state.cursors
        self._scope_hashes = state.scope_hashes
        self._ledger = state.ledger
        self._invoker = state.invoker

    async def aclose(self) -> None:
        """Close a shared ledger's connections (a later call reconnects); idempotent."""
        await self._ledger.aclose()

    @property
    def limits(self) -> Limits:
        """The registry's limits, defaults resolved."""
        return self._limits

    @property
    def policy(self) -> Policy:
        """The policy the registry asks: the object given (``replace`` keeps it)."""
        return self._policy

    @property
    def ranking(self) -> Ranking | Scorer | Hybrid:
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

    def spec(self, name: str) -> OperationSpec:
        """The full definition of the operation of that exact name, as ``inspect``
        returns it, without asking the policy: for the host and its adapters (static
        data such as a server's tool table), never an answer to a principal.
        ``KeyError`` if no operation has that name.
        """
        position = self._positions.get(name) if isinstance(name, str) else None
        if position is None:
            raise KeyError(name)
        return operation_spec(self._entries[position])

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

    async def groups(self, ctx: Any, *, limit: int = SEARCH_MAX_LIMIT) -> tuple[str, ...] | Failed:
        """The groups, sorted, holding an operation ``ctx``'s principal may discover (at
        most ``limit``, 1 to 20): what a search's ``group`` may usefully name. It asks the
        policy about a bounded number of operations, so a principal denied most of a
        large catalog may get fewer groups than it could search; it never names a group
        the principal may discover nothing of."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError("limit must be an int")
        if not 1 <= limit <= SEARCH_MAX_LIMIT:
            raise ValueError(f"limit must be 1 to {SEARCH_MAX_LIMIT}")
        try:
            await scope_key(self._policy, ctx)
            groups = self._compiled.groups
            return await discoverable_groups(self._policy, self._entries, groups, ctx, limit)
        except BaseException as exc:
            return _failed(exc)

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


@dataclass(frozen=True, slots=True)
class _Compiled:
    """What construction compiled and checked: shared by every ``replace`` copy."""

    limits: Limits
    policy: Policy
    clock: Callable[[], float]
    monotonic: Callable[[], float]
    entries: tuple[Entry, ...]
    positions: dict[str, int]
    index: SearchIndex
    groups: GroupMembers
    revision: str
    form_checks: FormChecks
    regex_backtrack_limit: int | None = None


@dataclass(frozen=True, slots=True)
class _Order:
    """How search orders results: the ``ranking`` given, its ranker, the cursor's method."""

    ranking: Ranking | Scorer | Hybrid
    ranker: Ranker
    method: str


@dataclass(frozen=True, slots=True)
class _State:
    """The keys and the continuation ledger, with the invoke sequence built over them."""

    keys: RegistryKeys
    ledger_factory: LedgerFactory | None
    cursors: CursorSealer
    scope_hashes: ScopeHashes
    ledger: LedgerBackend[Any, Any]
    invoker: Invoker


def _derive(
    ranking: Ranking | Scorer | Hybrid,
) -> Callable[
    [tuple[Entry, ...], RuleBuild | None], tuple[SearchIndex, str, RelevanceBuild | None]
]:
    """What a build derives from its entries alone: the search index (the one
    ``begin_index`` began, when it answered), the definitions revision and what
    ``ranking``'s index begins beside them (``start_ranker``: the relevance index of a
    large catalog, in a child process). Inside the paused collector too: 20,000
    ``Definition`` objects would trigger passes."""

    def derive(
        entries: tuple[Entry, ...], begun: RuleBuild | None
    ) -> tuple[SearchIndex, str, RelevanceBuild | None]:
        started = start_ranker(ranking, entries)
        revision = catalog_revision(entries)  # while the children finish
        return search_index(entries, begun), revision, started

    return derive


def _order(
    compiled: _Compiled, ranking: Ranking | Scorer | Hybrid, started: RelevanceBuild | None
) -> _Order:
    """The search order for ``ranking`` (see _search._ranking): the rule's index itself
    by default."""
    ranker, method = build_ranker(ranking, compiled.index, compiled.entries, started)
    return _Order(ranking, ranker, method)


def _state(compiled: _Compiled, keys: RegistryKeys, ledger: LedgerFactory | None) -> _State:
    """Take the keys, open the continuation ledger, and build the invoke sequence over
    them."""
    backend: LedgerBackend[Any, Any]
    if ledger is None:
        backend = Ledger(compiled.limits, compiled.clock)
    else:
        if not callable(getattr(ledger, "bind", None)):
            raise TypeError("ledger must be a shared ledger such as opgate.redis.RedisLedger")
        if not keys.shared:
            raise ConfigurationError(
                "a shared ledger needs a shared secret: pass secret= (the same on every replica)"
            )
        backend = ledger.bind(
            limits=compiled.limits, clock=compiled.clock, keys=keys, revision=compiled.revision
        )
    scope_hashes = ScopeHashes(keys.scope)
    invoker = Invoker(
        entries=compiled.entries,
        positions=compiled.positions,
        policy=compiled.policy,
        limits=compiled.limits,
        ledger=backend,
        monotonic=compiled.monotonic,
        form_checks=compiled.form_checks,
        scope_hashes=scope_hashes,
    )
    cursors = CursorSealer(clock=compiled.clock, key=keys.cursor)
    return _State(keys, ledger, cursors, scope_hashes, backend, invoker)


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
