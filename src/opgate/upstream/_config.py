"""The upstreams file: the ``mcpServers`` format MCP clients use, read into frozen values.

``load_config(source, *, environ=None)`` accepts a ``pathlib.Path`` or other path-like
(the file is read), JSON text (``str`` or ``bytes``) or an already-parsed mapping, and returns a
``Config``. The shape::

    {"mcpServers": {
        "time":   {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"},
                   "cwd": "/srv", "tools": {"deny": ["convert_time"]}},
        "github": {"url": "https://api.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
                   "tools": {"allow": ["search_issues", "get_issue"]}}}}

* Members of the top-level object other than ``mcpServers`` are ignored (a client's
  own settings file may be given as it is).
* An upstream's name is 1 to ``MAX_UPSTREAM_NAME`` characters from ``[A-Za-z0-9_-]``:
  it becomes the group and the prefix of every operation name (``time.get_current_time``),
  so it holds no dot.
* An entry with ``command`` (and optionally ``args``, ``env``, ``cwd``) is a ``StdioServer``;
  one with ``url`` (and optionally ``headers``) an ``HTTPServer`` (streamable HTTP).
  ``type`` may say which (``"stdio"``; ``"http"``, ``"streamable-http"`` or
  ``"streamableHttp"``) and must then agree; ``"sse"`` is refused (not supported).
  ``"disabled": true`` leaves the entry out unread (its name is kept in
  ``Config.disabled``).
  Any other member is an error, so a misspelt ``"header"`` cannot silently drop a
  credential.
* ``tools`` (optional): ``{"allow": [names]}`` offers only the listed tools,
  ``{"deny": [names]}`` all but them; names are the upstream's own tool names,
  matched exactly. Not both.
* ``${VAR}`` in an ``env`` or ``headers`` value is replaced by the gateway's
  environment variable ``VAR``; ``${VAR:-default}`` uses ``default`` when ``VAR`` is
  unset or empty. A variable that is not set (and has no default) is an error naming
  the upstream and the variable. A default holding another reference
  (``${X:-${Y}}``) is an error: references do not nest (as in Claude Code's
  ``.mcp.json``; VS Code and Cursor use their own ``${env:VAR}``). ``$${`` writes a
  literal ``${``; any other ``$`` is kept as it is. No other member is expanded: a
  ``${`` in ``command``, ``args``, ``cwd`` or ``url`` is passed as it is, with a
  warning in ``Config.warnings``.
* Also in ``Config.warnings``: an HTTP entry that sends credentials (a header other
  than ``PLAIN_HEADERS``, or a password in the URL) over plain ``http://`` to a host
  that is not the loopback.

Every error is a ``ConfigError`` whose message starts with the RFC 6901 pointer of
the offending member (``/mcpServers/github/headers/Authorization``); the pointer is
also on ``.pointer``. Resolved ``env`` and ``headers`` values are secrets: the
values' ``repr`` shows their names only, and a URL's query and user information are
left out of it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from opgate.json import JSONError, parse
from opgate.loopback import is_loopback

__all__ = [
    "MAX_UPSTREAM_NAME",
    "PLAIN_HEADERS",
    "Config",
    "ConfigError",
    "HTTPServer",
    "ServerConfig",
    "StdioServer",
    "ToolFilter",
    "load_config",
]

#: Longest upstream name: it prefixes every operation name (at most 128 characters), so
#: it leaves at least 63 characters for the tool's own name.
MAX_UPSTREAM_NAME = 64

#: Header names (lower case) whose values are not credentials: not redacted from
#: answers, and not warned about over plain HTTP.
PLAIN_HEADERS = frozenset(
    {"accept", "accept-encoding", "accept-language", "content-type", "user-agent"}
)

_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_UPSTREAM_NAME}}}")
_VARIABLE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
# RFC 9110 field names (tokens); values may not hold CR, LF or NUL.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "tools", "type", "disabled"})
_HTTP_KEYS = frozenset({"url", "headers", "tools", "type", "disabled"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp"})


class ConfigError(ValueError):
    """The upstreams file is not usable; the message starts with the member's pointer."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer or '/'}: {message}")
        self.pointer = pointer


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Which of an upstream's tools are offered.

    * ``allow``: when not ``None``, only these tool names;
    * ``deny``: these tool names never (empty when ``allow`` is given).
    """

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    def admits(self, tool: str) -> bool:
        """Whether the upstream tool named ``tool`` is offered."""
        if self.allow is not None:
            return tool in self.allow
        return tool not in self.deny


@dataclass(frozen=True, slots=True)
class StdioServer:
    """An upstream started as a subprocess, spoken to over its stdin and stdout.

    * ``name``: the upstream's name (group and operation-name prefix);
    * ``command``, ``args``: what is run (``args`` a tuple);
    * ``env``: the variables the entry names, resolved (a read-only mapping); the
      process gets these and ``INHERITED_ENV`` only (see ``_session``);
    * ``cwd``: the working directory, or ``None`` for the gateway's own;
    * ``tools``: the ``ToolFilter``.
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cwd: str | None = None
    tools: ToolFilter = ToolFilter()

    def __repr__(self) -> str:
        return (
            f"StdioServer(name={self.name!r}, command={self.command!r}, args={self.args!r}, "
            f"env=<{', '.join(sorted(self.env))}>, cwd={self.cwd!r})"
        )


@dataclass(frozen=True, slots=True)
class HTTPServer:
    """An upstream reached over streamable HTTP.

    * ``name``: the upstream's name (group and operation-name prefix);
    * ``url``: the MCP endpoint (``http`` or ``https``);
    * ``headers``: sent with every request, resolved (a read-only mapping); nothing
      of the gateway's own clients (their bearer tokens included) is ever added;
    * ``tools``: the ``ToolFilter``.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tools: ToolFilter = ToolFilter()

    def __repr__(self) -> str:
        parts = urlsplit(self.url)
        shown = f"{parts.scheme}://{parts.hostname or ''}"
        if parts.port is not None:
            shown += f":{parts.port}"
        shown += parts.path
        return (
            f"HTTPServer(name={self.name!r}, url={shown!r}, "
            f"headers=<{', '.join(sorted(self.headers))}>)"
        )


ServerConfig: TypeAlias = StdioServer | HTTPServer


@dataclass(frozen=True, slots=True)
class Config:
    """The upstreams of one file, in the file's order.

    * ``servers``: the enabled entries (``StdioServer`` or ``HTTPServer``);
    * ``disabled``: the names of entries marked ``"disabled": true``;
    * ``warnings``: what is usable but likely a mistake, each message starting with
      the member's pointer as a ``ConfigError``'s does (see the module docstring).
    """

    servers: tuple[ServerConfig, ...] = ()
    disabled: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[ServerConfig]:
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self.servers)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _child(pointer: str, token: str) -> str:
    return f"{pointer}/{_escape(token)}"


def _string(value: object, pointer: str, what: str, *, nonempty: bool = True) -> str:
    if not isinstance(value, str):
        raise ConfigError(pointer, f"{what} must be a string")
    if nonempty and not value:
        raise ConfigError(pointer, f"{what} must not be empty")
    if "\0" in value:
        raise ConfigError(pointer, f"{what} must not contain a NUL character")
    return value


def _object(value: object, pointer: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(pointer, f"{what} must be an object")
    return value


def _expand(value: str, pointer: str, upstream: str, environ: Mapping[str, str]) -> str:
    """``value`` with every ``${VAR}`` and ``${VAR:-default}`` replaced, ``$${`` as ``${``."""
    parts: list[str] = []
    at = 0
    while (dollar := value.find("$", at)) >= 0:
        parts.append(value[at:dollar])
        if value.startswith("$${", dollar):
            parts.append("${")
            at = dollar + 3
            continue
        if not value.startswith("${", dollar):
            parts.append("$")
            at = dollar + 1
            continue
        end = value.find("}", dollar + 2)
        if end < 0:
            raise ConfigError(
                pointer, "an unterminated ${ (write ${NAME}, or $${ for a literal ${)"
            )
        written = value[dollar : end + 1]
        reference = _VARIABLE.fullmatch(value[dollar + 2 : end])
        if reference is None:
            raise ConfigError(
                pointer,
                f"{written!r} is not a variable reference: write ${{NAME}} or "
                "${NAME:-default}, NAME from [A-Za-z_][A-Za-z0-9_]*",
            )
        name, default = reference.group(1), reference.group(2)
        if default is not None and "${" in default:
            raise ConfigError(
                pointer, "a ${NAME:-default} default cannot hold another ${...}: they do not nest"
            )
        found = environ.get(name)
        if default is not None:
            parts.append(found if found else default)
        elif found is None:
            raise ConfigError(
                pointer,
                f"upstream {upstream!r} needs the environment variable {name}, "
                "which is not set in the gateway's environment",
            )
        else:
            parts.append(found)
        at = end + 1
    parts.append(value[at:])
    expanded = "".join(parts)
    if "\0" in expanded:
        raise ConfigError(pointer, "the expanded value contains a NUL character")
    return expanded


def _literal_warnings(entry: Mapping[str, Any], pointer: str) -> list[str]:
    """A warning for each ``${`` in a member that is not expanded."""
    found: list[str] = []
    for key in ("command", "cwd", "url"):
        if isinstance(entry.get(key), str) and "${" in entry[key]:
            found.append(_child(pointer, key))
    args = entry.get("args")
    if isinstance(args, list | tuple):
        found.extend(
            f"{_child(pointer, 'args')}/{index}"
            for index, item in enumerate(args)
            if isinstance(item, str) and "${" in item
        )
    return [
        f"{where}: ${{...}} is passed as it is here: only env and headers values are expanded"
        for where in found
    ]


def _clear_text_warnings(server: HTTPServer, pointer: str) -> list[str]:
    """A warning when ``server`` sends credentials over ``http://`` to another machine."""
    parts = urlsplit(server.url)
    if parts.scheme != "http" or is_loopback(parts.hostname or ""):
        return []
    credentials = [k for k in server.headers if k.lower() not in PLAIN_HEADERS]
    if parts.password:
        credentials.append("the URL's password")
    if not credentials:
        return []
    return [
        f"{_child(pointer, 'url')}: credentials ({', '.join(credentials)}) travel in clear "
        "over http:// to another machine: use https://"
    ]


def _strings(value: object, pointer: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ConfigError(pointer, f"{what} must be an array of strings")
    return tuple(
        _string(item, f"{pointer}/{index}", f"each of {what}", nonempty=False)
        for index, item in enumerate(value)
    )


def _tool_filter(value: object, pointer: str) -> ToolFilter:
    members = _object(value, pointer, "tools")
    keys = set(members)
    if keys not in ({"allow"}, {"deny"}):
        raise ConfigError(
            pointer, 'tools must be {"allow": [tool names]} or {"deny": [tool names]}'
        )
    (key,) = keys
    names = _strings(members[key], _child(pointer, key), f"tools.{key}")
    if len(set(names)) != len(names):
        raise ConfigError(_child(pointer, key), f"tools.{key} names a tool twice")
    for index, name in enumerate(names):
        if not name:
            raise ConfigError(f"{pointer}/{key}/{index}", "a tool name must not be empty")
    if key == "allow":
        return ToolFilter(allow=frozenset(names))
    return ToolFilter(deny=frozenset(names))


def _variables(
    value: object, pointer: str, what: str, upstream: str, environ: Mapping[str, str]
) -> Mapping[str, str]:
    members = _object(value, pointer, what)
    resolved: dict[str, str] = {}
    for key, item in members.items():
        where = _child(pointer, key)
        _string(item, where, f"each {what} value", nonempty=False)
        resolved[key] = _expand(item, where, upstream, environ)
    return MappingProxyType(resolved)


def _stdio(
    name: str, entry: Mapping[str, Any], pointer: str, environ: Mapping[str, str]
) -> StdioServer:
    command = _string(entry["command"], _child(pointer, "command"), "command")
    args = _strings(entry.get("args", []), _child(pointer, "args"), "args")
    env: Mapping[str, str] = MappingProxyType({})
    if "env" in entry:
        env = _variables(entry["env"], _child(pointer, "env"), "env", name, environ)
        for key in env:
            if not key or "=" in key or "\0" in key:
                raise ConfigError(
                    _child(_child(pointer, "env"), key),
                    "an environment variable name must be nonempty, without '=' or NUL",
                )
    cwd = None
    if "cwd" in entry:
        cwd = _string(entry["cwd"], _child(pointer, "cwd"), "cwd")
    tools = _tool_filter(entry["tools"], _child(pointer, "tools")) if "tools" in entry else None
    return StdioServer(name, command, args, env, cwd, tools or ToolFilter())


def _http(
    name: str, entry: Mapping[str, Any], pointer: str, environ: Mapping[str, str]
) -> HTTPServer:
    where = _child(pointer, "url")
    url = _string(entry["url"], where, "url")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ConfigError(where, "url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(where, "url must be an http:// or https:// URL with a host")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise ConfigError(where, "url must not contain spaces or control characters")
    headers: Mapping[str, str] = MappingProxyType({})
    if "headers" in entry:
        headers = _variables(entry["headers"], _child(pointer, "headers"), "headers", name, environ)
        for key, value in headers.items():
            at = _child(_child(pointer, "headers"), key)
            if not _HEADER_NAME.fullmatch(key):
                raise ConfigError(at, "a header name must be an HTTP token")
            if any(c in value for c in "\r\n\0"):
                raise ConfigError(at, "a header value must not contain CR, LF or NUL")
    tools = _tool_filter(entry["tools"], _child(pointer, "tools")) if "tools" in entry else None
    return HTTPServer(name, url, headers, tools or ToolFilter())


def _server(
    name: str, entry: Mapping[str, Any], pointer: str, environ: Mapping[str, str]
) -> ServerConfig:
    kind = entry.get("type")
    if kind is not None and not isinstance(kind, str):
        raise ConfigError(
            _child(pointer, "type"),
            'type must be a string: "stdio" or "http" ("streamable-http", "streamableHttp")',
        )
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        if kind == "sse":
            raise ConfigError(
                _child(pointer, "type"),
                "SSE upstreams are not supported: use stdio or streamable HTTP",
            )
        raise ConfigError(
            _child(pointer, "type"),
            'type must be "stdio" or "http" ("streamable-http", "streamableHttp")',
        )
    if "command" in entry and "url" in entry:
        raise ConfigError(pointer, "an upstream has either command (stdio) or url (HTTP)")
    if "command" in entry:
        if kind is not None and kind != "stdio":
            raise ConfigError(_child(pointer, "type"), f"type {kind!r} needs url, not command")
        allowed = _STDIO_KEYS
    elif "url" in entry:
        if kind == "stdio":
            raise ConfigError(_child(pointer, "type"), "type 'stdio' needs command, not url")
        allowed = _HTTP_KEYS
    else:
        raise ConfigError(pointer, "an upstream needs command (stdio) or url (HTTP)")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(
            _child(pointer, unknown[0]),
            f"unknown member {unknown[0]!r} (an entry may have: {', '.join(sorted(allowed))})",
        )
    if "command" in entry:
        return _stdio(name, entry, pointer, environ)
    return _http(name, entry, pointer, environ)


def _document(source: object) -> object:
    if isinstance(source, os.PathLike):
        try:
            text = Path(source).read_bytes()
        except OSError as exc:
            raise ConfigError("", f"cannot read {os.fspath(source)!r}: {exc.strerror}") from None
        return _parsed(text)
    if isinstance(source, str | bytes):
        return _parsed(source)
    if isinstance(source, Mapping):
        return source
    raise TypeError("the upstreams config must be a Path, JSON text or a mapping")


def _parsed(text: str | bytes) -> object:
    try:
        return parse(text)
    except JSONError as exc:
        raise ConfigError(exc.pointer or "", f"not valid JSON: {exc.reason}") from None


def load_config(source: object, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read the upstreams file ``source`` (see the module docstring).

    ``environ`` (default ``os.environ``) is where ``${VAR}`` references are looked up;
    it is read here, once. Raises ``ConfigError`` naming the pointer of what is
    wrong, ``TypeError`` for a ``source`` of another type.
    """
    document = _document(source)
    environ = os.environ if environ is None else environ
    top = _object(document, "", "the upstreams config")
    if "mcpServers" not in top:
        raise ConfigError("", 'the upstreams config needs "mcpServers": {NAME: {...}}')
    entries = _object(top["mcpServers"], "/mcpServers", "mcpServers")
    servers: list[ServerConfig] = []
    disabled: list[str] = []
    warnings: list[str] = []
    for name, entry in entries.items():
        pointer = _child("/mcpServers", name)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                pointer,
                f"an upstream name must be 1 to {MAX_UPSTREAM_NAME} characters from "
                "[A-Za-z0-9_-] (it prefixes the operation names)",
            )
        members = _object(entry, pointer, f"upstream {name!r}")
        flag = members.get("disabled", False)
        if not isinstance(flag, bool):
            raise ConfigError(_child(pointer, "disabled"), "disabled must be true or false")
        if flag:  # not read further: a disabled entry needs none of its variables
            disabled.append(name)
        else:
            server = _server(name, members, pointer, environ)
            servers.append(server)
            warnings.extend(_literal_warnings(members, pointer))
            if isinstance(server, HTTPServer):
                warnings.extend(_clear_text_warnings(server, pointer))
    return Config(tuple(servers), tuple(disabled), tuple(warnings))
