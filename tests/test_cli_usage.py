"""``opgate.cli._usage``: ``main`` reports a ``UsageError`` as ``opgate COMMAND: message``
on stderr with exit status 2, and nothing on stdout; any other exception is not a
usage error and is not turned into one."""

from __future__ import annotations

import argparse

import pytest

import opgate.cli
from opgate.cli._usage import UsageError

from conftest import run_main


def refuse(arguments: argparse.Namespace) -> int:
    raise UsageError("say what to do\non two lines")


def test_a_usage_error_is_reported_with_the_command_and_status_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opgate.cli, "serve", refuse)
    status, out, err = run_main(capsys, "serve", "x:y")
    assert (status, out) == (2, "")
    assert err == "opgate serve: say what to do\non two lines\n"


def test_a_real_usage_error_reaches_stderr_the_same_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run_main(capsys, "serve")
    assert (status, out) == (2, "")
    assert err == "opgate serve: give MODULE:ATTR (a registry) or --openapi SPEC --base-url URL\n"


def test_another_exception_is_not_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(arguments: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(opgate.cli, "serve", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        opgate.cli.main(["serve", "x:y"])
