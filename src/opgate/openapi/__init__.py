"""An OpenAPI 3.0/3.1 description as an opgate catalog: any REST API behind three tools.

```python
from opgate.openapi import build_catalog

catalog = build_catalog(Path("openapi.json"), base_url="https://api.example.com",
                        headers=lambda ctx: {"Authorization": f"Bearer {token_for(ctx)}"})
registry = catalog.registry(MyPolicy())      # every endpoint, behind search/inspect/invoke
print("\n".join(catalog.report.lines()))    # counts, then each skip and warning, why
```

One operation per path and method; names, schemas and what is skipped are described
in ``docs/openapi.md`` and in the docstrings of the modules here. Calls go over HTTP
with ``httpx2`` (one client per catalog); methods in ``confirm`` (every non-GET by
default) ask a person first and are sent at most once per accepted answer.
"""

from ._catalog import SAFE_METHODS, UNSAFE_METHODS, Catalog, HeaderSource, build_catalog
from ._document import Document, DocumentError, load_document
from ._naming import base_name
from ._operations import BodyPlan, OperationPlan, ParamPlan
from ._report import Issue, Report

__all__ = [
    "SAFE_METHODS",
    "UNSAFE_METHODS",
    "BodyPlan",
    "Catalog",
    "Document",
    "DocumentError",
    "HeaderSource",
    "Issue",
    "OperationPlan",
    "ParamPlan",
    "Report",
    "base_name",
    "build_catalog",
    "load_document",
]
