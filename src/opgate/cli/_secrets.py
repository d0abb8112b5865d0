"""The secrets ``opgate serve`` reads: from a file named on the command line, or from
the environment, never from the command line itself (every local user can read it)."""

from __future__ import annotations

import argparse
import os

from ._options import SECRET_ENV
from ._usage import UsageError

__all__ = ["SECRET_FILE_BYTES", "read_secret_file", "shared_secret"]

#: Longest secret or password file read.
SECRET_FILE_BYTES = 8192


def read_secret_file(path: str, option: str) -> bytes:
    """A secret file's bytes, one trailing newline dropped."""
    try:
        with open(path, "rb") as file:
            secret = file.read(SECRET_FILE_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read {option}: {exc.strerror}") from None
    return secret[:-1] if secret.endswith(b"\n") else secret


def shared_secret(arguments: argparse.Namespace) -> bytes | None:
    """The shared secret from ``--secret-file`` or ``OPGATE_SECRET``, if any."""
    if arguments.secret_file:
        return read_secret_file(arguments.secret_file, "--secret-file")
    value = os.environ.get(SECRET_ENV)
    return value.encode("utf-8") if value else None
