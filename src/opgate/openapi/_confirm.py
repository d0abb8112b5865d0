"""Confirmation before sending, and the record that makes a confirmed send happen once.

When an operation's method is in the catalog's ``confirm`` set, its handler first
returns ``await_input(FormInput(...))``: a form whose message shows the method, the
path with its parameters filled in, the query, and the body (at most
``MAX_SHOWN_BYTES`` of it, with a note when cut), and whose one field is the boolean
``confirm``. Nothing is sent unless the answer is ``accept`` with ``confirm: true``.

The prompt's private state holds a fresh random key (``send``). ``SentLog`` records,
per key, that a send began and how it ended:

* the first accepted answer claims the key, sends once, and records the outcome;
* an identical replay after that reaches the handler with ``recovery_only=True``
  (the registry's continuation ledger guarantees it): the request is never sent
  again; the recorded outcome is returned, marked as already sent; when the
  record is gone (evicted, or another process), a failure says the request was
  already sent and that its outcome is not known here.

``SentLog`` keeps at most ``MAX_RECORDS`` outcomes (oldest dropped first), so its
memory is bounded by ``MAX_RECORDS`` times the result budget.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from opgate import FormInput, Result, Text, fail, finish

from ._request import PreparedRequest

__all__ = ["CONFIRM_SCHEMA", "MAX_RECORDS", "MAX_SHOWN_BYTES", "SentLog", "confirmation"]

#: Outcomes of confirmed sends kept for replays.
MAX_RECORDS = 256
#: Longest part of the body or query shown in a confirmation message.
MAX_SHOWN_BYTES = 6000

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Send this request",
            "description": "Yes sends the request exactly as shown; no sends nothing.",
        }
    },
    "required": ["confirm"],
}


def _cut(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    kept = raw[:limit].decode("utf-8", errors="ignore")
    return f"{kept}… [{len(raw) - limit} more bytes not shown]"


def confirmation(name: str, prepared: PreparedRequest, key: str) -> FormInput:
    """The confirmation form for ``prepared``; ``key`` goes into the private state."""
    lines = [f"Send {prepared.method} {prepared.path} ({name})?"]
    if prepared.query:
        query = "&".join(f"{k}={v}" for k, v in prepared.query)
        lines.append(f"Query: {_cut(query, MAX_SHOWN_BYTES // 4)}")
    for header, value in prepared.headers:
        lines.append(f"Header {header}: {_cut(value, 200)}")
    if prepared.content is not None:
        body = prepared.content.decode("utf-8", errors="replace")
        if prepared.content_type and "json" in prepared.content_type:
            with contextlib.suppress(ValueError):
                body = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        lines.append(f"Body ({prepared.content_type}):\n{_cut(body, MAX_SHOWN_BYTES)}")
    return FormInput("\n".join(lines), CONFIRM_SCHEMA, state={"send": key})


@dataclass(frozen=True, slots=True)
class _Record:
    done: bool
    result: Result | None = None
    message: str = ""
    diagnostics: Any = None


class SentLog:
    """Which confirmed sends began, and how they ended (see the module docstring)."""

    def __init__(self, capacity: int = MAX_RECORDS) -> None:
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        """Mark ``key`` as being sent; ``False`` if it was claimed before."""
        with self._lock:
            if key in self._records:
                return False
            self._records[key] = _Record(done=False)
            while len(self._records) > self._capacity:
                self._records.popitem(last=False)
            return True

    def record(self, key: str, result: Result | None, message: str = "") -> None:
        """Keep how the send for ``key`` ended (a result, or a failure message)."""
        with self._lock:
            if key in self._records:
                self._records[key] = _Record(True, result, message)

    def replay(self, key: str, method: str, path: str) -> Any:
        """The outcome to return for an answer that was already used: never a new send."""
        with self._lock:
            record = self._records.get(key)
        shown = f"{method} {path}"
        if record is None or not record.done:
            return fail(
                f"{shown} was already sent for this confirmation and is not sent again; "
                "its outcome is not known here (check the API before asking again)"
            )
        if record.result is None:
            return fail(
                f"already sent once for this confirmation, not sent again: {record.message}"
            )
        note = Text(
            f"{shown} was already sent for this confirmation; not sent again. Its response was:"
        )
        result = record.result
        return finish(Result([note, *result.content], structured=result.structured))
