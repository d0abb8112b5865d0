"""Sending a prepared request to the host's API, and mapping the response to an outcome.

``Upstream`` owns the one ``httpx2.AsyncClient`` a catalog shares (created on first
use, closed by ``Catalog.aclose()``), the base URL, the timeouts and the budgets.

Requests
--------
* The URL is the host's base URL followed by the operation's percent-encoded path;
  the final URL is checked to have the base URL's scheme, host and port and to lie
  under its path before anything is sent. Arguments never hold a URL.
* Headers: the parameter headers, then the host's headers (credentials) on top; a
  parameter can never replace a host header.
* Redirects are never followed by the client. A redirect of a ``GET``/``HEAD`` to a
  URL under the same base URL is followed (at most ``MAX_REDIRECTS`` times), unless
  ``send(follow_redirects=False)`` (a confirmed request); any other redirect ends the
  call with a failure that does not reveal the location.
* ``build`` makes the exact first request (``request_headers`` composes its
  headers) without sending it, for the confirmation form; ``send(check=...)`` lets
  the caller refuse that exact request before anything is sent.
* ``timeout`` bounds the whole exchange, body included; the client's own connect,
  read, write and pool timeouts use the same value. ``trust_env`` is off: no proxy,
  ``.netrc`` or certificate settings are picked up from the environment behind the
  host's back (pass your own ``client=`` for those). The client keeps no cookies: a
  ``Set-Cookie`` in one principal's response never rides on another's request.

Responses
---------
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
  characters of the body with control characters removed, whitespace collapsed and
  every host header value replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import anyio
import httpx2

from opgate import Image, ResourceLink, Result, Text, fail, finish

from ._request import PreparedRequest, json_bytes

__all__ = [
    "MAX_ERROR_EXCERPT",
    "MAX_REDIRECTS",
    "Reply",
    "Upstream",
    "check_base_url",
    "request_headers",
]

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


def request_headers(prepared: PreparedRequest, host_headers: Mapping[str, str]) -> dict[str, str]:
    """The headers opgate sets: parameters, ``Content-Type``, ``Accept``, the host's on top."""
    headers: dict[str, str] = {}
    lowered_host = {name.lower() for name in host_headers}
    for name, value in prepared.headers:
        if name.lower() not in lowered_host:
            headers[name] = value
    if prepared.content_type is not None:
        headers["Content-Type"] = prepared.content_type
    headers.setdefault("Accept", "application/json, */*;q=0.5")
    headers.update(host_headers)
    return headers


def _media_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type.endswith(("/json", "+json"))


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
        self._base_path = self.base.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
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
        path = url.raw_path.decode("ascii").split("?", 1)[0]
        return path == self._base_path or path.startswith(self._base_path + "/")

    def build(self, prepared: PreparedRequest, headers: Mapping[str, str]) -> httpx2.Request:
        """The first request for ``prepared`` with ``headers`` (``request_headers``), unsent.

        ``ValueError`` if it would leave the base URL.
        """
        return self.client().build_request(
            prepared.method,
            self.url(prepared.path),
            params=list(prepared.query),
            headers=headers,
            content=prepared.content,
        )

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
        headers = request_headers(prepared, host_headers)
        try:
            request = self.build(prepared, headers)
        except ValueError:
            return _failed("refused: the request would leave the API's base URL")
        if check is not None:
            refusal = check(request)
            if refusal is not None:
                return _failed(refusal)
        secrets = sorted(
            {v for v in host_headers.values() if len(v) >= 4}
            | {part for v in host_headers.values() for part in v.split() if len(part) >= 8},
            key=len,
            reverse=True,
        )
        try:
            with anyio.fail_after(self.timeout):
                response, body, truncated = await self._exchange(request, headers, follow_redirects)
        except TimeoutError:
            return _failed(
                f"the API did not answer within {self.timeout:g} s "
                "(the request may have reached it)"
            )
        except httpx2.TimeoutException:
            return _failed(f"the API did not answer within {self.timeout:g} s")
        except httpx2.HTTPError:
            return _failed("the API could not be reached (connection failed)")
        status = response.status_code
        if status >= 300 or status < 200:
            return _failure(response, body, secrets)
        return self._success(response, body, truncated, has_output_schema)

    async def _exchange(
        self, request: httpx2.Request, headers: dict[str, str], follow_redirects: bool
    ) -> tuple[httpx2.Response, bytes, bool]:
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
            location = response.headers.get("location")
            follow = follow_redirects and method in ("GET", "HEAD")
            if response.is_redirect and location and follow:
                target = response.url.join(location)
                if self._inside(target):
                    request = client.build_request(
                        method,
                        str(target.copy_with(query=None)),
                        params=tuple(target.params.multi_items()),
                        headers=headers,
                    )
                    continue
            return response, body, truncated
        return response, body, truncated

    def _success(
        self, response: httpx2.Response, body: bytes, truncated: bool, has_output_schema: bool
    ) -> Reply:
        status = response.status_code
        media_type = _media_type(response)
        budget = self.result_bytes - RESULT_RESERVE
        if not body and not truncated:
            return Reply(Result([Text(f"HTTP {status} {response.reason_phrase}".strip())]))
        if _is_json(media_type) and not truncated:
            value = _parse_json(body)
            if value is not _NOT_JSON:
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
                    pass  # not representable (lone surrogates, depth): fall back to text
        if has_output_schema:
            return _failed(
                f"HTTP {status}: the response ({len(body)}{'+' if truncated else ''} bytes, "
                f"{media_type or 'no media type'}) does not fit the result budget "
                "as structured content"
            )
        if media_type in _IMAGES and not truncated and len(body) <= MAX_INLINE_IMAGE:
            return Reply(Result([Image(body, media_type)]))
        if _is_json(media_type) or _TEXTUAL.match(media_type) or not media_type:
            return Reply(Result([Text(_cut_text(body, truncated, budget, response))]))
        size = response.headers.get("content-length", "")
        length = int(size) if size.isdigit() and len(size) < 16 else len(body)
        link = ResourceLink(
            str(response.url),
            response.url.path.rsplit("/", 1)[-1] or "response",
            mime_type=media_type if _MEDIA.fullmatch(media_type) else None,
            size=length,
        )
        note = f"HTTP {status}: a {media_type} response of {length} bytes (not inlined)"
        return Reply(Result([Text(note), link]))


_MEDIA = re.compile(r"[a-z0-9!#$&^_.+-]{1,64}/[a-z0-9!#$&^_.+-]{1,64}")
_NOT_JSON = object()


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body, parse_float=Decimal, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _cut_text(body: bytes, truncated: bool, budget: int, response: httpx2.Response) -> str:
    text = body.decode(response.encoding or "utf-8", errors="replace")
    limit = budget // 2  # JSON escaping may double the size of awkward text
    if len(text.encode("utf-8")) <= limit and not truncated:
        return text
    kept = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[cut: the response is longer than the result budget]"


def _failure(response: httpx2.Response, body: bytes, secrets: list[str]) -> Reply:
    status = response.status_code
    head = f"HTTP {status} {response.reason_phrase}".strip()
    if 300 <= status < 400:
        return _failed(
            f"{head}: the API redirected the request elsewhere; only a GET or HEAD redirect "
            "within the base URL is followed, and none of a confirmed request",
            diagnostics={"status": status},
        )
    text = body.decode(response.encoding or "utf-8", errors="replace")
    value = _parse_json(body)
    if value is not _NOT_JSON:
        text = json_bytes(value).decode()
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    excerpt = " ".join(_CONTROL.sub(" ", text).split())
    if len(excerpt) > MAX_ERROR_EXCERPT:
        excerpt = excerpt[: MAX_ERROR_EXCERPT - 1] + "…"
    message = f"{head}: {excerpt}" if excerpt else head
    return _failed(message, diagnostics={"status": status})
