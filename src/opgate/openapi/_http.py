"""Sending a prepared request to the host's API, and mapping the response to an outcome.

``Upstream`` owns the one ``httpx2.AsyncClient`` a catalog shares (created on first
use, closed by ``Catalog.aclose()``), the base URL, the timeouts and the budgets.

Requests
--------
* The URL is the host's base URL followed by the operation's percent-encoded path;
  the final URL is checked to have the base URL's scheme, host and port, no userinfo,
  and to lie under its path before anything is sent. Paths are compared as the most
  permissive server would read them: percent-decoded until nothing changes (``%2e``,
  ``%2f``, ``%252e`` ...), NFKC-normalised (a fullwidth ``%ef%bc%8e`` is ``.``), ``\\`` read
  as ``/``; a path that is not UTF-8 once decoded (overlong ``%c0%ae`` ...) or has a
  dot segment is refused outright: a segment of dots and spaces once a ``;``
  parameter and anything after a NUL, ``?`` or ``#`` are dropped, control characters
  trimmed (``..;``, ``..%00``, ``..%20``, ``..%09``, ``%2e%2e%23``, ``...``); IIS's
  ``%u002e`` is decoded too. The raw path must lie under the base path too (``/api%2fx`` is a
  sibling of ``/api`` for a server that does not decode ``%2F``). Arguments never
  hold a URL.
* Headers: the parameter headers, then the host's headers (credentials) on top; a
  parameter can never replace a host header, nor a default header of a client the
  host passed in (``client_headers``: the form names those as set by the host).
* Query: a default query parameter of a client the host passed in (``params=``,
  such as ``api_key``) is a credential too: a parameter of that name is left out,
  in any spelling a lenient server files under it (``API_KEY``, ``api.key``,
  ``api_key[]``), so it never replaces the host's value (``client_params``: the form names those
  as set by the host, without their values).
* Cookies: the catalog's own client keeps none (see below); a host's own ``client=``
  keeps its own cookie policy, so one that serves several principals should be given
  a jar that keeps nothing.
* Redirects are never followed by the client. A redirect of a ``GET``/``HEAD`` to a
  URL that passes the same check is followed, with the host's headers (at most
  ``MAX_REDIRECTS`` times), unless ``send(follow_redirects=False)`` (a confirmed
  request); any other redirect ends the call with a failure that does not reveal the
  location, so credentials never go anywhere but under the base URL.
* ``build`` makes the exact first request without sending it, for the confirmation
  form; ``send(check=...)`` lets the caller refuse that exact request before
  anything is sent.
* ``timeout`` bounds the whole exchange, body included; the client's own connect,
  read, write and pool timeouts use the same value. ``trust_env`` is off: no proxy,
  ``.netrc`` or certificate settings are picked up from the environment behind the
  host's back (pass your own ``client=`` for those). The client keeps no cookies: a
  ``Set-Cookie`` in one principal's response never rides on another's request.

Responses
---------
Every host header value, and every default header, cookie and query parameter
value of a client the host passed in (and their words, and Basic credentials
decoded), is redacted
from everything a response becomes, in any encoding ``opgate.redact`` recognises, before
it is serialised: parsed JSON is redacted value by value and its text copy made
from the redacted value; texts, failure messages, the status reason and link
addresses are redacted as text. JSON is read with opgate's strict parser (no
``RecursionError``, nesting at most 128, duplicate names and lone surrogates refused):
what it refuses falls back to text. Text is decoded with the declared charset when
it is a text encoding (else UTF-8), invalid bytes and lone surrogates replaced.

* 2xx with a JSON media type: structured content (exact numbers) plus a compact
  JSON text copy when both fit the result budget; the structured content alone with
  a short note when only it fits; otherwise the beginning of the text with a note
  saying how much was cut (a failure instead when the operation has an output
  schema, which truncated text could never satisfy).
* 2xx textual (``text/*``, XML, YAML, JavaScript, ...): the text, cut to the budget.
* 2xx images up to ``MAX_INLINE_IMAGE`` bytes: an ``Image`` block.
* 2xx anything else: a ``ResourceLink`` to the request URL (never fetched by opgate)
  with its media type and size, plus a one-line text.
* 4xx/5xx (and unfollowed 3xx): ``fail("HTTP <status> <reason>: <excerpt>")`` with
  ``diagnostics={"status": status}``; the excerpt is at most ``MAX_ERROR_EXCERPT``
  characters of the body (JSON compacted) with control characters removed and
  whitespace collapsed.
* A status line or header that is not valid HTTP (the client refuses a header
  section beyond 100 KiB), or a ``Content-Encoding`` the request's
  ``Accept-Encoding`` did not ask for, ends the call with a failure that says so. Bodies are read
  to at most four times the result budget, counted after decompression (in bounded
  pieces), within the one ``timeout``.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import unquote

import anyio
import httpx2

from opgate import Image, ResourceLink, Result, Text, fail, finish
from opgate.json import JSONError, parse
from opgate.redact import Redactor

from ._request import PreparedRequest, json_bytes

__all__ = [
    "LEAVES_BASE",
    "MAX_ERROR_EXCERPT",
    "MAX_REDIRECTS",
    "Reply",
    "Upstream",
    "check_base_url",
    "request_headers",
]

#: The longest timeout taken: the largest float (an int past it cannot be one).
_LONGEST = sys.float_info.max

#: The default headers of opgate's own HTTP client: they hold no credential.
CLIENT_HEADERS = frozenset({"accept", "accept-encoding", "connection", "user-agent"})

#: Why a request whose URL would leave the base URL is not sent.
LEAVES_BASE = "refused: the request would leave the API's base URL"
#: Redirects followed within the base URL for GET and HEAD.
MAX_REDIRECTS = 5
#: Characters of an error body quoted in a failure message.
MAX_ERROR_EXCERPT = 500
#: Largest image returned inline (under the default 48 KiB inline budget once base64-encoded).
MAX_INLINE_IMAGE = 32 * 1024
#: Room kept in the result budget for block framing and notes.
RESULT_RESERVE = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_TEXTUAL = re.compile(
    r"^(text/.*|application/(xml|.*\+xml|x-yaml|yaml|javascript|x-www-form-urlencoded|"
    r"problem\+xml|graphql|sql|csv))$"
)
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_IIS_ESCAPE = re.compile("%u([0-9a-fA-F]{4})")  # IIS reads %u002e as "."
_SEGMENT_END = re.compile("[;\x00?#]")
_TRIMMED = ". " + "".join(map(chr, range(32))) + "\x7f"
#: Rounds of percent-decoding a path is given before it is refused as evasive.
_DECODE_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Reply:
    """How a call ended: a ``result`` (success) or a failure ``message`` and ``diagnostics``."""

    result: Result | None
    message: str = ""
    diagnostics: Any = None

    def outcome(self) -> Any:
        """``finish(result)`` or ``fail(message, diagnostics)``."""
        if self.result is not None:
            return finish(self.result)
        return fail(self.message, self.diagnostics)


def _failed(message: str, diagnostics: Any = None) -> Reply:
    return Reply(None, message, diagnostics)


def check_base_url(base_url: str) -> httpx2.URL:
    """The host's base URL, parsed; ``ValueError`` unless it is plain http(s) with a host."""
    if not isinstance(base_url, str):
        raise TypeError(f"base_url must be a str, not {type(base_url).__name__}")
    try:
        url = httpx2.URL(base_url)
    except Exception:
        raise ValueError(f"base_url {base_url[:100]!r} is not a URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError("base_url must be an absolute http:// or https:// URL with a host")
    if url.userinfo or url.query or url.fragment:
        raise ValueError(
            "base_url must not carry credentials, a query or a fragment "
            "(give credentials through headers=)"
        )
    return url


def _no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing: the shared client serves every principal."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


def request_headers(
    prepared: PreparedRequest, host_headers: Mapping[str, str], reserved: Collection[str] = ()
) -> dict[str, str]:
    """The headers opgate sets: parameters, ``Content-Type``, ``Accept``, the host's on top.

    A parameter named like a host header or like one of ``reserved`` (lower-case
    names) is left out, ``_`` read as ``-`` (CGI, WSGI and nginx file ``X_Api_Key``
    under ``X-Api-Key``).
    """
    headers: dict[str, str] = {}
    taken = {_header_key(name) for name in (*host_headers, *reserved)}
    for name, value in prepared.headers:
        if _header_key(name) not in taken:
            headers[name] = value
    if prepared.content_type is not None:
        headers["Content-Type"] = prepared.content_type
    headers.setdefault("Accept", "application/json, */*;q=0.5")
    headers.update(host_headers)
    return headers


def _header_key(name: str) -> str:
    return name.lower().replace("_", "-")


def _media_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type.endswith(("/json", "+json"))


def _plain_path(raw_path: str) -> str | None:
    """``raw_path`` as the most permissive server would read it, or ``None`` if any
    reading of it has a dot segment, or it is not UTF-8 (see the module docstring)."""
    path = raw_path
    for _ in range(_DECODE_ROUNDS):
        try:
            decoded = unquote(_IIS_ESCAPE.sub(_iis_character, path), errors="strict")
        except UnicodeDecodeError:  # overlong forms such as %c0%ae among them
            return None
        if decoded == path:
            break
        path = decoded
    else:
        return None
    path = unicodedata.normalize("NFKC", path).replace("\\", "/")
    if any(_dot_segment(segment) for segment in path.split("/")):
        return None
    return path


def _iis_character(match: re.Match[str]) -> str:
    return chr(int(match.group(1), 16))


def _dot_segment(segment: str) -> bool:
    """Whether some server reads ``segment`` as ``.`` or ``..``: it is dots (and spaces
    or control characters, which servers trim) once what follows a ``;``, NUL, ``?`` or
    ``#`` (a query or fragment to a server that decodes first) is dropped."""
    name = _SEGMENT_END.split(segment, 1)[0]
    return "." in name and not name.strip(_TRIMMED)


def _query_key(name: str) -> str:
    """The name a lenient server files a query parameter under: case folded, ``.`` and
    spaces as ``_`` and ``[...]`` dropped (PHP), so ``API.Key[]`` is ``api_key``."""
    return name.split("[", 1)[0].casefold().replace(".", "_").replace(" ", "_")


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base + "/")


def _text_of(body: bytes, response: httpx2.Response) -> str:
    """The body as text: its declared charset when that is a text encoding, else UTF-8;
    invalid bytes and lone surrogates become U+FFFD."""
    encoding = response.encoding or "utf-8"
    try:
        if not codecs.lookup(encoding)._is_text_encoding:
            encoding = "utf-8"
        text = body.decode(encoding, errors="replace")
    except (LookupError, UnicodeError, ValueError, TypeError):
        text = body.decode("utf-8", errors="replace")
    return _SURROGATE.sub("\ufffd", text)


def _undecodable(response: httpx2.Response) -> str | None:
    """A ``Content-Encoding`` of ``response`` its request did not ask for (the client
    decodes what it asks for, and passes anything else through undecoded)."""
    asked = response.request.headers.get("accept-encoding", "")
    accepted = {part.split(";", 1)[0].strip().lower() for part in asked.split(",")}
    for value in response.headers.get_list("content-encoding", split_commas=True):
        coding = value.strip()
        if coding and coding.lower() != "identity" and coding.lower() not in accepted:
            return coding  # as written: a credential echoed here is redacted as it was sent
    return None


class Upstream:
    """The shared client, base URL, timeout and budgets of one catalog."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        result_bytes: int,
        max_connections: int,
        client: httpx2.AsyncClient | None,
    ) -> None:
        self.base = check_base_url(base_url)
        self._base_text = str(self.base).rstrip("/")
        base_path = _plain_path(self.base.raw_path.decode("latin-1").split("?", 1)[0])
        if base_path is None:
            raise ValueError("base_url's path must not have '.' or '..' segments")
        self._base_path = base_path.rstrip("/")
        self._raw_base = self.base.raw_path.decode("latin-1").split("?", 1)[0].rstrip("/")
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not 0 < timeout <= _LONGEST
        ):
            raise ValueError("timeout must be a positive, finite number of seconds")
        self.timeout = float(timeout)
        self.result_bytes = result_bytes
        self._max_connections = max_connections
        self._client = client
        self._owned = client is None

    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.timeout),
                limits=httpx2.Limits(
                    max_connections=self._max_connections,
                    max_keepalive_connections=min(self._max_connections, 16),
                ),
                follow_redirects=False,
                trust_env=False,
                cookies=_no_cookies(),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._owned:
            client, self._client = self._client, None
            await client.aclose()

    def url(self, path: str) -> str:
        """The absolute URL of ``path``; ``ValueError`` if it would leave the base URL."""
        url = httpx2.URL(self._base_text + path)
        if not self._inside(url):
            raise ValueError("the path would leave the API's base URL")
        return str(url)

    def _inside(self, url: httpx2.URL) -> bool:
        if (url.scheme, url.host, url.port) != (self.base.scheme, self.base.host, self.base.port):
            return False
        if url.userinfo:
            return False
        raw = url.raw_path.decode("latin-1").split("?", 1)[0]
        path = _plain_path(raw)
        if path is None:
            return False
        # both readings: decoded, and as a server that does not decode %2F would route it
        return all(_under(p, base) for p, base in ((path, self._base_path), (raw, self._raw_base)))

    def client_params(self) -> frozenset[str]:
        """Names of the client's default query parameters (credentials, like ``api_key``).

        Empty for the catalog's own client.
        """
        return frozenset(self.client().params.keys())

    def _credentials(self, host_headers: Mapping[str, str]) -> list[str]:
        """Every value the host set: its headers, and the defaults of its own client
        (headers, cookies, query parameters); all are redacted from responses."""
        client = self.client()
        values = list(host_headers.values())
        values += [v for k, v in client.headers.items() if k.lower() not in CLIENT_HEADERS]
        values += [v for _, v in client.params.multi_items()]
        values += [cookie.value for cookie in client.cookies.jar if cookie.value]
        return values

    def client_headers(self) -> frozenset[str]:
        """Lower-case names of the client's default headers, opgate's own defaults aside.

        Empty for the catalog's own client; a client the host passed in may carry
        credentials there.
        """
        names = (name.lower() for name in self.client().headers)
        return frozenset(name for name in names if name not in CLIENT_HEADERS)

    def build(self, prepared: PreparedRequest, host_headers: Mapping[str, str]) -> httpx2.Request:
        """The first request ``send`` makes for ``prepared``, unsent.

        ``ValueError`` if it would leave the base URL.
        """
        return self._request(prepared, self._headers(prepared, host_headers))

    def _headers(
        self, prepared: PreparedRequest, host_headers: Mapping[str, str]
    ) -> dict[str, str]:
        return request_headers(prepared, host_headers, self.client_headers())

    def _request(self, prepared: PreparedRequest, headers: Mapping[str, str]) -> httpx2.Request:
        taken = {_query_key(name) for name in self.client_params()}
        return self.client().build_request(
            prepared.method,
            self.url(prepared.path),
            params=[(k, v) for k, v in prepared.query if _query_key(k) not in taken],
            headers=headers,
            content=prepared.content,
        )

    def _redirect_target(self, response: httpx2.Response) -> httpx2.URL | None:
        """Where a redirect of ``response`` may be followed to, or ``None`` (not followed)."""
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            return None
        try:
            target = response.url.join(location)
        except Exception:  # an unparseable Location is not followed
            return None
        return target if self._inside(target) else None

    async def send(
        self,
        prepared: PreparedRequest,
        host_headers: Mapping[str, str],
        *,
        has_output_schema: bool,
        check: Callable[[httpx2.Request], str | None] | None = None,
        follow_redirects: bool = True,
    ) -> Reply:
        """Send ``prepared`` and return how it ended (never raises for HTTP problems).

        ``check`` sees the exact first request before it is sent; a message it
        returns is the failure, and nothing is sent. Without ``follow_redirects``
        only that request is sent (a confirmed one: nothing the person did not see).
        """
        headers = self._headers(prepared, host_headers)
        try:
            request = self._request(prepared, headers)
        except ValueError:
            return _failed(LEAVES_BASE)
        if check is not None:
            refusal = check(request)
            if refusal is not None:
                return _failed(refusal)
        redactor = Redactor(self._credentials(host_headers))
        try:
            with anyio.fail_after(self.timeout):
                exchanged = await self._exchange(request, headers, follow_redirects)
        except TimeoutError:
            return _failed(
                f"the API did not answer within {self.timeout:g} s "
                "(the request may have reached it)"
            )
        except httpx2.TimeoutException:
            return _failed(f"the API did not answer within {self.timeout:g} s")
        except httpx2.ProtocolError:
            return _failed(
                "the API's answer is not valid HTTP (a malformed or oversized status line or "
                "header); the request may have reached it"
            )
        except httpx2.DecodingError:
            return _failed(
                "the API's response could not be decoded (its Content-Encoding is malformed); "
                "the request may have reached it"
            )
        except httpx2.HTTPError:
            return _failed("the API could not be reached (connection failed)")
        response, body, truncated, exhausted = exchanged
        status = response.status_code
        coding = _undecodable(response)
        if coding is not None:
            return _failed(
                f"HTTP {status}: the response could not be decoded (Content-Encoding "
                f"{redactor.text(coding)[:40]!r} is not supported)",
                diagnostics={"status": status},
            )
        if exhausted:
            return _failed(
                f"HTTP {status}: the API redirected more than {MAX_REDIRECTS} times; "
                "not followed further",
                diagnostics={"status": status},
            )
        if status >= 300 or status < 200:
            return _failure(response, body, truncated, redactor)
        return self._success(response, body, truncated, has_output_schema, redactor)

    async def _exchange(
        self, request: httpx2.Request, headers: dict[str, str], follow_redirects: bool
    ) -> tuple[httpx2.Response, bytes, bool, bool]:
        """The last response, its body (at most the read limit), whether the body was
        cut there, and whether it is a redirect still to follow after the last allowed."""
        client = self.client()
        limit = max(self.result_bytes * 4, 64 * 1024)
        method = request.method
        for _ in range(MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                chunks: list[bytes] = []
                size = 0
                truncated = False
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > limit:
                        truncated = True
                        break
            finally:
                await response.aclose()
            body = b"".join(chunks)[:limit]
            follow = follow_redirects and method in ("GET", "HEAD")
            target = self._redirect_target(response) if follow else None
            if target is None:
                return response, body, truncated, False
            request = client.build_request(
                method,
                str(target.copy_with(query=None, fragment=None)),
                params=tuple(target.params.multi_items()),
                headers=headers,
            )
        return response, body, truncated, True  # still redirecting after the last one

    def _success(
        self,
        response: httpx2.Response,
        body: bytes,
        truncated: bool,
        has_output_schema: bool,
        redactor: Redactor,
    ) -> Reply:
        status = response.status_code
        media_type = _media_type(response)
        budget = self.result_bytes - RESULT_RESERVE
        if not body and not truncated:
            return Reply(Result([Text(_status_line(response, redactor))]))
        value: Any = _NOT_JSON
        if _is_json(media_type) and not truncated:
            value = _parse_json(body, response)
            if value is not _NOT_JSON:
                value = _redacted(value, body, response, redactor)
                try:
                    compact = json_bytes(value)
                    escaped = len(json.dumps(compact.decode("utf-8")))
                    if len(compact) + escaped <= budget:
                        return Reply(Result([Text(compact.decode())], structured=value))
                    if len(compact) + 200 <= budget:
                        note = (
                            f"HTTP {status}: a JSON response of {len(compact)} bytes, in the "
                            "structured content only (too large for a text copy as well)"
                        )
                        return Reply(Result([Text(note)], structured=value))
                except (ValueError, TypeError):
                    pass  # not representable as structured content: fall back to text
        # the header as written (not lower-cased), so a credential echoed there is found
        written_type = response.headers.get("content-type", "").split(";", 1)[0].strip()
        clean_type = not redactor.found(written_type)
        shown_type = redactor.text(written_type)[:100] or "no media type"
        if has_output_schema:
            why = (
                "is not JSON opgate reads (malformed, nested deeper than 128 levels, a repeated "
                "member name or a lone surrogate)"
                if _is_json(media_type) and not truncated and value is _NOT_JSON
                else "does not fit the result budget as structured content"
            )
            return _failed(
                f"HTTP {status}: the response ({len(body)}{'+' if truncated else ''} bytes, "
                f"{shown_type}) {why}"
            )
        if (
            media_type in _IMAGES
            and not truncated
            and len(body) <= MAX_INLINE_IMAGE
            and not redactor.found(body.decode("latin-1"))
        ):
            return Reply(Result([Image(body, media_type)]))
        if _is_json(media_type) or _TEXTUAL.match(media_type) or not media_type:
            text = _shown_text(_text_of(body, response), truncated, redactor)
            return Reply(Result([Text(_cut_text(text, truncated, budget))]))
        size = response.headers.get("content-length", "")
        length = int(size) if size.isdigit() and len(size) < 16 else len(body)
        note = f"HTTP {status}: a {shown_type} response of {length} bytes (not inlined)"
        uri = str(response.url)
        if redactor.found(uri):
            return Reply(Result([Text(f"{note}; its address holds a credential, not shown")]))
        link = ResourceLink(
            uri,
            response.url.path.rsplit("/", 1)[-1] or "response",
            mime_type=media_type if clean_type and _MEDIA.fullmatch(media_type) else None,
            size=length,
        )
        return Reply(Result([Text(note), link]))


_MEDIA = re.compile(r"[a-z0-9!#$&^_.+-]{1,64}/[a-z0-9!#$&^_.+-]{1,64}")
_NOT_JSON = object()
_EXPONENT = re.compile(r"[0-9][eE]")


def _status_line(response: httpx2.Response, redactor: Redactor) -> str:
    """``HTTP <status> <reason>``, the reason redacted before it is cut (so no part of
    a credential is left at the cut)."""
    reason = redactor.text(response.reason_phrase)[:200]
    reason = " ".join(_CONTROL.sub(" ", reason).split())
    return f"HTTP {response.status_code} {reason}".strip()


def _parse_json(body: bytes, response: httpx2.Response) -> Any:
    """The JSON value of ``body`` (opgate's strict parser), or ``_NOT_JSON``."""
    charset = (response.charset_encoding or "utf-8").lower().replace("_", "-")
    try:
        if charset in ("utf-8", "utf8"):
            return parse(body)
        return parse(_text_of(body, response))
    except JSONError:
        return _NOT_JSON


def _redacted(value: Any, body: bytes, response: httpx2.Response, redactor: Redactor) -> Any:
    """``value`` (parsed from ``body``) redacted; the secrets are looked for where the
    body, or its strings once their escapes are decoded and its numbers once written
    without an exponent, hold their runs."""
    probe = _text_of(body, response)
    if "\\u" in probe or _EXPONENT.search(probe):  # escapes and 4.8e7 hide a run
        probe += "\n" + json_bytes(value).decode("utf-8")
    return redactor.value(value, probe)


def _shown_text(text: str, truncated: bool, redactor: Redactor) -> str:
    """``text`` redacted; when the body was cut at the read limit, without the tail in
    which a credential could have been cut in two (and so not be recognised)."""
    return redactor.truncated(text) if truncated else redactor.text(text)


def _cut_text(text: str, truncated: bool, budget: int) -> str:
    """``text``, or its beginning with a note, so that its JSON string fits ``budget``."""
    limit = budget - 200
    if not truncated and _escaped_size(text) <= limit:
        return text
    kept = text
    for _ in range(8):
        size = _escaped_size(kept)
        if size <= limit:
            break
        kept = kept[: max(0, len(kept) * limit // size - 1)]
    return f"{kept}\n[cut: the response is longer than the result budget]"


def _escaped_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "replace"))


def _failure(response: httpx2.Response, body: bytes, truncated: bool, redactor: Redactor) -> Reply:
    status = response.status_code
    head = _status_line(response, redactor)
    if 300 <= status < 400:
        return _failed(
            f"{head}: the API redirected the request elsewhere; only a GET or HEAD redirect "
            "within the base URL is followed, and none of a confirmed request",
            diagnostics={"status": status},
        )
    value = _NOT_JSON if truncated else _parse_json(body, response)
    if value is not _NOT_JSON:
        text = json_bytes(_redacted(value, body, response, redactor)).decode()
    else:
        text = _shown_text(_text_of(body, response), truncated, redactor)
    excerpt = redactor.text(" ".join(_CONTROL.sub(" ", text).split()))
    if len(excerpt) > MAX_ERROR_EXCERPT:
        excerpt = excerpt[: MAX_ERROR_EXCERPT - 1] + "…"
    message = f"{head}: {excerpt}" if excerpt else head
    return _failed(message, diagnostics={"status": status})
