"""Pausing the cyclic garbage collector while a registry is built.

Building a registry allocates containers by the thousand that never form reference
cycles: reference counting frees every one of them. Each allocation still counts toward
the collector's thresholds, and the passes they trigger re-scan every young survivor,
finding nothing. The switch is process-wide, so it is used only there, once per
registry, never while a request is parsed or copied: a host's other threads would lose
their collector meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused_collector"]


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """Pause the cyclic collector for the block, restoring it after.

    The collector is re-enabled only if it was enabled on entry, so a host that
    disabled it keeps it disabled, and it is restored even when the block raises.
    The switch is process-wide: cycles other threads make meanwhile are collected by
    the next pass after the block. Two overlapping blocks in different threads leave
    it enabled once the last that found it enabled has ended.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
