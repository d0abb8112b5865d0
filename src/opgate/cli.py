"""The ``opgate`` command line: ``opgate serve`` and ``opgate demo``.

``opgate serve MODULE:ATTR`` serves a registry over stdio, or over streamable
HTTP with ``--http [HOST:]PORT`` (127.0.0.1 unless a host is given). ``ATTR`` is
an ``opgate.Registry``, an ``opgate.mcp.GatewayServer``, or a callable taking no
arguments that returns one of them. Over stdio nothing but MCP messages is
written to stdout; logs go to stderr.

Several replicas serve one catalog when they share a secret (``OPGATE_SECRET``, or
``--secret-file PATH``; never a command-line value, which other users of the
machine could read) and a continuation ledger (``--ledger redis://HOST:PORT/DB``, or
the URL in ``OPGATE_LEDGER_URL``; Redis's password in ``OPGATE_LEDGER_PASSWORD`` or
``--ledger-password-file PATH``, never on the command line); see docs/deployment.md.

``opgate serve --openapi SPEC --base-url URL [--header NAME=ENVVAR ...]
[--confirm METHODS]`` serves every operation of an OpenAPI 3.0/3.1 file instead
(``opgate.openapi``): each ``--header`` sends the value of environment variable
``ENVVAR`` as header ``NAME`` on every call (credentials never appear on the command
line); ``--confirm`` lists the methods a person must confirm (default
``POST,PUT,PATCH,DELETE``; ``none`` for none). Every MCP principal is allowed every
operation: put an authenticating proxy or ``--token-verifier`` in front, and give
the upstream credentials only the rights the agents may use.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import ipaddress
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]

LOOPBACK = "127.0.0.1"

#: The environment variable that carries the shared secret (its UTF-8 bytes).
SECRET_ENV = "OPGATE_SECRET"

#: The environment variables that carry the ledger's URL (it may hold credentials) and
#: Redis's password: the command line of a process is readable by every local user.
LEDGER_URL_ENV = "OPGATE_LEDGER_URL"
LEDGER_PASSWORD_ENV = "OPGATE_LEDGER_PASSWORD"

#: Longest secret or password file read.
SECRET_FILE_BYTES = 8192


class UsageError(Exception):
    """A command-line mistake; the message says what to do."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "serve":
            return _serve(arguments)
        if arguments.command == "demo":
            from .demo import run, serve

            return serve(arguments.database) if arguments.serve else run(arguments.database)
    except UsageError as exc:
        parser.exit(2, f"opgate {arguments.command}: {exc}\n")
    return 2  # pragma: no cover - argparse rejects unknown commands


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opgate", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve a registry over MCP (stdio, or streamable HTTP with --http)",
        description="Serve MODULE:ATTR (a Registry, a GatewayServer, or a factory of one), "
        "or the operations of an OpenAPI document (--openapi SPEC --base-url URL).",
    )
    serve.add_argument("target", metavar="MODULE:ATTR", nargs="?")
    serve.add_argument(
        "--openapi",
        metavar="SPEC",
        help="serve the operations of this OpenAPI 3.0/3.1 file (JSON or YAML) instead",
    )
    serve.add_argument("--base-url", metavar="URL", help="with --openapi: where calls go")
    serve.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=ENVVAR",
        help="with --openapi: send header NAME with the value of $ENVVAR (repeatable)",
    )
    serve.add_argument(
        "--confirm",
        metavar="METHODS",
        default="POST,PUT,PATCH,DELETE",
        help="with --openapi: methods a person confirms before sending (or 'none')",
    )
    serve.add_argument(
        "--output-schemas",
        action="store_true",
        help="with --openapi: declare output schemas from the JSON success responses",
    )
    serve.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp (HOST defaults to 127.0.0.1)",
    )
    serve.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME",
        help="also offer this operation as its own MCP tool (repeatable)",
    )
    serve.add_argument(
        "--ranking",
        choices=("rule", "relevance"),
        help="order search results by the substring rule or by relevance "
        "(default: the registry's own, which is the rule unless it chose otherwise)",
    )
    serve.add_argument("--name", default="opgate", help="the server name clients see")
    serve.add_argument(
        "--token-verifier",
        metavar="MODULE:ATTR",
        help="HTTP bearer authentication: an mcp TokenVerifier (or a factory of one)",
    )
    serve.add_argument("--issuer-url", help="with --token-verifier: the authorization server's URL")
    serve.add_argument(
        "--resource-url", help="with --token-verifier: this server's public URL (RFC 9728)"
    )
    serve.add_argument(
        "--required-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="with --token-verifier: a scope every token must carry (repeatable)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="Host header values to accept (DNS-rebinding protection; repeatable)",
    )
    serve.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="Origin header values to accept (repeatable)",
    )
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="allow --http on a non-loopback address without --token-verifier",
    )
    for flag, kind, metavar, text in _HTTP_LIMIT_OPTIONS:
        serve.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)
    serve.add_argument(
        "--secret-file",
        metavar="PATH",
        help=f"the shared secret (32+ bytes; one trailing newline ignored); default: ${SECRET_ENV}",
    )
    serve.add_argument(
        "--ledger",
        metavar="URL",
        help="a shared continuation ledger, redis://HOST:PORT/DB (needs the shared secret; "
        f"no password here: see --ledger-password-file); default: ${LEDGER_URL_ENV}",
    )
    serve.add_argument(
        "--ledger-password-file",
        metavar="PATH",
        help="with a ledger: Redis's password (one trailing newline ignored); "
        f"default: ${LEDGER_PASSWORD_ENV}",
    )
    serve.add_argument(
        "--ledger-prefix",
        default="opgate",
        metavar="NAME",
        help="with --ledger: the deployment's key prefix in Redis (default opgate)",
    )
    serve.add_argument(
        "--ledger-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --ledger: how long a transition survives its replica (default 15)",
    )
    serve.add_argument(
        "--log-level",
        default=os.environ.get("OPGATE_LOG_LEVEL", "WARNING"),
        help="Python logging level of opgate's loggers on stderr (default WARNING)",
    )
    serve.add_argument(
        "--log-logger",
        action="append",
        default=[],
        metavar="NAME",
        help="also log this third-party logger (and its children) at --log-level "
        "(repeatable); the others stay at WARNING: at DEBUG some log message content",
    )
    demo = commands.add_parser("demo", help="run the bundled support-desk demo over MCP")
    demo.add_argument("--serve", action="store_true", help="only serve the demo on stdio")
    demo.add_argument("--database", metavar="PATH", help="the SQLite file (default: data dir)")
    return parser


#: ``opgate serve --http`` options for ``opgate.mcp.HTTPLimits`` fields (defaults there).
_HTTP_LIMIT_OPTIONS: tuple[tuple[str, type, str, str], ...] = (
    ("--max-sessions", int, "N", "with --http: open 2025-11-25 sessions (default 1000)"),
    (
        "--principal-sessions",
        int,
        "N",
        "with --http: open sessions of one principal (default 32)",
    ),
    (
        "--session-idle-timeout",
        float,
        "SECONDS",
        "with --http: close a session idle this long (default 600)",
    ),
    (
        "--principal-requests",
        int,
        "N",
        "with --http: requests of one principal in flight at once (default 64)",
    ),
    (
        "--max-connections",
        int,
        "N",
        "with --http: open connections; beyond it the one arriving or idle longest is closed "
        "(default 2048)",
    ),
    (
        "--header-timeout",
        float,
        "SECONDS",
        "with --http: time to receive a request's head (default 10)",
    ),
    (
        "--body-timeout",
        float,
        "SECONDS",
        "with --http: time to receive a request's body after its head (default 30)",
    ),
    (
        "--keep-alive-timeout",
        float,
        "SECONDS",
        "with --http: idle time between requests on one connection (default 5)",
    ),
)


def _http_limits(arguments: argparse.Namespace) -> Any:
    """The ``HTTPLimits`` the ``--http`` limit options give (None without any)."""
    given = {
        flag[2:].replace("-", "_"): getattr(arguments, flag[2:].replace("-", "_"))
        for flag, *_ in _HTTP_LIMIT_OPTIONS
    }
    given = {name: value for name, value in given.items() if value is not None}
    if given and arguments.http is None:
        raise UsageError(f"--{next(iter(given)).replace('_', '-')} needs --http")
    from .mcp import HTTPLimits

    return HTTPLimits(**given)


def _load(spec: str, what: str, *, find: bool = False) -> Any:
    """The object ``MODULE:ATTR`` or ``PATH.py:ATTR`` names (``ATTR`` may be dotted).

    A spec ending in ``.py``, or naming an existing file, is loaded from that file, its
    directory first on ``sys.path`` so that its sibling modules import; anything else is
    imported as a module, the working directory importable. With ``find``, ``:ATTR`` may
    be left out: the one ``Registry`` or ``GatewayServer`` the module defines at its top
    level is returned (a registry a gateway there serves counts as that gateway). Every
    failure to import is one ``UsageError`` naming the working directory and the search
    path; the traceback goes to the ``opgate.serve`` log at DEBUG.
    """
    source, attribute, is_file = _split_spec(spec)
    if not source or (not attribute and not find):
        raise UsageError(
            f"{what} must be MODULE:ATTR or PATH.py:ATTR, for example myapp.catalog:registry "
            "or app.py:registry"
        )
    module = _import_file(source) if is_file else _import_module(source)
    if not attribute:
        return _find_served(module, source)
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"{source!r} has no attribute {attribute!r}") from None
    return value


def _split_spec(spec: str) -> tuple[str, str, bool]:
    """``(module or path, attribute or "", is a file)`` of a ``--target``-style spec."""
    if spec.endswith(".py") or os.path.isfile(spec):
        return spec, "", True
    head, separator, tail = spec.rpartition(":")
    if separator and (head.endswith(".py") or os.path.isfile(head)):
        return head, tail, True
    module, _, attribute = spec.partition(":")
    return module, attribute, False


def _import_module(name: str) -> Any:
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except Exception as exc:
        raise _import_failure(repr(name), exc) from None


def _import_file(source: str) -> Any:
    """The module of the file ``source``, executed once however often it is named."""
    import hashlib
    import importlib.machinery
    import importlib.util

    path = os.path.abspath(source)
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {source} (working directory: {os.getcwd()})")
    directory = os.path.dirname(path)
    if sys.path[:1] != [directory]:
        sys.path.insert(0, directory)
    stem = os.path.splitext(os.path.basename(path))[0]
    # Under its own name when free, so that a sibling importing it gets this module; a
    # name already taken (a standard module, another file) gets a private one instead.
    for name in (stem, f"_opgate_file_{hashlib.sha256(path.encode()).hexdigest()[:16]}"):
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__file__", None) == path:
            return loaded
        if loaded is None and name.isidentifier():
            break
    # The source loader explicitly: a file without the .py suffix is Python source too.
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _import_failure(source, exc) from None
    return module


def _import_failure(source: str, exc: Exception) -> UsageError:
    """One message for a module that failed to import: why, where, and the search path.

    MCP clients start servers from a directory and with an environment of their own, so
    the usual cause is a search path other than the one the user tried in a terminal.
    """
    serve_logger.debug("importing %s failed", source, exc_info=exc)
    if isinstance(exc, SyntaxError):
        reason = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        reason = f"{type(exc).__name__}: {str(exc)[:300]}"
        frames = [
            frame
            for frame in traceback.extract_tb(exc.__traceback__)
            if not frame.filename.startswith("<") and frame.filename != __file__
        ]
        if frames:
            reason += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    lines = [
        f"cannot import {source}: {''.join(map(_visible, reason))}",
        f"  working directory: {os.getcwd()}",
        f"  python: {sys.executable}",
        "  search path (sys.path):",
        *(f"    {entry or '(the working directory)'}" for entry in sys.path),
        "An MCP client starts the server in its own directory with a reduced environment: "
        "give the file's full path, or set cwd and env (PYTHONPATH) in the client's "
        "configuration; --log-level DEBUG shows the traceback.",
    ]
    return UsageError("\n".join(lines))


def _find_served(module: Any, source: str) -> Any:
    """The one ``Registry`` or ``GatewayServer`` at the top level of ``module``."""
    from . import Operation, Registry
    from .mcp import GatewayServer

    names: dict[int, list[str]] = {}
    objects: dict[int, Any] = {}
    for name, value in vars(module).items():
        if isinstance(value, Registry | GatewayServer):
            names.setdefault(id(value), []).append(name)
            objects[id(value)] = value
    for value in list(objects.values()):
        if isinstance(value, GatewayServer):
            objects.pop(id(value.registry), None)  # the gateway serves it
    if len(objects) == 1:
        return next(iter(objects.values()))
    if objects:
        found = ", ".join(names[key][0] for key in objects)
        raise UsageError(
            f"{source} defines several registries or servers ({found}): name the one "
            f"to serve, as {source}:{names[next(iter(objects))][0]}"
        )
    operations = [name for name, value in vars(module).items() if isinstance(value, Operation)]
    functions = [
        name
        for name, value in vars(module).items()
        if callable(value)
        and not isinstance(value, Operation | type)
        and getattr(value, "__module__", None) == module.__name__
        and not name.startswith("_")
    ]
    defined = []
    if operations:
        defined.append(f"operations {', '.join(operations)}")
    if functions:
        defined.append(f"functions {', '.join(functions)}")
    found = f"; it defines {' and '.join(defined)}" if defined else ""
    factory = functions[0] if functions else "build_registry"
    raise UsageError(
        f"{source} defines no Registry or GatewayServer at its top level{found}: add "
        "one (registry = Registry([...], LocalPolicy())), or name a function returning "
        f"one, as {source}:{factory}"
    )


def _read_secret_file(path: str, option: str) -> bytes:
    """A secret file's bytes, one trailing newline dropped."""
    try:
        with open(path, "rb") as file:
            secret = file.read(SECRET_FILE_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read {option}: {exc.strerror}") from None
    return secret[:-1] if secret.endswith(b"\n") else secret


def _secret(arguments: argparse.Namespace) -> bytes | None:
    """The shared secret from ``--secret-file`` or ``OPGATE_SECRET``, if any."""
    if arguments.secret_file:
        return _read_secret_file(arguments.secret_file, "--secret-file")
    value = os.environ.get(SECRET_ENV)
    return value.encode("utf-8") if value else None


def _ledger_password(arguments: argparse.Namespace) -> str | None:
    """Redis's password from ``--ledger-password-file`` or ``OPGATE_LEDGER_PASSWORD``."""
    if arguments.ledger_password_file:
        data = _read_secret_file(arguments.ledger_password_file, "--ledger-password-file")
        try:
            password = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("--ledger-password-file must hold UTF-8 text") from None
        if not password:
            raise UsageError("--ledger-password-file is empty")
        return password
    return os.environ.get(LEDGER_PASSWORD_ENV) or None


def _ledger_url(arguments: argparse.Namespace) -> tuple[str, str] | None:
    """The ledger URL and where it came from (``--ledger`` or ``OPGATE_LEDGER_URL``)."""
    from_env = os.environ.get(LEDGER_URL_ENV) or None
    if arguments.ledger is None:
        return None if from_env is None else (from_env, f"${LEDGER_URL_ENV}")
    if from_env is not None:
        raise UsageError(f"give the ledger URL once: --ledger or ${LEDGER_URL_ENV}, not both")
    return arguments.ledger, "--ledger"


def _ledger(arguments: argparse.Namespace) -> Any:
    """The shared ledger ``--ledger`` (or ``OPGATE_LEDGER_URL``) names, if any."""
    found = _ledger_url(arguments)
    if found is None:
        if arguments.ledger_lease is not None:
            raise UsageError("--ledger-lease needs --ledger")
        if arguments.ledger_password_file:
            raise UsageError("--ledger-password-file needs --ledger")
        return None
    url, source = found
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise UsageError(f"{source} must be a redis://HOST:PORT/DB, rediss:// or unix:// URL")
    try:
        from redis.asyncio.connection import parse_url

        from .redis import RedisLedger, url_has_password
    except ImportError:
        raise UsageError("--ledger needs the redis extra: pip install 'opgate[redis]'") from None
    from datetime import timedelta

    try:
        in_url = url_has_password(url)
        options_in_url: dict[str, Any] = dict(parse_url(url))
    except ValueError:
        raise UsageError(f"{source} is not a Redis URL redis-py can read") from None
    if url.startswith("rediss://") and options_in_url.get("ssl_cert_reqs") in ("none", "optional"):
        print(
            "opgate: warning: the ledger URL turns TLS certificate verification off "
            "(ssl_cert_reqs): whoever is on the path can pose as Redis and read its password",
            file=sys.stderr,
            flush=True,
        )
    if in_url and source == "--ledger":
        # Refused, not warned: the process list shows a command line to every local user.
        raise UsageError(
            "the --ledger URL holds a password, which every user of this machine can read "
            f"in the process list: give it with --ledger-password-file PATH or "
            f"${LEDGER_PASSWORD_ENV}, or put the whole URL in ${LEDGER_URL_ENV}"
        )
    options: dict[str, Any] = {"prefix": arguments.ledger_prefix}
    if arguments.ledger_lease is not None:
        options["lease"] = timedelta(seconds=arguments.ledger_lease)
    password = _ledger_password(arguments)
    if password is not None:
        if in_url:
            raise UsageError(
                f"{source} already holds a password: drop it there or drop "
                f"--ledger-password-file/${LEDGER_PASSWORD_ENV}"
            )
        options["password"] = password
    host = options_in_url.get("host", "")
    if (in_url or password is not None) and url.startswith("redis://") and not _is_loopback(host):
        print(
            "opgate: warning: Redis's password travels in clear over redis:// to another "
            "machine: use rediss:// (TLS)",
            file=sys.stderr,
            flush=True,
        )
    try:
        return RedisLedger(url, **options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class _ServePolicy:
    """``opgate serve --openapi``: every principal may use every operation."""

    def scope_key(self, ctx: Any) -> str:
        return str(getattr(ctx, "scope_key", "local"))

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


def _openapi_registry(arguments: argparse.Namespace) -> Any:
    """The registry of ``--openapi SPEC`` (the report goes to stderr)."""
    from pathlib import Path

    from .openapi import DocumentError, build_catalog

    if arguments.target:
        raise UsageError("give either MODULE:ATTR or --openapi SPEC, not both")
    if not arguments.base_url:
        raise UsageError("--openapi needs --base-url URL (where the API's calls go)")
    headers: dict[str, str] = {}
    for item in arguments.header:
        name, separator, variable = item.partition("=")
        if not separator or not name or not variable:
            raise UsageError(f"--header needs NAME=ENVVAR, got {item!r}")
        if variable not in os.environ:
            raise UsageError(f"--header {name}: environment variable {variable} is not set")
        headers[name] = os.environ[variable]
    confirm = arguments.confirm.strip()
    methods = [] if confirm.lower() == "none" else [m for m in confirm.split(",") if m.strip()]
    if not methods and confirm.lower() != "none":
        # an unset variable in a script must not turn the human gate off unnoticed
        raise UsageError("--confirm needs methods (such as POST,DELETE) or 'none'; it was blank")
    try:
        catalog = build_catalog(
            Path(arguments.openapi),
            base_url=arguments.base_url,
            headers=headers,
            confirm=[m.strip() for m in methods],
            output_schemas=arguments.output_schemas,
        )
    except OSError as exc:
        raise UsageError(f"cannot read {arguments.openapi}: {exc.strerror}") from None
    except (DocumentError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    registry = catalog.registry(_ServePolicy())
    print(f"opgate: {catalog.report.summary()}", file=sys.stderr, flush=True)
    for issue in catalog.report.skipped:
        logging.getLogger("opgate.openapi").info("skipped %s", issue)
    return registry


def _gateway(arguments: argparse.Namespace) -> Any:
    from . import Ranking, Registry
    from .mcp import GatewayServer

    secret = _secret(arguments)
    ledger = _ledger(arguments)
    if ledger is not None and secret is None:
        raise UsageError(
            f"--ledger needs the shared secret: set {SECRET_ENV} or pass --secret-file"
        )
    if arguments.openapi:
        target = _openapi_registry(arguments)
    elif not arguments.target:
        raise UsageError("give MODULE:ATTR (a registry) or --openapi SPEC --base-url URL")
    else:
        target = _load(arguments.target, "the target", find=True)
    if not isinstance(target, Registry | GatewayServer) and callable(target):
        target = target()
    ranking = None if arguments.ranking is None else Ranking(arguments.ranking)
    try:
        return _served(target, arguments, secret, ledger, ranking)
    except ImportError as exc:  # Ranking.RELEVANCE without its extra: say how to install it
        raise UsageError(str(exc)) from None


def _served(
    target: object,
    arguments: argparse.Namespace,
    secret: bytes | None,
    ledger: Any,
    ranking: Any,
) -> Any:
    """The gateway to serve: ``target`` with the shared state and ranking applied."""
    from . import Registry
    from .mcp import GatewayServer

    changes: dict[str, Any] = {}
    if secret is not None:
        changes.update(secret=secret, ledger=ledger)
    if ranking is not None:
        changes.update(ranking=ranking)
    if isinstance(target, Registry):
        return GatewayServer(
            target.replace(**changes) if changes else target,
            name=arguments.name,
            pinned=arguments.pin,
            on_failure=log_cause,
        )
    if isinstance(target, GatewayServer):
        if arguments.pin:
            raise UsageError("--pin applies to a Registry; this target is a GatewayServer")
        return target.replace(
            registry=target.registry.replace(**changes) if changes else None,
            on_failure=_with_cause_log(target.on_failure),
        )
    raise UsageError(
        f"{arguments.target} is a {type(target).__name__}, not an opgate.Registry or "
        "opgate.mcp.GatewayServer (or a function returning one)"
    )


def _address(value: str) -> tuple[str, int]:
    host, separator, port_text = value.rpartition(":")
    if not separator:
        host, port_text = LOOPBACK, value
    host = host.strip("[]") or LOOPBACK
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--http needs [HOST:]PORT, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--http port {port} is out of range")
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: Loggers that follow ``--log-level``; every other logger stays at WARNING or above.
OWN_LOGGERS = ("opgate",)

#: The logger of ``opgate serve``'s own lines, private causes among them.
serve_logger = logging.getLogger("opgate.serve")


def _configure_logging(level_name: str, opened: Sequence[str]) -> int:
    """Log to stderr: opgate's loggers and ``opened`` at ``level_name``, the rest at WARNING.

    Third-party loggers at DEBUG write message content (``sse_starlette`` logs every
    SSE chunk: results, prompt text, cursors), so they are opened only by name.
    Returns the level.
    """
    level = logging.getLevelName(level_name.upper())
    if not isinstance(level, int):
        raise UsageError(f"--log-level {level_name!r} is not a logging level (DEBUG, INFO, ...)")
    logging.basicConfig(
        stream=sys.stderr,
        level=max(level, logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in (*OWN_LOGGERS, *opened):
        logging.getLogger(name).setLevel(level)
    return level


def log_cause(ctx: Any, tool: str, failure: Any) -> None:
    """``opgate serve``'s failure hook: the private cause, with its traceback, to the log.

    An ``internal`` failure's cause is a bug in a handler, a policy or the server: it
    is logged at ERROR on ``opgate.serve`` (stderr), never sent to the client. Other
    failures' causes (a schema violation, an upstream error) are logged at DEBUG.
    """
    cause = failure.cause
    if cause is None:
        return
    level = logging.ERROR if failure.code.value == "internal" else logging.DEBUG
    if not serve_logger.isEnabledFor(level):
        return
    try:
        text = "".join(traceback.format_exception(cause)).rstrip()
    except Exception:  # a hostile exception's __str__; its class still says a lot
        text = f"{type(cause).__name__} (its text could not be formatted)"
    serve_logger.log(
        level,
        "%s: %s; private cause (not sent to the client):\n%s",
        tool,
        failure.code.value,
        _continuation_lines(text),
    )


#: Characters of a private cause written to the log; the rest is counted.
CAUSE_LOG_CHARACTERS = 32_768


def _continuation_lines(text: str) -> str:
    """``text`` as indented log lines with every unprintable character escaped.

    A cause's text may carry an agent's argument: indentation and escapes keep it
    from forging a log line of its own or sending terminal control sequences.
    """
    shown = text[:CAUSE_LOG_CHARACTERS]
    lines = ["    " + "".join(map(_visible, line)) for line in shown.splitlines()]
    if len(text) > len(shown):
        lines.append(f"    … [{len(text) - len(shown)} more characters]")
    return "\n".join(lines)


def _visible(character: str) -> str:
    if character.isprintable() or character == "\t":
        return character
    code = ord(character)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def _with_cause_log(hook: Any) -> Any:
    """``hook`` (a host's own ``on_failure``, or None) followed by ``log_cause``."""
    if hook is None:
        return log_cause

    def both(ctx: Any, tool: str, failure: Any) -> None:
        try:
            hook(ctx, tool, failure)
        finally:
            log_cause(ctx, tool, failure)

    return both


def _serve(arguments: argparse.Namespace) -> int:
    arguments.level = _configure_logging(arguments.log_level, arguments.log_logger)
    from . import ConfigurationError

    try:
        limits = _http_limits(arguments)
        gateway = _gateway(arguments)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    _check_ledger(gateway)
    _freeze_heap()
    if arguments.http is None:
        if arguments.token_verifier:
            raise UsageError("--token-verifier needs --http (stdio has one local principal)")
        import anyio

        anyio.run(gateway.run_stdio)
        return 0
    return _serve_http(gateway, arguments, limits)


def _freeze_heap() -> None:
    """Take everything built so far, the registry first, out of the collector's walks.

    The registry lives as long as the process: at a real catalog's scale, hundreds of
    thousands of containers that every full collection would walk again, a pause of
    hundreds of milliseconds on whichever request it falls. ``gc.freeze()`` moves them
    to the permanent generation. Reference counting still frees a frozen object; only a
    cycle among frozen objects is never collected. Start-up leaves few such cycles
    (imports, argument parsing: about a hundred objects), so no full collection runs
    first: it would cost the start as much as the pause it avoids. Objects made later,
    per request, are collected as before.
    """
    gc.freeze()


def _check_ledger(gateway: Any) -> None:
    """Say on stderr whether the shared ledger answers; refuse one that rejects us.

    An unreachable Redis is an outage, not a mistake: the replica serves (calls that
    would prompt run without input support) and says so. A Redis that refuses this
    replica's credentials or rights, or whose TLS certificate fails verification,
    will not heal by itself: that stops the start.
    """
    backend = gateway.registry.ledger
    check = getattr(backend, "check", None)
    if check is None:
        return
    import anyio
    from redis.exceptions import AuthenticationError, NoPermissionError

    async def probe() -> BaseException | None:
        try:
            result: BaseException | None = await check()
            return result
        finally:
            await backend.aclose()  # its connections belong to this event loop

    error = anyio.run(probe)
    where = backend.health.where
    if error is None:
        print(f"opgate: ledger {where} is reachable", file=sys.stderr, flush=True)
        return
    reason = f"{type(error).__name__}: {str(error)[:200]}"
    if isinstance(error, AuthenticationError | NoPermissionError):
        raise UsageError(
            f"the ledger at {where} refused this replica ({reason}): check the password "
            f"(${LEDGER_PASSWORD_ENV}, --ledger-password-file) and the Redis user's rights"
        )
    if "CERTIFICATE_VERIFY_FAILED" in str(error):  # redis-py keeps only the text
        raise UsageError(
            f"the ledger at {where} failed TLS certificate verification ({reason}): give "
            "the CA that signed Redis's certificate with ?ssl_ca_certs=PATH in the URL"
        )
    print(
        f"opgate: the ledger at {where} is unreachable ({reason}); serving anyway: calls "
        "run without input prompts and answers get busy until it is back",
        file=sys.stderr,
        flush=True,
    )


def _serve_http(gateway: Any, arguments: argparse.Namespace, limits: Any) -> int:
    import anyio
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    from .mcp import serve_http

    host, port = _address(arguments.http)
    verifier = None
    auth = None
    if arguments.token_verifier:
        verifier = _load(arguments.token_verifier, "--token-verifier")
        if isinstance(verifier, type) or not hasattr(verifier, "verify_token"):
            verifier = verifier() if callable(verifier) else verifier
        if not hasattr(verifier, "verify_token"):
            raise UsageError("--token-verifier must name an mcp TokenVerifier or a factory of one")
        public = arguments.resource_url or f"http://{host}:{port}/mcp"
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(arguments.issuer_url or public),
            resource_server_url=AnyHttpUrl(arguments.resource_url)
            if arguments.resource_url
            else None,
            required_scopes=arguments.required_scope or None,
            validate_token_resource=False if arguments.resource_url else None,
        )
    elif not _is_loopback(host) and not arguments.allow_unauthenticated:
        raise UsageError(
            f"refusing to serve {host} without authentication: pass --token-verifier, "
            "or --allow-unauthenticated if a proxy in front authenticates callers"
        )
    app = gateway.http_app(
        host=host,
        token_verifier=verifier,
        auth=auth,
        allowed_hosts=arguments.allowed_host,
        allowed_origins=arguments.allowed_origin,
        limits=limits,
    )
    print(
        f"opgate: serving {len(gateway.registry)} operations at http://{host}:{port}/mcp",
        file=sys.stderr,
        flush=True,
    )
    opened = any(name.split(".")[0] == "uvicorn" for name in arguments.log_logger)
    level = arguments.level if opened else max(arguments.level, logging.WARNING)
    anyio.run(
        functools.partial(serve_http, app, host=host, port=port, limits=limits, log_level=level)
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
