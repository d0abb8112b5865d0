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
protocol eras) and its progress. Upstreams that fail or crash are started again with
a backoff, and the catalog follows their tool lists (``Catalog.on_change``). This
subpackage and ``opgate.mcp`` are the MCP adapters, the only parts of opgate that
import ``mcp``. The configuration, naming, the relay, restarts, the lock file and what is not built
yet are in ``docs/gateway.md`` and the docstrings of the modules here.
"""

from ._catalog import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_SETTLE,
    DEFAULT_START_TIMEOUT,
    Catalog,
    Change,
    Listener,
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
from ._lock import LOCK_VERSION, Lock, LockError, Verdict, definition, digest
from ._report import Issue, Report, UpstreamStatus
from ._session import (
    DEFAULT_BACKOFF,
    DUMPABLE_ENV,
    INHERITED_ENV,
    Backoff,
    UpstreamError,
    UpstreamSession,
    child_environment,
    protect_gateway,
)

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_SETTLE",
    "DEFAULT_START_TIMEOUT",
    "DUMPABLE_ENV",
    "INHERITED_ENV",
    "LOCK_VERSION",
    "MAX_UPSTREAM_NAME",
    "Backoff",
    "Catalog",
    "Change",
    "Config",
    "ConfigError",
    "HTTPServer",
    "Issue",
    "Listener",
    "Lock",
    "LockError",
    "Report",
    "ServerConfig",
    "StdioServer",
    "ToolFilter",
    "ToolPlan",
    "UpstreamError",
    "UpstreamSession",
    "UpstreamStatus",
    "Verdict",
    "child_environment",
    "definition",
    "digest",
    "load_config",
    "open_catalog",
    "protect_gateway",
]
