"""``open_catalog``: every upstream's tools as opgate operations, and the connections behind them.

``async with open_catalog(config) as catalog:`` starts every upstream at once
(each bounded by ``start_timeout``; one that fails or is slow is reported and does
not hold up the rest), lists their tools, and builds one ``Operation`` per tool.
``catalog.registry(policy)`` is the ``Registry``; a host that has operations of
its own builds ``Registry([*catalog.operations, *mine], policy)`` instead. Leaving
the block closes every connection (stdio upstreams are stopped).

A tool becomes an operation
---------------------------
* name ``NAME.TOOL`` (``_naming``), group ``NAME``;
* summary: the tool's ``title``, else ``annotations.title``, else the first sentence
  of its description, else ``TOOL (NAME)``; on one line, at most ``MAX_SUMMARY_CHARS``;
* description: the tool's description as written, then a line naming the
  annotations' hints the upstream declared (``readOnlyHint`` and the others), which
  are the upstream's claims, not checked; the whole annotations object is kept on
  ``catalog.tools[name].annotations``;
* input and output schemas: the tool's own, through the registry's schema compiler
  profile. A tool the registry refuses (a schema outside the profile, a definition
  over ``Limits.definition_bytes``) is left out and reported with the compiler's
  message; so is a tool the entry's ``tools`` filter excludes, and a second tool of
  the same name.

A call (the handler)
--------------------
The registry validates the arguments, then the handler (``_relay``) sends
``tools/call`` with them to the upstream (``_session``), relays the upstream's
questions as prompts and its progress, and maps the answer (``_results``); the
registry checks the result as for any operation. An upstream's failure, timeout,
closed connection or malformed answer fails that call with ``operation_failed``
naming the upstream; other calls and upstreams go on. Nothing of the caller
(``ctx``, its token) is passed to the upstream.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO

import anyio
import mcp.types as types

from opgate import (
    ConfigurationError,
    Invocation,
    Limits,
    Operation,
    Outcome,
    Policy,
    Registry,
)
from opgate.json import JSONValue

from ._config import Config
from ._naming import Namer
from ._relay import Relay
from ._report import Issue, Report, bounded
from ._results import json_value
from ._session import MAX_LISTED_TOOLS, UpstreamSession

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "MAX_SUMMARY_CHARS",
    "Catalog",
    "ToolPlan",
    "open_catalog",
]

#: Seconds an upstream has to start, finish its handshake and list its tools.
DEFAULT_START_TIMEOUT: Final = 30.0
#: Seconds one ``tools/call`` may take before it fails (and is cancelled upstream).
DEFAULT_CALL_TIMEOUT: Final = 120.0
#: Longest summary: search pages show it for every hit, so it stays one short line.
MAX_SUMMARY_CHARS: Final = 200
#: Seconds the connections have to close on leaving the block before they are cancelled.
CLOSE_GRACE: Final = 10.0

#: The annotation hints named in the description, in this order.
_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """One upstream tool as offered.

    * ``name``: the operation name; ``upstream``, ``tool``: where it goes;
    * ``summary``, ``description``: as the operation shows them;
    * ``annotations``: the tool's annotations object as the upstream sent it, or ``None``;
    * ``input_schema``, ``output_schema``: the tool's schemas (``output_schema`` may be
      ``None``).
    """

    name: str
    upstream: str
    tool: str
    summary: str
    description: str
    annotations: JSONValue
    input_schema: JSONValue
    output_schema: JSONValue


def summary_of(tool: types.Tool, upstream: str) -> str:
    """The operation summary of ``tool`` (see the module docstring)."""
    candidates = [tool.title, tool.annotations.title if tool.annotations else None]
    for candidate in candidates:
        shown = bounded(candidate or "", MAX_SUMMARY_CHARS)
        if shown:
            return shown
    description = (tool.description or "").strip()
    if description:
        paragraph = description.split("\n\n", 1)[0]
        found = _SENTENCE.match(paragraph)
        text = bounded(found.group(1) if found else paragraph, MAX_SUMMARY_CHARS)
        if text:
            return text
    return bounded(f"{tool.name} ({upstream})", MAX_SUMMARY_CHARS) or upstream


def _annotations(tool: types.Tool) -> JSONValue:
    if tool.annotations is None:
        return None
    dumped = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json_value(dumped)


def description_of(tool: types.Tool) -> str:
    """The tool's description, then its declared hints on a line of their own."""
    description = tool.description or ""
    annotations = tool.annotations
    if annotations is None:
        return description
    dumped = annotations.model_dump(by_alias=True, exclude_none=True)
    hints = [f"{hint}={str(dumped[hint]).lower()}" for hint in _HINTS if hint in dumped]
    if not hints:
        return description
    line = f"Annotations declared by the upstream: {', '.join(hints)}."
    return f"{description.rstrip()}\n\n{line}" if description.strip() else line


class _Handler:
    """The handler of one upstream tool (an async callable object): the relay's."""

    def __init__(self, session: UpstreamSession, tool: str, relay: Relay) -> None:
        self._session = session
        self._tool = tool
        self._relay = relay

    async def __call__(self, inv: Invocation) -> Outcome:
        return await self._relay.call(self._session, self._tool, inv)


class _AllowAll:
    """The policy of the definition check (no request is ever made)."""

    def scope_key(self, ctx: Any) -> str:
        return "opgate.upstream.check"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


def _refused(operations: list[Operation], limits: Limits | None) -> dict[str, str]:
    """The operations the registry refuses, by name, each with its message.

    One registry of them all is the common case (nothing refused); otherwise the
    halves are tried in turn down to single operations, so a few bad tools among
    thousands cost a few registries, not one per tool.
    """
    try:
        Registry(operations, _AllowAll(), limits=limits)
        return {}
    except (ConfigurationError, TypeError) as exc:
        if len(operations) == 1:
            return {operations[0].name: str(exc)}
    middle = len(operations) // 2
    return _refused(operations[:middle], limits) | _refused(operations[middle:], limits)


class Catalog:
    """The operations of every connected upstream, with their connections.

    * ``operations``: the ``Operation`` tuple (upstreams in the file's order, each
      upstream's tools by name);
    * ``report``: the ``Report`` of the start;
    * ``tools``: operation name → ``ToolPlan``;
    * ``sessions``: upstream name → ``UpstreamSession`` (every enabled upstream,
      connected or not);
    * ``registry(policy, *, limits=None)``: the ``Registry`` of these operations.
    """

    def __init__(
        self,
        sessions: Iterable[UpstreamSession],
        *,
        disabled: tuple[str, ...] = (),
        limits: Limits | None = None,
        hold_timeout: float | None = None,
    ) -> None:
        self.sessions = {session.name: session for session in sessions}
        self._limits = limits
        checked = limits or Limits()
        if hold_timeout is None:
            hold_timeout = checked.input_lifetime.total_seconds()
        self._relay = Relay(limits=checked, hold_timeout=hold_timeout)
        self.tools: dict[str, ToolPlan] = {}
        operations: list[Operation] = []
        warnings: list[Issue] = []
        skipped: list[Issue] = []
        namer = Namer()
        for session in self.sessions.values():
            if session.client is None:
                continue
            self._import(session, namer, operations, warnings, skipped)
        self.operations = tuple(operations)
        self.report = Report(
            upstreams=tuple(session.status() for session in self.sessions.values()),
            disabled=disabled,
            operations=tuple(operation.name for operation in operations),
            warnings=tuple(warnings),
            skipped=tuple(skipped),
        )

    def _import(
        self,
        session: UpstreamSession,
        namer: Namer,
        operations: list[Operation],
        warnings: list[Issue],
        skipped: list[Issue],
    ) -> None:
        upstream = session.name
        tools = session.server.tools
        if session.truncated:
            warnings.append(
                Issue(
                    upstream,
                    "",
                    "listing cut",
                    f"the upstream listed more than {MAX_LISTED_TOOLS} tools or pages "
                    "without end; the tools after the cut are left out",
                )
            )
        listed = {tool.name for tool in session.tools}
        for name in sorted((tools.allow or set()) - listed):
            warnings.append(
                Issue(
                    upstream,
                    name,
                    "not listed",
                    "the allow list names a tool the upstream does not list",
                )
            )
        for name in sorted(tools.deny - listed):
            warnings.append(
                Issue(
                    upstream,
                    name,
                    "not listed",
                    "the deny list names a tool the upstream does not list",
                )
            )
        seen: set[str] = set()
        names = namer.names(upstream, (t.name for t in session.tools if tools.admits(t.name)))
        candidates: list[tuple[Operation, ToolPlan, str, Issue | None]] = []
        for tool in sorted(session.tools, key=lambda tool: tool.name):
            shown = bounded(tool.name, 128)
            if tool.name in seen:
                skipped.append(
                    Issue(upstream, shown, "duplicate", "the upstream lists this tool name twice")
                )
                continue
            seen.add(tool.name)
            if not tools.admits(tool.name):
                kind = "allow list" if tools.allow is not None else "deny list"
                skipped.append(Issue(upstream, shown, "filtered", f"left out by the {kind}"))
                continue
            naming = names[tool.name]
            try:
                plan = ToolPlan(
                    naming.name,
                    upstream,
                    tool.name,
                    summary_of(tool, upstream),
                    description_of(tool),
                    _annotations(tool),
                    json_value(tool.input_schema),
                    None if tool.output_schema is None else json_value(tool.output_schema),
                )
                operation = Operation(
                    plan.name,
                    plan.summary,
                    _Handler(session, tool.name, self._relay),
                    description=plan.description,
                    group=upstream,
                    input_schema=plan.input_schema,
                    output_schema=plan.output_schema,
                )
            except (ConfigurationError, TypeError, ValueError) as exc:
                skipped.append(Issue(upstream, shown, "definition", bounded(str(exc))))
                continue
            renamed = None
            if naming.changed:
                changes = [
                    what
                    for what, done in (
                        ("characters outside [A-Za-z0-9_.-] replaced", naming.replaced),
                        ("shortened to 128 characters", naming.shortened),
                        ("a number added: the name was taken", naming.suffixed),
                    )
                    if done
                ]
                reason = f"offered as {naming.name!r} ({'; '.join(changes)})"
                renamed = Issue(upstream, shown, "renamed", reason)
            candidates.append((operation, plan, shown, renamed))
        if not candidates:
            return
        refused = _refused([operation for operation, *_ in candidates], self._limits)
        for operation, plan, shown, renamed in candidates:
            if operation.name in refused:
                reason = bounded(refused[operation.name])
                skipped.append(Issue(upstream, shown, "definition", reason))
                continue
            if renamed is not None:
                warnings.append(renamed)
            self.tools[plan.name] = plan
            operations.append(operation)

    def __len__(self) -> int:
        return len(self.operations)

    def __repr__(self) -> str:
        connected = sum(1 for session in self.sessions.values() if session.client is not None)
        return (
            f"Catalog({len(self.operations)} operations from {connected} of "
            f"{len(self.sessions)} upstreams)"
        )

    def registry(self, policy: Policy, *, limits: Limits | None = None) -> Registry:
        """The ``Registry`` of this catalog's operations under ``policy``.

        ``limits`` defaults to the ones given to ``open_catalog`` (every operation
        was checked against those).
        """
        return Registry(self.operations, policy, limits=self._limits if limits is None else limits)


@asynccontextmanager
async def open_catalog(
    config: Config,
    *,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    limits: Limits | None = None,
    hold_timeout: float | None = None,
    stderr: TextIO | None = None,
) -> AsyncIterator[Catalog]:
    """Start every upstream of ``config`` and yield their ``Catalog`` (see the module
    docstring).

    * ``start_timeout``: seconds each upstream has to start, negotiate and list its
      tools (they start in parallel, so the whole start takes at most about that);
    * ``call_timeout``: seconds one call may take;
    * ``limits``: the registry's ``Limits`` every tool definition and relayed prompt
      is checked against;
    * ``hold_timeout``: seconds a 2025-11-25 upstream's call stays open for a person's
      answer (default ``limits.input_lifetime``, how long the prompt lives), after
      which its question is declined;
    * ``stderr``: where stdio upstreams' stderr goes (default ``sys.stderr``; a stream
      without a file descriptor falls back to the process's own stderr).

    Raises ``TypeError`` or ``ValueError`` for bad arguments; nothing an upstream does
    raises (see ``catalog.report``).
    """
    if not isinstance(config, Config):
        raise TypeError("config must be an opgate.upstream.Config (see load_config)")
    timeouts = [("start_timeout", start_timeout), ("call_timeout", call_timeout)]
    if hold_timeout is not None:
        timeouts.append(("hold_timeout", hold_timeout))
    for what, seconds in timeouts:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ValueError(f"{what} must be a positive number of seconds")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError("limits must be an opgate.Limits")
    sessions = [
        UpstreamSession(
            server, start_timeout=start_timeout, call_timeout=call_timeout, stderr=stderr
        )
        for server in config
    ]
    # The connections' owner tasks outlive the start, so the task group spans the
    # caller's block; it is left with no error of its own (the owner tasks never
    # raise), so the block's own exception propagates as it was, not in a group.
    group = anyio.create_task_group()
    await group.__aenter__()
    try:
        for session in sessions:
            group.start_soon(session.run, name=f"opgate upstream {session.name}")
        for session in sessions:
            await session.started()
        yield Catalog(sessions, disabled=config.disabled, limits=limits, hold_timeout=hold_timeout)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE):
            async with anyio.create_task_group() as closing:
                for session in sessions:
                    closing.start_soon(session.close)
        group.cancel_scope.cancel()
        await group.__aexit__(None, None, None)
