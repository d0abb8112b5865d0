"""A real Redis for the tests: Debian's ``redis-server`` on a free loopback port.

``ensure_redis_server()`` finds the binary (``$OPGATE_REDIS_SERVER``, else ``PATH``,
else ``/usr/bin/redis-server``) and, when it is missing and this process is root
(CI), installs the Debian package with ``apt-get``. Outside CI without root it
fails with the command to run (``sudo apt-get install redis-server``); no mock or
fake Redis stands in for it.

``RedisServer`` starts one server without persistence (``--save ''
--appendonly no``) bound to 127.0.0.1, waits until it answers ``PING``, and can be
stopped and started again on the same port (the restart tests: every key is lost),
paused and resumed (SIGSTOP, SIGCONT) or killed (the fault tests).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["RedisServer", "ensure_redis_server"]

#: apt-get may wait for the package lists; bounded so a broken mirror fails the run.
INSTALL_TIMEOUT = 600


def _find() -> str | None:
    configured = os.environ.get("OPGATE_REDIS_SERVER")
    if configured:
        return configured
    found = shutil.which("redis-server")
    if found:
        return found
    return "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None


def ensure_redis_server() -> str:
    """The ``redis-server`` binary, installed with apt-get when missing and root."""
    found = _find()
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            "redis-server is not installed: run `sudo apt-get install redis-server` "
            "(or set OPGATE_REDIS_SERVER to a redis-server binary)"
        )
    import node_tools  # the announcer pytest routes to the terminal (tests/conftest.py)

    node_tools.announce(
        "opgate tests: redis-server is missing; installing Debian's redis-server package "
        "(about 6 MB) with apt-get, as root"
    )
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "redis-server"]
    if subprocess.call(install, env=environment, timeout=INSTALL_TIMEOUT) != 0:
        subprocess.check_call(["apt-get", "update"], env=environment, timeout=INSTALL_TIMEOUT)
        subprocess.check_call(install, env=environment, timeout=INSTALL_TIMEOUT)
    found = _find()
    if not found:
        raise RuntimeError("apt-get installed redis-server but the binary was not found")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1; ``url`` is its ``redis://`` URL."""

    def __init__(self, directory: Path, *, arguments: tuple[str, ...] = ()) -> None:
        self.binary = ensure_redis_server()
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.arguments = arguments  # more redis-server options (``--requirepass PW``)
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers."""
        log = (self.directory / "redis.log").open("ab")
        arguments = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        arguments += ["--appendonly", "no", "--dir", str(self.directory), *self.arguments]
        self._process = subprocess.Popen(
            [self.binary, *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 20
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith((b"+PONG", b"-NOAUTH")):  # up (auth aside)
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer in 20 s: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again: without persistence every key is gone."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """Stop the server's process (SIGSTOP): connections stay open, nothing is answered."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused server run again (SIGCONT): it answers what was queued meanwhile."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Kill the server (SIGKILL, after resuming it if paused): every key is gone."""
        process, self._process = self._process, None
        if process is not None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()

    def log_tail(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""
