"""Proving that a build's new patterns compile, in a child process beside the build.

Construction refuses a schema whose ``pattern`` the regex engine cannot compile, so
every pattern a build meets for the first time (``_proven_patterns`` spares it the
others) is compiled once. jsonschema-rs holds the GIL while it compiles, so a thread
cannot do that while the build goes on; a child process can. ``PatternProof`` runs
this file with the same interpreter (``sys.executable -I -S -B``: no environment,
working directory or user site, no bytecode written) and hands it the patterns and the
folder the parent's jsonschema-rs was imported from, which the child appends to its own
standard library path: nothing else the parent's ``sys.path`` holds (a ``""`` entry, a
host's folders) is searched. The build indexes the catalog meanwhile and reads the
answer at the end.

The answer is trusted only when the child reports it compiled them with the parent's
very extension module (the same file) and the same options; that guards against a
mismatch, not a hostile child, which is why the child searches only that folder.
``all_compile`` and ``regex_options`` below are what both sides run. A child that
cannot start, fails or answers anything else gives no answer; so does one that has not
answered when the build is ready for it and a grace about as long as compiling the
patterns in process has passed (it is killed). The build then compiles the patterns
itself: nothing but the time taken depends on whether the child ran.

This module imports nothing outside the standard library at import time: the child
runs it as a script before it has a ``sys.path`` to find anything else on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema_rs

__all__ = ["WORKER_MIN", "PatternProof", "all_compile", "regex_options", "start_proof"]

#: Fewer new patterns than this are compiled in process: starting the child costs
#: about as much as compiling a few hundred typical patterns.
WORKER_MIN = 512

#: Longest life of the child, in seconds, however long the build goes on; then it is
#: killed and the build compiles the patterns itself.
TIMEOUT = 60.0

#: Once the build is ready for the answer, how long it waits for a child still working
#: before it kills it and compiles the patterns itself: about what compiling them in
#: process takes (about 0.1 ms per typical pattern), at least ``GRACE`` seconds.
GRACE = 0.25
GRACE_PER_PATTERN = 0.0002


def regex_options(
    backtrack_limit: int | None,
) -> jsonschema_rs.RegexOptions | jsonschema_rs.FancyRegexOptions:
    """The regex engine options of a build (``backtrack_limit`` already checked)."""
    import jsonschema_rs

    if backtrack_limit is None:
        return jsonschema_rs.RegexOptions()
    return jsonschema_rs.FancyRegexOptions(backtrack_limit=backtrack_limit)


def all_compile(
    patterns: Sequence[str],
    options: jsonschema_rs.RegexOptions | jsonschema_rs.FancyRegexOptions,
) -> bool:
    """Whether every pattern compiles with ``options`` (one validator holding them all:
    the engine's limits apply to each regex alone)."""
    import jsonschema_rs

    try:
        jsonschema_rs.Draft202012Validator(
            {"allOf": [{"pattern": pattern} for pattern in patterns]}, pattern_options=options
        )
    except Exception:
        return False
    return True


def _engine_file() -> str:
    import jsonschema_rs

    return os.path.realpath(jsonschema_rs.__file__ or "")


def _engine_folder(engine: str) -> str:
    """The ``sys.path`` folder the module file ``engine`` was imported from."""
    folder = os.path.dirname(engine)
    if os.path.basename(engine).startswith("__init__."):  # a package: its parent
        folder = os.path.dirname(folder)
    return folder


class PatternProof:
    """The compile of ``patterns`` in a child process, begun at construction."""

    __slots__ = ("_abandoned", "_answer", "_grace", "_lock", "_process", "_thread")

    def __init__(self, patterns: Sequence[str], backtrack_limit: int | None) -> None:
        self._answer: bool | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._abandoned = False
        self._lock = threading.Lock()
        self._grace = max(GRACE, GRACE_PER_PATTERN * len(patterns))
        engine = _engine_file()
        request = json.dumps(  # ASCII escapes carry any string, lone surrogates too
            {
                "path": [_engine_folder(engine)],
                "engine": engine,
                "backtrack_limit": backtrack_limit,
                "patterns": list(patterns),
            }
        ).encode("ascii")
        # The child's pipes are served by a thread: a large request must not block the
        # build while the child starts.
        self._thread = threading.Thread(
            target=self._ask, args=(request,), name="opgate-pattern-proof", daemon=True
        )
        self._thread.start()

    def _ask(self, request: bytes) -> None:
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError, ValueError):
            return
        with self._lock:
            self._process = process
            abandoned = self._abandoned
        if abandoned:
            process.kill()
        try:
            with process:  # its pipes closed and the child waited for, whatever happens
                try:
                    output, _ = process.communicate(request, timeout=TIMEOUT)
                except Exception:  # a timeout, a broken pipe: no answer
                    process.kill()
                    return
        except Exception:  # closing a pipe it left unread
            return
        if process.returncode != 0 or self._abandoned:
            return
        try:
            answer = json.loads(output)
        except Exception:  # not JSON, or nested past the parser's depth
            return
        if isinstance(answer, dict) and answer.get("engine") is True:
            compiled = answer.get("compiled")
            if type(compiled) is bool:
                self._answer = compiled

    def result(self) -> bool | None:
        """Whether every pattern compiles, or ``None`` without a trustworthy answer.

        Waits for the child at most about as long as compiling the patterns in process
        would take (``GRACE``, ``GRACE_PER_PATTERN``); then kills it and answers
        ``None``. Either way the child has exited and been waited for on return."""
        self._thread.join(self._grace)
        if self._thread.is_alive():
            with self._lock:
                self._abandoned = True
                process = self._process
            if process is not None:
                process.kill()
            self._thread.join()
            return None
        return self._answer


def start_proof(patterns: Sequence[str], backtrack_limit: int | None) -> PatternProof | None:
    """A child's proof of ``patterns``, or ``None`` when one would not pay: fewer than
    ``WORKER_MIN`` of them, or no CPU or interpreter to run it beside the build."""
    from ._spawn import can_spawn  # here: the child runs this file as a script

    if len(patterns) < WORKER_MIN or not can_spawn():
        return None
    try:
        return PatternProof(patterns, backtrack_limit)
    except RuntimeError:  # no thread to start
        return None


def _prove_request() -> None:
    """The child's side: read the request, compile, answer on standard output."""
    request: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    sys.path += request["path"]  # after the standard library: it is not shadowed
    same = _engine_file() == request["engine"]
    compiled = same and all_compile(request["patterns"], regex_options(request["backtrack_limit"]))
    sys.stdout.write(json.dumps({"engine": same, "compiled": compiled}))


if __name__ == "__main__":
    _prove_request()
