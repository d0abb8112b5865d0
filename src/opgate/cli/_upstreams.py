"""``opgate serve --upstreams FILE``: the tools of the MCP servers an ``mcpServers`` file
lists, served as one catalog (``opgate.upstream``), and ``--check``, which starts them,
prints the whole start report and serves nothing. ``--start-timeout``,
``--call-timeout`` and ``--hold-timeout`` are ``open_catalog``'s timeouts.

With ``--lock LOCKFILE`` every tool's definition is pinned (``opgate.upstream.Lock``): the
file is written on the first run, with every tool as listed then; later a tool whose
definition changed, or that is new, is withheld and the report names it, followed by the
command that accepts it (``--check`` also prints each withheld tool's definition now, to
review before accepting). Accepting is a run of its own: ``--check --accept NAME.TOOL``
(or ``--accept-all``) starts the upstreams, writes the lock file and exits; a ``--check``
without them writes nothing.

The upstreams' connections belong to the event loop that started them, so starting them,
building the gateway and serving run in one loop: ``serve_upstreams`` owns it and hands
the catalog's registry and the catalog to the caller, which serves it there and makes
the gateway follow the catalog's changes (``Catalog.follow``: restarted upstreams that
list other tools, late upstreams joining, ``list_changed``), each said on stderr.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from ._escapes import visible
from ._openapi import ServePolicy, print_report
from ._options import UPSTREAM_TIMEOUT_OPTIONS
from ._usage import UsageError

__all__ = ["accepted_pairs", "catalog_timeouts", "follow_catalog", "serve_upstreams"]


def catalog_timeouts(arguments: argparse.Namespace) -> dict[str, float]:
    """``open_catalog``'s timeouts that ``--start-timeout``, ``--call-timeout`` and
    ``--hold-timeout`` give (each left at its default when not given); a value that is
    not a positive, finite number of seconds is a ``UsageError``."""
    timeouts: dict[str, float] = {}
    for flag, _ in UPSTREAM_TIMEOUT_OPTIONS:
        name = flag[2:].replace("-", "_")
        seconds = getattr(arguments, name)
        if seconds is None:
            continue
        if not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(f"{flag} must be a positive, finite number of seconds")
        timeouts[name] = seconds
    return timeouts


def accepted_pairs(values: list[str]) -> list[tuple[str, str]]:
    """``--accept NAME.TOOL`` values as (upstream, tool) pairs: upstream names hold no
    dot, so the first dot ends the name and the rest is the upstream's own tool name."""
    pairs = []
    for value in values:
        upstream, dot, tool = value.partition(".")
        if not dot or not upstream or not tool:
            raise UsageError(
                f"--accept needs NAME.TOOL (the upstream's name, a dot, its own tool name, "
                f"as the report shows them), got {value!r}"
            )
        pairs.append((upstream, tool))
    return pairs


def follow_catalog(catalog: Any, gateway: Any, stream: Any = None) -> None:
    """Make ``gateway`` serve each change of ``catalog`` (``Catalog.follow``), and say
    each one applied on ``stream`` (default stderr); a change the swap refuses is said
    by the ``opgate.upstream`` logger, and the gateway keeps serving what it served."""

    def said(change: Any) -> None:
        print(f"opgate: {change.summary()}", file=stream or sys.stderr, flush=True)

    catalog.follow(gateway)
    catalog.on_change(said)


def withheld_pin(arguments: argparse.Namespace, catalog: Any, lock: Any) -> str | None:
    """Why ``--pin`` cannot pin a tool ``lock`` withholds (the first such pin, by the
    operation name the tool would have been offered under), or ``None``: a pin of a
    withheld tool is otherwise only "not in the registry"."""
    from ..upstream import Verdict

    served = set(catalog.tools)
    for pin in arguments.pin or ():
        withheld = None if pin in served else lock.withheld_names.get(pin)
        if withheld is None:
            continue
        upstream, tool, verdict = withheld
        if verdict is Verdict.CHANGED:
            why = "its definition changed since it was accepted"
            review = "review the change with --check"
        else:
            why = "the upstream did not list it when it was accepted"
            review = "review its definition with --check"
        return (
            f"--pin {visible_text(pin)}: the lock file {visible_text(str(lock.path))} "
            f"withholds this tool ({why}); {review}, then accept with: "
            f"{accept_command(arguments, [(upstream, tool)])}"
        )
    return None


def accept_command(arguments: argparse.Namespace, tools: list[tuple[str, str]]) -> str:
    """The command line that accepts ``tools`` (upstream, tool) into the lock file of
    this run, escaped for the terminal."""
    command = shlex.join(
        ["opgate", "serve", "--upstreams", arguments.upstreams, "--lock", arguments.lock]
    )
    accept = " ".join(f"--accept {shlex.quote(f'{upstream}.{tool}')}" for upstream, tool in tools)
    return visible_text(f"{command} --check {accept}")


def serve_upstreams(
    arguments: argparse.Namespace, serve_registry: Callable[[Any, Any], Awaitable[None]]
) -> int:
    """Start the upstreams of ``--upstreams FILE``, print their report (to stderr; every
    line of it to stdout with ``--check``), then await ``serve_registry`` with their
    catalog's registry, whose policy allows every principal every operation, and the
    catalog; returns the exit status once it returns, the upstreams closed.

    With ``--check`` nothing is served: 0 when some operation can be served, 1 when none
    can. Another source besides the file, a file that is not a usable configuration, or a
    lock file that cannot be read or written is a ``UsageError``.
    """
    from pathlib import Path

    import anyio

    from ..upstream import (
        DEFAULT_CALL_TIMEOUT,
        DEFAULT_START_TIMEOUT,
        ConfigError,
        Lock,
        LockError,
        load_config,
        open_catalog,
    )

    if arguments.target or arguments.openapi:
        raise UsageError("give one of MODULE:ATTR, --openapi SPEC or --upstreams FILE")
    timeouts = catalog_timeouts(arguments)
    try:
        config = load_config(Path(arguments.upstreams))
    except ConfigError as exc:
        # the file may come from elsewhere: the member names it quotes are escaped
        raise UsageError(f"{arguments.upstreams}: {visible_text(str(exc))}") from None
    lock = None
    if arguments.lock:
        accepting = bool(arguments.accept or arguments.accept_all)
        try:
            lock = Lock(
                arguments.lock,
                accept=accepted_pairs(arguments.accept),
                accept_all=arguments.accept_all,
                write=accepting or not arguments.check,
            )
        except LockError as exc:
            raise UsageError(str(exc)) from None

    stream = sys.stdout if arguments.check else sys.stderr
    for warning in config.warnings:
        shown = "".join(map(visible, warning))
        print(f"opgate: warning: {arguments.upstreams}: {shown}", file=stream, flush=True)

    async def run() -> int:
        async with open_catalog(
            config,
            start_timeout=timeouts.get("start_timeout", DEFAULT_START_TIMEOUT),
            call_timeout=timeouts.get("call_timeout", DEFAULT_CALL_TIMEOUT),
            hold_timeout=timeouts.get("hold_timeout"),
            lock=lock,
        ) as catalog:
            stream = sys.stdout if arguments.check else sys.stderr
            print_report(catalog.report, stream, every=arguments.check)
            if lock is not None:
                print_lock(arguments, catalog, lock, stream)
            if arguments.check:
                if not catalog.operations:
                    print(f"opgate: no tool of {arguments.upstreams} can be served", file=stream)
                    return 1
                return 0
            if lock is not None:
                refused = withheld_pin(arguments, catalog, lock)
                if refused is not None:
                    raise UsageError(refused)
            await serve_registry(catalog.registry(ServePolicy()), catalog)
            return 0

    try:
        result: int = anyio.run(run)
    except LockError as exc:
        raise UsageError(f"{exc}; nothing was served") from None
    return result


def print_lock(arguments: argparse.Namespace, catalog: Any, lock: Any, stream: TextIO) -> None:
    """What the lock did: the tools it recorded or accepted, and for the tools it withheld
    the command that accepts them (with ``--check``, each one's definition now, to review)."""
    from ..json import canonical_bytes
    from ..upstream import Verdict, definition

    name = visible_text(str(lock.path))
    first = sorted({u for u, _, verdict in lock.recorded if verdict is Verdict.ACCEPTED})
    lines = []
    if first:
        recorded = sum(1 for *_, verdict in lock.recorded if verdict is Verdict.ACCEPTED)
        tools = f"{recorded} tool{'s' if recorded != 1 else ''} of {', '.join(first)}"
        if lock.write:
            lines.append(f"opgate: lock {name}: recorded {tools} as listed now (first use)")
        else:
            lines.append(
                f"opgate: lock {name}: a --check writes nothing; serving (or --check "
                f"--accept-all) records {tools} as listed now (first use)"
            )
    for upstream, tool, verdict in lock.recorded:
        if verdict is not Verdict.ACCEPTED:
            lines.append(
                f"opgate: lock {name}: accepted {visible_text(upstream)}.{visible_text(tool)} "
                f"({verdict.value})"
            )
    withheld = lock.withheld
    if withheld:
        count = len(withheld)
        command = accept_command(arguments, [(upstream, tool) for upstream, tool, _ in withheld])
        review = "" if arguments.check else "review the change with --check, then "
        lines.append(
            f"opgate: lock {name}: {count} tool{'s' if count != 1 else ''} withheld "
            f"(definition changed or new since accepted); {review}accept with: {command}"
        )
        if arguments.check:
            for upstream, tool, _ in withheld:
                session = catalog.sessions[upstream]
                found = [t for t in session.tools if t.name == tool]
                text = canonical_bytes(definition(found[0])).decode("utf-8", "replace")
                text = session.redactor.text(text)  # for display: the entry's keys hidden
                lines.append(
                    f"  definition of {visible_text(upstream)}/{visible_text(tool)} now: "
                    f"{visible_text(text)}"
                )
    if lines:
        print("\n".join(lines), file=stream, flush=True)


def visible_text(text: str) -> str:
    """``text`` with every character a terminal would act on escaped."""
    return "".join(map(visible, text))
