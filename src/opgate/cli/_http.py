"""``opgate serve --http``: bearer authentication from ``--token-verifier``, the HTTP
limits the options give, and the streamable HTTP server on the sockets bound first."""

from __future__ import annotations

import argparse
import functools
import logging
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from opgate.loopback import is_loopback

from ._load import call_factory, load
from ._options import HTTP_LIMIT_OPTIONS
from ._ports import http_address, listen
from ._usage import UsageError

__all__ = ["http_limits", "http_server", "serve_over_http"]


def http_limits(arguments: argparse.Namespace) -> Any:
    """The ``HTTPLimits`` the ``--http`` limit options give (the defaults without any)."""
    given = {
        flag[2:].replace("-", "_"): getattr(arguments, flag[2:].replace("-", "_"))
        for flag, *_ in HTTP_LIMIT_OPTIONS
    }
    given = {name: value for name, value in given.items() if value is not None}
    from ..mcp import HTTPLimits

    return HTTPLimits(**given)


def serve_over_http(gateway: Any, arguments: argparse.Namespace, limits: Any) -> int:
    """Serve ``gateway`` at ``--http [HOST:]PORT`` until stopped; returns the exit status."""
    import anyio

    anyio.run(http_server(gateway, arguments, limits))
    return 0


def http_server(
    gateway: Any, arguments: argparse.Namespace, limits: Any
) -> Callable[[], Awaitable[None]]:
    """``gateway``'s HTTP server at ``--http [HOST:]PORT``, its port bound and announced;
    awaiting the result serves until stopped, in the caller's event loop."""
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    from ..mcp import serve_http

    host, port = http_address(arguments.http)
    verifier = None
    auth = None
    if arguments.token_verifier:
        verifier = load(arguments.token_verifier, "--token-verifier")
        if callable(verifier) and (
            isinstance(verifier, type) or not hasattr(verifier, "verify_token")
        ):
            verifier = call_factory(verifier, arguments.token_verifier)
        if not hasattr(verifier, "verify_token"):
            raise UsageError("--token-verifier must name an mcp TokenVerifier or a factory of one")
        public = arguments.resource_url or f"http://{host}:{port}/mcp"
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(arguments.issuer_url or public),
            resource_server_url=AnyHttpUrl(arguments.resource_url)
            if arguments.resource_url
            else None,
            required_scopes=arguments.required_scope or None,
            validate_token_resource=False if arguments.resource_url else None,
        )
    elif not is_loopback(host) and not arguments.allow_unauthenticated:
        raise UsageError(
            f"refusing to serve {host} without authentication: pass --token-verifier, "
            "or --allow-unauthenticated if a proxy in front authenticates callers"
        )
    app = gateway.http_app(
        host=host,
        token_verifier=verifier,
        auth=auth,
        allowed_hosts=arguments.allowed_host,
        allowed_origins=arguments.allowed_origin,
        limits=limits,
    )
    sockets = listen(host, port)
    if verifier is None and not arguments.allow_unauthenticated:
        _refuse_beyond_loopback(host, sockets)
    port = sockets[0].getsockname()[1]  # the one chosen for port 0
    print(_serving_line(len(gateway.registry), host, port), file=sys.stderr, flush=True)
    opened = any(name.split(".")[0] == "uvicorn" for name in arguments.log_logger)
    level = arguments.level if opened else max(arguments.level, logging.WARNING)
    return functools.partial(
        serve_http, app, host=host, port=port, limits=limits, log_level=level, sockets=sockets
    )


def _serving_line(count: int, host: str, port: int) -> str:
    """``opgate: serving N operations at URL``, printed once the port is bound."""
    shown = f"[{host}]" if ":" in host else host
    noun = "operation" if count == 1 else "operations"
    return f"opgate: serving {count} {noun} at http://{shown}:{port}/mcp"


def _refuse_beyond_loopback(host: str, sockets: list[socket.socket]) -> None:
    """Serving without authentication is allowed on this machine's loopback only, and
    ``localhost`` counts as it by its name: refuse when a socket it named listens on
    another address (a hosts file may map ``localhost`` to any)."""
    beyond = [s.getsockname()[0] for s in sockets if not is_loopback(s.getsockname()[0])]
    if beyond:
        for listener in sockets:
            listener.close()
        raise UsageError(
            f"refusing to serve {host} without authentication: it names {beyond[0]}, "
            "beyond this machine's loopback; pass --http 127.0.0.1:PORT, or "
            "--token-verifier, or --allow-unauthenticated if a proxy in front "
            "authenticates callers"
        )
