"""Adapters use the core's public seams only (issue 21, items 1 and 2).

An import walk over every module of the adapters (``opgate.mcp``, ``opgate.redis``,
``opgate.openapi``, ``opgate.upstream``, ``opgate.demo``) and of the command line
(``opgate.cli``): each import of an opgate module must be the module's own subpackage,
or a public module (``opgate``, ``opgate.ledger``, ``opgate.json``, ``opgate.loopback``,
``opgate.names``, ``opgate.redact``, ``opgate.schema``, another adapter's package) naming
only what that module lists in ``__all__``. A private core module (``opgate._ledger``) or a name
outside ``__all__`` fails, naming file, line and name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SOURCE / "opgate"

#: The subpackages that adapt the core to a transport, a store, a description or a demo.
ADAPTERS = ("mcp", "redis", "openapi", "upstream", "demo")

#: The core's public modules an adapter may import from (names in their ``__all__``).
PUBLIC_CORE = frozenset(
    {
        "opgate",
        "opgate.ledger",
        "opgate.json",
        "opgate.loopback",
        "opgate.names",
        "opgate.redact",
        "opgate.schema",
    }
)

#: The adapters' own public packages, which another adapter (and the CLI) may import.
PUBLIC_ADAPTERS = frozenset(f"opgate.{name}" for name in ADAPTERS)

#: The command line: held to the adapters' rule, but no adapter may import it.
CLI = "cli"

#: The packages that may import the MCP SDK (``mcp``, ``mcp_types``): the two MCP
#: adapters, and the command line and the demo's client, which sit on top of them.
MCP_IMPORTERS = ("opgate.mcp", "opgate.upstream", "opgate.cli", "opgate.demo")


@dataclass(frozen=True, slots=True)
class Violation:
    """One import of a private name: where it is and what it names."""

    path: str
    line: int
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.reason}"


def adapter_files() -> list[Path]:
    """Every module of the adapter subpackages and of the CLI."""
    files: list[Path] = []
    for name in (*ADAPTERS, CLI):
        files.extend(sorted((PACKAGE / name).rglob("*.py")))
    return files


def module_name(path: Path) -> str:
    """``opgate.mcp._server`` for ``src/opgate/mcp/_server.py``."""
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def public_names(module: str) -> frozenset[str] | None:
    """The ``__all__`` of an opgate module, read from its source; ``None`` if it has none
    or does not exist."""
    base = SOURCE.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                return frozenset(ast.literal_eval(node.value))
    return None


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names."""
    if node.level == 0:
        return node.module or ""
    parts = importer.split(".")
    if not is_package:
        parts.pop()  # a module's own package is level 1
    parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def _own_package(importer: str) -> str | None:
    """The adapter subpackage (or the CLI's) a module belongs to."""
    parts = importer.split(".")
    if len(parts) >= 2 and parts[1] in (*ADAPTERS, CLI):
        return ".".join(parts[:2])
    return None


def _allowed_module(module: str, importer: str) -> bool:
    if module in PUBLIC_CORE - {"opgate.schema"} or module in PUBLIC_ADAPTERS:
        return True
    # The schema keyword tables are a seam for the OpenAPI schema translation alone.
    return module == "opgate.schema" and importer == "opgate.openapi._schemas"


def check_source(
    source: str, path: str, importer: str, *, is_package: bool = False
) -> list[Violation]:
    """The private opgate imports in one module's ``source`` (``importer`` is its name)."""
    own = _own_package(importer)
    found: list[Violation] = []

    def check(line: int, module: str, names: list[str]) -> None:
        if own is not None and (module == own or module.startswith(own + ".")):
            return  # the adapter's own modules
        if module != "opgate" and not module.startswith("opgate."):
            return  # third-party or standard library
        if not _allowed_module(module, importer):
            found.append(Violation(path, line, module, "a private opgate module"))
            return
        exported = public_names(module)
        for name in names:
            if name == "__version__":
                continue  # a package attribute by convention, never listed in __all__
            if name == "*":
                found.append(Violation(path, line, f"{module}.*", "a star import"))
            elif exported is None or name not in exported:
                found.append(Violation(path, line, f"{module}.{name}", "not in its __all__"))

    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, importer, is_package)
            names = [alias.name for alias in node.names]
            if module == "opgate" or module in PUBLIC_ADAPTERS:
                # ``from opgate import ledger`` imports a module, not a name
                submodules = [n for n in names if f"{module}.{n}" in PUBLIC_CORE | PUBLIC_ADAPTERS]
                names = [n for n in names if n not in submodules]
            check(node.lineno, module, names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "opgate" or alias.name.startswith("opgate."):
                    check(node.lineno, alias.name, [])
    return sorted(found, key=lambda violation: violation.line)  # ast.walk goes breadth first


def test_adapters_import_only_public_names() -> None:
    violations: list[Violation] = []
    for path in adapter_files():
        violations.extend(
            check_source(
                path.read_text("utf-8"),
                str(path.relative_to(SOURCE.parent)),
                module_name(path),
                is_package=path.name == "__init__.py",
            )
        )
    assert not violations, "adapters import private core names:\n" + "\n".join(
        str(v) for v in violations
    )


def test_walk_finds_adapter_modules() -> None:
    names = {module_name(path) for path in adapter_files()}
    assert {
        "opgate.cli",
        "opgate.cli._serve",
        "opgate.mcp._server",
        "opgate.redis._ledger",
    } <= names
    assert "opgate.openapi._http" in names
    assert "opgate.upstream._config" in names
    assert "opgate.demo" in names


def test_walk_catches_a_private_module() -> None:
    source = "import json\nfrom .._ledger import Ledger\nfrom .._json import parse\n"
    found = check_source(source, "src/opgate/mcp/_planted.py", "opgate.mcp._planted")
    assert [str(v) for v in found] == [
        "src/opgate/mcp/_planted.py:2: opgate._ledger: a private opgate module",
        "src/opgate/mcp/_planted.py:3: opgate._json: a private opgate module",
    ]


def test_walk_catches_a_name_outside_all() -> None:
    source = (
        "def late():\n"
        "    from opgate import Registry, _registry, __version__\n"
        "    from opgate.redis._ledger import url_has_password\n"
        "    from ..mcp import GatewayServer, _server\n"
        "import opgate._json as exact\n"
        "from ..ledger import Ledger\n"
        "from ._load import load\n"
    )
    found = check_source(source, "src/opgate/cli/_planted.py", "opgate.cli._planted")
    assert [str(v) for v in found] == [
        "src/opgate/cli/_planted.py:2: opgate._registry: not in its __all__",
        "src/opgate/cli/_planted.py:3: opgate.redis._ledger: a private opgate module",
        "src/opgate/cli/_planted.py:4: opgate.mcp._server: not in its __all__",
        "src/opgate/cli/_planted.py:5: opgate._json: a private opgate module",
        "src/opgate/cli/_planted.py:6: opgate.ledger.Ledger: not in its __all__",
    ]


def test_walk_allows_own_package_and_public_seams() -> None:
    source = (
        "from . import _wire\nfrom ._wire import anything\nfrom .. import Registry\n"
        "from ..ledger import LedgerBackend\nfrom opgate.json import parse\nimport opgate\n"
    )
    assert check_source(source, "src/opgate/redis/_x.py", "opgate.redis._x") == []
    assert check_source("from .. import mcp\n", "src/opgate/demo/_x.py", "opgate.demo._x") == []


def test_walk_keeps_the_cli_modules_to_the_cli() -> None:
    source = "from opgate.cli._load import load\nfrom ..cli import main\n"
    found = check_source(source, "src/opgate/mcp/_planted.py", "opgate.mcp._planted")
    assert [str(v) for v in found] == [
        "src/opgate/mcp/_planted.py:1: opgate.cli._load: a private opgate module",
        "src/opgate/mcp/_planted.py:2: opgate.cli: a private opgate module",
    ]
    own = "from ._load import load\nfrom . import _options\n"
    assert check_source(own, "src/opgate/cli/_serve.py", "opgate.cli._serve") == []


def _sdk_imports(source: str, path: str) -> list[int]:
    """The lines of ``source`` that import the MCP SDK."""

    def is_sdk(module: str) -> bool:
        return module.split(".")[0] in ("mcp", "mcp_types")

    def imports_sdk(node: ast.Import | ast.ImportFrom) -> bool:
        if isinstance(node, ast.Import):
            return any(is_sdk(alias.name) for alias in node.names)
        return node.level == 0 and is_sdk(node.module or "")

    nodes = ast.walk(ast.parse(source, path))
    imports = [node for node in nodes if isinstance(node, ast.Import | ast.ImportFrom)]
    return sorted(node.lineno for node in imports if imports_sdk(node))


def test_only_the_mcp_adapters_import_the_sdk() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if any(name == allowed or name.startswith(allowed + ".") for allowed in MCP_IMPORTERS):
            continue
        relative = str(path.relative_to(SOURCE.parent))
        found.extend(
            f"{relative}:{line}" for line in _sdk_imports(path.read_text("utf-8"), relative)
        )
    assert not found, "the core imports the MCP SDK:\n" + "\n".join(found)


def test_sdk_walk_sees_every_spelling() -> None:
    source = (
        "import mcp\nimport mcp.types as types\nfrom mcp import Client\n"
        "from mcp_types import Tool\nfrom .mcp import GatewayServer\nimport mcpx\n"
    )
    assert _sdk_imports(source, "x.py") == [1, 2, 3, 4]
