"""Existing MCP servers as an opgate catalog: many upstreams behind three tools.

```python
from opgate.upstream import load_config, open_catalog

config = load_config(Path("mcp.json"))          # {"mcpServers": {...}}, ${VAR} resolved
async with open_catalog(config) as catalog:      # every upstream started in parallel
    print(catalog.report.summary())              # connected, imported, skipped (with reasons)
    registry = catalog.registry(MyPolicy())      # or Registry([*catalog.operations, *mine], ...)
    await GatewayServer(registry).run_stdio()
```

Each upstream tool is an operation ``NAME.TOOL`` in group ``NAME``; ``invoke``
forwards ``tools/call`` to that upstream over the official SDK's client (stdio or
streamable HTTP), relays the questions it asks a person as opgate prompts (both
protocol eras) and its progress. This subpackage and ``opgate.mcp`` are the MCP
adapters, the only parts of opgate that import ``mcp``. The configuration, naming,
the relay and what is not built yet are in ``docs/gateway.md`` and the docstrings of
the modules here.
"""

from ._catalog import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    Catalog,
    ToolPlan,
    open_catalog,
)
from ._config import (
    MAX_UPSTREAM_NAME,
    Config,
    ConfigError,
    HTTPServer,
    ServerConfig,
    StdioServer,
    ToolFilter,
    load_config,
)
from ._report import Issue, Report, UpstreamStatus
from ._session import (
    DUMPABLE_ENV,
    INHERITED_ENV,
    UpstreamError,
    UpstreamSession,
    child_environment,
    protect_gateway,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "DUMPABLE_ENV",
    "INHERITED_ENV",
    "MAX_UPSTREAM_NAME",
    "Catalog",
    "Config",
    "ConfigError",
    "HTTPServer",
    "Issue",
    "Report",
    "ServerConfig",
    "StdioServer",
    "ToolFilter",
    "ToolPlan",
    "UpstreamError",
    "UpstreamSession",
    "UpstreamStatus",
    "child_environment",
    "load_config",
    "open_catalog",
    "protect_gateway",
]
