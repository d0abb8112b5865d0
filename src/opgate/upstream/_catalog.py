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
  the same name; and, with a ``Lock``, a tool whose definition is not the one accepted
  (``_lock``), named before it is withheld so a withheld tool moves no other's name.

A call (the handler)
--------------------
The registry validates the arguments, then the handler (``_relay``) sends
``tools/call`` with them to the upstream (``_session``), relays the upstream's
questions as prompts and its progress, and maps the answer (``_results``); the
registry checks the result as for any operation. An upstream's failure, timeout,
closed connection or malformed answer fails that call with ``operation_failed``
naming the upstream; other calls and upstreams go on. Nothing of the caller
(``ctx``, its token) is passed to the upstream.

Keeping the catalog true
------------------------
The catalog follows its upstreams while the block runs. An upstream that failed to
start keeps being started (``_session``, with a ``Backoff``) and joins when it comes
up; one that relists its tools (``list_changed``) or comes back from a restart with
other tools changes them. Each such change rebuilds the operations: the rebuilds are
serialized (one at a time, in the catalog's own task) and coalesced (a change that
arrives while one is pending or running makes at most one rebuild more, after
``settle`` seconds in which more may arrive), and a rebuild that changes no
operation's definition changes nothing. A rebuild offers its ``Change`` to every
listener (``on_change``), in order; ``follow(gateway)`` is the listener that swaps a
``GatewayServer``'s registry. A listener that raises refuses the change: the catalog
keeps its operations, ``report.refused`` says why, and the next change tries again
from the upstreams' tools as they are then. An upstream that is down keeps its
operations (calls fail at once saying it is restarting) until it lists others.
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol, TextIO

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
from ._lock import Lock
from ._naming import Namer
from ._relay import Relay
from ._report import Issue, Report, bounded, visible
from ._results import json_value
from ._session import (
    DEFAULT_BACKOFF,
    MAX_LISTED_TOOLS,
    Backoff,
    UpstreamSession,
    max_message_bytes,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_SETTLE",
    "DEFAULT_START_TIMEOUT",
    "MAX_SUMMARY_CHARS",
    "Catalog",
    "Change",
    "Listener",
    "ToolPlan",
    "open_catalog",
]

#: The longest timeout taken: the largest float (an int past it cannot be one).
_LONGEST = sys.float_info.max

logger = logging.getLogger("opgate.upstream")

#: Seconds an upstream has to start, finish its handshake and list its tools.
DEFAULT_START_TIMEOUT: Final = 30.0
#: Seconds one ``tools/call`` may take before it fails (and is cancelled upstream).
DEFAULT_CALL_TIMEOUT: Final = 120.0
#: Longest summary: search pages show it for every hit, so it stays one short line.
MAX_SUMMARY_CHARS: Final = 200
#: Seconds the connections have to close on leaving the block before they are cancelled.
CLOSE_GRACE: Final = 10.0
#: Seconds a rebuild waits after the first change for more to arrive (coalescing).
DEFAULT_SETTLE: Final = 0.25

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


@dataclass(frozen=True, slots=True)
class Change:
    """One rebuild of the catalog, as its listeners get it.

    * ``operations``: every operation of the catalog after the change;
    * ``upstreams``: the upstreams whose operations changed (joined, relisted);
    * ``report``: the report after the change;
    * ``number``: 1 for the first change after the catalog was opened, then 2, ...;
    * ``joined``: those of ``upstreams`` that had never been up before (late starts).
    """

    operations: tuple[Operation, ...]
    upstreams: tuple[str, ...]
    report: Report
    number: int
    joined: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: which upstreams joined, whose tools changed, and the catalog's size."""
        parts = [f"{name} joined" for name in self.joined]
        relisted = [name for name in self.upstreams if name not in self.joined]
        if relisted:
            parts.append(f"the tools of {', '.join(relisted)} changed")
        return f"change {self.number}: {'; '.join(parts)}; {len(self.operations)} operations now"


#: A listener of the catalog's changes (``on_change``): called with each ``Change``;
#: may be a coroutine function. Raising refuses the change.
Listener = Callable[[Change], Awaitable[None] | None]


class _Swappable(Protocol):
    """What ``follow`` needs of a server (``opgate.mcp.GatewayServer``)."""

    @property
    def registry(self) -> Registry: ...

    def swap(self, registry: Registry) -> None: ...


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
    """The tool's description, then its declared hints on a line of their own; in the
    description, every control but line feed and tab, and every format (bidi,
    zero-width) character, is written as an escape (``visible``)."""
    description = visible(tool.description or "")
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


def _present(sessions: dict[str, UpstreamSession]) -> frozenset[str]:
    return frozenset(name for name, session in sessions.items() if session.generation)


def _plans_of(plans: dict[str, ToolPlan], upstream: str) -> dict[str, ToolPlan]:
    return {name: plan for name, plan in plans.items() if plan.upstream == upstream}


class Catalog:
    """The operations of every connected upstream, with their connections.

    * ``operations``: the ``Operation`` tuple (upstreams in the file's order, each
      upstream's tools by name);
    * ``report``: the ``Report`` now (each upstream's status as it is now);
    * ``tools``: operation name → ``ToolPlan``;
    * ``sessions``: upstream name → ``UpstreamSession`` (every enabled upstream,
      connected or not);
    * ``lock``: the ``Lock`` given, or ``None``: a tool whose definition it has not
      accepted is left out and reported in ``report.skipped``; building the catalog saves
      what it accepted (``Lock.save()``, which raises ``LockError``);
    * ``registry(policy, *, limits=None)``: the ``Registry`` of these operations;
    * ``on_change(listener)``, ``follow(gateway)``: what follows the catalog's changes
      (see the module docstring).
    """

    def __init__(
        self,
        sessions: Iterable[UpstreamSession],
        *,
        disabled: tuple[str, ...] = (),
        limits: Limits | None = None,
        hold_timeout: float | None = None,
        lock: Lock | None = None,
    ) -> None:
        self.sessions = {session.name: session for session in sessions}
        self._limits = limits
        self._disabled = disabled
        checked = limits or Limits()
        if hold_timeout is None:
            hold_timeout = checked.input_lifetime.total_seconds()
        self._relay = Relay(limits=checked, hold_timeout=hold_timeout)
        self.lock = lock
        self._listeners: list[Listener] = []
        self._wake = anyio.Event()
        self._rebuilds = 0
        self._refused = ""
        self.operations, self.tools, self._report = self._build()
        if lock is not None:
            lock.save()
        self._present = _present(self.sessions)  # the upstreams imported (up once)
        for session in self.sessions.values():
            session.on_tools = self._poke

    def _poke(self) -> None:
        """An upstream's tools may have changed: a rebuild is due."""
        self._wake.set()

    def _build(self) -> tuple[tuple[Operation, ...], dict[str, ToolPlan], Report]:
        """The operations of every upstream that has listed its tools (connected now,
        or connected before and restarting), their plans and the report."""
        plans: dict[str, ToolPlan] = {}
        operations: list[Operation] = []
        warnings: list[Issue] = []
        skipped: list[Issue] = []
        namer = Namer()
        for session in self.sessions.values():
            if session.generation == 0:
                continue
            self._import(session, namer, operations, warnings, skipped, plans)
        report = Report(
            upstreams=(),
            disabled=self._disabled,
            operations=tuple(operation.name for operation in operations),
            warnings=tuple(warnings),
            skipped=tuple(skipped),
        )
        return tuple(operations), plans, report

    @property
    def report(self) -> Report:
        """The report of the catalog as it is now (see ``Report``)."""
        return replace(
            self._report,
            upstreams=tuple(session.status() for session in self.sessions.values()),
            rebuilds=self._rebuilds,
            refused=self._refused,
        )

    def on_change(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every ``Change`` from now on (after the listeners
        given before it); returns the function that stops it. A listener runs in the
        catalog's task, one change at a time; one that raises refuses the change (see
        the module docstring), and the listeners after it are not called."""
        if not callable(listener):
            raise TypeError("listener must be callable")
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def follow(
        self, gateway: _Swappable, *, others: Iterable[Operation] = ()
    ) -> Callable[[], None]:
        """Swap ``gateway``'s registry on every change: to
        ``gateway.registry.with_operations([*change.operations, *others])`` (the host's
        own operations ``others`` kept beside the catalog's), through
        ``gateway.swap``. A registry the swap refuses (a pinned operation gone, say)
        refuses the change. Returns the function that stops following."""
        kept = tuple(others)

        def swap(change: Change) -> None:
            gateway.swap(gateway.registry.with_operations([*change.operations, *kept]))

        return self.on_change(swap)

    async def _follow(self, settle: float) -> None:
        """The catalog's task: one rebuild at a time, for the changes since the last."""
        while True:
            await self._wake.wait()
            await anyio.sleep(settle)  # a burst of changes becomes one rebuild
            self._wake = anyio.Event()  # a change from now on makes one rebuild more
            try:
                await self._rebuild()
            except Exception as exc:  # a rebuild must never take the gateway down
                self._refused = f"the rebuild failed ({type(exc).__name__})"
                logger.error("catalog rebuild failed: %s", type(exc).__name__)

    async def _rebuild(self) -> None:
        """Build the operations again; offer them to the listeners if a definition
        changed (see the module docstring)."""
        operations, plans, report = self._build()
        changed = tuple(
            name for name in self.sessions if _plans_of(plans, name) != _plans_of(self.tools, name)
        )
        if not changed:
            self._report = report  # the same definitions: the same operations serve
            return
        number = self._rebuilds + 1
        shown = replace(
            report,
            upstreams=tuple(session.status() for session in self.sessions.values()),
            rebuilds=number,
        )
        joined = tuple(name for name in changed if name not in self._present)
        if self.lock is not None:
            self.lock.save()  # what a late upstream listed: saved before it is served
        change = Change(operations, changed, shown, number, joined)
        for listener in tuple(self._listeners):
            try:
                result = listener(change)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._refused = bounded(
                    f"change {change.number} ({', '.join(changed)}) was refused: "
                    f"{type(exc).__name__}: {exc}"
                )
                logger.warning("catalog %s", self._refused)
                return
        self.operations, self.tools, self._report = operations, plans, report
        self._present = _present(self.sessions)
        self._rebuilds = number
        self._refused = ""

    def _import(
        self,
        session: UpstreamSession,
        namer: Namer,
        operations: list[Operation],
        warnings: list[Issue],
        skipped: list[Issue],
        plans: dict[str, ToolPlan],
    ) -> None:
        upstream = session.name
        tools = session.server.tools
        if self.lock is not None:
            self.lock.listed(upstream)
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
            withheld = (
                None
                if self.lock is None
                else self.lock.check(upstream, tool, offered_as=naming.name)
            )
            if withheld is not None:
                skipped.append(withheld)
                continue
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
            plans[plan.name] = plan
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
    lock: Lock | None = None,
    backoff: Backoff = DEFAULT_BACKOFF,
    settle: float = DEFAULT_SETTLE,
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
      without a file descriptor falls back to the process's own stderr);
    * ``lock``: a ``Lock``: tools whose definitions it has not accepted are withheld,
      and what it accepted is written once the catalog is built and before each
      rebuild that changes it is offered (``_lock``);
    * ``backoff``: how an upstream that is down is started again (``Backoff``);
    * ``settle``: seconds a rebuild waits after a change for more to arrive.

    The block's first report is of every upstream's first start; the catalog changes
    after that as its upstreams do (see the module docstring).

    Raises ``TypeError`` or ``ValueError`` for bad arguments, and ``LockError`` when the
    lock cannot be saved (the upstreams are closed first); nothing an upstream does
    raises (see ``catalog.report``).
    """
    if not isinstance(config, Config):
        raise TypeError("config must be an opgate.upstream.Config (see load_config)")
    timeouts = [("start_timeout", start_timeout), ("call_timeout", call_timeout)]
    if not isinstance(backoff, Backoff):
        raise TypeError("backoff must be an opgate.upstream.Backoff")
    if (
        isinstance(settle, bool)
        or not isinstance(settle, int | float)
        or not 0 <= settle <= _LONGEST
    ):
        raise ValueError("settle must be a finite number of seconds, at least 0")
    if hold_timeout is not None:
        timeouts.append(("hold_timeout", hold_timeout))
    for what, seconds in timeouts:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds <= _LONGEST
        ):
            raise ValueError(f"{what} must be a positive, finite number of seconds")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError("limits must be an opgate.Limits")
    if lock is not None and not isinstance(lock, Lock):
        raise TypeError("lock must be an opgate.upstream.Lock")
    sessions = [
        UpstreamSession(
            server,
            start_timeout=start_timeout,
            call_timeout=call_timeout,
            stderr=stderr,
            max_message_bytes=max_message_bytes(limits or Limits()),
            backoff=backoff,
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
        catalog = Catalog(
            sessions,
            disabled=config.disabled,
            limits=limits,
            hold_timeout=hold_timeout,
            lock=lock,
        )
        group.start_soon(catalog._follow, settle, name="opgate upstream catalog")
        yield catalog
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE):
            async with anyio.create_task_group() as closing:
                for session in sessions:
                    closing.start_soon(session.close)
        group.cancel_scope.cancel()
        await group.__aexit__(None, None, None)
