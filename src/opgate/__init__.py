"""opgate: a large catalog of application operations behind three MCP tools.

``search``, ``inspect`` and ``invoke`` over a fixed ``Registry`` of ``Operation``
definitions (written by hand, or made from typed functions by ``@operation``), with
per-principal authorization (``Policy``; ``LocalPolicy`` and ``ScopePolicy`` ready-made),
exact JSON Schema checks, human input that resumes safely (``FormInput``, ``URLInput``)
and progress. Users import only from ``opgate``; adapters also use the seams
``opgate.ledger`` (the continuation-ledger contract) and ``opgate.json`` (the JSON
profile). Every implementation module is private.
"""

from ._failures import ConfigurationError, Failure, FailureCode, internal_failure
from ._forms import FormInput, FormPrompt, InputMode, URLInput, URLPrompt
from ._functions import operation
from ._invocation import Invocation, Resume
from ._limits import PAGE_BYTES, Limits
from ._operation import Operation, OperationSpec, SearchPage, Summary
from ._outcomes import (
    Completed,
    Failed,
    Outcome,
    Pending,
    await_input,
    fail,
    finish,
    unsupported_input,
)
from ._policies import LocalPolicy, ScopePolicy
from ._policy import Discover, DiscoveryScope, Execute, Policy
from ._progress import ProgressUpdate
from ._registry import Registry
from ._responses import InputAction, InputResponse
from ._results import (
    NO_STRUCTURED,
    Audio,
    EmbeddedResource,
    Image,
    NoStructured,
    ResourceLink,
    Result,
    Text,
)
from ._search import Candidate, Embedder, Hybrid, Ranking, Scorer
from ._version import __version__ as __version__
from .ledger import Lifetime

__all__ = [
    "NO_STRUCTURED",
    "PAGE_BYTES",
    "Audio",
    "Candidate",
    "Completed",
    "ConfigurationError",
    "Discover",
    "DiscoveryScope",
    "EmbeddedResource",
    "Embedder",
    "Execute",
    "Failed",
    "Failure",
    "FailureCode",
    "FormInput",
    "FormPrompt",
    "Hybrid",
    "Image",
    "InputAction",
    "InputMode",
    "InputResponse",
    "Invocation",
    "Lifetime",
    "Limits",
    "LocalPolicy",
    "NoStructured",
    "Operation",
    "OperationSpec",
    "Outcome",
    "Pending",
    "Policy",
    "ProgressUpdate",
    "Ranking",
    "Registry",
    "ResourceLink",
    "Result",
    "Resume",
    "ScopePolicy",
    "Scorer",
    "SearchPage",
    "Summary",
    "Text",
    "URLInput",
    "URLPrompt",
    "await_input",
    "fail",
    "finish",
    "internal_failure",
    "operation",
    "unsupported_input",
]
