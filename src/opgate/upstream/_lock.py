"""The lock file: a digest of every accepted upstream tool, and the tools it withholds.

A tool whose definition changes after an operator accepted it is a known attack (a
"rug pull": a harmless description approved, an instructing or widened one served
later). ``Lock`` pins each accepted tool's definition by digest and withholds a tool
whose definition is not the accepted one until the operator accepts it.

The digest
----------
``digest(tool)`` is ``"sha256:"`` and the hex SHA-256 of the canonical JSON
(``opgate.json.canonical_bytes``) of the object of the tool's ``name``, ``title``,
``description``, ``inputSchema``, ``outputSchema`` and ``annotations`` as the upstream
listed them (members it left out stay out): everything the gateway shows the agent or
checks a call against. ``icons``, ``execution`` and ``_meta`` are not in it: the gateway
neither shows nor acts on them, and a server's ``_meta`` may change from one listing
to the next.

The file
--------
JSON, one entry per upstream and tool, sorted, two-space indented, ending in a newline::

    {
      "opgate-lock": 1,
      "upstreams": {
        "kit": {
          "add": "sha256:9f2c…",
          "echo": "sha256:41d0…"
        }
      }
    }

Tools are the upstream's own names (not the operation names, which depend on the
other tools). A missing file is an empty lock. A file that is not this shape (not
JSON, another ``"opgate-lock"`` version, a digest that is not ``sha256:`` and 64 hex
digits) is a ``LockError`` naming the file and what is wrong, and is never written
over. The file is written whole to a temporary file beside it, flushed to disk, then
renamed over it, so a reader (another gateway process starting) sees the old file or
the new one, never a part; concurrent writers do not mix, the last rename wins.

The decision
------------
``decide(pinned, digest)`` for one tool of one upstream, ``pinned`` being that
upstream's entries in the lock or ``None`` when the lock has no entry for the upstream:

* ``ACCEPTED``: the upstream is not in the lock (a first run, or an upstream added to
  the configuration since: adding it is the operator's act of trust, as the first run
  is), or the tool's digest is the one pinned;
* ``CHANGED``: the tool is pinned with another digest;
* ``NEW``: the upstream is in the lock and the tool is not. A new tool is withheld as a
  changed one is: an upstream could list a harmless set to be accepted and add the
  tool that instructs the agent later, which is the same attack.

An upstream in the lock with no tools (it listed none) is pinned: its later tools are
new. Entries of tools no longer listed, and of upstreams that did not connect or are no
longer configured, are kept (an upstream down at one start must not lose its pins); the
file may be edited by hand to drop them.

``Lock``
--------
``Lock(path, *, accept=(), accept_all=False, write=True)`` reads ``path`` at once (a
missing file whose directory does not exist is a ``LockError`` then, not after the
upstreams have started). A ``Catalog`` built with it asks ``lock.listed(upstream)`` for
each upstream that listed its tools and ``lock.check(upstream, tool)`` for each tool it
would offer: ``None`` to offer it, or the ``Issue`` to report it under in ``skipped``
(kind ``"changed since accepted"`` or ``"not accepted"``). ``accept`` (pairs of upstream
and tool names) and ``accept_all`` accept the named or all tools as listed now, new or
changed. ``lock.save()`` then writes what the build accepted (first-use upstreams,
accepted tools) when it changed anything, and the lock goes on deciding against what it
wrote: a later build (the catalog rebuilt when an upstream's tools change) withholds a
tool changed since. ``accept`` and ``accept_all`` apply to the first build only, so a
change that arrives later is never accepted unseen. An ``accept`` naming a tool no
upstream offered in that build is a ``LockError`` and nothing is written. With
``write=False`` (a dry run) the lock decides the same and writes nothing.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

import mcp.types as types

from opgate.json import JSONError, JSONValue, canonical_bytes, parse

from ._report import Issue, bounded
from ._results import json_value

__all__ = [
    "LOCK_VERSION",
    "Lock",
    "LockError",
    "Verdict",
    "decide",
    "definition",
    "digest",
    "read_lock",
    "write_lock",
]

#: The ``"opgate-lock"`` version this opgate reads and writes.
LOCK_VERSION: Final = 1

#: The tool members the digest covers (the SDK's aliases, as listed on the wire).
DIGESTED: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

#: upstream name → (tool name → digest).
Pins = Mapping[str, Mapping[str, str]]


class LockError(Exception):
    """A lock file that cannot be read or written, or an acceptance that matched nothing;
    the message names the file and says what is wrong."""


class Verdict(enum.Enum):
    """What the lock says of one listed tool (see the module docstring)."""

    ACCEPTED = "accepted"
    NEW = "new"
    CHANGED = "changed"


def definition(tool: types.Tool) -> JSONValue:
    """What ``digest`` covers of ``tool``: the ``DIGESTED`` members it has, as JSON (for
    an operator to review before accepting); raises ``JSONError`` for a definition that
    is not JSON opgate can carry."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json_value({key: dumped[key] for key in DIGESTED if key in dumped})


def digest(tool: types.Tool) -> str:
    """``"sha256:"`` and the hex SHA-256 of the canonical JSON of ``definition(tool)``;
    raises ``JSONError`` for a definition that is not JSON opgate can carry."""
    return "sha256:" + hashlib.sha256(canonical_bytes(definition(tool))).hexdigest()


def decide(pinned: Mapping[str, str] | None, tool: str, tool_digest: str) -> Verdict:
    """The verdict on ``tool`` listed with ``tool_digest`` by an upstream whose lock
    entries are ``pinned`` (``None``: the upstream is not in the lock)."""
    if pinned is None:
        return Verdict.ACCEPTED
    accepted = pinned.get(tool)
    if accepted is None:
        return Verdict.NEW
    return Verdict.ACCEPTED if accepted == tool_digest else Verdict.CHANGED


def read_lock(path: Path) -> Pins:
    """The pins of the lock file at ``path`` (empty when there is none); raises
    ``LockError`` for a file that cannot be read or is not a lock file of this version."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return MappingProxyType({})
    except OSError as exc:
        raise LockError(f"{path}: cannot read the lock file: {exc.strerror or exc}") from None
    try:
        value = parse(data)
    except JSONError as exc:
        raise LockError(f"{path}: not a lock file (not JSON: {exc}); fix or remove it") from None
    if not isinstance(value, dict) or "opgate-lock" not in value:
        raise LockError(f'{path}: not a lock file (no "opgate-lock" member); fix or remove it')
    version = value["opgate-lock"]
    if version != LOCK_VERSION or isinstance(version, bool):
        raise LockError(
            f"{path}: lock file version {bounded(str(version), 40)!r}; this opgate reads "
            f"version {LOCK_VERSION} (a newer opgate wrote it, or it was edited)"
        )
    extra = sorted(set(value) - {"opgate-lock", "upstreams"})
    if extra:
        raise LockError(f"{path}: not a lock file: unknown member {bounded(extra[0], 80)!r}")
    upstreams = value.get("upstreams", {})
    if not isinstance(upstreams, dict):
        raise LockError(f'{path}: not a lock file: "upstreams" is not an object')
    pins: dict[str, Mapping[str, str]] = {}
    for upstream, tools in upstreams.items():
        if not isinstance(tools, dict):
            raise LockError(
                f"{path}: not a lock file: upstream {bounded(upstream, 80)!r} is not an object"
            )
        entries: dict[str, str] = {}
        for tool, pinned in tools.items():
            if not isinstance(pinned, str) or not _DIGEST.fullmatch(pinned):
                raise LockError(
                    f"{path}: not a lock file: {bounded(upstream, 80)}/{bounded(tool, 80)} "
                    'is not a digest ("sha256:" and 64 hex digits)'
                )
            entries[tool] = pinned
        pins[upstream] = MappingProxyType(entries)
    return MappingProxyType(pins)


def lock_bytes(pins: Pins) -> bytes:
    """The file's text for ``pins``: sorted, two-space indented, a final newline."""
    import json

    document = {
        "opgate-lock": LOCK_VERSION,
        "upstreams": {upstream: dict(tools) for upstream, tools in pins.items()},
    }
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode("utf-8", "surrogatepass")


def write_lock(path: Path, pins: Pins) -> None:
    """Write ``pins`` to ``path`` atomically (a temporary file beside it, flushed, then
    renamed over it); raises ``LockError`` when it cannot, leaving ``path`` as it was."""
    directory = path.parent
    try:
        descriptor, temporary = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        raise LockError(f"{path}: cannot write the lock file: {exc.strerror or exc}") from None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(lock_bytes(pins))
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        _remove(temporary)
        raise LockError(f"{path}: cannot write the lock file: {exc.strerror or exc}") from None
    except BaseException:
        _remove(temporary)
        raise
    _sync_directory(directory)


def _remove(temporary: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(temporary)


def _sync_directory(directory: Path) -> None:
    """Flush the rename to disk where the platform allows opening a directory."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


class Lock:
    """The lock file at ``path`` and the decisions of the catalog builds that use it
    (see the module docstring).

    * ``path``: the file;
    * ``pins``: what the lock holds now (read, or last written);
    * ``created``: whether there is no file yet (a first run, or a dry run of one);
    * ``write``: whether ``save()`` writes (``False``: a dry run);
    * ``recorded``: the ``(upstream, tool, verdict)`` of every tool the last ``save()``
      accepted or recorded anew: first use (``ACCEPTED``) or an acceptance of a
      ``NEW`` or ``CHANGED`` tool;
    * ``withheld``: the ``(upstream, tool, verdict)`` of every tool the last build
      withheld (``NEW`` or ``CHANGED``), with the upstream's own tool names (a report's
      ``Issue.tool`` is bounded for printing);
    * ``withheld_names``: for each of those the build gave an operation name
      (``check(..., offered_as=)``), that name mapped to its ``(upstream, tool,
      verdict)``: what a ``--pin`` of the name would have pinned.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        accept: Iterable[tuple[str, str]] = (),
        accept_all: bool = False,
        write: bool = True,
    ) -> None:
        self.path = Path(path)
        self.pins: Pins = read_lock(self.path)
        self.created = not self.path.exists()
        if write and self.created and not self.path.parent.is_dir():
            # said now, not after every upstream has started and the write fails
            raise LockError(
                f"{self.path}: cannot write the lock file: {self.path.parent} is not a directory"
            )
        accepted = frozenset(accept)
        for pair in accepted:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(map(_is_str, pair))):
                raise TypeError("accept holds (upstream, tool) pairs of names")
        self._accept = accepted
        self._accept_all = bool(accept_all)
        self.write = bool(write)
        self.recorded: tuple[tuple[str, str, Verdict], ...] = ()
        self.withheld: tuple[tuple[str, str, Verdict], ...] = ()
        self.withheld_names: Mapping[str, tuple[str, str, Verdict]] = MappingProxyType({})
        self._withheld: list[tuple[str, str, Verdict]] = []
        self._withheld_names: dict[str, tuple[str, str, Verdict]] = {}
        self._pending: dict[str, dict[str, str]] | None = None
        self._offered: set[tuple[str, str]] = set()
        self._changes: list[tuple[str, str, Verdict]] = []

    def __repr__(self) -> str:
        tools = sum(len(tools) for tools in self.pins.values())
        return f"Lock({str(self.path)!r}, {len(self.pins)} upstreams, {tools} tools)"

    def listed(self, upstream: str) -> None:
        """Record that ``upstream`` connected and listed its tools in this build: an
        upstream not in the lock is pinned from now on, with no tools if it offered
        none (so tools it lists later are new)."""
        pending = self._start()
        if upstream not in self.pins:
            pending.setdefault(upstream, {})

    def check(
        self, upstream: str, tool: types.Tool, *, offered_as: str | None = None
    ) -> Issue | None:
        """``None`` to offer ``tool`` of ``upstream``, else the ``Issue`` it is withheld
        under; records what the build accepted, for ``save()``, and what it withheld,
        under the operation name ``offered_as`` when given."""
        pending = self._start()
        name = tool.name
        shown = bounded(name, 128)
        try:
            tool_digest = digest(tool)
        except (JSONError, ValueError, TypeError):
            return Issue(
                upstream, shown, "definition", "the definition is not JSON opgate can carry"
            )
        self._offered.add((upstream, name))
        pinned = self.pins.get(upstream)
        verdict = decide(pinned, name, tool_digest)
        if verdict is Verdict.ACCEPTED:
            if pinned is None:
                pending.setdefault(upstream, {})[name] = tool_digest
                self._changes.append((upstream, name, verdict))
            return None
        if self._accept_all or (upstream, name) in self._accept:
            pending.setdefault(upstream, {})[name] = tool_digest
            self._changes.append((upstream, name, verdict))
            return None
        self._withheld.append((upstream, name, verdict))
        if offered_as is not None:
            self._withheld_names[offered_as] = (upstream, name, verdict)
        if verdict is Verdict.CHANGED:
            return Issue(
                upstream,
                shown,
                "changed since accepted",
                f"withheld: its definition changed since it was accepted into {self.path.name}; "
                "it is offered again once the change is accepted",
            )
        return Issue(
            upstream,
            shown,
            "not accepted",
            f"withheld: a tool the upstream did not list when it was accepted into "
            f"{self.path.name} (a new tool can rug-pull as a changed one can); it is "
            "offered once accepted",
        )

    def save(self) -> None:
        """Write what the build since the last ``save()`` accepted, if it changed the
        lock (nothing with ``write=False``), and decide later builds against it; raises
        ``LockError`` when an ``accept`` named no offered tool or the file cannot be
        written (then nothing changes)."""
        pending = self._start()
        try:
            unmatched = sorted(self._accept - self._offered)
            if unmatched:
                upstream, tool = unmatched[0]
                more = f" (and {len(unmatched) - 1} more)" if len(unmatched) > 1 else ""
                raise LockError(
                    f"{self.path}: cannot accept {bounded(upstream, 80)}.{bounded(tool, 80)}"
                    f"{more}: no connected upstream offers that tool (the names are the "
                    "upstream's and its own tool's, as the report shows them); nothing was "
                    "written"
                )
            pins: Pins = MappingProxyType(
                {upstream: MappingProxyType(dict(tools)) for upstream, tools in pending.items()}
            )
            if self.write and (self.created or _plain(pins) != _plain(self.pins)):
                write_lock(self.path, pins)
                self.created = False
            self.pins = pins
            self.recorded = tuple(self._changes)
            self.withheld = tuple(self._withheld)
            self.withheld_names = MappingProxyType(dict(self._withheld_names))
            self._accept = frozenset()
            self._accept_all = False
        finally:
            self._pending = None
            self._offered = set()
            self._changes = []
            self._withheld = []
            self._withheld_names = {}

    def _start(self) -> dict[str, dict[str, str]]:
        if self._pending is None:
            self._pending = {upstream: dict(tools) for upstream, tools in self.pins.items()}
        return self._pending


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _plain(pins: Pins) -> dict[str, dict[str, str]]:
    return {upstream: dict(tools) for upstream, tools in pins.items()}
