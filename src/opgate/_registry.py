"""``Registry``: construction, and the one place that sequences search, inspect and invoke.

The rules live in their own modules (``_json``, ``_schema``, ``_search``,
``_cursor``, ``_policy``, ``_results``, ``_forms``, ``_responses``, ``_ledger``,
``_progress``); this module only calls them in the order the spec requires and
turns every request-level problem into a returned ``Failed``. Requests never raise
for bad input, nor for anything a callback raises (``BaseException`` included);
real cancellation of the calling task, ``KeyboardInterrupt`` and ``SystemExit``
propagate (``_execution``). A returned failure holds no traceback frames.

No lock is held while a policy, handler or progress callback runs.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring
from typing import Any, Protocol

import anyio
import anyio.to_thread

from ._collector import paused_collector
from ._cursor import CursorBinding, CursorError, CursorSealer
from ._execution import (
    honour_cancellation,
    is_own_close,
    must_propagate,
    must_yield,
    run_sync_to_completion,
)
from ._failures import ConfigurationError, Failure, FailureCode, internal_failure, returned
from ._forms import FormChecks, FormInput, InputMode, StoredPrompt, URLInput, is_genuine_prompt
from ._invocation import Resume, new_invocation, new_resume
from ._json import (
    JSONError,
    JSONValue,
    from_python,
    parse,
    parsed_canonical_bytes,
)
from ._keys import Definition, RegistryKeys, definitions_revision
from ._ledger import (
    Binding,
    Event,
    Ledger,
    LedgerBackend,
    LedgerRecord,
    Lifetime,
    is_token_shaped,
)
from ._limits import (
    DEFAULT_LIMITS,
    PAGE_BYTES,
    PAGE_RESERVE_BYTES,
    PROMPT_OVERHEAD_BYTES,
    QUERY_BYTES,
    RECORD_FIXED_BYTES,
    SEARCH_DEFAULT_LIMIT,
    SEARCH_MAX_LIMIT,
    Limits,
)
from ._operation import Operation, OperationSpec
from ._outcomes import Completed, Failed, InvokeOutcome, Outcome, Pending
from ._policy import (
    Discover,
    DiscoveryScope,
    Execute,
    Policy,
    PolicyError,
    authorize,
    discovery_scope,
    judge_exception,
    judge_verdict,
    scope_key,
    unavailable,
)
from ._progress import Diagnostics, ProgressChannel, ProgressSink
from ._ranking import Ranking, Scorer, build_ranker
from ._responses import (
    AnswerError,
    InputAction,
    InputResponse,
    check_response_shape,
    decode_answers_canonical,
    is_genuine_response,
)
from ._results import Result, check_result_budget, is_constructed, json_string_size
from ._schema import CompiledSchema, CompileMemo, SchemaCompiler, SchemaRole, ViolationDetail
from ._search import IndexEntry, SearchIndex, fold_group, normalize_query

__all__ = ["LedgerFactory", "Registry", "SearchPage", "Summary"]


class LedgerFactory(Protocol):
    """A shared continuation store's configuration, bound to one registry when it is
    built (``opgate.redis.RedisLedger``): ``bind`` returns the store's backend."""

    def bind(
        self,
        *,
        limits: Limits,
        clock: Callable[[], float],
        keys: RegistryKeys,
        revision: str,
    ) -> LedgerBackend[Any, Any]: ...


#: Accepted when an operation declares no input schema: any argument object.
_ANY_OBJECT: dict[str, JSONValue] = {"type": "object"}

#: Collection types accepted for ``input_support`` without the slower ABC check.
_PLAIN_COLLECTIONS = (frozenset, set, tuple, list)

#: Scope-key hashes remembered (principals are few and hot; the HMAC is 3 µs).
SCOPE_HASHES_CACHED = 4096

#: Bytes of framing charged for one failure message plus its diagnostics.
FAILURE_OVERHEAD_BYTES = 256

#: The public message for a call on a closed serving lifetime.
LIFETIME_CLOSED = (
    "the serving lifetime is closed: this server no longer accepts calls; "
    "use the application's own intent or job key to find the outcome of earlier requests"
)


@dataclass(frozen=True, slots=True)
class Summary:
    """One search result: an operation's name, group and complete summary."""

    name: str
    group: str
    summary: str


@dataclass(frozen=True, slots=True)
class SearchPage:
    """A page of search results and, when more may follow, the cursor to continue."""

    items: tuple[Summary, ...]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class _Entry:
    """A registered operation as the registry keeps it (snapshotted, compiled)."""

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]
    source: str
    handler: Callable[..., Any]
    is_async: bool
    input_schema: CompiledSchema
    output_schema: CompiledSchema | None
    item_bytes: int  # encoded size of its search page item, comma included
    discover: Discover  # immutable, so one request value serves every search
    summary_item: Summary


@dataclass(slots=True, eq=False)  # internal and never mutated; frozen costs 0.7 µs a call
class _Call:
    """One invoke request whose arguments passed: what every later phase needs."""

    ctx: Any
    entry: _Entry
    values: dict[str, JSONValue]  # validated; handed out only as detached copies
    modes: frozenset[InputMode]
    lifetime_seconds: float
    serving: Lifetime
    channel: ProgressChannel
    deadline: float  # the host's effective anyio deadline, read once per call
    started: float  # time.monotonic() when the call began

    async def checkpoint(self, when: str, *, fresh: bool = False) -> None:
        """The check before dispatch and before returning a result.

        Fails ``cancelled`` if the anyio deadline has passed (or the scope was
        cancelled), delivers a pending cancellation of the calling task (asyncio
        deadlines included: see ``_execution.honour_cancellation``), and refuses a
        closed serving lifetime. ``fresh`` reads anyio's scopes again instead of the
        deadline read at the start (1.8 µs): after a sync handler, whose worker thread
        kept anyio from delivering a cancellation of the caller's scope. (An async
        handler's awaits deliver it; what a shielded section held back is delivered
        by the yield once the call has taken ``YIELD_AFTER``.)
        """
        deadline = anyio.current_effective_deadline() if fresh else self.deadline
        if deadline != math.inf and deadline <= anyio.current_time():
            raise Failure(FailureCode.CANCELLED, f"the deadline passed {when}")
        if must_yield(self.started):
            await honour_cancellation()
        if self.serving.closed:
            raise Failure(FailureCode.EXPIRED, LIFETIME_CLOSED)


_string = encode_basestring  # json.dumps's string encoder for ensure_ascii=False


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _item_bytes(name: str, group: str, summary: str) -> int:
    # The bytes of json.dumps({"group": ..., "name": ..., "summary": ...},
    # ensure_ascii=False, separators=(",", ":")) plus one, without building the dict.
    item = f'{{"group":{_string(group)},"name":{_string(name)},"summary":{_string(summary)}}}'
    return _utf8_size(item) + 1


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
        from . import __version__

        compiler = SchemaCompiler(backtrack_limit=regex_backtrack_limit)
        memo = CompileMemo()
        with paused_collector():
            default_input = compiler.compile(
                _ANY_OBJECT, role=SchemaRole.INPUT, where="default", memo=memo
            )
            entries: dict[str, _Entry] = {}
            for operation in operations:
                if not isinstance(operation, Operation):
                    raise TypeError(f"expected opgate.Operation, got {type(operation).__name__}")
                if operation.name in entries:
                    raise ConfigurationError(f"operation name {operation.name!r} is not unique")
                entries[operation.name] = self._snapshot(operation, compiler, default_input, memo)
            del memo
            self._entries = tuple(entries[name] for name in sorted(entries))
            self._positions = {entry.name: index for index, entry in enumerate(self._entries)}
            self._index = SearchIndex(
                [
                    IndexEntry(e.name, e.group, e.summary, (e.description, *e.examples, e.source))
                    for e in self._entries
                ]
            )
            # The search order (see _ranking): the rule's index itself by default.
            self._ranker, self._search_method = build_ranker(ranking, self._index, self._entries)
            # Inside the paused collector too: 20,000 Definition objects would trigger passes.
            self._scope_hashes: dict[str, bytes] = {}
            self._revision = definitions_revision(
                (
                    Definition(
                        e.name,
                        e.group,
                        e.summary,
                        e.description,
                        e.examples,
                        e.source,
                        e.input_schema.canonical,
                        None if e.output_schema is None else e.output_schema.canonical,
                    )
                    for e in self._entries
                ),
                __version__,
            )
        self._form_checks = FormChecks()
        self._bind_state(secret, ledger)

    def _bind_state(self, secret: bytes | None, ledger: LedgerFactory | None) -> None:
        """Derive the keys from ``secret`` and open the continuation ledger."""
        try:
            keys = RegistryKeys.from_secret(secret)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._secret = keys.scope
        self._cursors = CursorSealer(clock=self._clock, key=keys.cursor)
        self._scope_hashes = {}
        self._ledger: LedgerBackend[Any, Any]
        if ledger is None:
            self._ledger = Ledger(self._limits, self._clock)
            return
        if not callable(getattr(ledger, "bind", None)):
            raise TypeError("ledger must be a shared ledger such as opgate.redis.RedisLedger")
        if not keys.shared:
            raise ConfigurationError(
                "a shared ledger needs a shared secret: pass secret= (the same on every replica)"
            )
        self._ledger = ledger.bind(
            limits=self._limits, clock=self._clock, keys=keys, revision=self._revision
        )

    def _with_state(self, *, secret: bytes | None, ledger: LedgerFactory | None) -> Registry:
        """A copy serving the same compiled catalog with another secret and ledger
        (how ``opgate serve`` applies ``OPGATE_SECRET`` and ``--ledger`` to a built
        registry); the copy has no continuations."""
        copy = object.__new__(Registry)
        copy.__dict__.update(self.__dict__)
        copy._bind_state(secret, ledger)
        return copy

    def _with_ranking(self, ranking: Ranking | Scorer) -> Registry:
        """A copy serving the same compiled catalog under another ranking (how
        ``opgate serve --ranking`` applies to a built registry)."""
        copy = object.__new__(Registry)
        copy.__dict__.update(self.__dict__)
        copy._ranker, copy._search_method = build_ranker(ranking, self._index, self._entries)
        return copy

    async def aclose(self) -> None:
        """Close a shared ledger's connections (a later call reconnects); idempotent."""
        await self._ledger.aclose()

    def _snapshot(
        self,
        operation: Operation,
        compiler: SchemaCompiler,
        default_input: CompiledSchema,
        memo: CompileMemo,
    ) -> _Entry:
        where = f"operation {operation.name!r}"
        input_schema = (
            default_input
            if operation.input_schema is None
            else compiler.compile(
                operation.input_schema,
                role=SchemaRole.INPUT,
                where=f"{where} input_schema",
                memo=memo,
            )
        )
        output_schema = (
            None
            if operation.output_schema is None
            else compiler.compile(
                operation.output_schema,
                role=SchemaRole.OUTPUT,
                where=f"{where} output_schema",
                memo=memo,
            )
        )
        texts = "".join(
            (
                operation.name,
                operation.group,
                operation.summary,
                operation.description,
                operation.source,
                *operation.examples,
            )
        )
        size = (
            _utf8_size(texts)
            + len(input_schema.canonical)
            + (len(output_schema.canonical) if output_schema else 0)
        )
        if size > self._limits.definition_bytes:
            raise ConfigurationError(
                f"{where} is {size} bytes (texts, examples, source and schemas), over "
                f"Limits.definition_bytes ({self._limits.definition_bytes})"
            )
        item_bytes = _item_bytes(operation.name, operation.group, operation.summary)
        if item_bytes > PAGE_BYTES - PAGE_RESERVE_BYTES:
            raise ConfigurationError(
                f"{where} cannot fit an empty search page: its name, group and summary "
                f"encode to {item_bytes} bytes, over {PAGE_BYTES - PAGE_RESERVE_BYTES}; "
                f"shorten the summary"
            )
        handler = operation.handler
        is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
        )
        return _Entry(
            name=operation.name,
            group=operation.group,
            summary=operation.summary,
            description=operation.description,
            examples=operation.examples,
            source=operation.source,
            handler=handler,
            is_async=is_async,
            input_schema=input_schema,
            output_schema=output_schema,
            item_bytes=item_bytes,
            discover=Discover(operation.name),
            summary_item=Summary(operation.name, operation.group, operation.summary),
        )

    @property
    def limits(self) -> Limits:
        """The registry's limits, defaults resolved."""
        return self._limits

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

    def _scope_hash(self, key: str) -> bytes:
        """The keyed hash that stands for a scope key in cursors and continuations."""
        cached = self._scope_hashes.get(key)
        if cached is None:
            cached = hmac.new(self._secret, key.encode("utf-8", "surrogatepass"), "sha256").digest()
            if len(self._scope_hashes) >= SCOPE_HASHES_CACHED:
                self._scope_hashes.clear()  # bounded; recomputing is cheap
            self._scope_hashes[key] = cached
        return cached

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
        problem = _search_problem(query, group, limit, cursor, self._limits.token_bytes)
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
                scope_hash=self._scope_hash(key),
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
                exact = await self._exact(ctx, binding, scope)
                if exact is not None:
                    return exact
            return await self._page(ctx, binding, after, size, scope)
        except PolicyError as exc:
            return Failed(exc.failure)

    async def _exact(
        self, ctx: Any, binding: CursorBinding, scope: DiscoveryScope | None
    ) -> SearchPage | None:
        position = self._index.exact(binding.query)
        if position is None:
            return None
        entry = self._entries[position]
        if binding.group and fold_group(entry.group) != binding.group:
            return None
        if scope is not None and not scope.admits(entry.name, entry.group):
            return None
        if not await authorize(self._policy, ctx, entry.discover):
            return None
        return SearchPage((entry.summary_item,))

    async def _page(
        self,
        ctx: Any,
        binding: CursorBinding,
        after: tuple[int, str] | None,
        size: int,
        scope: DiscoveryScope | None,
    ) -> SearchPage:
        """Place authorized candidates in rank order until the page or its budget is full.

        Search asks the policy for every candidate it considers, so this loop is the
        hot path: a sync policy's verdict is judged inline, without a coroutine.
        """
        budget = PAGE_BYTES - PAGE_RESERVE_BYTES
        check = self._policy.authorize
        entries = self._entries
        items: list[Summary] = []
        used = 0
        last: tuple[int, int] | None = None  # (tier, catalog position) of the last item
        unavailable_code = FailureCode.UNAVAILABLE
        # A discovery scope narrows the candidates inside the index, before any policy call.
        within = None if scope is None else self._index.scope(scope.groups, scope.prefixes)
        ranked = self._ranker.ranked(binding.query, binding.group, after, scope=within)
        for tier, position in ranked:
            entry = entries[position]
            if len(items) == size or used + entry.item_bytes > budget:
                # A further candidate exists: continue after the last placed item.
                assert last is not None  # every item fits an empty page (checked at startup)
                return SearchPage(tuple(items), self._cursors.seal(binding, last))
            try:
                verdict = check(ctx, entry.discover)
                if verdict is not None:
                    if type(verdict) is Failure and verdict.code is unavailable_code:
                        continue  # the usual denial, judged inline
                    if inspect.isawaitable(verdict):
                        verdict = await verdict
                    if not (verdict is None or judge_verdict(verdict)):
                        continue
            except PolicyError:
                raise
            except BaseException as exc:
                if is_own_close(exc):
                    raise
                if not judge_exception(exc):
                    continue
            items.append(entry.summary_item)
            used += entry.item_bytes
            last = (tier, position)
        return SearchPage(tuple(items))

    # -- inspect -----------------------------------------------------------------

    async def inspect(self, ctx: Any, name: str) -> OperationSpec | Failed:
        """The full definition of an operation the principal may discover, schemas included."""
        try:
            await scope_key(self._policy, ctx)
            entry = await self._discoverable(ctx, name)
        except BaseException as exc:
            return _failed(exc)
        if entry is None:
            return Failed(unavailable())
        output = entry.output_schema
        return OperationSpec(
            name=entry.name,
            group=entry.group,
            summary=entry.summary,
            description=entry.description,
            examples=entry.examples,
            _input_schema=entry.input_schema.document(),
            _output_schema=None if output is None else output.document(),
        )

    async def _discoverable(self, ctx: Any, name: object) -> _Entry | None:
        position = self._positions.get(name) if isinstance(name, str) else None
        if position is None:
            return None
        entry = self._entries[position]
        scope = await discovery_scope(self._policy, ctx)
        if scope is not None and not scope.admits(entry.name, entry.group):
            return None
        if not await authorize(self._policy, ctx, entry.discover):
            return None
        return entry

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
            return await self._invoke(
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

    async def _invoke(
        self,
        ctx: Any,
        name: str,
        arguments: object,
        input_support: object,
        resume: object,
        progress: object,
        input_expiry: object,
        lifetime: object,
        diagnostics: Diagnostics,
    ) -> InvokeOutcome:
        started = time.monotonic()
        modes, lifetime_seconds, serving = self._options(
            input_support, progress, input_expiry, lifetime
        )
        key = await scope_key(self._policy, ctx)
        entry = await self._discoverable(ctx, name)
        if entry is None:
            raise unavailable()
        values, canonical = self._arguments(entry, arguments)
        # Only calls that may prompt or that resume need the continuation binding.
        bound: tuple[Binding, int] | None = None
        if resume is not None or modes:
            if canonical is None:
                canonical = parsed_canonical_bytes(values)
            binding = Binding(
                operation=entry.name,
                arguments_hash=hashlib.sha256(canonical).digest(),
                scope_hash=self._scope_hash(key),
                lifetime=serving,
            )
            bound = (binding, len(canonical))
        channel = ProgressChannel(progress, diagnostics, clock=self._monotonic)  # type: ignore[arg-type]
        # The effective deadline of the host's cancel scopes, read once: it is
        # checked before dispatch and before a result is returned.
        deadline = anyio.current_effective_deadline()
        call = _Call(
            ctx, entry, values, modes, lifetime_seconds, serving, channel, deadline, started
        )
        try:
            if resume is not None:
                assert bound is not None
                outcome = await self._resume(call, bound[0], resume)
            else:
                outcome = await self._initial(call, bound)
        finally:
            await channel.close()
        return _with_diagnostics(outcome, diagnostics)

    def _options(
        self, input_support: object, progress: object, input_expiry: object, lifetime: object
    ) -> tuple[frozenset[InputMode], float, Lifetime]:
        if type(input_support) not in _PLAIN_COLLECTIONS and (
            isinstance(input_support, str | bytes) or not isinstance(input_support, Collection)
        ):
            raise Failure(FailureCode.INVALID_REQUEST, "input_support must be a set of InputMode")
        modes = frozenset(input_support)  # type: ignore[call-overload]  # a Collection, checked
        if modes and not all(isinstance(mode, InputMode) for mode in modes):
            raise Failure(
                FailureCode.INVALID_REQUEST, "input_support must contain InputMode values"
            )
        if progress is not None and not callable(progress):
            raise Failure(FailureCode.INVALID_REQUEST, "progress must be a callable sink")
        seconds = self._limits.input_lifetime.total_seconds()
        if input_expiry is not None:
            if not isinstance(input_expiry, timedelta) or input_expiry <= timedelta(0):
                raise Failure(
                    FailureCode.INVALID_REQUEST, "input_expiry must be a positive timedelta"
                )
            seconds = min(seconds, input_expiry.total_seconds())
        if lifetime is None:
            serving = self._ledger.default_lifetime
        elif isinstance(lifetime, Lifetime) and lifetime._ledger is self._ledger:
            serving = lifetime
        else:
            raise Failure(
                FailureCode.INVALID_REQUEST,
                "lifetime must come from this registry's open_lifetime()",
            )
        if serving.closed:
            raise Failure(FailureCode.EXPIRED, LIFETIME_CLOSED)
        return modes, seconds, serving

    def _arguments(
        self, entry: _Entry, arguments: object
    ) -> tuple[dict[str, JSONValue], bytes | None]:
        """Budget, strict parse, object check, schema validation: the validated arguments.

        Also returns their canonical bytes when the budget check had to compute them
        (mapping arguments), so they are not computed twice.
        """
        canonical: bytes | None = None
        limit = self._limits.argument_bytes
        try:
            if isinstance(arguments, str):
                raw = arguments.encode("utf-8", "surrogatepass")
                if len(raw) > limit:
                    raise _too_large(len(raw), limit)
                values = parse(arguments, profile=True, expansion_limit=True)
            elif isinstance(arguments, bytes | bytearray):
                if len(arguments) > limit:
                    raise _too_large(len(arguments), limit)
                values = parse(arguments, profile=True, expansion_limit=True)
            elif isinstance(arguments, Mapping):
                values = from_python(arguments, profile=True)
                canonical = parsed_canonical_bytes(values)  # the C encoder, mostly
                size = len(canonical)
                if size > limit:
                    raise _too_large(size, limit)
            else:
                raise Failure(
                    FailureCode.INVALID_ARGUMENTS,
                    "arguments must be a JSON object (JSON text or a mapping)",
                )
        except JSONError as exc:
            raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {exc}") from None
        if not isinstance(values, dict):
            raise Failure(
                FailureCode.INVALID_ARGUMENTS,
                f"arguments must be a JSON object, not {_json_kind(values)}",
            )
        violation = entry.input_schema.first_violation(values)
        if violation is not None:
            raise Failure(FailureCode.INVALID_ARGUMENTS, f"arguments: {violation}")
        return values, canonical

    async def _may_execute(self, call: _Call) -> bool:
        """Execution authorization, with a detached copy of the validated arguments."""
        return await authorize(
            self._policy, call.ctx, Execute._of_validated(call.entry.name, call.values)
        )

    async def _initial(self, call: _Call, bound: tuple[Binding, int] | None) -> InvokeOutcome:
        """A call that answers no prompt; with input support it reserves a chain first."""
        if not await self._may_execute(call):
            return Failed(unavailable())
        reservation: Any = None
        if bound is not None:
            reservation = await self._ledger.begin(*bound)
        try:
            await call.checkpoint("before the operation started")
            outcome = await self._dispatch(call, None)
            if outcome.kind == "await_input":
                if reservation is None:
                    return Failed(Failure(FailureCode.CONFIRMATION_REQUIRED))
                return await self._commit(call, None, outcome, reservation)
            result = self._conclude(call.entry, outcome)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            return result
        finally:
            if reservation is not None:
                await self._ledger.release(reservation)

    async def _resume(self, call: _Call, binding: Binding, resume: object) -> InvokeOutcome:
        """A call answering a prompt: find, check and claim its record, then act on it."""
        token, response = self._resume_parts(resume)
        record = await self._ledger.find(token, binding)
        if record is None:
            return Failed(Failure(FailureCode.EXPIRED))
        prompt = record.prompt
        assert isinstance(prompt, StoredPrompt)
        answers, answer_bytes = self._answers(prompt, response)
        answer_key = response.action.value.encode("ascii") + b"\0" + answer_bytes
        charge = len(answer_bytes) + Ledger.max_prompt_charge(self._limits)
        # Only a new answer needs room; replays and recoveries reuse the record.
        claim = await self._ledger.claim(record, answer_key, len(answer_bytes), charge)
        if isinstance(claim, Failure):
            return Failed(claim)
        claimed, reservation = claim
        try:
            # From here the record is in flight: whatever happens before the handler
            # takes it over (an exception of any kind) gives it back, so it can never
            # stay busy.
            try:
                state = prompt.state_value()
                verified = new_resume(response.action, answers, state, claimed is Event.RECOVER)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._ledger.settle(record, _GIVE_BACK[claimed])
                raise
            if claimed is Event.REPLAY:
                return await self._replay(call, record)
            if claimed is Event.RECOVER:
                return await self._recover(call, record, verified)
            assert reservation is not None
            return await self._answer(call, record, verified, reservation)
        finally:
            if reservation is not None:
                await self._ledger.release(reservation)

    def _resume_parts(self, resume: object) -> tuple[str, InputResponse]:
        if not (isinstance(resume, tuple) and len(resume) == 2):
            raise Failure(
                FailureCode.INVALID_REQUEST, "resume must be (continuation, InputResponse)"
            )
        token, response = resume
        if not is_genuine_response(response):  # final class, completed constructor only
            raise Failure(FailureCode.INVALID_REQUEST, "resume must carry an InputResponse")
        if not isinstance(token, str) or len(token) > self._limits.token_bytes:
            raise Failure(FailureCode.INVALID_REQUEST, "malformed continuation")
        if not is_token_shaped(token):
            raise Failure(FailureCode.INVALID_REQUEST, "malformed continuation")
        return token, response

    def _answers(self, prompt: StoredPrompt, response: InputResponse) -> tuple[JSONValue, bytes]:
        """Decode, bound and check the answers against the protected original prompt."""
        try:
            answers, canonical = decode_answers_canonical(
                response, max_bytes=self._limits.answer_bytes
            )
        except AnswerError as exc:
            raise Failure(FailureCode.INVALID_REQUEST, f"answers: {exc}") from None
        problem = check_response_shape(prompt.mode, response, answers)
        if problem is not None:
            raise Failure(FailureCode.INVALID_REQUEST, problem)
        if prompt.mode is InputMode.FORM and response.action is InputAction.ACCEPT:
            problem = self._form_checks.validate(prompt.schema_bytes, answers)
            if problem is not None:
                raise Failure(FailureCode.INVALID_REQUEST, f"answers: {problem}")
        return answers, canonical

    async def _answer(
        self, call: _Call, record: LedgerRecord, verified: Resume, reservation: Any
    ) -> InvokeOutcome:
        """A new answer: authorize, dispatch, then record what became of it."""
        try:
            allowed = await self._may_execute(call)
            await call.checkpoint("before the operation started")
        except BaseException:
            await self._ledger.settle(record, Event.REVERT)
            raise
        if not allowed:
            await self._ledger.settle(record, Event.REVERT)
            return Failed(unavailable())
        settled = False
        try:
            outcome = await self._dispatch(call, verified)
            if outcome.kind == "await_input":
                if record.round >= self._limits.max_prompts:
                    return Failed(Failure(FailureCode.INTERACTION_LIMIT))
                reply = await self._commit(call, record, outcome, reservation)
                settled = isinstance(reply, Pending)
                return reply
            result = self._conclude(call.entry, outcome)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            if isinstance(result, Completed):
                await self._ledger.settle(record, Event.FINISHED, reservation)
                settled = True
            return result
        finally:
            if not settled:
                await self._ledger.settle(record, Event.BROKEN, reservation)

    async def _replay(self, call: _Call, record: LedgerRecord) -> InvokeOutcome:
        """An identical answer to an answered prompt: the same next prompt, re-authorized."""
        try:
            if not await self._may_execute(call):
                return Failed(unavailable())
            child = await self._ledger.child_of(record)
            if child is None:
                return Failed(Failure(FailureCode.EXPIRED))
            child_record, token = child
            prompt = child_record.prompt
            assert isinstance(prompt, StoredPrompt)
            return Pending(prompt.public(), token, _utc(child_record.expires_at))
        finally:
            await self._ledger.settle(record, Event.REPLAYED)

    async def _recover(self, call: _Call, record: LedgerRecord, verified: Resume) -> InvokeOutcome:
        """An identical answer after completion or breakage: a recovery-only call."""
        recovered = False
        try:
            if not await self._may_execute(call):
                return Failed(unavailable())
            await call.checkpoint("before the operation started")
            outcome = await self._dispatch(call, verified)
            if outcome.kind == "await_input":
                return Failed(
                    Failure(
                        FailureCode.INVALID_RESULT,
                        "a recovery call may only finish; it cannot ask for more input",
                    )
                )
            result = self._conclude(call.entry, outcome)
            await call.checkpoint("before the result was returned", fresh=not call.entry.is_async)
            recovered = isinstance(result, Completed)
            return result
        finally:
            await self._ledger.settle(record, Event.RECOVERED if recovered else Event.BROKEN)

    async def _dispatch(self, call: _Call, verified: Resume | None) -> Outcome:
        """Call the handler and return its genuine outcome.

        Anything it raises (``BaseException`` included) becomes a sanitized
        ``internal`` failure, except what ``must_propagate``. A sync handler runs in
        a worker thread that is waited for even if the caller is cancelled, so this
        returns (or raises) only once the handler has really returned.
        """
        entry = call.entry
        # The handler is the validated arguments' last user (each call dispatches once;
        # the policy had its own copy), so it gets them without a copy: a copy of 64 KiB
        # of small items costs milliseconds (issue 9, item 1).
        invocation = new_invocation(entry.name, call.values, call.modes, verified, call.channel)
        try:
            if entry.is_async:
                outcome = await entry.handler(invocation)
            else:
                outcome = await run_sync_to_completion(entry.handler, invocation)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except BaseException as exc:
            if must_propagate(exc) or is_own_close(exc):
                raise
            raise internal_failure(exc) from None
        if not isinstance(outcome, Outcome) or not outcome.is_genuine():
            raise Failure(
                FailureCode.INVALID_RESULT,
                "the operation returned neither finish(...), fail(...) nor await_input(...)",
            )
        return outcome

    def _conclude(self, entry: _Entry, outcome: Outcome) -> Completed | Failed:
        """Check a finish or fail outcome against the output schema and result budgets."""
        if outcome.kind == "fail":
            return Failed(self._operation_failure(entry, outcome))
        assert outcome.kind == "finish"  # genuine outcomes only (_dispatch)
        result = outcome.payload
        if not isinstance(result, Result) or not is_constructed(result):
            raise Failure(
                FailureCode.INVALID_RESULT, "finish(...) needs a Result built with Result(...)"
            )
        if entry.output_schema is not None:
            encoded = result.structured_json
            if encoded is None:
                raise Failure(
                    FailureCode.INVALID_RESULT,
                    "the operation declares an output schema but returned no structured result",
                )
            try:  # one strict parse of the canonical bytes applies the numeric profile
                structured = parse(encoded, profile=True)
            except JSONError as exc:  # the rule only: the pointer holds the data's names
                failure = Failure(FailureCode.INVALID_RESULT, f"structured result: {exc.reason}")
                failure.cause = exc
                raise failure from None
            violation = entry.output_schema.first_violation(structured)
            if violation is not None:  # the public message names nothing from the data
                failure = Failure(
                    FailureCode.INVALID_RESULT, f"structured result: {violation.public()}"
                )
                failure.cause = ViolationDetail(violation)
                raise failure
        problem = check_result_budget(
            result,
            result_bytes=self._limits.result_bytes,
            inline_bytes=self._limits.inline_bytes,
        )
        if problem is not None:
            raise Failure(FailureCode.INVALID_RESULT, problem)
        return Completed(result)

    def _operation_failure(self, entry: _Entry, outcome: Outcome) -> Failure:
        message = outcome.message
        if not isinstance(message, str) or _has_surrogate(message):
            raise Failure(FailureCode.INVALID_RESULT, "fail(...) needs a str message")
        budget = self._limits.result_bytes - FAILURE_OVERHEAD_BYTES
        encoded = json_string_size(message)  # as JSON will carry it, escapes included
        if encoded > budget:
            raise Failure(
                FailureCode.INVALID_RESULT, "the failure message exceeds the result budget"
            )
        diagnostics: JSONValue = None
        if outcome.payload is not None:
            try:
                diagnostics = from_python(outcome.payload, profile=entry.output_schema is not None)
            except JSONError:
                diagnostics = None
            if (
                diagnostics is not None
                and entry.output_schema is not None
                and not entry.output_schema.is_valid(diagnostics)
            ):
                diagnostics = None
            if (
                diagnostics is not None
                and encoded + len(parsed_canonical_bytes(diagnostics)) > budget
            ):
                diagnostics = None
        return Failure(FailureCode.OPERATION_FAILED, message, diagnostics=diagnostics)

    async def _commit(
        self,
        call: _Call,
        parent: LedgerRecord | None,
        outcome: Outcome,
        reservation: Any,
    ) -> Pending | Failed:
        """Check a prompt against the host's support and the budgets, then commit it."""
        prompt = outcome.payload
        if not is_genuine_prompt(prompt):  # final classes, completed constructors only
            raise Failure(
                FailureCode.INVALID_RESULT, "await_input(...) needs a FormInput or URLInput"
            )
        if prompt.mode not in call.modes:
            return Failed(Failure(FailureCode.CONFIRMATION_REQUIRED))
        self._check_prompt(prompt)
        stored = StoredPrompt.of(prompt)
        charge = RECORD_FIXED_BYTES + stored.size
        committed = await self._ledger.commit(
            reservation, parent, stored, charge, call.lifetime_seconds
        )
        if isinstance(committed, Failure):
            return Failed(committed)
        record, token = committed
        return Pending(stored.public(), token, _utc(record.expires_at))

    def _check_prompt(self, prompt: FormInput | URLInput) -> None:
        """The prompt's state and public part must fit their budgets (else ``invalid_result``).

        The public part is counted as JSON encodes it: the message's escapes count,
        like a result's text (the schema's canonical bytes and the URL are already JSON).
        """
        limits = self._limits
        if isinstance(prompt, FormInput):
            public = json_string_size(prompt.message) + prompt.schema_size
            state = len(prompt.state_bytes)
            if state > limits.state_bytes:
                raise Failure(
                    FailureCode.INVALID_RESULT,
                    f"the prompt's state is {state} bytes, over Limits.state_bytes "
                    f"({limits.state_bytes})",
                )
        else:
            public = json_string_size(prompt.message) + _utf8_size(prompt.url().url)
            state = 0
        if public > limits.form_schema_bytes:
            raise Failure(
                FailureCode.INVALID_RESULT,
                f"the prompt's message and schema or URL are {public} bytes, over "
                f"Limits.form_schema_bytes ({limits.form_schema_bytes})",
            )
        if public + PROMPT_OVERHEAD_BYTES > limits.result_bytes:
            raise Failure(FailureCode.INVALID_RESULT, "the prompt does not fit the result budget")


#: How a claimed record is given back when its request stops before the hand-over.
_GIVE_BACK = {Event.ANSWER: Event.REVERT, Event.REPLAY: Event.REPLAYED, Event.RECOVER: Event.BROKEN}


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


def _search_problem(
    query: object, group: object, limit: object, cursor: object, token_bytes: int
) -> str | None:
    for label, value in (("query", query), ("group", group)):
        if not isinstance(value, str):
            return f"{label} must be a string"
        if _has_surrogate(value):
            return f"{label} must be valid UTF-8"
        if len(value) > QUERY_BYTES or _utf8_size(value) > QUERY_BYTES:
            return f"{label} must be at most {QUERY_BYTES} UTF-8 bytes"
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX_LIMIT
    ):
        return f"limit must be an integer from 1 to {SEARCH_MAX_LIMIT}"
    if cursor is not None and (not isinstance(cursor, str) or len(cursor) > token_bytes):
        return "malformed cursor: start the search again without a cursor"
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _too_large(size: int, limit: int) -> Failure:
    return Failure(
        FailureCode.INVALID_ARGUMENTS,
        f"arguments are {size} bytes, over the limit of {limit} bytes",
    )


def _json_kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a number"


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _with_diagnostics(outcome: InvokeOutcome, diagnostics: Diagnostics) -> InvokeOutcome:
    entries = diagnostics.entries
    if not entries:
        return outcome
    if isinstance(outcome, Completed):
        return Completed(outcome.result, entries)
    if isinstance(outcome, Failed):
        return Failed(outcome.failure, entries)
    return Pending(outcome.prompt, outcome.continuation, outcome.expires_at, entries)
