"""The documentation's links and test references resolve.

Every relative link in ``README.md``, ``CHANGELOG.md``, ``docs/*.md`` and the result
files under ``benchmarks/results/`` must name a file that exists, and its ``#anchor``
a heading of that file, spelt as GitHub spells heading anchors. Every test named in
``docs/security.md`` (``tests/test_x.py::name``, ``::name`` after such a reference,
or a bare `` `test_name` ``) must be a test function that exists, so the threat
model cannot point at a test that was renamed or removed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks" / "results").glob("*.md"),
    ]
)

# Pages being written on another branch: a link to one is checked once the page exists.
PENDING: set[str] = set()

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside code."""
    targets: list[str] = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        targets.extend(_LINK.findall(_CODE_SPAN.sub("", line)))
    return targets


def test_the_slug_follows_github() -> None:
    assert slug("Final run (2026-12-01, 05:31 UTC)") == "final-run-2026-12-01-0531-utc"
    assert slug("The MCP wire is exact (issue 20, items 1\u20135)") == (
        "the-mcp-wire-is-exact-issue-20-items-15"
    )
    assert slug("The rule (`Ranking.RULE`, default)") == "the-rule-rankingrule-default"
    assert slug("Serving over HTTP: limits and a reverse proxy") == (
        "serving-over-http-limits-and-a-reverse-proxy"
    )


def test_the_link_finder_skips_code_and_reads_images(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [a](b.md#c), ![chart](c.png) and `[no](link.md)`.\n"
        "```\n[nor](this.md)\n```\n## Title\n",
        encoding="utf-8",
    )
    assert links(page) == ["b.md#c", "c.png"]
    assert anchors(page) == {"title", "title-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken: list[str] = []
    for target in links(page):
        if _EXTERNAL.match(target):
            continue
        name, _, fragment = target.partition("#")
        resolved = (page.parent / name).resolve() if name else page
        if not resolved.exists():
            if Path(os.path.relpath(resolved, ROOT)).as_posix() not in PENDING:
                broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


_TEST_FILE = re.compile(r"tests/[\w/]+\.py")
_REFERENCE = re.compile(r"(tests/[\w/]+\.py)?::(\w+)")
_BARE_TEST = re.compile(r"`(test_\w+)`")


def _test_functions(path: Path) -> set[str]:
    """The test functions a module defines: by ``def``, or assigned (``test_a, test_b = ...``)."""
    text = path.read_text(encoding="utf-8")
    names = set(re.findall(r"^\s*(?:async\s+)?def\s+(test_\w+)", text, re.M))
    for targets in re.findall(r"^((?:test_\w+\s*,\s*)*test_\w+)\s*=", text, re.M):
        names.update(name.strip() for name in targets.split(","))
    return names


def test_every_test_security_md_names_exists() -> None:
    text = "\n".join(_prose_lines((ROOT / "docs" / "security.md").read_text(encoding="utf-8")))
    everywhere: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        everywhere |= _test_functions(path)
    missing: list[str] = []
    for name in sorted(set(_TEST_FILE.findall(text))):
        if not (ROOT / name).exists():
            missing.append(f"{name}: no such file")
    current: str | None = None
    for match in re.finditer(rf"{_TEST_FILE.pattern}|{_REFERENCE.pattern}", text):
        if match.group(0).startswith("tests/") and "::" not in match.group(0):
            current = match.group(0)
            continue
        file, function = match.group(1) or current, match.group(2)
        if file is not None:
            current = file
        if file is None:
            missing.append(f"::{function}: no test file named before it")
        elif not (ROOT / file).exists():
            missing.append(f"{file}::{function}: no such file")
        elif function not in _test_functions(ROOT / file):
            missing.append(f"{file}::{function}")
    for function in sorted(set(_BARE_TEST.findall(text))):
        if function not in everywhere:
            missing.append(f"`{function}`: no such test anywhere")
    assert not missing, missing
