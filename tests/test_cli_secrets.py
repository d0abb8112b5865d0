"""``opgate.cli._secrets``: the shared secret ``opgate serve`` reads.

It comes from ``--secret-file PATH`` or ``OPGATE_SECRET``, never from a command-line
value; a file's one trailing newline is dropped and at most ``SECRET_FILE_BYTES`` are
read; the secret is never printed, and ``--ledger`` needs it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from opgate.cli._secrets import SECRET_FILE_BYTES, read_secret_file, shared_secret
from opgate.cli._usage import UsageError

from conftest import ROOT, run_main, serve_environment


def serve(
    *arguments: str, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry", *arguments],
        cwd=ROOT,
        env={**serve_environment(), **(environment or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_refuses_a_shared_ledger_without_a_shared_secret(tmp_path: Path) -> None:
    environment = serve_environment()
    environment.pop("OPGATE_SECRET", None)
    completed = subprocess.run(
        [*[sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry"],
         "--http", "127.0.0.1:0", "--ledger", "redis://127.0.0.1:1/0"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "OPGATE_SECRET" in completed.stderr
    short = tmp_path / "secret"
    short.write_text("too short\n")
    completed = serve("--http", "127.0.0.1:0", "--secret-file", str(short))
    assert completed.returncode == 2
    assert "32" in completed.stderr
    assert "too short" not in completed.stderr  # the secret is never printed
    completed = serve("--ledger", "localhost:6379", environment={"OPGATE_SECRET": "x" * 40})
    assert completed.returncode == 2
    assert "redis://" in completed.stderr


def test_a_missing_secret_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_main(capsys, "serve", "x:y", "--secret-file", str(tmp_path / "none"))
    assert status == 2
    assert not out
    assert err == "opgate serve: cannot read --secret-file: No such file or directory\n"


# -- read_secret_file and shared_secret, called directly --------------------------------------


@pytest.mark.parametrize(
    ("data", "secret"),
    [
        (b"s3cret\n", b"s3cret"),
        (b"s3cret", b"s3cret"),
        (b"s3cret\n\n", b"s3cret\n"),  # one newline only
        (b"s3cret\r\n", b"s3cret\r"),
        (b" s3cret \n", b" s3cret "),  # no other stripping
        (b"\n", b""),
        (b"", b""),
        (b"\xff\x00bytes\n", b"\xff\x00bytes"),
    ],
)
def test_one_trailing_newline_is_dropped(tmp_path: Path, data: bytes, secret: bytes) -> None:
    path = tmp_path / "secret"
    path.write_bytes(data)
    assert read_secret_file(str(path), "--secret-file") == secret


def test_at_most_secret_file_bytes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"a" * SECRET_FILE_BYTES + b"b" * 100)
    assert read_secret_file(str(path), "--secret-file") == b"a" * SECRET_FILE_BYTES
    path.write_bytes(b"a" * (SECRET_FILE_BYTES - 1) + b"\n")
    assert read_secret_file(str(path), "--secret-file") == b"a" * (SECRET_FILE_BYTES - 1)


def test_an_unreadable_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot read --the-option: Is a directory$"):
        read_secret_file(str(tmp_path), "--the-option")


def test_the_file_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"from-the-file\n")
    monkeypatch.setenv("OPGATE_SECRET", "from-the-environment-é")
    assert shared_secret(argparse.Namespace(secret_file=str(path))) == b"from-the-file"
    from_env = shared_secret(argparse.Namespace(secret_file=None))
    assert from_env == "from-the-environment-é".encode()
    monkeypatch.setenv("OPGATE_SECRET", "")
    assert shared_secret(argparse.Namespace(secret_file=None)) is None
    monkeypatch.delenv("OPGATE_SECRET")
    assert shared_secret(argparse.Namespace(secret_file=None)) is None
