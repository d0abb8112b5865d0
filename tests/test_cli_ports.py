"""``opgate serve --http``'s port: bound before the server says it serves, and every
failure to bind a usage error that says what to do."""

from __future__ import annotations

import re
import socket
import subprocess

import pytest

from conftest import ROOT, SERVE, run_main, serve_environment, stop_process


def test_a_busy_port_is_refused_before_serving_is_announced() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        completed = subprocess.run(
            [*SERVE, "--http", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=serve_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert completed.returncode == 2, completed.stderr
    assert f"opgate serve: port {port} is in use on 127.0.0.1" in completed.stderr
    assert "port 0 picks a free one" in completed.stderr
    assert "serving" not in completed.stderr
    assert completed.stdout == ""


def test_an_address_of_another_machine_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # 192.0.2.0/24 is reserved for documentation: never an address of this machine.
    status, out, err = run_main(
        capsys, *SERVE[3:], "--http", "192.0.2.1:8000", "--allow-unauthenticated"
    )
    assert (status, out) == (2, "")
    assert "cannot listen on 192.0.2.1:8000: 192.0.2.1 is not an address of this machine" in err
    assert "serving" not in err


def test_port_zero_announces_the_port_it_got() -> None:
    process = subprocess.Popen(
        [*SERVE, "--http", "127.0.0.1:0"],
        cwd=ROOT,
        env=serve_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # the process exits (EOF) if it cannot serve
        found = re.fullmatch(
            r"opgate: serving \d+ operations at http://127\.0\.0\.1:(\d+)/mcp\n", line
        )
        assert found, line
        port = int(found.group(1))
        assert port != 0
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert connection.recv(12).startswith(b"HTTP/1.1 ")
    finally:
        stop_process(process)  # type: ignore[arg-type]
        if process.stderr is not None:
            process.stderr.close()


def test_localhost_naming_another_address_is_not_served_unauthenticated(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``localhost`` counts as this machine by its name, so the listening sockets must
    be too: a hosts file that maps it to the wildcard address (as some blocklists do)
    would otherwise serve every network without authentication."""
    resolve = socket.getaddrinfo

    def wildcard_localhost(host: str, *args: object, **kwargs: object) -> object:
        return resolve("0.0.0.0" if host == "localhost" else host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", wildcard_localhost)
    status, out, err = run_main(capsys, *SERVE[3:], "--http", "localhost:0")
    assert (status, out) == (2, "")
    assert "refusing to serve localhost without authentication: it names 0.0.0.0" in err
    assert "serving" not in err
