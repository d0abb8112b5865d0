"""Giving the memory a registry build freed back to the operating system.

A registry build at catalog scale allocates and frees far more than it keeps: schema
walks, index construction, the relevance index's postings. glibc's allocator keeps
what was freed for reuse and returns little of it by itself: it trims only the top of
its heap, above a threshold it raises after each large block it frees, and never the
free pages below a live block. The process then stays resident at its build's peak.
``trim_heap`` asks the allocator for those pages back (``malloc_trim(0)``) once a build
has ended. Only free pages are returned: nothing live moves, and a later allocation
takes fresh pages as it would have. Where the C library has no ``malloc_trim`` (musl,
macOS, Windows) it does nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["trim_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes

        found: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):  # no such symbol, or no such library
        return None
    return found


def trim_heap() -> bool:
    """Return the C allocator's free pages to the operating system; whether the C
    library could be asked (glibc). Safe from any thread: the allocator locks each of
    its arenas in turn."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
