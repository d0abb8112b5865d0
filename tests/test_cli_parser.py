"""``opgate``'s parser: the version, and help text without markup that names defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

import opgate
from opgate.demo import resolve_database_path

from conftest import run_main


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(capsys, "--version")
    assert (status, out, err) == (0, f"opgate {opgate.__version__}\n", "")


@pytest.mark.parametrize("command", [[], ["serve"], ["demo"]])
def test_help_shows_no_markup(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_main(capsys, *command, "--help")
    assert status == 0
    assert "usage: opgate" in out
    for markup in ("`", ":class:", ":func:", ":meth:", "**"):
        assert markup not in out, (markup, out)


def test_top_level_help_names_the_commands_and_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run_main(capsys, "--help")
    assert "The opgate command line: opgate serve and opgate demo." in out
    assert "--version" in out


def test_demo_help_names_the_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPGATE_DEMO_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data%home"))
    _, out, _ = run_main(capsys, "demo", "--help")
    expected = (tmp_path / "data%home" / "opgate" / "demo.sqlite3").resolve()
    assert expected == resolve_database_path().resolve()  # what the demo opens
    assert f"default: {expected}; set $OPGATE_DEMO_DB for another" in " ".join(out.split())


def test_demo_help_names_the_database_of_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPGATE_DEMO_DB", str(tmp_path / "desk.db"))
    _, out, _ = run_main(capsys, "demo", "--help")
    expected = (tmp_path / "desk.db").resolve()
    assert f"default: {expected}, from $OPGATE_DEMO_DB" in " ".join(out.split())
