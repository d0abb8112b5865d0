"""``build_catalog``: an OpenAPI document as opgate operations, their HTTP handler and policy.

A ``Catalog`` holds the operations, the import ``Report``, and what the handlers
share: one HTTP client, the host's base URL and headers, the confirmation set and
the record of confirmed sends. ``catalog.registry(policy)`` builds the ``Registry``.

How the handler learns the caller (for per-principal headers)
-------------------------------------------------------------
opgate hands a handler only its ``Invocation``; the caller's ``ctx`` reaches the
policy. ``catalog.policy(inner)`` wraps the host's policy: when ``inner`` allows an
``Execute`` of one of this catalog's operations, the wrapper keeps ``ctx`` in a
context variable, which the handler reads when it calls ``headers(ctx)``. The
registry calls ``authorize(ctx, Execute(...))`` right before every dispatch, on
the same task (the contract's invoke pipeline, steps 10-12), so the handler always
sees the ``ctx`` that was just authorized for its own operation.
``catalog.registry(policy)`` does the wrapping; a host that builds the ``Registry``
itself must pass ``catalog.policy(policy)``, or a handler that needs headers fails
with an ``internal`` error (the cause names the mistake).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import secrets
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import anyio
import httpx2

from opgate import (
    ConfigurationError,
    Execute,
    InputAction,
    Invocation,
    Limits,
    Operation,
    Policy,
    Registry,
    Resume,
    await_input,
    fail,
)

from ._confirm import (
    MISMATCH,
    SentLog,
    Unshowable,
    confirmation,
    hidden_headers,
    render,
    request_digest,
    unshowable,
)
from ._document import load_document
from ._http import LEAVES_BASE, Upstream
from ._operations import OperationPlan, plan_operations
from ._report import Report
from ._request import ArgumentProblem, PreparedRequest, prepare

__all__ = ["SAFE_METHODS", "UNSAFE_METHODS", "Catalog", "HeaderSource", "build_catalog"]

#: Methods that only read (RFC 9110 "safe"): never confirmed by default.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: Methods that may change data: confirmed by default.
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Connections the shared client keeps open at most.
MAX_CONNECTIONS = 32
_ALL_METHODS = SAFE_METHODS | UNSAFE_METHODS

HeaderSource = (
    Mapping[str, str]
    | Callable[[Any], Mapping[str, str]]
    | Callable[[Any], Awaitable[Mapping[str, str]]]
)

_CALLER: contextvars.ContextVar[tuple[int, str, Any] | None] = contextvars.ContextVar(
    "opgate_openapi_caller", default=None
)


class _AllowAll:
    def scope_key(self, ctx: Any) -> str:
        return "opgate.openapi.check"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


class _CatalogPolicy:
    """``inner``, plus: an allowed ``Execute`` of a catalog operation records ``ctx``."""

    def __init__(self, inner: Policy, catalog: Catalog) -> None:
        self._inner = inner
        self._catalog_id = id(catalog)
        self._names = catalog._names

    def scope_key(self, ctx: Any) -> Any:
        return self._inner.scope_key(ctx)

    def authorize(self, ctx: Any, request: Any) -> Any:
        verdict = self._inner.authorize(ctx, request)
        if not (isinstance(request, Execute) and request.name in self._names):
            return verdict
        if inspect.isawaitable(verdict):
            return self._after(verdict, ctx, request.name)
        if verdict is None:
            _CALLER.set((self._catalog_id, request.name, ctx))
        return verdict

    async def _after(self, verdict: Awaitable[Any], ctx: Any, name: str) -> Any:
        result = await verdict
        if result is None:
            _CALLER.set((self._catalog_id, name, ctx))
        return result


class _Handler:
    """The handler of one operation (an async callable object)."""

    def __init__(self, catalog: Catalog, plan: OperationPlan) -> None:
        self._catalog = catalog
        self.plan = plan

    async def __call__(self, inv: Invocation) -> Any:
        catalog, plan = self._catalog, self.plan
        try:
            prepared = prepare(plan, inv.arguments, catalog._request_budget)
        except ArgumentProblem as exc:
            return fail(f"not sent: {exc}")
        resume = inv.resume
        if resume is not None:
            # An answer is checked as an answer even where this method is not confirmed
            # (a replica configured otherwise): a declined or replayed answer never sends.
            return await self._answer(prepared, resume)
        if plan.method in catalog.confirm:
            return await self._ask(prepared)
        reply = await catalog._upstream.send(
            prepared,
            await catalog._headers(plan.name),
            has_output_schema=plan.output_schema is not None,
        )
        return reply.outcome()

    async def _answer(self, prepared: PreparedRequest, resume: Resume) -> Any:
        """Send ``prepared`` once for an accepted confirmation, if it is the request shown."""
        catalog, plan = self._catalog, self.plan
        upstream = catalog._upstream
        state = resume.state if isinstance(resume.state, dict) else {}
        key, digest = state.get("send"), state.get("request")
        if not isinstance(key, str) or not isinstance(digest, str):
            return fail("not sent: the confirmation is not recognised")
        if resume.action is not InputAction.ACCEPT or resume.answers != {"confirm": True}:
            return fail(f"not sent: {plan.method} {prepared.path} was not confirmed")
        if resume.recovery_only or not catalog._sent.claim(key):
            return catalog._sent.replay(key, plan.method, prepared.path)
        try:
            headers = await catalog._headers(plan.name)
        except BaseException:
            catalog._sent.record(key, None, "not sent: the host's headers failed")
            raise
        hidden = hidden_headers(headers, upstream.client_headers())

        def shown(request: httpx2.Request) -> str | None:
            shown_digest = request_digest(request, hidden, upstream.client_params())
            return None if shown_digest == digest else MISMATCH

        try:
            reply = await upstream.send(
                prepared,
                headers,
                has_output_schema=plan.output_schema is not None,
                check=shown,
                follow_redirects=False,
            )
        except BaseException as exc:
            ended = (
                "was cancelled"
                if isinstance(exc, anyio.get_cancelled_exc_class())
                else "ended with an internal error"
            )
            catalog._sent.record(
                key,
                None,
                f"{plan.method} {prepared.path} may have reached the API: the call {ended} "
                "before its response was read (check the API before asking again)",
            )
            raise
        catalog._sent.record(key, reply.result, reply.message)
        return reply.outcome()

    async def _ask(self, prepared: PreparedRequest) -> Any:
        """The confirmation of the exact request ``prepared`` makes (see ``_confirm``)."""
        catalog, plan = self._catalog, self.plan
        upstream = catalog._upstream
        headers = await catalog._headers(plan.name)
        try:
            request = upstream.build(prepared, headers)
        except ValueError:
            return fail(LEAVES_BASE)
        hidden = hidden_headers(headers, upstream.client_headers())
        query = upstream.client_params()
        try:
            message = render(plan.name, plan.path, request, hidden, catalog._form_budget, query)
        except Unshowable as exc:
            return unshowable(str(exc))
        key = secrets.token_urlsafe(18)
        return await_input(confirmation(message, key, request_digest(request, hidden, query)))


class Catalog:
    """Operations built from one OpenAPI document, with their shared HTTP machinery.

    * ``operations``: the ``Operation`` tuple (document order);
    * ``report``: what was imported, warned about and skipped;
    * ``plans``: name → ``OperationPlan`` (method, path, parameters; for tests and tools);
    * ``confirm``: the upper-case methods that need a person's confirmation;
    * ``registry(policy, *, limits=None)``: the ``Registry`` (see the module docstring);
    * ``policy(inner)``: ``inner`` wrapped so handlers see the caller's ``ctx``;
    * ``await aclose()``: close the shared HTTP client (if the catalog created it).
    """

    def __init__(
        self,
        plans: Iterable[OperationPlan],
        report: Report,
        upstream: Upstream,
        *,
        headers: HeaderSource | None,
        confirm: frozenset[str],
        limits: Limits | None,
    ) -> None:
        self.report = report
        self.confirm = confirm
        self._upstream = upstream
        self._header_source = headers
        self._limits = limits
        self._form_budget = (limits or Limits()).form_schema_bytes
        self._request_budget = 4 * (limits or Limits()).argument_bytes
        self._sent = SentLog()
        self.plans = {plan.name: plan for plan in plans}
        self._names = frozenset(self.plans)
        self.operations = tuple(self._operation(plan) for plan in self.plans.values())

    def _operation(self, plan: OperationPlan) -> Operation:
        return Operation(
            plan.name,
            plan.summary,
            _Handler(self, plan),
            description=plan.description,
            group=plan.group,
            input_schema=plan.input_schema,
            output_schema=plan.output_schema,
        )

    def __len__(self) -> int:
        return len(self.operations)

    def __repr__(self) -> str:
        return f"Catalog({len(self.operations)} operations, base_url={str(self._upstream.base)!r})"

    def policy(self, inner: Policy) -> Policy:
        """``inner`` wrapped so this catalog's handlers receive the caller's ``ctx``."""
        return _CatalogPolicy(inner, self)

    def registry(self, policy: Policy, *, limits: Limits | None = None) -> Registry:
        """Build the ``Registry`` of this catalog's operations under ``policy``.

        An operation the schema compiler rejects (a ``pattern`` it cannot compile, a
        number outside the numeric profile, a definition over budget) is removed and
        recorded in ``report.skipped`` with the compiler's message, instead of failing
        the whole catalog. ``limits`` defaults to the ones given to ``build_catalog``.
        """
        limits = limits if limits is not None else self._limits
        self._form_budget = (limits or Limits()).form_schema_bytes
        self._request_budget = 4 * (limits or Limits()).argument_bytes
        wrapped = self.policy(policy)
        try:
            return Registry(self.operations, wrapped, limits=limits)
        except ConfigurationError:
            pass
        rejected = {op.name: reason for op, reason in _isolate(list(self.operations), limits)}
        repaired: dict[str, Operation] = {}
        for name, reason in rejected.items():
            plan = self.plans[name]
            fixed = self._without_bad_patterns(plan, limits)
            if fixed is not None:
                self.plans[name] = fixed
                repaired[name] = self._operation(fixed)
                self.report.warn(
                    plan.method,
                    plan.path,
                    "pattern dropped",
                    "dropped a pattern that is not a regular expression the schema compiler "
                    "accepts (ECMA-262)",
                )
                continue
            del self.plans[name]
            self.report.skip(plan.method, plan.path, "schema compiler", reason)
            self.report.operations.remove(name)
        self.operations = tuple(
            repaired.get(op.name, op)
            for op in self.operations
            if op.name not in rejected or op.name in repaired
        )
        self._names = frozenset(self.plans)
        return Registry(self.operations, self.policy(policy), limits=limits)

    def _without_bad_patterns(
        self, plan: OperationPlan, limits: Limits | None
    ) -> OperationPlan | None:
        """``plan`` without the ``pattern``s the compiler refuses, if that is all that was wrong."""
        bad = {p for p in _patterns((plan.input_schema, plan.output_schema)) if not _regex_ok(p)}
        if not bad:
            return None
        fixed = replace(
            plan,
            input_schema=_drop_patterns(plan.input_schema, bad),
            output_schema=_drop_patterns(plan.output_schema, bad),
        )
        try:
            Registry([self._operation(fixed)], _AllowAll(), limits=limits)
        except ConfigurationError:
            return None
        return fixed

    async def aclose(self) -> None:
        """Close the shared HTTP client (a client passed in by the host stays open)."""
        await self._upstream.aclose()

    async def _headers(self, name: str) -> dict[str, str]:
        source = self._header_source
        if source is None:
            return {}
        if isinstance(source, Mapping):
            return _checked_headers(source)
        caller = _CALLER.get()
        _CALLER.set(None)  # used once: the next call is authorized (and recorded) afresh
        if caller is None or caller[0] != id(self) or caller[1] != name:
            raise RuntimeError(
                "headers(ctx) needs the caller: build the Registry with catalog.registry(policy) "
                "or pass catalog.policy(policy) to Registry"
            )
        produced = source(caller[2])
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, Mapping):
            raise TypeError("headers(ctx) must return a mapping of header names to values")
        return _checked_headers(produced)


def _checked_headers(headers: Mapping[Any, Any]) -> dict[str, str]:
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("header names and values must be str")
        if not name or any(c in name for c in "\r\n:\0 ") or any(c in value for c in "\r\n\0"):
            raise ValueError("a host header name or value contains a forbidden character")
        checked[name] = value
    return checked


def _patterns(value: Any) -> Iterator[str]:
    """Every string under a ``pattern`` key (schemas only hold patterns there)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "pattern" and isinstance(item, str):
                yield item
            else:
                yield from _patterns(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _patterns(item)


def _drop_patterns(value: Any, bad: set[str]) -> Any:
    if isinstance(value, dict):
        return {
            k: _drop_patterns(v, bad)
            for k, v in value.items()
            if not (k == "pattern" and isinstance(v, str) and v in bad)
        }
    if isinstance(value, list):
        return [_drop_patterns(v, bad) for v in value]
    return value


@functools.lru_cache(maxsize=4096)
def _regex_ok(pattern: str) -> bool:
    """Whether opgate's schema compiler accepts ``pattern`` (asked through a tiny registry)."""
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    try:
        Registry([Operation("p", "p", _no_handler, input_schema=schema)], _AllowAll())
    except (ConfigurationError, TypeError):
        return False
    return True


def _no_handler(inv: Invocation) -> Any:  # pragma: no cover - never invoked
    return fail("unused")


def _isolate(operations: list[Operation], limits: Limits | None) -> list[tuple[Operation, str]]:
    """The operations the registry rejects, each with the compiler's message (bisection)."""
    try:
        Registry(operations, _AllowAll(), limits=limits)
        return []
    except ConfigurationError as exc:
        if len(operations) == 1:
            return [(operations[0], str(exc))]
    middle = len(operations) // 2
    return _isolate(operations[:middle], limits) + _isolate(operations[middle:], limits)


def build_catalog(
    source: object,
    *,
    base_url: str,
    headers: HeaderSource | None = None,
    confirm: Collection[str] = UNSAFE_METHODS,
    output_schemas: bool = False,
    timeout: float = 30.0,
    limits: Limits | None = None,
    client: Any = None,
    max_connections: int = MAX_CONNECTIONS,
) -> Catalog:
    """Read an OpenAPI 3.0/3.1 document and build its operations.

    * ``source``: a ``pathlib.Path``, the document's text (``str``/``bytes``, JSON or
      YAML) or a mapping; see ``load_document``.
    * ``base_url``: where calls go (``https://api.example.com/v1``); the document's
      ``servers`` are never used, and an agent can never change it.
    * ``headers``: the host's headers (credentials): a mapping used for every call, or
      ``headers(ctx)`` (sync or async) called per call with the caller's ``ctx``.
    * ``confirm``: methods that need a person's confirmation before sending (default:
      ``POST``, ``PUT``, ``PATCH``, ``DELETE``); ``()`` for none.
    * ``output_schemas``: declare output schemas from the JSON success responses
      (off by default: real APIs often break their own response schemas).
    * ``timeout``: seconds for a whole exchange; ``limits``: the registry's ``Limits``
      (definition and result budgets are planned against them).
    * ``client``: an ``httpx2.AsyncClient`` to use instead of the catalog's own (the
      host closes it; redirects are still never followed by it).

    Raises ``DocumentError`` for input that is not OpenAPI 3.0/3.1, ``TypeError`` or
    ``ValueError`` for bad arguments; everything wrong inside the document goes to
    ``catalog.report``.
    """
    methods = frozenset(str(m).upper() for m in confirm)
    unknown = methods - _ALL_METHODS
    if isinstance(confirm, str) or unknown:
        raise ValueError(
            f"confirm must be a collection of HTTP methods ({', '.join(sorted(_ALL_METHODS))})"
        )
    if headers is not None and not (isinstance(headers, Mapping) or callable(headers)):
        raise TypeError("headers must be a mapping or a callable headers(ctx)")
    if isinstance(headers, Mapping):
        headers = _checked_headers(headers)
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError("limits must be an opgate.Limits")
    resolved = limits or Limits()
    upstream = Upstream(
        base_url,
        timeout=timeout,
        result_bytes=resolved.result_bytes,
        max_connections=max_connections,
        client=client,
    )
    document = load_document(source)
    report = Report(title=document.title, version=document.openapi)
    plans = plan_operations(
        document,
        report,
        output_schemas=output_schemas,
        definition_bytes=resolved.definition_bytes,
    )
    return Catalog(plans, report, upstream, headers=headers, confirm=methods, limits=limits)
