"""Cross-cutting: every third-party package ``src/opgate`` imports is declared in
``pyproject.toml`` (a dependency, or an extra for the optional ones), so that no import
works only because another package happens to pull it in."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "src" / "opgate"

#: Import names whose distribution is spelled otherwise.
DISTRIBUTIONS = {
    "Stemmer": "pystemmer",
    "jsonschema_rs": "jsonschema-rs",
    "mcp_types": "mcp-types",
    "pydantic_core": "pydantic-core",
    "yaml": "pyyaml",
}


def imported() -> set[str]:
    """The top-level names of every module ``src/opgate`` imports (absolute imports)."""
    found: set[str] = set()
    for path in SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.partition(".")[0])
    return found


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra, packages in project["optional-dependencies"].items():
        if extra not in ("dev", "bench"):  # tools of the project, not opgate's imports
            requirements += packages
    return {
        re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower()
        for requirement in requirements
    }


def test_every_third_party_import_is_declared() -> None:
    third_party = imported() - set(sys.stdlib_module_names) - {"opgate"}
    assert third_party  # the walk found the imports at all
    missing = sorted(
        name for name in third_party if DISTRIBUTIONS.get(name, name).lower() not in declared()
    )
    assert missing == [], f"imported but not declared in pyproject.toml: {missing}"
