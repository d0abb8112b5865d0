"""The interactive demo at a real terminal: typed lines, and Ctrl-C at a prompt or mid-step.

``opgate demo`` runs under a pseudo-terminal, so it takes the interactive path, and
Ctrl-C is the ``\\x03`` byte a terminal sends: the line discipline turns it into SIGINT
for the foreground process group, as when a person presses the keys.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from opgate.demo import INTERRUPTED
from opgate.demo._terminal import Terminal

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX")

#: Generous bounds that only a hang runs out (a run takes a few seconds).
START_TIMEOUT = 60.0
#: How long the demo may take to end after Ctrl-C; before the fix it never did on its own.
EXIT_TIMEOUT = 10.0

CTRL_C = b"\x03"
FORM_PROMPT = "Enter to answer, d to decline, c to cancel: "


class DemoAtTerminal:
    """``python -m opgate demo`` with a pseudo-terminal as its controlling terminal."""

    def __init__(self, database: Path) -> None:
        self.database = database
        source = str(Path(__file__).resolve().parents[1] / "src")
        current = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONPATH": source + (os.pathsep + current if current else "")}
        argv = [sys.executable, "-m", "opgate", "demo", "--database", str(database)]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            try:
                # Ctrl-C as at a person's terminal, even when the tests were started
                # in the background (a shell's `&` makes SIGINT ignored, and an ignored
                # signal stays ignored across exec: Python then never raises
                # KeyboardInterrupt)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.execve(sys.executable, argv, env)
            finally:
                os._exit(127)
        self.output = b""
        self.status: int | None = None
        self._seen = 0

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; false at the end of output."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every process holding the terminal has closed it
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, text: str) -> None:
        """Read until ``text`` appears after everything matched so far."""
        deadline = time.monotonic() + START_TIMEOUT
        while text not in self.text[self._seen :]:
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"{text!r} never appeared in:\n{self.text}")
        self._seen = self.text.index(text, self._seen) + len(text)

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float) -> int | None:
        """The exit status within ``timeout`` (reading all output meanwhile), else ``None``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.05):
                    pass
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        return None

    def close(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def _server_pids(database: Path) -> list[int]:
    """The demo servers (``demo --serve``) running on ``database``, from ``/proc``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"--serve" in args and os.fsencode(database) in args and state != "Z":
            pids.append(int(entry.name))
    return pids


needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoAtTerminal]:
    run = DemoAtTerminal(tmp_path / "desk.sqlite3")
    yield run
    run.close()
    for pid in _server_pids(run.database):  # never leave one behind, even when a test fails
        os.kill(pid, signal.SIGKILL)


def _assert_interrupted(demo: DemoAtTerminal) -> None:
    assert demo.wait(EXIT_TIMEOUT) == INTERRUPTED, demo.text
    assert "Traceback" not in demo.text, demo.text
    assert demo.text.rstrip().endswith("opgate demo: interrupted"), demo.text
    assert _server_pids(demo.database) == []


@needs_proc
def test_ctrl_c_at_a_prompt_ends_the_demo_and_its_server(demo: DemoAtTerminal) -> None:
    demo.expect("answers   you, at this terminal")
    demo.expect(FORM_PROMPT)
    assert len(_server_pids(demo.database)) == 1
    demo.type(CTRL_C)
    _assert_interrupted(demo)


@needs_proc
def test_answers_typed_then_ctrl_c_during_the_export(demo: DemoAtTerminal) -> None:
    demo.expect(FORM_PROMPT)  # the refund
    demo.type(b"d\n")
    demo.expect("Open it and pay there? [y/N] ")
    demo.type(b"n\n")
    demo.expect(FORM_PROMPT)  # the escalation's first question
    demo.type(b"\n")
    demo.expect("Team (number): ")
    demo.type(b"3\n")
    demo.expect("Priority (number, default high): ")
    demo.type(b"\n")
    demo.expect("Why (text, optional): ")
    demo.type(b"\n")
    demo.expect(FORM_PROMPT)  # the second: tell the customer?
    demo.type(b"d\n")
    demo.expect("escalated to Engineering (high); Ada Lovelace not told: the second question")
    demo.expect("invoke reports.export_orders")
    demo.expect("1/5 ")
    demo.type(CTRL_C)
    _assert_interrupted(demo)
    assert "5/5" not in demo.text


# --- Terminal ----------------------------------------------------------------------


@pytest.fixture
def keyboard() -> Iterator[tuple[int, Terminal]]:
    """A pseudo-terminal: the ``Terminal`` reads the slave end, the test types on the master."""
    master, slave = pty.openpty()
    with open(slave, encoding="utf-8", closefd=True) as stdin, open(os.devnull, "w") as out:
        yield master, Terminal(stdin, out)
    os.close(master)


def test_terminal_reads_typed_lines(keyboard: tuple[int, Terminal]) -> None:
    master, terminal = keyboard
    os.write(master, "yes\nnon-ascii é\n".encode())
    assert terminal.ask("? ") == "yes"
    assert terminal.ask("? ") == "non-ascii é"


def test_terminal_close_wakes_a_waiting_ask(keyboard: tuple[int, Terminal]) -> None:
    _, terminal = keyboard
    ended: list[BaseException] = []

    def ask() -> None:
        try:
            terminal.ask("? ")
        except BaseException as exc:
            ended.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    terminal.close()
    thread.join(EXIT_TIMEOUT)
    assert not thread.is_alive()
    assert [type(exc) for exc in ended] == [EOFError]
    with pytest.raises(EOFError):
        terminal.ask("? ")
