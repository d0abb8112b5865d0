"""What opening the upstreams did: each upstream's state, the tools imported, skipped, renamed.

Nothing an upstream does at start raises past ``open_catalog``: an upstream that
fails to start (or does not finish within its timeout) is an ``UpstreamStatus`` with
``connected=False`` and a reason; a tool that cannot be offered is an ``Issue`` in
``skipped``; a tool offered under a changed name, or a filter naming a tool the
upstream does not list, is an ``Issue`` in ``warnings``. Reasons are for the
operator: they may quote the upstream's own texts (bounded, on one line), never a
resolved credential.

Two helpers make an upstream's text safe to show: ``bounded`` (one line, cut) for
reasons (``redacted_line`` when the text may hold a credential), ``visible`` (every
invisible or terminal-controlling character written as an escape, nothing cut) for
what reaches the agent or a person at length.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opgate.redact import Redactor

__all__ = [
    "MAX_REASON_CHARS",
    "Issue",
    "Report",
    "UpstreamStatus",
    "bounded",
    "redacted_line",
    "visible",
]

#: Longest reason kept: reasons may quote what an upstream sent, which may be anything.
MAX_REASON_CHARS = 300


#: A terminal's escape sequences (ECMA-48): a CSI sequence (``ESC [`` or C1 ``CSI``,
#: parameters, intermediates, a final byte: colours, cursor moves); a control string
#: (OSC ``ESC ]``, DCS ``ESC P``, SOS ``ESC X``, PM ``ESC ^``, APC ``ESC _``, or their C1
#: forms) with its payload, up to ``BEL`` or ``ST`` (titles, OSC 8 hyperlinks), or when
#: unterminated up to the next ``ESC`` or the end; or another ``ESC`` sequence (``ESC
#: 7``, ``ESC ( B``).
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)


def bounded(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` on one line (terminal escape sequences, whitespace runs and other
    controls each as a single space), at most ``limit`` characters (cut with ``…``).

    A sequence becomes a space rather than nothing, so that text already redacted
    cannot join across one into a credential (``sec\\x1b[mret``)."""
    text = _ESCAPE_SEQUENCE.sub(" ", text)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def redacted_line(text: str, redactor: Redactor, limit: int = MAX_REASON_CHARS) -> str:
    """``bounded(redactor.text(text), limit)``, redacted again once on its one line:
    the space ``bounded`` puts for a whitespace run, a control or an escape sequence
    can join the words of a credential (``Bearer\\tabc``) the first pass did not see."""
    once = redactor.text(text)
    return bounded(redactor.text(bounded(once, len(once) + 1)), limit)


#: Categories ``visible`` escapes: C0/C1 controls, format characters (bidi controls,
#: zero-width characters, the BOM), line and paragraph separators, lone surrogates.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with each C0/C1 control, Unicode format character (bidi overrides and
    isolates, zero-width characters), line or paragraph separator and lone surrogate
    written as an escape (``\\u202e``, ``\\x1b`` written ``\\u001b``), so that what an
    upstream wrote cannot reorder, hide or restyle what is shown around it. Line feeds and
    tabs are kept when ``lines`` is true, escaped (``\\n``, ``\\t``) otherwise."""
    if text.isprintable():
        return text
    kept = "\n\t" if lines else ""
    out = []
    for char in text:
        if char in kept or unicodedata.category(char) not in _INVISIBLE:
            out.append(char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) > 0xFFFF:
            out.append(f"\\U{ord(char):08x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem with one tool, or with a whole upstream (``tool`` empty).

    * ``upstream``: the upstream's name;
    * ``tool``: the upstream's own tool name, ``""`` for the upstream itself;
    * ``kind``: a short stable category (``"filtered"``, ``"definition"``, ``"renamed"``, ...);
    * ``reason``: one line, at most ``MAX_REASON_CHARS`` characters.
    """

    upstream: str
    tool: str
    kind: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.upstream}/{self.tool}" if self.tool else self.upstream
        return f"{where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class UpstreamStatus:
    """One upstream now.

    * ``name``, ``transport`` (``"stdio"`` or ``"http"``);
    * ``connected``: whether it is started and its tools listed;
    * ``reason``: why not, ``""`` when connected;
    * ``protocol_version``: what was negotiated (``""`` when not connected);
    * ``server``: the name and version the upstream gave (``""`` if none);
    * ``tools``: how many tools it listed;
    * ``since``: when the current connection came up, or (not connected) when the last
      start failed or the connection was lost; ``None`` before the first attempt ended;
    * ``attempts``: starts that failed in a row since it was last up (the gateway keeps
      retrying with a backoff: ``retrying``);
    * ``restarts``: connections made after the first (a crash, a lost session);
    * ``retrying``: whether the gateway is starting it again (``False`` once closed).
    """

    name: str
    transport: str
    connected: bool
    reason: str = ""
    protocol_version: str = ""
    server: str = ""
    tools: int = 0
    since: datetime | None = None
    attempts: int = 0
    restarts: int = 0
    retrying: bool = False

    def __str__(self) -> str:
        if not self.connected:
            tried = f" ({_counted(self.attempts, 'failed start')})" if self.attempts > 1 else ""
            again = f"; retrying{tried}" if self.retrying else ""
            return f"{self.name} ({self.transport}): not connected: {self.reason}{again}"
        server = f", {self.server}" if self.server else ""
        restarted = f", restarted {_counted(self.restarts, 'time')}" if self.restarts else ""
        since = f", up since {self.since:%Y-%m-%d %H:%M:%S} UTC" if self.restarts else ""
        return (
            f"{self.name} ({self.transport}{server}, {self.protocol_version}): "
            f"{_counted(self.tools, 'tool')} listed{restarted}{since}"
        )


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of opening one upstreams config.

    * ``upstreams``: one ``UpstreamStatus`` per enabled upstream, in the file's order;
    * ``disabled``: names of the entries marked disabled;
    * ``operations``: names of the operations imported (upstreams in order, each
      upstream's tools by name);
    * ``warnings``: imported with a stated difference, or a filter naming a tool the
      upstream does not list;
    * ``skipped``: tools not imported, one ``Issue`` each;
    * ``rebuilds``: how many times the catalog changed since it was opened (an
      upstream joined, relisted other tools, or came back with other tools);
    * ``refused``: why the last rebuild was not applied (a listener refused it, and the
      catalog kept its operations), ``""`` when it was.
    """

    upstreams: tuple[UpstreamStatus, ...] = ()
    disabled: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    warnings: tuple[Issue, ...] = ()
    skipped: tuple[Issue, ...] = ()
    rebuilds: int = 0
    refused: str = ""

    @property
    def failed(self) -> tuple[UpstreamStatus, ...]:
        """The upstreams that did not connect."""
        return tuple(status for status in self.upstreams if not status.connected)

    def skipped_by_kind(self) -> Counter[str]:
        """How many tools were skipped, per ``Issue.kind``."""
        return Counter(issue.kind for issue in self.skipped)

    def summary(self) -> str:
        """One line: upstreams connected, operations imported, tools skipped, warnings."""
        connected = len(self.upstreams) - len(self.failed)
        return (
            f"{connected} of {_counted(len(self.upstreams), 'upstream')} connected, "
            f"{_counted(len(self.operations), 'operation')} imported, "
            f"{_counted(len(self.skipped), 'tool')} skipped, "
            f"{_counted(len(self.warnings), 'warning')}"
        )

    def lines(self) -> list[str]:
        """The whole report as lines of text: the summary, then ``upstream STATUS`` for
        each upstream, ``disabled NAME``, ``skipped ISSUE`` for each skipped tool and
        ``warning ISSUE`` for each warning, each with its reason, and why the last
        rebuild was refused, if it was."""
        return [
            self.summary(),
            *(f"upstream {status}" for status in self.upstreams),
            *(f"disabled {name}" for name in self.disabled),
            *(f"skipped {issue}" for issue in self.skipped),
            *(f"warning {issue}" for issue in self.warnings),
            *([f"rebuild refused: {self.refused}"] if self.refused else []),
        ]


def _counted(count: int, noun: str) -> str:
    """``1 warning``, ``2 warnings``, ``0 warnings``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
