"""The shared continuation ledger of ``opgate serve``: ``--ledger URL`` (or
``OPGATE_LEDGER_URL``), Redis's password from a file or the environment, and the
check at start that the ledger answers."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from opgate.loopback import is_loopback

from ._options import DEFAULT_LEDGER_PREFIX, LEDGER_PASSWORD_ENV, LEDGER_URL_ENV
from ._secrets import read_secret_file
from ._usage import UsageError

__all__ = ["check_ledger", "ledger_verdict", "probe_ledger", "shared_ledger"]


def _ledger_password(arguments: argparse.Namespace) -> str | None:
    """Redis's password from ``--ledger-password-file`` or ``OPGATE_LEDGER_PASSWORD``."""
    if arguments.ledger_password_file:
        data = read_secret_file(arguments.ledger_password_file, "--ledger-password-file")
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


def shared_ledger(arguments: argparse.Namespace) -> Any:
    """The shared ledger ``--ledger`` (or ``OPGATE_LEDGER_URL``) names, if any."""
    found = _ledger_url(arguments)
    if found is None:
        return None
    url, source = found
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise UsageError(f"{source} must be a redis://HOST:PORT/DB, rediss:// or unix:// URL")
    try:
        from redis.asyncio.connection import parse_url

        from ..redis import RedisLedger, url_has_password
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
    options: dict[str, Any] = {"prefix": arguments.ledger_prefix or DEFAULT_LEDGER_PREFIX}
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
    if (in_url or password is not None) and url.startswith("redis://") and not is_loopback(host):
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


def check_ledger(gateway: Any) -> None:
    """Say on stderr whether the shared ledger answers; refuse one that rejects us.

    An unreachable Redis is an outage, not a mistake: the replica serves (calls that
    would prompt run without input support) and says so. A Redis that refuses this
    replica's credentials or rights, or whose TLS certificate fails verification,
    will not heal by itself: that stops the start.
    """
    backend = gateway.registry.ledger
    if getattr(backend, "check", None) is None:
        return
    import anyio

    ledger_verdict(backend, anyio.run(probe_ledger, backend))


async def probe_ledger(backend: Any) -> BaseException | None:
    """The error of the ledger's ``check()``, or ``None``; its connections closed after."""
    try:
        result: BaseException | None = await backend.check()
        return result
    finally:
        await backend.aclose()  # its connections belong to this event loop


def ledger_verdict(backend: Any, error: BaseException | None) -> None:
    """Say whether the ledger answered (``check_ledger``); refuse one that rejects us."""
    from redis.exceptions import AuthenticationError, NoPermissionError

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
