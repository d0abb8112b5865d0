"""Building search indexes in a child process, beside the registry's build.

Both indexes are computed from the operations' texts alone, in Python (and numpy)
holding the GIL: a thread cannot build them while the registry checks schemas, a child
process can. A registry of at least ``WORKER_MIN`` operations starts one child for its
rule index (``RuleBuild``) as soon as it has read the operations, before it walks their
schemas, and, under ``Ranking.RELEVANCE`` or a ``Hybrid``, another for the relevance
index (``RelevanceBuild``) once the walk is done (the two would otherwise share the
CPU the schema walk needs).

Each child runs this file with the same interpreter (``sys.executable -I -S -B``: no
environment, working directory or user site, no bytecode written), reads the texts in
name order and the folders the parent's numpy and pystemmer were imported from, which
it appends to its standard library path. It imports the index modules from the
parent's own ``opgate`` folder (the one this file is in) without running the package's
``__init__`` (that would import the whole library), builds the index exactly as the
parent would, and answers it: the rule index as a pickle the parent reads back
allowing only the index's own classes, ``array`` and ``memoryview`` (and without the
entries, which the parent has), the relevance index's tables (``RelevanceIndex.tables``)
in ``marshal`` form, arrays as their bytes.

An answer is taken only when the child reports the same interpreter version (and Unicode
database), the same module files and the same settings (every constant of the index
modules, which a host or a test may have changed in the parent), and, for the rule
index, when the texts the registry snapshotted are the ones the child read; that guards
against a mismatch, not a hostile child, which is why the child searches only those
folders. A child that cannot start, fails or answers anything else gives no answer, and
so does one that has not answered when the registry is ready for it and a grace about as
long as the build in process has passed (it is killed): the registry then builds the
index itself. Nothing but the time taken depends on whether a child ran.

Requests and answers go through temporary files, not pipes: the parent holds the GIL
while it builds, so a thread serving pipes would move megabytes a switch interval at a
time.

This module imports nothing outside the standard library at import time: the child
runs it as a script before it has a ``sys.path`` to find anything else on.
"""

from __future__ import annotations

import io
import marshal
import mmap
import os
import pickle
import subprocess
import sys
import tempfile
import types
import weakref
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ._index import IndexEntry, SearchIndex
    from ._relevance import RelevanceIndex

__all__ = ["WORKER_MIN", "RelevanceBuild", "RuleBuild", "start_relevance", "start_rule"]

#: Smaller catalogs are indexed in process: below this the child's start (about 0.1 s)
#: is not hidden behind the registry's own work.
WORKER_MIN = 8000

#: Once the registry is ready for an index, how long it waits for a child still working
#: before it kills it and builds the index itself: about what the build in process
#: takes, at least ``GRACE`` seconds.
GRACE = 0.25
GRACE_PER_ENTRY = 0.00004

#: The modules whose constants each build reads: the child's must equal the parent's.
_MODULES = {
    "rule": (
        "opgate._search._index",
        "opgate._search._name_index",
        "opgate._search._text_index",
        "opgate._search._group_index",
        "opgate._search._postings",
        "opgate._search._bitsets",
    ),
    "relevance": ("opgate._search._relevance", "opgate._search._tokens"),
}

#: The third-party modules each build imports, from the parent's folders.
_LIBRARIES = {"rule": (), "relevance": ("numpy", "Stemmer")}

#: What a rule index's pickle may name: its own classes, arrays and views of them.
_PICKLED = {
    ("opgate._search._index", "SearchIndex"),
    ("opgate._search._name_index", "NameIndex"),
    ("opgate._search._text_index", "TextIndex"),
    ("opgate._search._group_index", "GroupIndex"),
    ("opgate._search._postings", "GramIndex"),
    ("opgate._search._postings", "Postings"),
    ("array", "array"),
    ("array", "_array_reconstructor"),
    ("builtins", "memoryview"),
}

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


def _settings(kind: str) -> list[object]:
    """Every constant (an upper-case module global) of the modules the build reads."""
    found: list[object] = []
    for name in _MODULES[kind]:
        module = sys.modules[name]
        for key, value in sorted(vars(module).items()):
            if key.lstrip("_").isupper():
                found.append([name, key, _plain(value)])
    return found


def _files(kind: str) -> list[str]:
    """The files of the modules the build runs: the child's must be the parent's."""
    names = (*_MODULES[kind], *_LIBRARIES[kind])
    return [os.path.realpath(getattr(sys.modules[name], "__file__", None) or "") for name in names]


def _folders(kind: str) -> list[str]:
    """The ``sys.path`` folders the parent's third-party modules were imported from."""
    found: list[str] = []
    for name in _LIBRARIES[kind]:
        path = os.path.realpath(getattr(sys.modules[name], "__file__", None) or "")
        folder = os.path.dirname(path)
        if os.path.basename(path).startswith("__init__."):  # a package: its parent
            folder = os.path.dirname(folder)
        if folder not in found:
            found.append(folder)
    return found


def _interpreter() -> list[str]:
    """The Python version and its Unicode database's: ``casefold`` and the index's
    character classes follow them, so the child's must be the parent's."""
    import unicodedata

    return [sys.version, unicodedata.unidata_version]


def _texts(entries: Sequence[IndexEntry]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(e.name, e.group, e.summary, e.documents) for e in entries]


def _plain_texts(entries: Sequence[IndexEntry]) -> bool:
    """Whether every text of ``entries`` is a ``str`` itself, whose ``==`` is its
    characters': a subclass's may say it equals the child's text without being it."""
    return {type(text) for e in entries for text in (e.name, e.group, e.summary, *e.documents)} <= {
        str
    }


def _stop(process: subprocess.Popen[bytes], answer: IO[bytes]) -> None:
    """Kill the child if it still runs, wait for it, close its answer file."""
    if process.poll() is None:
        process.kill()
    process.wait()
    answer.close()


class _ChildBuild:
    """One index of ``entries`` (in name order) built in a child process, begun at
    construction. The child is killed and waited for when its answer is read, or when
    this object is dropped unread (a registry whose build failed)."""

    __slots__ = ("__weakref__", "_answer", "_count", "_kind", "_process", "_stopped")

    def __init__(self, kind: str, entries: Sequence[IndexEntry]) -> None:
        self._kind = kind
        self._count = len(entries)
        request = {"kind": kind, "path": _folders(kind), "entries": _texts(entries)}
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

    def _answered(self) -> dict[str, Any] | None:
        """The child's answer, once it has exited (at most a grace from now), if it
        ran the parent's modules with the parent's settings; the child has exited and
        been waited for on return."""
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
                answer = marshal.loads(output)
            if not isinstance(answer, dict):
                return None
            kind = self._kind
            if (
                answer.get("files") != _files(kind)
                or answer.get("settings") != _settings(kind)
                or answer.get("interpreter") != _interpreter()
            ):
                return None
            return answer
        except (OSError, ValueError, EOFError, TypeError):  # no file, an empty one, garbage
            return None
        finally:
            self._stopped()


class RuleBuild(_ChildBuild):
    """The rule index (``SearchIndex``) of ``entries`` built in a child process."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Sequence[IndexEntry]) -> None:
        self._entries = list(entries)
        super().__init__("rule", self._entries)

    def result(self, entries: Sequence[IndexEntry]) -> SearchIndex | None:
        """The index of ``entries`` (what the registry snapshotted, in name order), or
        ``None`` if they are not the texts the child was given, or without a
        trustworthy answer in time (``_answered``)."""
        entries = list(entries)
        if not _plain_texts(entries) or entries != self._entries:
            self._stopped()
            return None
        answer = self._answered()
        if answer is None:
            return None
        from ._index import SearchIndex

        try:
            index = _RuleUnpickler(io.BytesIO(answer["index"])).load()
        except Exception:  # not a pickle of the allowed classes
            return None
        if type(index) is not SearchIndex or index._names != [e.name for e in entries]:
            return None
        index._entries = self._entries
        return index


class _RuleUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _PICKLED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a rule index")
        return super().find_class(module, name)


class RelevanceBuild(_ChildBuild):
    """The relevance index of ``entries`` built in a child process."""

    __slots__ = ()

    def __init__(self, entries: Sequence[IndexEntry]) -> None:
        super().__init__("relevance", entries)

    def result(self, rule: SearchIndex) -> RelevanceIndex | None:
        """The index beside ``rule``, or ``None`` without a trustworthy answer in time
        (``_answered``)."""
        answer = self._answered()
        if answer is None:
            return None
        import numpy as np

        from ._relevance import TABLES, RelevanceIndex

        try:
            tables: dict[str, object] = dict(answer["values"])
            for slot, (dtype, shape, data) in answer["arrays"].items():
                tables[slot] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
            if set(tables) != {*TABLES, "_stems"}:
                return None
            return RelevanceIndex.from_tables(tables, rule)
        except Exception:  # not the answer's shape
            return None


Build = TypeVar("Build", bound=_ChildBuild)


def _start(
    build: Callable[[Sequence[IndexEntry]], Build], entries: Sequence[IndexEntry]
) -> Build | None:
    """``build(entries)``, begun, or ``None`` when a child would not pay: fewer than
    ``WORKER_MIN`` entries, or no CPU or interpreter to run it beside the registry's
    build, or none could start."""
    from .._spawn import can_spawn  # here: the child runs this file as a script

    if len(entries) < WORKER_MIN or not can_spawn():
        return None
    try:
        return build(entries)
    except (OSError, subprocess.SubprocessError, ValueError):  # no file, no child
        return None


def start_rule(entries: Sequence[IndexEntry]) -> RuleBuild | None:
    """A child's build of the rule index of ``entries`` (in name order), or ``None``
    when one would not pay (``_start``)."""
    return _start(RuleBuild, entries)


def start_relevance(entries: Sequence[IndexEntry]) -> RelevanceBuild | None:
    """A child's build of the relevance index of ``entries``, or ``None`` when one
    would not pay (``_start``)."""
    return _start(RelevanceBuild, entries)


def _reduce_view(view: memoryview) -> tuple[Any, tuple[Any, ...]]:
    """A rule index's views, pickled as views of their whole arrays."""
    if view.nbytes != memoryview(view.obj).nbytes:
        raise pickle.PicklingError("a rule index holds only views of whole arrays")
    return memoryview, (view.obj,)


def _rule_answer(entries: list[Any]) -> dict[str, object]:
    import copyreg

    from opgate._search._index import SearchIndex

    index = SearchIndex(entries)
    index._entries = []  # the parent has them
    found = io.BytesIO()
    pickler = pickle.Pickler(found, protocol=pickle.HIGHEST_PROTOCOL)
    table: dict[type, Any] = {**copyreg.dispatch_table, memoryview: _reduce_view}
    pickler.dispatch_table = table
    pickler.dump(index)
    return {"index": found.getvalue()}


def _relevance_answer(entries: list[Any]) -> dict[str, object]:
    import numpy as np

    from opgate._search._relevance import RelevanceEntry, RelevanceIndex

    tables = RelevanceIndex(list(map(RelevanceEntry, entries)), None).tables()  # type: ignore[arg-type]
    arrays = {}
    for slot, value in list(tables.items()):
        if isinstance(value, np.ndarray):
            arrays[slot] = (value.dtype.str, value.shape, value.tobytes())
            del tables[slot]
    return {"arrays": arrays, "values": tables}


def _build_request() -> None:
    """The child's side: read the texts, build the index, answer it."""
    request: dict[str, Any] = marshal.loads(sys.stdin.buffer.read())
    sys.path += request["path"]  # after the standard library: it is not shadowed
    folder = os.path.dirname(os.path.realpath(__file__))
    for name, path in (("opgate", os.path.dirname(folder)), ("opgate._search", folder)):
        package = types.ModuleType(name)  # the package without its __init__
        package.__path__ = [path]
        sys.modules[name] = package
    from opgate._search._index import IndexEntry

    kind = request["kind"]
    entries = [IndexEntry(*entry) for entry in request["entries"]]
    del request
    answer = _rule_answer(entries) if kind == "rule" else _relevance_answer(entries)
    answer.update(files=_files(kind), settings=_settings(kind), interpreter=_interpreter())
    sys.stdout.buffer.write(marshal.dumps(answer))


if __name__ == "__main__":
    _build_request()
