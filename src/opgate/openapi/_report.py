"""What an import did: operations imported, warnings, and operations skipped with reasons.

Every problem found while reading a document is collected here instead of raised:
a ``Skip`` means the operation is not in the catalog (it could not be represented
or called correctly), a ``Warning`` means it is, with the stated difference (a
dropped optional parameter, a constraint the schema compiler cannot express).
Nothing in a document ever raises past ``build_catalog`` except a document that is
not OpenAPI 3.0/3.1 at all (``DocumentError``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Issue", "Report"]

#: Longest reason kept per issue: reasons quote document text, which may be anything.
MAX_REASON_CHARS = 300


def _bounded(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_REASON_CHARS:
        return text[: MAX_REASON_CHARS - 1] + "…"
    return text


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem with one operation (or the whole document, when ``method`` is empty).

    * ``method``: upper-case HTTP method, ``""`` for document-level issues;
    * ``path``: the path template as written in the document (``""`` likewise);
    * ``reason``: a one-line explanation (at most ``MAX_REASON_CHARS`` characters);
    * ``kind``: a short stable category used to group the report (``"cookie parameter"``,
      ``"request body media type"``, ``"external $ref"``, ...).
    """

    method: str
    path: str
    kind: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.method} {self.path}: " if self.method else ""
        return f"{where}{self.reason}"


@dataclass(slots=True)
class Report:
    """The outcome of importing one document.

    * ``title``, ``version``: the document's ``info.title`` and OpenAPI version;
    * ``operations``: names imported, in document order;
    * ``warnings``: imported with a stated difference;
    * ``skipped``: not imported, one ``Issue`` per skipped operation.
    """

    title: str = ""
    version: str = ""
    operations: list[str] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    skipped: list[Issue] = field(default_factory=list)

    def warn(self, method: str, path: str, kind: str, reason: str) -> None:
        """Record a warning (bounded reason)."""
        self.warnings.append(Issue(method, path, kind, _bounded(reason)))

    def skip(self, method: str, path: str, kind: str, reason: str) -> None:
        """Record a skipped operation (bounded reason)."""
        self.skipped.append(Issue(method, path, kind, _bounded(reason)))

    def skipped_by_kind(self) -> Counter[str]:
        """How many operations were skipped, per ``Issue.kind``."""
        return Counter(issue.kind for issue in self.skipped)

    def warnings_by_kind(self) -> Counter[str]:
        """How many warnings were recorded, per ``Issue.kind``."""
        return Counter(issue.kind for issue in self.warnings)

    def summary(self) -> str:
        """One line: imported, skipped and warning counts."""
        return (
            f"{self.title or 'OpenAPI document'} ({self.version}): "
            f"{_counted(len(self.operations), 'operation')} imported, "
            f"{len(self.skipped)} skipped, {_counted(len(self.warnings), 'warning')}"
        )

    def lines(self) -> list[str]:
        """The whole report as lines of text: the summary, then ``skipped ISSUE`` for
        each skipped operation and ``warning ISSUE`` for each warning, in document
        order, each with its reason."""
        return [
            self.summary(),
            *(f"skipped {issue}" for issue in self.skipped),
            *(f"warning {issue}" for issue in self.warnings),
        ]


def _counted(count: int, noun: str) -> str:
    """``1 warning``, ``2 warnings``, ``0 warnings``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
