"""Regular expressions proven to compile, remembered from one build to the next.

A ``Registry`` build proves every ``pattern`` of its schemas valid by compiling it with
the regex engine, and at a real catalog's scale that is one of its largest costs; the
validators compiled later, on first use, compile them again. This module keeps the
texts of the patterns a build proved in one file per engine (the opgate version, the
jsonschema-rs binary and the regex options), so that the next build of the same
catalog, in another process, starts knowing them.

What it remembers can only ever say "this pattern compiled": a pattern read from the
file skips the build's proof, never a profile rule or the meta-schema. A file someone
else could have written is not read (it must be a regular file owned by this user and
writable by no one else), nor one that names another engine inside (renamed from that
engine's file name), and a pattern that would not compile after all still fails where
its validator is compiled, on first use.

``$OPGATE_CACHE_DIR`` names the directory; empty turns the memory off. Unset, it is
``$XDG_CACHE_HOME/opgate`` (an absolute one), else ``~/.cache/opgate``. Every failure to
read or write is silent: the build then proves every pattern, as it would without the
file. A build that reads a file marks it used (its modification time, at most once in
``MARK_SECONDS``); one that writes removes this user's regular files of the directory
with the names this module writes (engines' files, crashed writes' temporary files) that
no build has used for ``STALE_SECONDS``, those of engines gone with an upgrade among
them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Collection, Set
from pathlib import Path

from ._version import __version__

__all__ = [
    "CACHE_ENV",
    "MAX_FILE_BYTES",
    "STALE_SECONDS",
    "cache_directory",
    "load_proven",
    "remember_proven",
]

#: The environment variable naming the directory (empty: remember nothing).
CACHE_ENV = "OPGATE_CACHE_DIR"

#: A file is read only up to this size, and written with only the last build's patterns
#: when the union would outgrow it.
MAX_FILE_BYTES = 4 * 1024 * 1024

#: A file no build has read or written for this long is removed by the next write.
STALE_SECONDS = 30 * 24 * 3600

#: A read marks its file used when it was last marked longer ago than this.
MARK_SECONDS = 24 * 3600

_FORMAT = 1

#: The names this module writes: engines' files and their temporary files (``mkstemp``'s
#: eight random characters after the prefix; nothing else in a shared directory).
_OWN_NAMES = re.compile(r"patterns-[0-9a-f]{32}\.json|\.patterns-[a-z0-9_]{8}")


def cache_directory() -> Path | None:
    """The directory the memory lives in, or ``None`` when it is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME")
    if base and os.path.isabs(base):  # a relative one is ignored, as the XDG spec says
        return Path(base) / "opgate"
    try:
        return Path.home() / ".cache" / "opgate"
    except RuntimeError:  # no home directory to resolve
        return None


def load_proven(backtrack_limit: int | None) -> frozenset[str]:
    """The patterns an earlier build proved with this engine (empty when none or off)."""
    directory = cache_directory()
    if directory is None:
        return frozenset()
    engine = _engine_key(backtrack_limit)
    try:
        data = _read_own_file(_file(directory, engine))
    except OSError:
        return frozenset()
    if data is None:
        return frozenset()
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return frozenset()
    # The engine is named inside too: a file renamed from another engine's name is not
    # read (the backtracking engine compiles lookarounds the linear one refuses).
    if (
        not isinstance(document, dict)
        or document.get("format") != _FORMAT
        or document.get("engine") != engine
    ):
        return frozenset()
    patterns = document.get("patterns")
    if not isinstance(patterns, list) or not all(type(p) is str for p in patterns):
        return frozenset()
    return frozenset(patterns)


def remember_proven(backtrack_limit: int | None, loaded: Set[str], proven: Collection[str]) -> None:
    """Write the patterns a build knows to compile: ``loaded`` (what it started from)
    and ``proven`` (what it proved itself).

    Nothing is written when the build proved nothing new. The union is kept unless it
    would outgrow ``MAX_FILE_BYTES``; then only what the build proved itself is, and
    nothing when even that would.
    """
    if not proven:
        return
    directory = cache_directory()
    if directory is None:
        return
    engine = _engine_key(backtrack_limit)
    path = _file(directory, engine)
    for patterns in (sorted({*loaded, *proven}), sorted(proven)):
        # ASCII escapes keep any string, lone surrogates too, readable by json.loads.
        document = {"format": _FORMAT, "engine": engine, "patterns": patterns}
        data = json.dumps(document).encode("ascii")
        if len(data) <= MAX_FILE_BYTES:
            with contextlib.suppress(OSError):
                _replace(path, data)
            with contextlib.suppress(OSError):
                _prune(directory, keep=path)
            return


def _prune(directory: Path, keep: Path) -> None:
    """Remove this user's regular files of ``directory`` with names this module writes
    that have not been used for ``STALE_SECONDS`` (never ``keep``, never a link).

    Where the platform can, each name is checked and removed relative to one open
    descriptor of the directory: a directory swapped for a link meanwhile then cannot
    turn a name checked here into a file removed elsewhere.
    """
    oldest = time.time() - STALE_SECONDS
    getuid = getattr(os, "getuid", None)
    relative = os.listdir in os.supports_fd and {os.stat, os.unlink} <= os.supports_dir_fd
    with contextlib.ExitStack() as stack:
        where: int | None = None
        if relative:
            where = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            stack.callback(os.close, where)
        for name in os.listdir(directory if where is None else where):
            if name == keep.name or not _OWN_NAMES.fullmatch(name):
                continue
            target = name if where is not None else os.path.join(directory, name)
            with contextlib.suppress(OSError):
                status = os.stat(target, dir_fd=where, follow_symlinks=False)
                if (
                    stat.S_ISREG(status.st_mode)
                    and (getuid is None or status.st_uid == getuid())
                    and status.st_mtime < oldest
                ):
                    os.unlink(target, dir_fd=where)


def _file(directory: Path, engine: str) -> Path:
    return directory / f"patterns-{engine}.json"


def _engine_key(backtrack_limit: int | None) -> str:
    """Which engine proved the patterns: opgate, the jsonschema-rs binary, the options."""
    import jsonschema_rs

    binary = Path(jsonschema_rs.__file__).parent
    identity = [__version__, repr(backtrack_limit)]
    with contextlib.suppress(OSError):
        for entry in sorted(binary.glob("*.so")) + sorted(binary.glob("*.pyd")):
            status = entry.stat()
            identity.append(f"{entry}:{status.st_size}:{status.st_mtime_ns}")
    return hashlib.sha256("\n".join(identity).encode()).hexdigest()[:32]


def _read_own_file(path: Path) -> bytes | None:
    """The file's bytes if this user owns it, no one else may write it, and it is small.

    Opened without blocking: a FIFO left in its place would otherwise wait for a writer
    (the descriptor is then refused as not a regular file).
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(path, flags)
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
            return None
        getuid = getattr(os, "getuid", None)
        if getuid is not None and (
            status.st_uid != getuid() or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return None
        data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return None
        # Used: not stale (``_prune``). By path where the descriptor cannot be (Windows).
        # Only once a day: a file in an image's layer is then not copied up at every start.
        if status.st_mtime < time.time() - MARK_SECONDS:
            with contextlib.suppress(OSError):
                os.utime(file.fileno() if os.utime in os.supports_fd else path)
        return data


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a private temporary file, then a rename)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".patterns-")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
