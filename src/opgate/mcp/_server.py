"""``GatewayServer``: a ``Registry`` served as MCP tools on the official SDK.

One low-level ``mcp.server.Server`` with two handlers, ``tools/list`` and
``tools/call``. The call handler is the one place that sequences a request:

1. build the ``CallContext`` (principal from the verified bearer token, or the
   local principal);
2. check the gateway tool's own arguments (``_tools``);
3. call the registry (search, inspect, invoke) with the client's input modes,
   a progress sink and the serving lifetime;
4. for a ``Pending`` outcome, ask the person in the era's way — an
   ``elicitation/create`` request inside the call (2025-11-25) and resume, or an
   ``InputRequiredResult`` whose ``request_state`` carries the continuation
   (2026-07-28) — until the operation finishes;
5. translate the outcome (``_wire``) and check its size as sent.

Over ``run_stdio`` and ``http_app`` the transports are exact (``_exact``): the
operation's arguments and the person's answers reach the registry as the JSON text
the client sent, and numbers go out in their canonical spelling.

Operation-level failures are ``isError`` results, never JSON-RPC errors. Private
causes and diagnostics go to the ``opgate.mcp`` logger (and, when the client asked
for them, to MCP log notifications) as sanitized lines: never a token, an
argument, or an exception's text.
"""

from __future__ import annotations

import json
import logging
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp.types as types
import pydantic
import pydantic_core
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier, principal_components
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette

from .. import (
    PAGE_BYTES,
    Completed,
    ConfigurationError,
    Failed,
    Failure,
    FailureCode,
    FormPrompt,
    InputMode,
    InputResponse,
    Lifetime,
    OperationSpec,
    Pending,
    ProgressUpdate,
    Ranking,
    Registry,
    SearchPage,
    __version__,
    internal_failure,
)
from ..json import JSONValue, canonical_bytes, parse
from ..ledger import is_token_shaped
from ._context import LOCAL_PRINCIPAL, CallContext, Principal
from ._exact import (
    Answers,
    ExactHTTP,
    UnreadableMessage,
    current_message,
    member_bytes,
    stdio_streams,
)
from ._http import HTTPLimits, guard_requests, guard_sessions
from ._profile import form_problem
from ._tools import (
    GATEWAY_TOOLS,
    INSPECT,
    INVOKE,
    RELEVANCE_GATEWAY_TOOLS,
    SEARCH,
    ToolArgumentError,
    ToolSpec,
    empty_search_hint,
    inspect_arguments,
    invoke_arguments,
    search_arguments,
)
from ._wire import (
    INPUT_KEY,
    elicitation_params,
    failure_result,
    input_response,
    structured_result,
    tool_result,
    wire_size,
    wire_value,
)

__all__ = ["FailureHook", "GatewayServer", "principal_from_token"]

logger = logging.getLogger("opgate.mcp")

#: A host's hook for failures: ``(ctx, tool, failure)``; ``failure.cause`` is private.
FailureHook = Callable[[CallContext, str, Failure], None]

#: ``request_state`` prefixes naming the kind of prompt the state answers.
_STATE_PREFIX = {InputMode.FORM: "f.", InputMode.URL: "u."}
_STATE_MODES = {prefix: mode for mode, prefix in _STATE_PREFIX.items()}

#: MCP log levels, least severe first (the spec's RFC 5424 order).
_LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

#: Revisions without elicitation, and the one with forms only (and its own profile).
_BEFORE_ELICITATION = frozenset({"2024-11-05", "2025-03-26"})
_FORMS_ONLY = frozenset({"2025-06-18"})


def principal_from_token(token: AccessToken) -> Principal:
    """The ``Principal`` a verified ``AccessToken`` stands for (issuer from ``iss``)."""
    client_id, issuer, subject = principal_components(token)
    return Principal(
        client_id=client_id, issuer=issuer, subject=subject, scopes=frozenset(token.scopes)
    )


@dataclass(frozen=True, slots=True)
class _Serving:
    """What one serving run owns: its lifetime (closed when the run ends)."""

    lifetime: Lifetime


class GatewayServer:
    """Serve a ``Registry`` over MCP: ``search``, ``inspect``, ``invoke`` and pinned tools.

    ``GatewayServer(registry, *, name="opgate", instructions=None, pinned=(),
    on_failure=None)``. ``pinned`` names operations that also appear as their own
    MCP tools (same policy, validation and interaction path as ``invoke``); a
    name that is not in the registry or that collides with a gateway tool raises
    ``ConfigurationError``. ``on_failure`` is called for every failed call with
    the failure, its private ``cause`` included, for the host's own logging.

    Each serving run (a stdio process, an HTTP app's lifespan, an in-process
    client connection) opens its own serving lifetime and closes it when the
    run ends, which expires that run's pending prompts and no others.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        name: str = "opgate",
        instructions: str | None = None,
        pinned: Iterable[str] = (),
        on_failure: FailureHook | None = None,
        input_request_keys: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("registry must be an opgate.Registry")
        if isinstance(pinned, str):
            raise TypeError("pinned must be a collection of operation names, not one str")
        pins = tuple(dict.fromkeys(pinned))
        keys = dict(input_request_keys or {})
        _check_names(registry, pins, keys)
        gateway_names = {tool.name for tool in GATEWAY_TOOLS}
        for pin in pins:
            if pin in gateway_names:
                raise ConfigurationError(
                    f"pinned operation {pin!r} has the name of a gateway tool; rename it"
                )
        for operation, key in keys.items():
            if not isinstance(key, str) or not key:
                raise ConfigurationError(f"the input request key for {operation!r} must be a str")
        self._registry = registry
        self._instructions = instructions
        self._input_keys = keys
        self._pinned = frozenset(pins)
        self._pin_order = pins
        self._on_failure = on_failure
        self._input_schemas = _listed_input_schemas(registry)
        self._log_levels: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        self._servings = 0  # serving runs open now
        self._answers = Answers()  # answers to the elicitations this server sent
        with warnings.catch_warnings():
            # logging/setLevel is deprecated from 2026-07-28 but is how 2025-11-25
            # clients ask for log notifications.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self._server: Server[_Serving] = Server(
                name,
                version=__version__,
                instructions=instructions or _INSTRUCTIONS,
                lifespan=self._lifespan,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_set_logging_level=self._set_logging_level,
                get_tool_input_schema=self._input_schema_lookup(pins),
            )

    @property
    def registry(self) -> Registry:
        """The registry this server serves."""
        return self._registry

    def swap(self, registry: Registry) -> None:
        """Serve ``registry`` from now on: calls (and listings) that start after the
        swap use it; calls in flight finish on the registry they started with, their
        prompts included. Nothing is awaited, so the swap is atomic for every task.

        ``registry`` must carry on this one's service (``registry.continues(old)``:
        built with ``old.with_operations(...)``), so the serving lifetimes already open
        and the prompts pending stay valid; it must hold every pinned operation and
        every operation ``input_request_keys`` names. Otherwise nothing changes and
        ``ConfigurationError`` says why (``TypeError`` for a non-``Registry``). The
        gateway tools' listed schemas follow the new registry's ranking. The tools a
        client lists stay the same names (a pinned tool shows its new definition at
        the next ``tools/list``), so no ``list_changed`` is sent to clients.
        """
        if not isinstance(registry, Registry):
            raise TypeError("registry must be an opgate.Registry")
        if not registry.continues(self._registry):
            raise ConfigurationError(
                "the new registry does not carry on the served one (another ledger and "
                "keys): build it with served.with_operations(operations)"
            )
        _check_names(registry, self._pin_order, self._input_keys)
        schemas = _listed_input_schemas(registry)
        self._registry = registry
        self._input_schemas = schemas
        self._server.get_tool_input_schema = self._input_schema_lookup(self._pin_order)

    @property
    def pinned(self) -> tuple[str, ...]:
        """The pinned operation names, in the order given."""
        return self._pin_order

    @property
    def on_failure(self) -> FailureHook | None:
        """The host's hook for failed calls, if any."""
        return self._on_failure

    def replace(
        self, *, registry: Registry | None = None, on_failure: FailureHook | None = None
    ) -> GatewayServer:
        """A new server with this one's name, instructions, pinned tools and input
        request keys, serving ``registry`` with the hook ``on_failure``; either left out
        keeps this server's. Checked as ``GatewayServer(...)`` checks its arguments; the
        new server has an SDK server of its own. This is how ``opgate serve`` applies
        its registry options and cause log to a host's server.
        """
        return GatewayServer(
            self._registry if registry is None else registry,
            name=self._server.name,
            instructions=self._instructions,
            pinned=self._pin_order,
            on_failure=self._on_failure if on_failure is None else on_failure,
            input_request_keys=self._input_keys,
        )

    @property
    def sdk_server(self) -> Server[Any]:
        """The underlying low-level ``mcp.server.Server`` (for in-process clients)."""
        return self._server

    def __repr__(self) -> str:
        return f"<GatewayServer {self._server.name!r}: {len(self._registry)} operations>"

    # -- serving -----------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it closes."""
        async with stdio_streams(self._answers) as (read_stream, write_stream):
            await self._server.run(
                read_stream, write_stream, self._server.create_initialization_options()
            )

    def http_app(
        self,
        *,
        host: str = "127.0.0.1",
        path: str = "/mcp",
        token_verifier: TokenVerifier | None = None,
        auth: AuthSettings | None = None,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        stateless: bool = False,
        limits: HTTPLimits | None = None,
    ) -> Starlette:
        """A streamable-HTTP ASGI app (run it with uvicorn on ``host``).

        DNS-rebinding protection is always on: requests whose ``Host`` or
        ``Origin`` is not allowed are refused. By default the allowed hosts are the
        loopback names for a loopback ``host`` and ``host`` itself otherwise; pass
        ``allowed_hosts`` (``"name:port"``, ``"name:*"``) and ``allowed_origins``
        for a public name. With ``token_verifier`` every request needs a valid
        bearer token and the principal comes from it; ``auth`` then defaults to
        settings whose issuer and resource are this server's own URL. ``limits``
        bounds the sessions one principal and the whole app may hold (``HTTPLimits``;
        serve the app with ``serve_http`` or ``uvicorn_config`` for its connection
        bounds).
        """
        limits = HTTPLimits() if limits is None else limits
        hosts = list(allowed_hosts)
        origins = list(allowed_origins)
        if not hosts:
            names = ["127.0.0.1", "localhost", "[::1]"] if host in _LOOPBACK_HOSTS else [host]
            hosts = [f"{name}:*" for name in names]
            origins = origins or [f"{scheme}://{name}:*" for name in names for scheme in _SCHEMES]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )
        if token_verifier is not None and auth is None:
            auth = AuthSettings(
                issuer_url=pydantic.AnyHttpUrl(f"http://{host}"),
                resource_server_url=None,
            )
        app = self._server.streamable_http_app(
            streamable_http_path=path,
            stateless_http=stateless,
            transport_security=security,
            host=host,
            auth=auth,
            token_verifier=token_verifier,
            max_sessions=limits.max_sessions,
            session_idle_timeout=limits.session_idle_timeout,
        )
        manager = self._server.session_manager
        # Inside authentication and both guards: a body is buffered only once its caller
        # is known and admitted (a refused session opening is answered unread).
        manager.asgi_app = ExactHTTP(  # type: ignore[assignment]
            manager.asgi_app, answers=self._answers, max_body=DEFAULT_MAX_REQUEST_BODY_SIZE
        )
        if not stateless:
            guard_sessions(manager, limits)
        guard_requests(manager, limits)
        return app

    @asynccontextmanager
    async def _lifespan(self, _server: Server[_Serving]) -> AsyncIterator[_Serving]:
        lifetime = self._registry.open_lifetime()
        self._servings += 1
        try:
            yield _Serving(lifetime)
        finally:
            await lifetime.close()
            self._servings -= 1
            if self._servings == 0:
                await self._registry.aclose()  # a shared ledger's connections

    # -- context -----------------------------------------------------------------

    @staticmethod
    def _context(ctx: ServerRequestContext[Any, Any]) -> CallContext:
        token = get_access_token()
        principal = LOCAL_PRINCIPAL if token is None else principal_from_token(token)
        session_id = None
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is not None:
            session_id = headers.get("mcp-session-id")
        return CallContext(principal, ctx.protocol_version, session_id, ctx)

    @staticmethod
    def _input_modes(ctx: ServerRequestContext[Any, Any]) -> frozenset[InputMode]:
        """The prompt kinds this client can show now (a bare ``elicitation: {}`` means form)."""
        capabilities = ctx.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        if elicitation is None:
            return frozenset()
        if (
            ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and not ctx.session.can_send_request
        ):
            return frozenset()  # no back-channel for elicitation/create on this request
        if ctx.protocol_version in _BEFORE_ELICITATION:
            return frozenset()
        modes = set()
        if elicitation.form is not None or elicitation.url is None:
            modes.add(InputMode.FORM)
        if elicitation.url is not None and ctx.protocol_version not in _FORMS_ONLY:
            modes.add(InputMode.URL)
        return frozenset(modes)

    # -- tools/list --------------------------------------------------------------

    def _input_schema_lookup(
        self, pins: tuple[str, ...]
    ) -> Callable[[str], Mapping[str, Any] | None] | None:
        """The SDK's input-schema lookup for its ``Mcp-Param-*`` header check, or ``None``.

        Without a lookup, the SDK runs this server's whole ``tools/list`` for every
        2026-07-28 ``tools/call`` with arguments over HTTP, only to find the called
        tool's input schema. The lookup answers that without listing, as the listing
        would: the gateway tools' schemas (listed for every principal), and ``None`` for
        a pinned operation. A pinned operation's schema is listed only for principals
        the policy lets discover it (``None`` for the others), and the SDK validates
        nothing against a schema without ``x-mcp-header`` annotations, so ``None`` is
        the listing's answer for every principal only when the pin declares no header
        parameter. If any pin declares one, the SDK keeps listing: only the policy,
        which may be async, can say whose listing shows it.
        """
        if any(_declares_header_parameters(self._registry.spec(pin).input_schema) for pin in pins):
            return None
        return self._input_schemas.get

    async def _list_tools(
        self, ctx: ServerRequestContext[_Serving], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        registry = self._registry  # one registry for the whole listing (see swap)
        # The search tool tells agents how the registry's ranking treats keywords.
        by_rule = registry.ranking is Ranking.RULE
        tools = [_tool(spec) for spec in (GATEWAY_TOOLS if by_rule else RELEVANCE_GATEWAY_TOOLS)]
        if self._pinned:
            call_ctx = self._context(ctx)
            modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            for name in self._pin_order:
                spec = await registry.inspect(call_ctx, name)
                if isinstance(spec, OperationSpec):
                    tools.append(_pinned_tool(spec, modern=modern))
        return types.ListToolsResult(tools=tools)

    # -- tools/call --------------------------------------------------------------

    async def _call_tool(
        self, ctx: ServerRequestContext[_Serving], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name = params.name
        if name not in (SEARCH, INSPECT, INVOKE) and name not in self._pinned:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name[:128]}")
        call_ctx = self._context(ctx)
        # The call runs on the registry served when it started, to its end (see swap).
        registry = self._registry
        try:
            if name == SEARCH:
                return await self._search(ctx, registry, call_ctx, params.arguments)
            if name == INSPECT:
                return await self._inspect(ctx, registry, call_ctx, params.arguments)
            if name == INVOKE:
                request = invoke_arguments(params.arguments)
                arguments = _exact(ctx, ("params", "arguments", "arguments"), request.arguments)
                return await self._invoke(
                    ctx, registry, call_ctx, name, request.name, arguments, params
                )
            arguments = _exact(ctx, ("params", "arguments"), params.arguments or {})
            return await self._invoke(ctx, registry, call_ctx, name, name, arguments, params)
        except ToolArgumentError as exc:
            return await self._failed(
                ctx, registry, call_ctx, name, Failure(FailureCode.INVALID_REQUEST, str(exc))
            )
        except Failure as failure:
            return await self._failed(ctx, registry, call_ctx, name, failure)
        except MCPError:
            raise  # a protocol error on purpose (a tampered request_state)
        except Exception as exc:  # a bug here must still answer as a tool error
            return await self._failed(ctx, registry, call_ctx, name, internal_failure(exc))

    async def _search(
        self,
        ctx: ServerRequestContext[_Serving],
        registry: Registry,
        call_ctx: CallContext,
        arguments: Mapping[str, Any] | None,
    ) -> types.CallToolResult:
        request = search_arguments(arguments)
        page = await registry.search(
            call_ctx, request.query, group=request.group, limit=request.limit, cursor=request.cursor
        )
        if not isinstance(page, SearchPage):
            return await self._failed(ctx, registry, call_ctx, SEARCH, page.failure)
        value = {
            "items": [
                {"name": item.name, "group": item.group, "summary": item.summary}
                for item in page.items
            ],
            "next_cursor": page.next_cursor,
        }
        sent = pydantic_core.to_json(value)
        if len(sent) > PAGE_BYTES:  # the index keeps pages under budget; never cut one
            raise Failure(FailureCode.INTERNAL, "the search page does not fit its budget")
        result = structured_result(value, sent.decode("utf-8"))
        if not page.items and request.cursor is None and registry.ranking is Ranking.RULE:
            hint = await self._empty_hint(registry, call_ctx, request.query)
            if hint is not None:
                result.content.append(types.TextContent(type="text", text=hint))
        return result

    async def _empty_hint(
        self, registry: Registry, call_ctx: CallContext, query: str
    ) -> str | None:
        """How to ask instead, for a multi-word query the rule found nothing for: only
        the groups this principal may discover operations of are named."""
        if len(query.split()) < 2:
            return None
        groups = await registry.groups(call_ctx)
        return empty_search_hint(query, groups if isinstance(groups, tuple) else ())

    async def _inspect(
        self,
        ctx: ServerRequestContext[_Serving],
        registry: Registry,
        call_ctx: CallContext,
        arguments: Mapping[str, Any] | None,
    ) -> types.CallToolResult:
        request = inspect_arguments(arguments)
        spec = await registry.inspect(call_ctx, request.name)
        if not isinstance(spec, OperationSpec):
            return await self._failed(ctx, registry, call_ctx, INSPECT, spec.failure)
        value: dict[str, JSONValue] = {
            "name": spec.name,
            "group": spec.group,
            "summary": spec.summary,
            "description": spec.description,
            "examples": [*spec.examples],
            "input_schema": spec.input_schema,
            "output_schema": spec.output_schema,
        }
        return structured_result(value, canonical_bytes(value).decode("utf-8"))

    async def _invoke(
        self,
        ctx: ServerRequestContext[_Serving],
        registry: Registry,
        call_ctx: CallContext,
        tool: str,
        operation: str,
        arguments: Mapping[str, Any] | bytes,
        params: types.CallToolRequestParams,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run an operation to its end, asking the person in the era's way.

        Every prompt is checked before it is shown: against the form profile of the
        negotiated revision, and for its size as sent.
        """
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        budget = registry.limits.result_bytes
        invoke = _Invoker(
            registry=registry,
            ctx=call_ctx,
            operation=operation,
            arguments=arguments,
            modes=self._input_modes(ctx),
            lifetime=ctx.lifespan_context.lifetime,
            progress=_progress_sink(ctx),
        )
        if modern:
            key = self._input_keys.get(operation, INPUT_KEY)
            resume = _modern_resume(ctx, params, key)
            outcome = await invoke(resume)
            if resume is not None and isinstance(outcome, Failed):
                _refuse_unresolved_state(outcome.failure)
            if isinstance(outcome, Pending):
                _check_profile(outcome, ctx.protocol_version)
                reply = _input_required(outcome, key)
                _check_prompt_size(wire_size(reply), budget)
                return reply
        else:
            if params.request_state is not None or params.input_responses:
                raise Failure(
                    FailureCode.INVALID_REQUEST,
                    "request_state and input_responses belong to protocol 2026-07-28",
                )
            outcome = await invoke(None)
            while isinstance(outcome, Pending):
                _check_profile(outcome, ctx.protocol_version)
                response = await _ask(ctx, outcome, self._answers, budget)
                outcome = await invoke((outcome.continuation, response))
        self._log_diagnostics(operation, outcome.diagnostics)
        if isinstance(outcome, Failed):
            return await self._failed(ctx, registry, call_ctx, tool, outcome.failure)
        assert isinstance(outcome, Completed)
        result = tool_result(outcome.result, objects_only=not modern)
        size = wire_size(result)
        if size > budget:
            message = f"the result is {size} bytes as sent, over the result budget of {budget}"
            return await self._failed(
                ctx, registry, call_ctx, tool, Failure(FailureCode.INVALID_RESULT, message)
            )
        return result

    async def _failed(
        self,
        ctx: ServerRequestContext[Any, Any],
        registry: Registry,
        call_ctx: CallContext,
        tool: str,
        failure: Failure,
    ) -> types.CallToolResult:
        """The ``isError`` result for ``failure``; its cause goes to the log, sanitized."""
        cause = failure.cause
        if cause is not None:
            line = f"{tool}: {failure.code.value} ({type(cause).__name__})"
            logger.warning("%s", line)
            await self._notify_log(ctx, "warning", line)
        if self._on_failure is not None:
            try:
                self._on_failure(call_ctx, tool, failure)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # a host hook must not change the reply
                logger.error("on_failure hook raised %s", type(exc).__name__)
        result = failure_result(failure)
        if wire_size(result) > registry.limits.result_bytes:
            result = failure_result(Failure(FailureCode.INVALID_RESULT))
        return result

    def _log_diagnostics(self, operation: str, diagnostics: tuple[str, ...]) -> None:
        for entry in diagnostics:
            logger.warning("%s: diagnostic: %s", operation, entry)

    # -- logging -----------------------------------------------------------------

    async def _set_logging_level(
        self, ctx: ServerRequestContext[_Serving], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        connection = _session_connection(ctx)
        if connection is not None:
            self._log_levels[connection] = _LOG_LEVELS.index(params.level)
        return types.EmptyResult()

    async def _notify_log(
        self, ctx: ServerRequestContext[Any, Any], level: types.LoggingLevel, line: str
    ) -> None:
        """An MCP log notification for this request, when the client asked for that level."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = _session_connection(ctx)
            wanted = self._log_levels.get(connection) if connection is not None else None
            if wanted is None or _LOG_LEVELS.index(level) < wanted:
                return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(
                    level, line, logger="opgate", related_request_id=ctx.request_id
                )
        except Exception as exc:  # logging must never change the reply
            logger.debug("log notification not sent: %s", type(exc).__name__)


@dataclass(frozen=True, slots=True)
class _Invoker:
    """One ``tools/call``'s fixed registry arguments; called once per round."""

    registry: Registry
    ctx: CallContext
    operation: str
    arguments: Mapping[str, Any] | bytes
    modes: frozenset[InputMode]
    lifetime: Lifetime
    progress: Callable[[ProgressUpdate], Any] | None

    async def __call__(
        self, resume: tuple[str, InputResponse] | None
    ) -> Completed | Failed | Pending:
        return await self.registry.invoke(
            self.ctx,
            self.operation,
            self.arguments,
            input_support=self.modes,
            resume=resume,
            progress=self.progress,
            lifetime=self.lifetime,
        )


def _progress_sink(ctx: ServerRequestContext[Any, Any]) -> Callable[[ProgressUpdate], Any]:
    """A sink forwarding updates as ``notifications/progress`` for this request.

    The SDK sends nothing when the request carried no progress token. MCP wants
    strictly increasing progress values, so a repeat is dropped.
    """
    last: list[float] = []

    async def sink(update: ProgressUpdate) -> None:
        completed = float(update.completed)
        if last and completed <= last[0]:
            return
        last[:] = [completed]
        total = None if update.total is None else float(update.total)
        await ctx.session.report_progress(completed, total, update.message or None)

    return sink


async def _ask(
    ctx: ServerRequestContext[Any, Any], pending: Pending, answers: Answers, budget: int
) -> InputResponse:
    """Show a prompt with ``elicitation/create`` inside this call (2025-11-25).

    The request goes out under an id of opgate's own, so an exact transport can hand
    this call the raw text of the answer. The wait ends when the prompt expires: a
    client that never answers gets ``expired`` rather than a call that hangs.
    """
    prompt = pending.prompt
    request = types.ElicitRequest(params=elicitation_params(prompt, modern=False))
    _check_prompt_size(wire_size(request), budget)
    mode = InputMode.FORM if isinstance(prompt, FormPrompt) else InputMode.URL
    seconds = max(0.0, (pending.expires_at - datetime.now(UTC)).total_seconds())
    try:
        with answers.expect(_session_id(ctx)) as expected, anyio.fail_after(seconds):
            raw = await _send_request(ctx, request, expected.id)
            answer = types.ElicitResult.model_validate(raw, by_name=False)
            if expected.unreadable:
                raise Failure(
                    FailureCode.INVALID_REQUEST, "the client's answer nests too deep to be read"
                )
            if expected.repeated:
                raise Failure(
                    FailureCode.INVALID_REQUEST,
                    "the client sent more than one response to the prompt: answer it once",
                )
            exact = expected.content if expected.arrived else None
    except TimeoutError:
        raise Failure(
            FailureCode.EXPIRED, "the prompt expired before the person answered"
        ) from None
    except pydantic.ValidationError:
        raise Failure(
            FailureCode.INVALID_REQUEST, "the client's answer to the prompt is malformed"
        ) from None
    except MCPError:
        # The client refused to show the prompt: the handler learns it as a cancel.
        return InputResponse.cancel()
    return input_response(mode, answer, exact)


def _session_connection(ctx: ServerRequestContext[Any, Any]) -> object | None:
    """The SDK's per-client connection behind this request's session: the key of the
    log level a client chose with ``logging/setLevel`` (it lasts for its connection).

    SDK-private (``mcp`` 2.3): ``ServerSession`` keeps the connection only as
    ``_connection``, and the ``ServerRequestContext`` handlers get has no
    ``connection`` (only the SDK's ``Context``, which its runner does not build).
    ``None`` if an SDK drops the attribute: clients of the handshake revisions (which
    ask with ``logging/setLevel``) then get no log notifications.
    """
    return getattr(ctx.session, "_connection", None)


def _request_channel(ctx: ServerRequestContext[Any, Any]) -> Any:
    """This call's request-scoped back-channel (a ``DispatchContext``).

    SDK-private (``mcp`` 2.3): the channel, which takes a caller's id through
    ``CallOptions``, is only ``ServerSession._request_outbound``; the public
    ``send_request`` mints ids itself, and opgate needs its own id to match the
    client's response to this call (``_exact.Answers``).
    """
    return ctx.session._request_outbound


async def _send_request(
    ctx: ServerRequestContext[Any, Any], request: types.ElicitRequest, request_id: str
) -> dict[str, Any]:
    """Send a request to the client on this call's back-channel, under ``request_id``."""
    channel = _request_channel(ctx)
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    result: dict[str, Any] = await channel.send_raw_request(
        data["method"], data.get("params"), {"request_id": request_id}
    )
    return result


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    return None if headers is None else headers.get("mcp-session-id")


def _exact(ctx: ServerRequestContext[Any, Any], path: tuple[str, ...], parsed: Any) -> Any:
    """The raw text of the request's object at ``path`` when the transport kept the
    request, else ``parsed`` (the SDK's value of it, also when it is no object).

    The raw message must be this request's (its id): anything else is a bug, refused
    rather than served with another message's values.
    """
    raw = current_message()
    if raw is None or not isinstance(parsed, Mapping):
        return parsed
    try:
        ident = member_bytes(raw, ("id",))
        if ident is None or json.loads(ident) != ctx.request_id:
            raise Failure(FailureCode.INTERNAL, "the request's raw text was not at hand")
        text = member_bytes(raw, path)
    except UnreadableMessage:
        raise Failure(
            FailureCode.INVALID_REQUEST,
            "the request could not be read exactly: send it as UTF-8 JSON with less nesting",
        ) from None
    # ``parsed`` may stand for an absent or null member (``{}``): only an object is taken.
    return text if text is not None and text.startswith(b"{") else parsed


def _check_profile(pending: Pending, version: str) -> None:
    """A form the negotiated revision cannot show is ``confirmation_required``."""
    prompt = pending.prompt
    if not isinstance(prompt, FormPrompt):
        return
    problem = form_problem(parse(prompt.schema_bytes), version)
    if problem is not None:
        raise Failure(
            FailureCode.CONFIRMATION_REQUIRED,
            f"this operation needs a form that MCP {version} clients cannot show "
            f"({problem}); use a client that supports MCP 2025-11-25 elicitation, or "
            "the application's own authorized interface",
        )


def _check_prompt_size(size: int, budget: int) -> None:
    if size > budget:
        raise Failure(
            FailureCode.INVALID_RESULT,
            f"the prompt is {size} bytes as sent, over the result budget of {budget}",
        )


def _modern_resume(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, key: str
) -> tuple[str, InputResponse] | None:
    """The continuation and answer a 2026-07-28 retry carries, if it is one.

    ``input_responses`` without a ``request_state`` answer nothing this server
    asked: the call is a fresh one (and asks again). A ``request_state`` this
    server cannot have issued is a JSON-RPC invalid-params error, as 2026-07-28
    asks of a tampered state.
    """
    state = params.request_state
    if state is None:
        return None
    mode = _STATE_MODES.get(state[:2])
    if mode is None or not is_token_shaped(state[2:]):
        raise MCPError(types.INVALID_PARAMS, "invalid requestState: start the call again")
    answer = (params.input_responses or {}).get(key)
    if not isinstance(answer, types.ElicitResult):
        raise Failure(
            FailureCode.INVALID_REQUEST,
            f"input_responses must answer the {key!r} elicitation request",
        )
    exact = _exact(ctx, ("params", "inputResponses", key, "content"), answer.content)
    return state[2:], input_response(mode, answer, exact if isinstance(exact, bytes) else None)


def _refuse_unresolved_state(failure: Failure) -> None:
    """A retry whose continuation is unknown, expired or foreign is a protocol error.

    The registry answers all of those with the same safe ``expired`` failure; its
    public message (pointing to the application's own intent or job key) is kept.
    """
    if failure.code is FailureCode.EXPIRED:
        raise MCPError(types.INVALID_PARAMS, failure.message, {"code": failure.code.value})


def _input_required(pending: Pending, key: str) -> types.InputRequiredResult:
    params = elicitation_params(pending.prompt, modern=True)
    return types.InputRequiredResult(
        input_requests={key: types.ElicitRequest(params=params)},
        request_state=_STATE_PREFIX[pending.prompt.mode] + pending.continuation,
    )


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        output_schema=None if spec.output_schema is None else dict(spec.output_schema),
    )


def _check_names(registry: Registry, pins: Iterable[object], keys: Mapping[str, str]) -> None:
    """``ConfigurationError`` unless every pin and every operation with an input
    request key is an operation of ``registry``."""
    for pin in pins:
        if not isinstance(pin, str) or pin not in registry:
            raise ConfigurationError(f"pinned operation {pin!r} is not in the registry")
    for operation in keys:
        if operation not in registry:
            raise ConfigurationError(f"input_request_keys names unknown operation {operation!r}")


def _listed_input_schemas(registry: Registry) -> dict[str, dict[str, Any]]:
    """The gateway tools' input schemas as ``tools/list`` shows them, by tool name."""
    tools = GATEWAY_TOOLS if registry.ranking is Ranking.RULE else RELEVANCE_GATEWAY_TOOLS
    return {spec.name: _tool(spec).input_schema for spec in tools}


def _declares_header_parameters(schema: JSONValue) -> bool:
    """Whether an ``x-mcp-header`` member appears anywhere in ``schema``: a superset of
    the annotations the SDK validates ``Mcp-Param-*`` headers against."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "x-mcp-header" in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _pinned_input_schema(spec: OperationSpec) -> Any:
    """A pinned operation's input schema as its tool lists it."""
    input_schema = wire_value(spec.input_schema)
    if isinstance(input_schema, dict) and "type" not in input_schema:
        # The registry only accepts object arguments; MCP wants that said at the root.
        input_schema = {"type": "object", **input_schema}
    return input_schema


def _pinned_tool(spec: OperationSpec, *, modern: bool) -> types.Tool:
    """A pinned operation as its own tool; before 2026-07-28 output schemas must be objects."""
    output = spec.output_schema
    if (
        output is not None
        and not modern
        and not (isinstance(output, dict) and output.get("type") == "object")
    ):
        output = None
    description = spec.summary if not spec.description else f"{spec.summary}\n\n{spec.description}"
    return types.Tool(
        name=spec.name,
        description=description,
        input_schema=_pinned_input_schema(spec),
        output_schema=None if output is None else wire_value(output),
    )


_SCHEMES = ("http", "https")

_INSTRUCTIONS = (
    "This server gives access to an application's operations through three tools. "
    "Use search to find operations by keywords, inspect to read one operation's input "
    "schema, and invoke to run it with arguments matching that schema."
)
