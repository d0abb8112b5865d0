"""The README's "In thirty lines" example runs as written, and its install commands are
the ones docs/quickstart.md runs.

The titled Python blocks (``app.py``, ``host.py``) are written to a folder: ``host.py``
runs there with plain ``python`` and prints what the registry answered, and
``opgate serve app.py`` serves ``app.py`` to the official MCP client, which answers the
refund's form. The install commands are checked against the quickstart's, which
``tests/test_quickstart.py`` runs in fresh environments.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT

pytestmark = pytest.mark.anyio

README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")


def section(heading: str) -> str:
    start = README.index(f"\n## {heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def titled_blocks(text: str) -> dict[str, str]:
    found = re.finditer(r'^```python title="([^"]+)"\n(.*?)^```$', text, re.MULTILINE | re.DOTALL)
    return {match[1]: match[2] for match in found}


EXAMPLE = titled_blocks(section("In thirty lines"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in EXAMPLE.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def environment() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT / "src")}  # this checkout's opgate, nothing else


def test_the_example_is_thirty_lines() -> None:
    assert set(EXAMPLE) == {"app.py", "host.py"}
    own = [
        line
        for text in EXAMPLE.values()
        for line in text.splitlines()
        if line.strip() and not line.startswith(("import ", "from "))
    ]
    assert len(own) <= 30, len(own)


def test_the_host_script_runs_as_written(folder: Path) -> None:
    run = subprocess.run(
        [sys.executable, "host.py"],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "orders.refund ['order'] (Text(text='order 7 refunded'),)\n"


async def test_the_app_is_served_by_opgate_serve(folder: Path) -> None:
    assert "`opgate serve app.py` serves it" in section("In thirty lines")
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "serve", "app.py"],
        cwd=folder,
        env=environment(),
    )
    with anyio.fail_after(60):
        async with Client(server, elicitation_callback=answer) as client:
            found = await client.call_tool("search", {"query": "order"})
            names = [item["name"] for item in found.structured_content["items"]]
            assert names == ["orders.lookup", "orders.refund"]
            looked = await client.call_tool(
                "invoke", {"name": "orders.lookup", "arguments": {"order": 7}}
            )
            assert looked.structured_content == {"order": 7, "status": "shipped"}
            refunded = await client.call_tool(
                "invoke", {"name": "orders.refund", "arguments": {"order": 7}}
            )
            assert refunded.content[0].text == "order 7 refunded"
    assert asked == ["Refund order 7?"]


def test_the_install_commands_are_the_ones_the_quickstart_runs() -> None:
    install = section("Install into your own project")
    assert "`pip install opgate` fails" in install
    [block] = re.findall(r"^```sh\n(.*?)^```$", install, re.MULTILINE | re.DOTALL)
    lines = []
    for line in block.splitlines():
        command, _, comment = line.partition("  # ")
        lines.append(command.strip())
        if comment.startswith("or "):  # an alternative spelled in the comment
            lines.append("pip install " + comment.removeprefix("or "))
    quickstart = QUICKSTART.replace(".venv/bin/pip install", "pip install")
    for command in lines:
        assert f"\n{command}\n" in quickstart, command
