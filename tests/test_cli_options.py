"""``opgate`` command-line options: version, help text, option dependencies, port binding."""

from __future__ import annotations

import pytest

import opgate
from opgate.cli import main


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``: its exit status (from ``SystemExit`` too), stdout and stderr."""
    try:
        status: int | str | None = main(list(argv))
    except SystemExit as exit_info:
        status = exit_info.code
    captured = capsys.readouterr()
    assert isinstance(status, int), status
    return status, captured.out, captured.err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(capsys, "--version")
    assert (status, out, err) == (0, f"opgate {opgate.__version__}\n", "")
