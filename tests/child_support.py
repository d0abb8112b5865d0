"""A stand-in interpreter for the tests of builds that start a child process
(``_pattern_proof``, ``_search._index_build``)."""

from __future__ import annotations

import stat
from pathlib import Path


def fake_python(folder: Path, script: str) -> str:
    """An executable named like Python that runs ``script`` (sh) instead."""
    path = folder / "python3"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
