"""opgate over MCP: a ``Registry`` behind ``search``, ``inspect`` and ``invoke``.

Built on the official ``mcp`` SDK; this subpackage (the server side) and
``opgate.upstream`` (the client side) are the MCP adapters, the parts of opgate
that import it. ``GatewayServer(registry)`` serves over stdio (``run_stdio``)
or streamable HTTP (``http_app``); a policy receives a ``CallContext`` whose
``principal`` is the caller and whose ``scope_key`` is the documented default
scope key. See ``docs/mcp.md``.
"""

from ._context import LOCAL_PRINCIPAL, CallContext, Principal
from ._http import HTTPLimits, serve_http, uvicorn_config
from ._server import FailureHook, GatewayServer, principal_from_token

__all__ = [
    "LOCAL_PRINCIPAL",
    "CallContext",
    "FailureHook",
    "GatewayServer",
    "HTTPLimits",
    "Principal",
    "principal_from_token",
    "serve_http",
    "uvicorn_config",
]
