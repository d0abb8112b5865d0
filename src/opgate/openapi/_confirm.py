"""Confirmation before sending: the form shows the exact request, and only that request is sent.

When an operation's method is in the catalog's ``confirm`` set, its handler first
builds the request it would send (``Upstream.build``: method, full URL with its
encoded query, every header, the body bytes) and returns
``await_input(FormInput(...))``, whose one field is the boolean ``confirm`` and
whose message is ``render(...)`` of that request:

* the request line with the exact URL, then each header on a line of its own,
  then the body bytes exactly as sent, then decoded views of the query, of a path
  holding percent-escapes (one item per segment) and of a form-encoded body;
* everything is printable ASCII. Values (header values, decoded parts) are JSON
  strings written by ``quoted``: a control, bidi, invisible, private-use,
  unassigned or non-ASCII character, a space after a space, and the printable
  characters an HTML or Markdown renderer acts on, is an escape such as ``\\n``,
  ``\\u202e`` or ``\\u0020``.
  The body is printable ASCII by construction (``_request`` writes JSON bodies
  with such escapes; form bodies are percent-encoded), so it is shown as it is;
* a value never holds a line break, and every line starts with the renderer's own
  label (``Request:``, ``Header:``, ``Body``, ...) or with two spaces (a body or a
  decoded item under its label): nothing an agent sends can make a line of its own;
* the host's headers (credentials), ``Authorization``, ``Proxy-Authorization``,
  ``Cookie`` and default headers of a client the host passed in are named but not
  shown (``hidden_headers``); so are the default query parameters of such a client
  (``api_key`` ...): the URL holds ``NOT_SHOWN`` as their value, and the decoded
  query says ``not shown (set by the host)``.

A request that cannot be shown completely within the prompt budget
(``Limits.form_schema_bytes``, message and schema counted as JSON carries them), or
not as printable ASCII, is refused (``Unshowable``, turned into ``fail("not sent:
...")`` naming its largest part and the budget): a person is never asked to confirm
what they cannot see.

Binding: the prompt's private state holds ``request_digest`` of the request shown.
On the accepted answer the handler rebuilds the request from the (ledger-bound)
arguments and the host's headers, and ``Upstream.send`` checks the digest against
the exact request it is about to send: another request (arguments in another
member order, a host header replacing a shown one) is refused, never sent.

The state also holds a fresh random key (``send``). ``SentLog`` records, per key,
that a send began and how it ended:

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

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, unquote_plus

import httpx2

from opgate import FormInput, Result, Text, fail, finish

from ._operations import HEADER_NAME
from ._request import quoted

__all__ = [
    "CONFIRM_SCHEMA",
    "MAX_RECORDS",
    "MISMATCH",
    "NOT_SHOWN",
    "SentLog",
    "Unshowable",
    "confirmation",
    "hidden_headers",
    "quoted",
    "render",
    "request_digest",
    "shown_url",
    "unshowable",
]

#: Outcomes of confirmed sends kept for replays.
MAX_RECORDS = 256
#: Headers that carry credentials whoever sets them: never shown.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})

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
_SCHEMA_BYTES = len(json.dumps(CONFIRM_SCHEMA, separators=(",", ":"), ensure_ascii=False))
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")
_FORM = "application/x-www-form-urlencoded"
_INTRO = (
    "Shown below: the whole request, exactly as it will be sent. Quoted values are JSON "
    "strings: every character that is not printable ASCII, and every space after a space, "
    "is written as an escape (such as \\n, \\u202e or \\u0020)."
)

#: Why the answer is refused when the request to send is not the one shown.
MISMATCH = (
    "not sent: the request this answer would send differs from the one shown for "
    "confirmation (the arguments were sent again in another member order, or this "
    "server is configured otherwise); call again without the answer to be asked afresh"
)


class Unshowable(Exception):
    """A request that cannot be shown completely and unambiguously (the text says why)."""


def hidden_headers(
    host_headers: Mapping[str, str], client_headers: Collection[str]
) -> frozenset[str]:
    """Lower-case names of the headers named but not shown (see the module docstring).

    ``client_headers``: ``Upstream.client_headers()``.
    """
    names = {name.lower() for name in host_headers} | CREDENTIAL_HEADERS
    return frozenset(names | set(client_headers))


#: What the form shows in place of the value of a query parameter the host set.
NOT_SHOWN = "(not-shown)"  # httpx percent-encodes "(" and ")" in a query value


def shown_url(request: httpx2.Request, hidden_query: Collection[str] = ()) -> str:
    """``request``'s URL, each value of a query parameter named in ``hidden_query``
    (``Upstream.client_params()``) written as ``NOT_SHOWN``."""
    url = str(request.url)
    if not hidden_query or not request.url.query:
        return url
    pairs = []
    for pair in request.url.query.decode("ascii").split("&"):
        name, equals, value = pair.partition("=")
        pairs.append(name + equals + (NOT_SHOWN if unquote_plus(name) in hidden_query else value))
    return url.split("?", 1)[0] + "?" + "&".join(pairs)


def request_digest(
    request: httpx2.Request, hidden: Collection[str], hidden_query: Collection[str] = ()
) -> str:
    """SHA-256 of everything ``render`` shows of ``request`` (hidden values aside)."""
    digest = hashlib.sha256()

    def put(part: bytes) -> None:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)

    put(request.method.encode("ascii"))
    put(shown_url(request, hidden_query).encode("utf-8"))
    for name, value in request.headers.raw:
        put(name)
        put(b"" if name.decode("latin-1").lower() in hidden else value)
    put(request.content)
    return digest.hexdigest()


def render(
    name: str,
    template: str,
    request: httpx2.Request,
    hidden: Collection[str],
    budget: int,
    hidden_query: Collection[str] = (),
) -> str:
    """The confirmation message for ``request`` (``Unshowable`` if it cannot be shown)."""
    method = request.method
    url = shown_url(request, hidden_query)
    if not url.isascii() or not url.isprintable():
        raise Unshowable("its URL cannot be shown as printable ASCII")
    lines = [
        f"Send {method} {quoted(template)[1:-1]} ({name})?",
        _INTRO,
        f"Request: {method} {url}",
    ]
    parts: dict[str, int] = {"the URL": len(url)}
    raw_query = request.url.query.decode("ascii")
    if raw_query:
        lines.append("Query, decoded:")
        for key, value in _decoded_pairs(raw_query, "query"):
            shown = "not shown (set by the host)" if key in hidden_query else quoted(value)
            lines.append(f"  {quoted(key)} = {shown}")
    raw_path = request.url.raw_path.decode("ascii").split("?", 1)[0]
    if "%" in raw_path:
        segments = [_decoded(segment, "path") for segment in raw_path.split("/")[1:]]
        lines.append("Path segments, decoded:")
        lines.append("  " + " / ".join(quoted(segment) for segment in segments))
    for raw_name, raw_value in request.headers.raw:
        header = raw_name.decode("latin-1")
        if HEADER_NAME.fullmatch(header) is None:
            raise Unshowable("a header name is not an HTTP token")
        if header.lower() in hidden:
            lines.append(f"Header: {header}: not shown (set by the host)")
            continue
        value = quoted(raw_value.decode("latin-1"))
        parts[f"header {header}"] = len(value)
        lines.append(f"Header: {header}: {value}")
    body = request.content
    if body:
        if _PRINTABLE.fullmatch(body) is None:
            raise Unshowable("its body holds bytes that are not printable ASCII")
        text = body.decode("ascii")
        parts["the body"] = len(text)
        lines.append(
            f"Body ({len(body)} bytes), exactly as sent, on the next line after two spaces:"
        )
        lines.append(f"  {text}")
        content_type = request.headers.get("content-type", "")
        if content_type.split(";", 1)[0].strip().lower() == _FORM:
            lines.append("Form fields, decoded:")
            lines += [f"  {quoted(k)} = {quoted(v)}" for k, v in _decoded_pairs(text, "body")]
    else:
        lines.append("Body: none")
    lines.append("End of the request.")
    message = "\n".join(lines)
    size = len(json.dumps(message)) - 2 + _SCHEMA_BYTES
    if size > budget:
        largest = max(parts, key=lambda part: parts[part])
        raise Unshowable(
            f"shown in full it takes {size} bytes, over the prompt budget of {budget} bytes "
            f"(Limits.form_schema_bytes); the largest part is {largest} ({parts[largest]} "
            "bytes as shown)"
        )
    return message


def unshowable(reason: str) -> Any:
    """The failure for a request that cannot be shown: nothing is sent."""
    return fail(
        f"not sent: this request cannot be shown completely for confirmation: {reason}. "
        "A person is never asked to confirm what they cannot see: send a smaller request"
    )


def confirmation(message: str, key: str, digest: str) -> FormInput:
    """The confirmation form; ``key`` and ``digest`` go into the private state."""
    return FormInput(message, CONFIRM_SCHEMA, state={"send": key, "request": digest})


def _decoded(text: str, where: str) -> str:
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise Unshowable(f"its {where} holds a percent-escape that is not UTF-8") from None


def _decoded_pairs(text: str, where: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(text, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise Unshowable(f"its {where} holds a percent-escape that is not UTF-8") from None


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
                "this confirmation was used once already and is not used again; "
                f"that use ended: {record.message}"
            )
        note = Text(
            f"{shown} was already sent for this confirmation; not sent again. Its response was:"
        )
        result = record.result
        return finish(Result([note, *result.content], structured=result.structured))
