"""Building the relevance index in a child process, beside the rule index.

The relevance index is computed from the operations' texts alone, in Python and numpy
holding the GIL: a thread cannot build it while the registry builds the rule index
and the revision, a child process can. ``RelevanceBuild`` runs this file with the same
interpreter (``sys.executable -I -S -B``: no environment, working directory or user
site, no bytecode written) and hands it the texts in name order and the folders the
parent's numpy and pystemmer were imported from, which the child appends to its
standard library path. The child imports ``_relevance`` from the parent's own
``opgate`` folder (the one this file is in) without running the package's
``__init__`` (that would import the whole library), builds ``RelevanceIndex`` exactly
as the parent would, and answers its tables (``RelevanceIndex.tables``) in ``marshal``
form: arrays as their bytes, the rest as they are.

The answer is taken only when the child reports the same modules (the same files) and
the same settings (every constant of ``_relevance`` and ``_tokens``, which a host or a
test may have changed in the parent); that guards against a mismatch, not a hostile
child, which is why the child searches only those folders. A child that cannot start,
fails or answers anything else gives no answer, and so does one that has not answered
when the registry is ready for it and a grace about as long as the build in process
has passed (it is killed): the registry then builds the index itself. Nothing but the
time taken depends on whether the child ran.

The request and the answer go through unnamed temporary files, not pipes: the parent
holds the GIL while it builds, so a thread serving pipes would move megabytes a
switch interval at a time.

This module imports nothing outside the standard library at import time: the child
runs it as a script before it has a ``sys.path`` to find anything else on.
"""

from __future__ import annotations

import marshal
import mmap
import os
import subprocess
import sys
import tempfile
import types
import weakref
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._index import IndexEntry, SearchIndex
    from ._relevance import RelevanceIndex

__all__ = ["WORKER_MIN", "RelevanceBuild", "start_build"]

#: Smaller catalogs are indexed in process: below this the child's start (about 0.1 s)
#: is not hidden behind the rule index.
WORKER_MIN = 8000

#: Once the registry is ready for the index, how long it waits for a child still
#: working before it kills it and builds the index itself: about what the build in
#: process takes, at least ``GRACE`` seconds.
GRACE = 0.25
GRACE_PER_ENTRY = 0.000025

#: The modules whose constants the build reads: the child's must equal the parent's.
_MODULES = ("opgate._search._relevance", "opgate._search._tokens")

#: The interpreter's flags for the child: isolated, no ``site``, no bytecode written.
_FLAGS = ("-I", "-S", "-B")


def _plain(value: object) -> object:
    """``value`` as ``marshal`` carries it, comparable across processes (sets sorted,
    arrays as lists), or ``None`` for what the build cannot read as a setting."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return value
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted(map(repr, value))
    if isinstance(value, dict):
        return sorted((repr(key), _plain(item)) for key, item in value.items())
    pattern = getattr(value, "pattern", None)
    if isinstance(pattern, str):  # a compiled regular expression
        return pattern
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # a numpy array
        return _plain(tolist())
    return None


def _settings() -> list[object]:
    """Every constant (an upper-case module global) of the modules the build reads."""
    found: list[object] = []
    for name in _MODULES:
        module = sys.modules[name]
        for key, value in sorted(vars(module).items()):
            if key.lstrip("_").isupper():
                found.append([name, key, _plain(value)])
    return found


def _files() -> list[str]:
    """The files of the modules the build runs: the child's must be the parent's."""
    names = (*_MODULES, "numpy", "Stemmer")
    return [os.path.realpath(getattr(sys.modules[name], "__file__", None) or "") for name in names]


def _folders() -> list[str]:
    """The ``sys.path`` folders the parent's numpy and pystemmer were imported from."""
    found: list[str] = []
    for name in ("numpy", "Stemmer"):
        path = os.path.realpath(getattr(sys.modules[name], "__file__", None) or "")
        folder = os.path.dirname(path)
        if os.path.basename(path).startswith("__init__."):  # a package: its parent
            folder = os.path.dirname(folder)
        if folder not in found:
            found.append(folder)
    return found


def _stop(process: subprocess.Popen[bytes], answer: IO[bytes]) -> None:
    """Kill the child if it still runs, wait for it, close its answer file."""
    if process.poll() is None:
        process.kill()
    process.wait()
    answer.close()


class RelevanceBuild:
    """The relevance index of ``entries`` (in name order) built in a child process,
    begun at construction. The child is killed and waited for when ``result`` returns,
    or when this object is dropped unread (a registry whose build failed)."""

    __slots__ = ("__weakref__", "_answer", "_count", "_process", "_stopped")

    def __init__(self, entries: Sequence[IndexEntry]) -> None:
        self._count = len(entries)
        request = {
            "path": _folders(),
            "entries": [(e.name, e.group, e.summary, e.documents) for e in entries],
        }
        with tempfile.TemporaryFile() as asked:
            asked.write(marshal.dumps(request))
            asked.seek(0)
            self._answer = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop
            try:
                self._process = subprocess.Popen(
                    [sys.executable, *_FLAGS, os.path.abspath(__file__)],
                    stdin=asked,
                    stdout=self._answer,
                    stderr=subprocess.DEVNULL,
                )
            except BaseException:
                self._answer.close()
                raise
        self._stopped = weakref.finalize(self, _stop, self._process, self._answer)

    def result(self, rule: SearchIndex) -> RelevanceIndex | None:
        """The index beside ``rule``, or ``None`` without a trustworthy answer in time.

        Waits for the child at most about as long as the build in process would take
        (``GRACE``, ``GRACE_PER_ENTRY``), then kills it and answers ``None``. Either way
        the child has exited and been waited for on return."""
        try:
            self._process.wait(max(GRACE, GRACE_PER_ENTRY * self._count))
        except subprocess.TimeoutExpired:
            self._stopped()
            return None
        try:
            if self._process.returncode != 0:
                return None
            # mapped, not read: the answer's bytes are not copied on the heap first
            with mmap.mmap(self._answer.fileno(), 0, access=mmap.ACCESS_READ) as output:
                return _index(output, rule)
        except (OSError, ValueError):  # no such file, or an empty one
            return None
        finally:
            self._stopped()


def _index(output: mmap.mmap, rule: SearchIndex) -> RelevanceIndex | None:
    """The index the child's ``output`` describes, if it ran the parent's modules with
    the parent's settings and answered every table."""
    import numpy as np

    from ._relevance import TABLES, RelevanceIndex

    try:
        answer = marshal.loads(output)
        if answer["files"] != _files() or answer["settings"] != _settings():
            return None
        tables: dict[str, object] = dict(answer["values"])
        for slot, (dtype, shape, data) in answer["arrays"].items():
            tables[slot] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
        if set(tables) != {*TABLES, "_stems"}:
            return None
        return RelevanceIndex.from_tables(tables, rule)
    except Exception:  # not marshal, or not the answer's shape
        return None


def start_build(entries: Sequence[IndexEntry]) -> RelevanceBuild | None:
    """A child's build of the relevance index of ``entries``, or ``None`` when one
    would not pay: fewer than ``WORKER_MIN`` of them, or no CPU or interpreter to run
    it beside the registry's build."""
    from .._spawn import can_spawn  # here: the child runs this file as a script

    if len(entries) < WORKER_MIN or not can_spawn():
        return None
    try:
        return RelevanceBuild(entries)
    except (OSError, subprocess.SubprocessError, ValueError):  # no file, no child
        return None


def _build_request() -> None:
    """The child's side: read the texts, build the index, answer its tables."""
    request: dict[str, Any] = marshal.loads(sys.stdin.buffer.read())
    sys.path += request["path"]  # after the standard library: it is not shadowed
    folder = os.path.dirname(os.path.realpath(__file__))
    for name, path in (("opgate", os.path.dirname(folder)), ("opgate._search", folder)):
        package = types.ModuleType(name)  # the package without its __init__
        package.__path__ = [path]
        sys.modules[name] = package
    import numpy as np

    from opgate._search._index import IndexEntry
    from opgate._search._relevance import RelevanceEntry, RelevanceIndex

    entries = [RelevanceEntry(IndexEntry(*entry)) for entry in request["entries"]]
    del request
    tables = RelevanceIndex(entries, None).tables()  # type: ignore[arg-type]
    arrays = {}
    for slot, value in list(tables.items()):
        if isinstance(value, np.ndarray):
            arrays[slot] = (value.dtype.str, value.shape, value.tobytes())
            del tables[slot]
    answer = {"files": _files(), "settings": _settings(), "arrays": arrays, "values": tables}
    sys.stdout.buffer.write(marshal.dumps(answer))


if __name__ == "__main__":
    _build_request()
