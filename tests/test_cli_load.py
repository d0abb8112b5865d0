"""``opgate serve``'s target loading: ``MODULE[:ATTR]`` and ``PATH.py[:ATTR]``.

A file is loaded from its path (its directory first on the search path, so siblings
import); without ``:ATTR`` the one registry or gateway server at the module's top level
is served, and none or several are named in the message. A module that fails to import
is one message naming the working directory and the search path, without a traceback
unless ``--log-level DEBUG`` asks for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opgate import cli
from opgate.cli._load import load
from opgate.cli._parser import build_parser
from opgate.cli._serve import build_gateway
from opgate.cli._usage import UsageError
from opgate.mcp import GatewayServer

from conftest import ROOT, serve_environment

APP = '''
from opgate import LocalPolicy, Registry, operation

@operation
def lookup(order: int) -> str:
    """Look up an order."""
    return f"order {order}"

registry = Registry([lookup], LocalPolicy())
'''


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch folder as the working directory; the modules loaded from it are dropped
    afterwards and the search path is restored."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def environment() -> dict[str, str]:
    """The serving environment with this checkout's ``src`` first (the working directory
    of these commands is elsewhere, so a relative ``PYTHONPATH`` would not reach it)."""
    env = serve_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env["PYTHONPATH"]])
    return env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def gateway(*argv: str) -> Any:
    return build_gateway(build_parser().parse_args(["serve", *argv]))


def usage_error(*argv: str) -> str:
    with pytest.raises(UsageError) as info:
        gateway(*argv)
    return str(info.value)


def test_a_file_without_attr_serves_its_one_registry(folder: Path) -> None:
    write(folder / "app.py", APP)
    served = gateway("app.py")
    assert isinstance(served, GatewayServer)
    assert "lookup" in served.registry
    assert sys.modules["app"].__file__ == str(folder / "app.py")  # siblings import it as app


def test_a_file_with_attr_names_a_registry_a_server_or_a_factory(folder: Path) -> None:
    write(
        folder / "app.py",
        APP
        + textwrap.dedent(
            """
            from opgate.mcp import GatewayServer

            def build():
                return Registry([lookup], LocalPolicy())

            class Holder:
                inner = registry

            server = GatewayServer(registry, name="shop")
            """
        ),
    )
    assert "lookup" in gateway("app.py:registry").registry
    assert "lookup" in gateway("app.py:build").registry  # a zero-argument callable
    assert "lookup" in gateway("app.py:Holder.inner").registry  # dotted, as for modules
    assert gateway("app.py:server").sdk_server.name == "shop"
    assert "no attribute 'missing'" in usage_error("app.py:missing")


def test_a_file_elsewhere_imports_its_siblings(folder: Path) -> None:
    project = folder / "project"
    write(project / "catalog.py", APP)
    write(project / "server.py", "from catalog import registry\n")
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    assert "lookup" in gateway(str(project / "server.py")).registry
    assert sys.path[0] == str(project)


def test_a_symlinked_file_imports_the_siblings_of_its_target(folder: Path) -> None:
    # As ``python link.py`` does: the search path gets the folder of the real file.
    project = folder / "project"
    write(project / "catalog.py", APP)
    write(project / "server.py", "from catalog import registry\n")
    (folder / "bin").mkdir()
    (folder / "bin" / "server.py").symlink_to(project / "server.py")
    assert "lookup" in gateway("bin/server.py").registry
    assert sys.path[0] == str(project)
    assert gateway(str(project / "server.py")).registry is sys.modules["server"].registry


RELATIVE_APP = APP.replace("from opgate import", "from .models import MODELS\nfrom opgate import")


def test_a_file_in_a_package_is_imported_as_its_module(folder: Path) -> None:
    # A relative import needs the package: the file is imported as shop.app with the
    # package's parent first on the search path, as ``python -m shop.app`` would.
    write(folder / "shop" / "__init__.py", "")
    write(folder / "shop" / "models.py", "MODELS = 1\n")
    write(folder / "shop" / "app.py", RELATIVE_APP)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    assert "lookup" in gateway(str(folder / "shop" / "app.py")).registry
    assert sys.path[0] == str(folder)
    assert sys.modules["shop.app"].__file__ == str(folder / "shop" / "app.py")
    assert gateway(str(folder / "shop" / "app.py") + ":registry").registry is (
        sys.modules["shop.app"].registry
    )


def test_a_package_folder_serves_its_init(folder: Path) -> None:
    write(folder / "shop" / "__init__.py", "from .app import registry\n")
    write(folder / "shop" / "models.py", "MODELS = 1\n")
    write(folder / "shop" / "app.py", RELATIVE_APP)
    assert "lookup" in gateway("shop/").registry
    assert "lookup" in gateway("shop/:registry").registry
    (folder / "plain").mkdir()
    assert usage_error("plain/").startswith("plain/ is a folder without __init__.py: name")


def test_a_package_named_like_a_loaded_module_is_refused_by_name(folder: Path) -> None:
    write(folder / "json" / "__init__.py", "")
    write(folder / "json" / "app.py", APP)
    message = usage_error("json/app.py")
    assert "json/app.py is module json.app of the package at" in message
    assert "another module is already named json" in message


def test_an_existing_file_without_the_py_suffix_is_loaded_as_a_file(folder: Path) -> None:
    write(folder / "app", APP)
    assert "lookup" in gateway("app").registry
    assert "lookup" in gateway("app:registry").registry


def test_a_module_without_attr_serves_its_one_registry(folder: Path) -> None:
    write(folder / "shop" / "__init__.py", "")
    write(folder / "shop" / "catalog.py", APP)
    assert "lookup" in gateway("shop.catalog").registry
    assert "lookup" in gateway("shop.catalog:registry").registry


def test_a_server_and_the_registry_it_serves_count_once(folder: Path) -> None:
    write(
        folder / "app.py",
        APP + "from opgate.mcp import GatewayServer\nserver = GatewayServer(registry, name='x')\n",
    )
    assert gateway("app.py").sdk_server.name == "x"


def test_several_registries_are_named(folder: Path) -> None:
    write(folder / "app.py", APP + "other = Registry([lookup], LocalPolicy())\nsame = other\n")
    message = usage_error("app.py")
    assert "several registries or servers (registry, other)" in message
    assert "app.py:registry" in message


def test_a_file_without_a_registry_says_what_it_defines(folder: Path) -> None:
    write(
        folder / "app.py",
        '''
        from opgate import LocalPolicy, Registry, operation

        @operation
        def lookup(order: int) -> str:
            """Look up an order."""
            return str(order)

        def build_catalog():
            return Registry([lookup], LocalPolicy())
        ''',
    )
    message = usage_error("app.py")
    assert "app.py defines no Registry or GatewayServer" in message
    # what it imported (operation, Registry, LocalPolicy) is not listed
    assert "it defines operations lookup and functions build_catalog: add one" in message
    assert message.endswith("as app.py:build_catalog")


def test_a_file_named_like_a_loaded_module_keeps_that_module(folder: Path) -> None:
    import json

    write(folder / "json.py", APP)
    assert "lookup" in gateway("json.py").registry
    assert sys.modules["json"] is json


def test_a_file_named_twice_runs_once(folder: Path) -> None:
    write(folder / "app.py", APP + "class Verifier:\n    pass\n")
    first = load("app.py:Verifier", "--token-verifier")
    assert load(str(folder / "app.py") + ":Verifier", "--token-verifier") is first
    assert gateway("app.py").registry is sys.modules["app"].registry


def test_a_missing_file_names_the_working_directory(folder: Path) -> None:
    message = usage_error("nothere.py")
    assert message == f"no such file: nothere.py (working directory: {folder})"


def test_a_verifier_still_needs_its_attr(folder: Path) -> None:
    write(folder / "app.py", APP)
    with pytest.raises(UsageError, match=r"must be MODULE:ATTR or PATH\.py:ATTR"):
        load("app.py", "--token-verifier")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import no_such_dep\n", "ModuleNotFoundError: No module named 'no_such_dep'"),
        ("def broken(:\n", "SyntaxError: "),
        ("raise RuntimeError('no database')\n", "RuntimeError: no database"),
    ],
)
def test_an_import_failure_is_one_message_with_the_search_path(
    folder: Path, source: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder / "app.py", source)
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "app.py"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    first = error.splitlines()[0]
    assert first.startswith(f"opgate serve: cannot import app.py: {reason}")
    assert f"{folder / 'app.py'}, line 1)" in first
    assert f"  working directory: {folder}\n" in error
    assert f"  python: {sys.executable}\n" in error
    assert f"    {folder}\n" in error  # the file's directory, first on the search path
    assert all(f"    {entry}\n" in error for entry in sys.path if entry)
    assert "--log-level DEBUG shows the traceback" in error
    assert "Traceback" not in error
    assert "app" not in sys.modules  # a failed module is not left half-imported


def test_a_factory_that_fails_is_one_message_with_the_search_path(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A factory's lazy imports fail like a module's: the same message, no traceback.
    write(
        folder / "app.py",
        """
        def build():
            import no_such_dep

        async def build_async():
            return None
        """,
    )
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "app.py:build"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    first = error.splitlines()[0]
    assert first.startswith(
        "opgate serve: cannot build app.py:build: ModuleNotFoundError: No module named "
        f"'no_such_dep' ({folder / 'app.py'}, line 3)"
    )
    assert f"  working directory: {folder}\n" in error
    assert "Traceback" not in error
    message = usage_error("app.py:build_async")
    assert message.startswith("app.py:build_async is an async function: make the factory")


def test_a_module_that_cannot_be_found_names_the_search_path(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "shop.catalog:registry"])
    error = capsys.readouterr().err
    assert error.startswith(
        "opgate serve: cannot import 'shop.catalog': ModuleNotFoundError: No module named 'shop'"
    )
    assert f"  working directory: {folder}\n" in error
    assert "search path (sys.path):" in error


def test_the_command_shows_the_traceback_only_at_debug(tmp_path: Path) -> None:
    write(tmp_path / "app.py", "import helper\n")
    write(tmp_path / "helper.py", "raise KeyError('setting')\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = [sys.executable, "-m", "opgate", "serve", str(tmp_path / "app.py")]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *extra],
            cwd=elsewhere,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    quiet = run()
    assert quiet.returncode == 2
    assert quiet.stdout == ""  # stdout belongs to MCP
    assert quiet.stderr.startswith(
        f"opgate serve: cannot import {tmp_path / 'app.py'}: KeyError: 'setting' "
        f"({tmp_path / 'helper.py'}, line 1)\n"
    )
    assert f"working directory: {elsewhere}\n" in quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = run("--log-level", "DEBUG")
    assert loud.returncode == 2
    assert "Traceback (most recent call last)" in loud.stderr
    assert 'helper.py", line 1' in loud.stderr
