"""Whether a build may run work in a child process beside it.

A child pays only where it runs at the same time as the build: on another CPU, started
by an interpreter that is Python itself (``sys.executable``), not an embedding program
or a frozen application that would start itself again. ``_pattern_proof`` and
``_search._index_build`` start their children only when ``can_spawn()``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CPU_MAX", "can_spawn", "cpus"]

#: The cgroup v2 CPU quota of this process's group (``max`` or ``QUOTA PERIOD``).
CPU_MAX = "/sys/fs/cgroup/cpu.max"


def cpus() -> int:
    """The CPUs this process may run on: those it is allowed, fewer when its cgroup's
    quota is less (a container run with ``--cpus=1`` on a larger machine)."""
    try:
        found = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        found = os.cpu_count() or 1
    try:
        with open(CPU_MAX, encoding="ascii") as limit:
            quota, period = limit.read().split()[:2]
        if quota != "max":
            found = min(found, max(1, int(quota) // int(period)))
    except (OSError, ValueError):  # no cgroup v2 file here, or one not understood
        pass
    return found


def can_spawn() -> bool:
    """Whether a child would run beside the build: another CPU to run on, and an
    interpreter that is Python (not an embedding program or a frozen application)."""
    executable = os.path.basename(sys.executable or "").lower()
    return cpus() > 1 and executable.startswith("python") and not getattr(sys, "frozen", False)
