"""``opgate serve``: the one place that sequences the command's checks and serves.

The order is read in ``serve``: options that need another, ``--openapi`` and
``--upstreams`` over HTTP only with authentication, logging, ``--check``, the HTTP limits,
the gateway (secret, ledger, target, ranking: built with the collector paused),
``LocalPolicy`` refused over HTTP, the ledger's answer, the heap frozen, then stdio or
HTTP. ``--upstreams`` takes the same steps from the gateway on, inside the event loop
its upstreams' connections belong to (``_serve_catalog``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import sys
from collections.abc import Iterator
from typing import Any

from ._http import http_limits, http_server, serve_over_http
from ._ledger import check_ledger, ledger_verdict, probe_ledger, shared_ledger
from ._load import call_factory, load
from ._logging import configure_logging, log_cause, with_cause_log
from ._openapi import check_openapi, openapi_registry
from ._options import (
    DEFAULT_NAME,
    SECRET_ENV,
    given,
    refuse_lone_options,
    refuse_unauthenticated_catalogs,
)
from ._secrets import shared_secret
from ._upstreams import follow_catalog, serve_upstreams
from ._usage import UsageError

__all__ = ["build_gateway", "serve"]


def serve(arguments: argparse.Namespace) -> int:
    """``opgate serve``: every check in order, then serve until stopped; the exit status."""
    refuse_lone_options(arguments)
    refuse_unauthenticated_catalogs(arguments)
    arguments.level = configure_logging(arguments.log_level, arguments.log_logger)
    from .. import ConfigurationError

    try:
        if arguments.upstreams:
            limits = http_limits(arguments)
            return serve_upstreams(arguments, functools.partial(_serve_catalog, arguments, limits))
        if arguments.check:
            return check_openapi(arguments)
        # over stdio the SDK is imported once the target is built (``_served``)
        limits = http_limits(arguments) if arguments.http is not None else None
        with _collector_paused():
            gateway = build_gateway(arguments)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    if arguments.http is not None:
        _refuse_local_policy(gateway.registry.policy)
    check_ledger(gateway)
    _freeze_heap()
    if arguments.http is None:
        import anyio

        anyio.run(gateway.run_stdio)
        return 0
    return serve_over_http(gateway, arguments, limits)


async def _serve_catalog(
    arguments: argparse.Namespace, limits: Any, registry: Any, catalog: Any
) -> None:
    """Serve ``registry`` (the ``--upstreams`` catalog's) in the running event loop: the
    gateway (swapped for each change of ``catalog``), the ledger's answer, then stdio or
    HTTP until stopped."""
    gateway = build_gateway(arguments, registry)
    follow_catalog(catalog, gateway)
    backend = gateway.registry.ledger
    if getattr(backend, "check", None) is not None:
        ledger_verdict(backend, await probe_ledger(backend))
    _freeze_heap()
    if arguments.http is None:
        await gateway.run_stdio()
    else:
        await http_server(gateway, arguments, limits)()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic collector while the target is imported and built, then restore it.

    A start-up allocates its catalog's containers by the million and keeps them: every
    young pass re-scans the survivors and every full pass the whole growing heap, for
    nothing. Nothing else runs in the process meanwhile. The cycles the build leaves
    behind are frozen with the heap (``_freeze_heap``) rather than collected: a full
    pass here would cost what the pause saves. A target that makes cyclic garbage by
    the megabyte can call ``gc.collect()`` before it returns.

    The pause is a zero first threshold, not ``gc.disable()``: a target that turns the
    collector off itself (``gc.disable()``) or sets its own thresholds keeps its choice,
    since only thresholds still as paused are restored.
    """
    thresholds = gc.get_threshold()
    paused = (0, *thresholds[1:])
    gc.set_threshold(*paused)
    try:
        yield
    finally:
        if gc.get_threshold() == paused:  # the target set none of its own
            gc.set_threshold(*thresholds)


def _freeze_heap() -> None:
    """Take everything built so far, the registry first, out of the collector's walks.

    The registry lives as long as the process: at a real catalog's scale, hundreds of
    thousands of containers that every full collection would walk again, a pause of
    hundreds of milliseconds on whichever request it falls. ``gc.freeze()`` moves them
    to the permanent generation. Reference counting still frees a frozen object; only a
    cycle among frozen objects is never collected. Start-up leaves few such cycles
    (imports, argument parsing, the target's build: hundreds of objects), so no full
    collection runs first: it would cost the start as much as the pause it avoids.
    Objects made later, per request, are collected as before.
    """
    gc.freeze()


def _refuse_local_policy(policy: object) -> None:
    """Refuse ``opgate.LocalPolicy`` over HTTP: it allows everything to whoever reaches
    the server, which over HTTP is every caller (every token holder), not one local client."""
    from .. import LocalPolicy

    if isinstance(policy, LocalPolicy):
        raise UsageError(
            "the registry's policy is opgate.LocalPolicy, which allows every operation to "
            "whoever reaches the server: over --http every caller (every token holder) "
            "would act as the one local principal. Serve it over stdio, or give the "
            "registry opgate.ScopePolicy or a policy of your own"
        )


def build_gateway(arguments: argparse.Namespace, registry: Any = None) -> Any:
    """The ``GatewayServer`` the command line names, with its shared state applied:
    ``registry`` if given (``--upstreams``' catalog), else ``--openapi`` or the target."""
    from .. import Ranking, Registry

    secret = shared_secret(arguments)
    ledger = shared_ledger(arguments)
    if ledger is not None and secret is None:
        raise UsageError(
            f"--ledger needs the shared secret: set {SECRET_ENV} or pass --secret-file"
        )
    if registry is not None:
        target = registry
    elif arguments.openapi:
        target = openapi_registry(arguments)
    elif not arguments.target:
        raise UsageError("give MODULE:ATTR (a registry) or --openapi SPEC --base-url URL")
    else:
        target = load(arguments.target, "the target", find=True)
    if not isinstance(target, Registry) and not _is_gateway(target) and callable(target):
        target = call_factory(target, arguments.target)
    ranking = None if arguments.ranking is None else Ranking(arguments.ranking)
    try:
        return _served(target, arguments, secret, ledger, ranking)
    except ImportError as exc:  # Ranking.RELEVANCE without its extra: say how to install it
        raise UsageError(str(exc)) from None


def _is_gateway(target: object) -> bool:
    """Whether ``target`` is an ``opgate.mcp.GatewayServer``: only a program that
    imported ``opgate.mcp`` can have made one, so this imports nothing."""
    mcp = sys.modules.get("opgate.mcp")
    return mcp is not None and isinstance(target, mcp.GatewayServer)


def _served(
    target: object,
    arguments: argparse.Namespace,
    secret: bytes | None,
    ledger: Any,
    ranking: Any,
) -> Any:
    """The gateway to serve: ``target`` with the shared state and ranking applied.

    The MCP SDK is imported after a registry's ``replace``: a relevance index that
    ``replace`` left a child process building is built during the import."""
    from .. import Registry

    changes: dict[str, Any] = {}
    if secret is not None:
        changes.update(secret=secret, ledger=ledger)
    if ranking is not None:
        changes.update(ranking=ranking)
    if isinstance(target, Registry):
        registry = target.replace(**changes) if changes else target
        from ..mcp import GatewayServer

        return GatewayServer(
            registry,
            name=arguments.name or DEFAULT_NAME,
            pinned=arguments.pin,
            on_failure=log_cause,
        )
    from ..mcp import GatewayServer

    if isinstance(target, GatewayServer):
        for option in ("--pin", "--name"):
            if given(arguments, option):
                raise UsageError(
                    f"{option} applies to a Registry; this target is a GatewayServer, "
                    "which has its own"
                )
        return target.replace(
            registry=target.registry.replace(**changes) if changes else None,
            on_failure=with_cause_log(target.on_failure),
        )
    raise UsageError(
        f"{arguments.target} is a {type(target).__name__}, not an opgate.Registry or "
        "opgate.mcp.GatewayServer (or a function returning one)"
    )
