#!/usr/bin/env python3
"""One entry point for a fresh clone: ``python3 dev.py demo`` and ``python3 dev.py test``.

It needs only Python 3.11+ and the package registries. On first use (and again
whenever ``pyproject.toml`` changes) it creates ``.venv`` beside this file and
installs opgate with its ``dev`` extras there; nothing is installed globally.

``test`` runs, in order and stopping at the first failure: ``ruff check``,
``ruff format --check``, ``mypy --strict src/`` and pytest. A pytest run that
collects no tests (exit status 5) is a failure, never a silent pass. The MCP
client tests also need ``npm``: they fetch their node tools (about 350 MB) into a
cache outside the clone, saying so before they do (``tests/node_tools.py``), and
the Redis tests need ``redis-server``; the README says what each command needs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".opgate-installed"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def _fingerprint() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_environment() -> None:
    """Create ``.venv`` and install the project into it unless it is up to date."""
    wanted = _fingerprint()
    if STAMP.exists() and STAMP.read_text() == wanted and PYTHON.exists():
        return
    if not PYTHON.exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    print("dev.py: installing opgate[dev] into .venv", flush=True)
    _run([str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"])
    STAMP.write_text(wanted)


def _run(command: list[str]) -> None:
    print("$ " + " ".join(command), flush=True)
    status = subprocess.call(command, cwd=ROOT)
    if status != 0:
        sys.exit(
            f"dev.py: {command[2] if command[1] == '-m' else command[0]} failed (exit {status})"
        )


def test(extra: list[str]) -> None:
    """Lint, type-check and run the whole test suite."""
    _run([str(PYTHON), "-m", "ruff", "check", "src", "tests", "benchmarks", "dev.py"])
    _run([str(PYTHON), "-m", "ruff", "format", "--check", "src", "tests", "benchmarks", "dev.py"])
    _run([str(PYTHON), "-m", "mypy", "--strict", "src"])
    command = [str(PYTHON), "-m", "pytest", *extra]
    print("$ " + " ".join(command), flush=True)
    status = subprocess.call(command, cwd=ROOT)
    if status == 5:
        sys.exit("dev.py: pytest collected no tests; that is a failure")
    if status != 0:
        sys.exit(f"dev.py: pytest failed (exit {status})")


def demo(extra: list[str]) -> None:
    """Run the demo application."""
    status = subprocess.call([str(BIN / "opgate"), "demo", *extra], cwd=ROOT)
    sys.exit(status)


def bench(extra: list[str]) -> None:
    """Install the ``bench`` extra (comparison packages) if missing, then run every benchmark.

    ``python3 dev.py bench [--quick]``: extra arguments go to ``benchmarks/run_all.py``.
    """
    stamp = VENV / ".opgate-bench-installed"
    if not (stamp.exists() and stamp.read_text() == _fingerprint()):
        print("dev.py: installing opgate[dev,bench] into .venv", flush=True)
        _run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev,bench]"])
        stamp.write_text(_fingerprint())
    status = subprocess.call(
        [str(PYTHON), str(ROOT / "benchmarks" / "run_all.py"), *extra], cwd=ROOT
    )
    sys.exit(status)


def main() -> None:
    commands = {"test": test, "demo": demo, "bench": bench}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: python3 dev.py {demo|test|bench} [extra arguments]")
    ensure_environment()
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
