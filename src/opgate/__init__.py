"""opgate: a large catalog of application operations behind three MCP tools.

Users import only from ``opgate``; every implementation module is private.
"""

from ._failures import ConfigurationError, Failure, FailureCode

__all__ = [
    "ConfigurationError",
    "Failure",
    "FailureCode",
]

__version__ = "0.1.0"
