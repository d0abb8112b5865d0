"""The checks a search request's parameters pass before anything runs.

``search_problem`` states what is wrong with the query, group, limit or cursor, in
the words ``Registry.search`` returns as an ``invalid_request`` failure; it runs no
callback and never awaits.
"""

from __future__ import annotations

from .._limits import QUERY_BYTES, SEARCH_MAX_LIMIT
from .._text import has_surrogate, utf8_size

__all__ = ["search_problem"]


def search_problem(
    query: object, group: object, limit: object, cursor: object, token_bytes: int
) -> str | None:
    """What is wrong with a search request's parameters, or ``None``."""
    for label, value in (("query", query), ("group", group)):
        if not isinstance(value, str):
            return f"{label} must be a string"
        if has_surrogate(value):
            return f"{label} must be valid UTF-8"
        if len(value) > QUERY_BYTES or utf8_size(value) > QUERY_BYTES:
            return f"{label} must be at most {QUERY_BYTES} UTF-8 bytes"
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX_LIMIT
    ):
        return f"limit must be an integer from 1 to {SEARCH_MAX_LIMIT}"
    if cursor is not None and (not isinstance(cursor, str) or len(cursor) > token_bytes):
        return "malformed cursor: start the search again without a cursor"
    return None
