"""What ``opgate serve``'s options mean together: their defaults, the environment
variables that stand in for some, and which option needs which.

Every rule here is a pure function of the parsed arguments (and the environment);
``opgate serve`` runs ``refuse_lone_options`` before it loads or reads anything.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from ._usage import UsageError

__all__ = [
    "DEFAULT_CONFIRM",
    "DEFAULT_LEDGER_PREFIX",
    "DEFAULT_NAME",
    "HTTP_LIMIT_OPTIONS",
    "LEDGER_PASSWORD_ENV",
    "LEDGER_URL_ENV",
    "NEEDS",
    "SECRET_ENV",
    "UPSTREAM_TIMEOUT_OPTIONS",
    "given",
    "has_ledger",
    "refuse_accepting_while_serving",
    "refuse_lone_options",
    "refuse_unauthenticated_catalogs",
]

#: The environment variable that carries the shared secret (its UTF-8 bytes).
SECRET_ENV = "OPGATE_SECRET"

#: The environment variables that carry the ledger's URL (it may hold credentials) and
#: Redis's password: the command line of a process is readable by every local user.
LEDGER_URL_ENV = "OPGATE_LEDGER_URL"
LEDGER_PASSWORD_ENV = "OPGATE_LEDGER_PASSWORD"

#: What ``opgate serve`` uses when the option is not given.
DEFAULT_CONFIRM = "POST,PUT,PATCH,DELETE"
DEFAULT_NAME = "opgate"
DEFAULT_LEDGER_PREFIX = "opgate"

#: ``opgate serve --http`` options for ``opgate.mcp.HTTPLimits`` fields (defaults there).
HTTP_LIMIT_OPTIONS: tuple[tuple[str, type, str, str], ...] = (
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
    (
        "--send-timeout",
        float,
        "SECONDS",
        "with --http: time output may wait on a client reading none of it (default 30)",
    ),
)


#: ``opgate serve --upstreams`` options for ``open_catalog``'s timeouts (seconds).
UPSTREAM_TIMEOUT_OPTIONS: tuple[tuple[str, str], ...] = (
    (
        "--start-timeout",
        "with --upstreams: time each upstream has to start, negotiate and list its tools "
        "(they start in parallel; default 30)",
    ),
    (
        "--call-timeout",
        "with --upstreams: time one call may wait for an upstream's answer before it fails "
        "and is cancelled upstream (default 120)",
    ),
    (
        "--hold-timeout",
        "with --upstreams: time a 2025-11-25 upstream's call stays open for a person's "
        "answer before its question is declined (default 600, a prompt's lifetime)",
    ),
)


def given(arguments: argparse.Namespace, option: str) -> bool:
    """Whether ``option`` (``--issuer-url``) was given on the command line."""
    return getattr(arguments, option[2:].replace("-", "_")) not in (None, False, [])


def has_ledger(arguments: argparse.Namespace) -> bool:
    """Whether a ledger URL is given, by ``--ledger`` or by ``OPGATE_LEDGER_URL``."""
    return arguments.ledger is not None or bool(os.environ.get(LEDGER_URL_ENV))


#: Options that mean nothing without another: (option, what it needs, whether that is given).
#: Refused rather than ignored: a forgotten ``--http`` or ``--token-verifier`` would
#: otherwise serve something else than the command line reads as.
NEEDS: tuple[tuple[str, str, Callable[[argparse.Namespace], bool]], ...] = (
    *(
        (option, "--token-verifier", lambda a: bool(a.token_verifier))
        for option in ("--issuer-url", "--resource-url", "--required-scope")
    ),
    ("--token-verifier", "--http (stdio has one local principal)", lambda a: a.http is not None),
    *(
        (option, "--http", lambda a: a.http is not None)
        for option in (
            "--allowed-host",
            "--allowed-origin",
            "--allow-unauthenticated",
            *(flag for flag, *_ in HTTP_LIMIT_OPTIONS),
        )
    ),
    *(
        (option, "--openapi", lambda a: bool(a.openapi))
        for option in ("--base-url", "--header", "--confirm", "--output-schemas")
    ),
    ("--check", "--openapi or --upstreams", lambda a: bool(a.openapi or a.upstreams)),
    ("--lock", "--upstreams", lambda a: bool(a.upstreams)),
    *((option, "--lock", lambda a: bool(a.lock)) for option in ("--accept", "--accept-all")),
    *(
        (option, "--upstreams", lambda a: bool(a.upstreams))
        for option, _ in UPSTREAM_TIMEOUT_OPTIONS
    ),
    *(
        (option, f"--ledger (or ${LEDGER_URL_ENV})", has_ledger)
        for option in ("--ledger-prefix", "--ledger-lease", "--ledger-password-file")
    ),
)


def refuse_lone_options(arguments: argparse.Namespace) -> None:
    """Refuse an option given without the one it needs, or with one it contradicts."""
    for option, needed, present in NEEDS:
        if given(arguments, option) and not present(arguments):
            raise UsageError(f"{option} needs {needed}")
    if arguments.allow_unauthenticated and arguments.token_verifier:
        raise UsageError(
            "--allow-unauthenticated contradicts --token-verifier (which authenticates)"
        )
    refuse_accepting_while_serving(arguments)


def refuse_accepting_while_serving(arguments: argparse.Namespace) -> None:
    """Refuse ``--accept`` and ``--accept-all`` without ``--check``, and both together.

    Accepting is a step of its own: the operator reviews the report, accepts, and serves
    without the option. An acceptance on a serving command line (a client's config
    starts it at every launch) would accept every later change unseen, which is what the
    lock is there to stop.
    """
    accepting = [option for option in ("--accept", "--accept-all") if given(arguments, option)]
    if accepting and not arguments.check:
        raise UsageError(
            f"{accepting[0]} needs --check: accept in a run of its own, "
            "opgate serve --upstreams FILE --lock LOCKFILE --check --accept NAME.TOOL, "
            "then serve without it (left on a serving command line it would accept every "
            "later change unseen)"
        )
    if len(accepting) == 2:
        raise UsageError("--accept-all accepts every tool already: give it or --accept, not both")


def refuse_unauthenticated_catalogs(arguments: argparse.Namespace) -> None:
    """Refuse ``--openapi`` or ``--upstreams`` over ``--http`` without ``--token-verifier``.

    Their policy lets every caller call every operation with the API's credentials (or
    the upstreams' own rights), like ``LocalPolicy`` (which ``opgate serve --http``
    refuses): only a verifier makes each caller a principal of its own. Without one every
    HTTP caller is the one local principal, whose prompts and cursors any other caller
    shares, and a proxy in front (``--allow-unauthenticated``) cannot change that.
    """
    if arguments.http is None or arguments.token_verifier:
        return
    if arguments.openapi:
        raise UsageError(
            "--openapi over --http needs --token-verifier: every authenticated caller may "
            "call every operation with the API's credentials, and without a verifier every "
            "caller that reaches the port is the one local principal"
        )
    if arguments.upstreams:
        raise UsageError(
            "--upstreams over --http needs --token-verifier: every authenticated caller may "
            "call every tool of every upstream with the upstreams' rights, and without a "
            "verifier every caller that reaches the port is the one local principal"
        )
