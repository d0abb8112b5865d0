"""Existing MCP servers as an opgate catalog: many upstreams behind three tools.

``load_config`` reads the ``mcpServers`` file MCP clients use into frozen values
(``Config``, ``StdioServer``, ``HTTPServer``, ``ToolFilter``); see ``_config``.
What a start did is a ``Report`` of ``UpstreamStatus`` and ``Issue`` values.
"""

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

__all__ = [
    "MAX_UPSTREAM_NAME",
    "Config",
    "ConfigError",
    "HTTPServer",
    "Issue",
    "Report",
    "ServerConfig",
    "StdioServer",
    "ToolFilter",
    "UpstreamStatus",
    "load_config",
]
