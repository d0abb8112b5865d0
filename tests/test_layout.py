"""The tests of a module are found by its name (docs/architecture.md, "Tests").

``src/opgate/_NAME.py`` → ``tests/test_NAME*.py``; a module of a subpackage
(``_search/_NAME.py``, ``mcp/_NAME.py``, ``redis/``, ``openapi/`` …) →
``tests/test_PACKAGE_NAME*.py``; the demo's modules are tested through the demo
(``tests/test_demo*.py``). A test file that names no module is a cross-cutting one and
says in its docstring what it covers.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "opgate"
TESTS = ROOT / "tests"

#: Modules with no rules of their own to test, and why.
NO_RULES = {"_version.py": "one constant, read by --version and the MCP server info"}

#: Subpackages whose modules are tested through the package as a whole.
WHOLE = {"demo"}


def stem_of(module: Path) -> str:
    """``test_search_index`` for ``src/opgate/_search/_index.py``."""
    relative = module.relative_to(PACKAGE)
    parts = [part.lstrip("_") for part in relative.parent.parts]
    if relative.parent.parts and relative.parent.parts[0] in WHOLE:
        return f"test_{parts[0]}"
    if relative.stem != "__init__":
        parts.append(relative.stem.lstrip("_"))
    return "test_" + "_".join(parts)


def modules() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or path.name in NO_RULES:
            continue
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue  # the facade: its names are the tests' subject everywhere
        found.append(path)
    return found


def files_of_tests() -> list[Path]:
    return sorted(TESTS.glob("test_*.py"))


def has_tests(stem: str) -> bool:
    return any(path.stem == stem or path.stem.startswith(stem + "_") for path in files_of_tests())


def test_every_module_has_tests_under_its_name() -> None:
    missing = [
        f"{path.relative_to(PACKAGE)} → tests/{stem_of(path)}*.py"
        for path in modules()
        if not has_tests(stem_of(path))
    ]
    assert not missing, "modules without a test file of their name: " + ", ".join(missing)


def test_the_rule_maps_modules_as_documented() -> None:
    assert stem_of(PACKAGE / "_keys.py") == "test_keys"
    assert stem_of(PACKAGE / "_search" / "_index.py") == "test_search_index"
    assert stem_of(PACKAGE / "mcp" / "_wire.py") == "test_mcp_wire"
    assert stem_of(PACKAGE / "demo" / "_terminal.py") == "test_demo"
    assert not has_tests("test_no_such_module")


def test_a_file_naming_no_module_says_what_it_covers() -> None:
    stems = {stem_of(path) for path in PACKAGE.rglob("*.py")}
    undocumented = []
    for path in files_of_tests():
        names_module = any(path.stem == stem or path.stem.startswith(stem + "_") for stem in stems)
        if not names_module and not ast.get_docstring(ast.parse(path.read_text())):
            undocumented.append(path.name)
    assert not undocumented, "cross-cutting test files without a docstring: " + ", ".join(
        undocumented
    )
