"""``opgate`` command-line options: version, help text, option dependencies, port binding."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

import opgate
from opgate import cli
from opgate.cli import main
from opgate.demo import resolve_database_path

from conftest import ROOT, SERVE, free_port, serve_environment, stop_process


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``: its exit status (from ``SystemExit`` too), stdout and stderr."""
    try:
        status: int | str | None = main(list(argv))
    except SystemExit as exit_info:
        status = exit_info.code
    captured = capsys.readouterr()
    assert isinstance(status, int), status
    return status, captured.out, captured.err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(capsys, "--version")
    assert (status, out, err) == (0, f"opgate {opgate.__version__}\n", "")


@pytest.mark.parametrize("command", [[], ["serve"], ["demo"]])
def test_help_shows_no_markup(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_main(capsys, *command, "--help")
    assert status == 0
    assert "usage: opgate" in out
    for markup in ("`", ":class:", ":func:", ":meth:", "**"):
        assert markup not in out, (markup, out)


def test_top_level_help_names_the_commands_and_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run_main(capsys, "--help")
    assert "The opgate command line: opgate serve and opgate demo." in out
    assert "--version" in out


def test_demo_help_names_the_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPGATE_DEMO_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data%home"))
    _, out, _ = run_main(capsys, "demo", "--help")
    expected = (tmp_path / "data%home" / "opgate" / "demo.sqlite3").resolve()
    assert expected == resolve_database_path().resolve()  # what the demo opens
    assert f"default: {expected}; set $OPGATE_DEMO_DB for another" in " ".join(out.split())


def test_demo_help_names_the_database_of_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPGATE_DEMO_DB", str(tmp_path / "desk.db"))
    _, out, _ = run_main(capsys, "demo", "--help")
    expected = (tmp_path / "desk.db").resolve()
    assert f"default: {expected}, from $OPGATE_DEMO_DB" in " ".join(out.split())


# -- options that need another ------------------------------------------------------------

HTTP_LIMITS = [
    ["--max-sessions", "3"],
    ["--principal-sessions", "3"],
    ["--session-idle-timeout", "3"],
    ["--principal-requests", "3"],
    ["--max-connections", "3"],
    ["--header-timeout", "3"],
    ["--body-timeout", "3"],
    ["--keep-alive-timeout", "3"],
]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--http", "0", "--issuer-url", "https://idp"], "--issuer-url needs --token-verifier"),
        (
            ["--http", "0", "--resource-url", "https://ops/mcp"],
            "--resource-url needs --token-verifier",
        ),
        (["--http", "0", "--required-scope", "ops"], "--required-scope needs --token-verifier"),
        (["--token-verifier", "tests.mcp_catalog:TokenVerifier"], "--token-verifier needs --http"),
        (["--allowed-host", "ops.example.com"], "--allowed-host needs --http"),
        (["--allowed-origin", "https://ops"], "--allowed-origin needs --http"),
        (["--allow-unauthenticated"], "--allow-unauthenticated needs --http"),
        *((limit, f"{limit[0]} needs --http") for limit in HTTP_LIMITS),
        (["--base-url", "http://h"], "--base-url needs --openapi"),
        (["--header", "A=B"], "--header needs --openapi"),
        (["--confirm", "none"], "--confirm needs --openapi"),
        (["--output-schemas"], "--output-schemas needs --openapi"),
        (["--check"], "--check needs --openapi or --upstreams"),
        (["--ledger-prefix", "p"], "--ledger-prefix needs --ledger (or $OPGATE_LEDGER_URL)"),
        (["--ledger-lease", "3"], "--ledger-lease needs --ledger (or $OPGATE_LEDGER_URL)"),
        (
            ["--ledger-password-file", "p"],
            "--ledger-password-file needs --ledger (or $OPGATE_LEDGER_URL)",
        ),
        (
            [
                *("--http", "0", "--allow-unauthenticated"),
                *("--token-verifier", "tests.mcp_catalog:TokenVerifier"),
            ],
            "--allow-unauthenticated contradicts --token-verifier",
        ),
    ],
)
def test_an_option_without_the_one_it_needs_is_refused(
    options: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPGATE_LEDGER_URL", raising=False)
    # A target that cannot be imported: the refusal comes before anything is loaded.
    status, out, err = run_main(capsys, "serve", "no_such_module:registry", *options)
    assert status == 2
    assert out == ""
    assert f"opgate serve: {message}" in err
    assert "no_such_module" not in err


def test_every_dependent_option_is_tested() -> None:
    from opgate import cli

    tested = {"--issuer-url", "--resource-url", "--required-scope", "--token-verifier"}
    tested |= {"--allowed-host", "--allowed-origin", "--allow-unauthenticated"}
    tested |= {limit[0] for limit in HTTP_LIMITS}
    tested |= {"--base-url", "--header", "--confirm", "--output-schemas", "--check"}
    tested |= {"--ledger-prefix", "--ledger-lease", "--ledger-password-file"}
    assert {option for option, *_ in cli._NEEDS} == tested


def test_ledger_options_are_accepted_with_the_ledger_url_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPGATE_LEDGER_URL", "ftp://not-redis")
    status, _, err = run_main(capsys, "serve", "x:y", "--ledger-prefix", "p")
    assert status == 2
    assert "needs --ledger" not in err
    assert "$OPGATE_LEDGER_URL must be a redis://" in err  # it got as far as the URL


@pytest.mark.parametrize("option", [["--name", "other"], ["--pin", "echo"]])
def test_registry_options_are_refused_for_a_gateway_server(
    option: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tests.mcp_catalog as served

    from opgate.mcp import GatewayServer

    gateway = GatewayServer(served.build_registry(), name="own")
    monkeypatch.setattr(served, "gateway", gateway, raising=False)
    status, out, err = run_main(capsys, "serve", "tests.mcp_catalog:gateway", *option)
    assert (status, out) == (2, "")
    assert f"{option[0]} applies to a Registry; this target is a GatewayServer" in err


# -- LocalPolicy is for stdio ---------------------------------------------------------------


async def refuse_to_serve(*args: object, **kwargs: object) -> None:
    raise AssertionError("served")


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize(
    "authentication", [[], ["--token-verifier", "tests.mcp_catalog:TokenVerifier"]]
)
def test_a_local_policy_registry_is_refused_over_http(
    wrap: bool,
    authentication: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import tests.mcp_catalog as served

    from opgate import LocalPolicy, Registry
    from opgate.mcp import GatewayServer

    registry = Registry(served.operations(), LocalPolicy())
    target = GatewayServer(registry) if wrap else registry
    monkeypatch.setattr(served, "local", target, raising=False)
    monkeypatch.setattr("opgate.mcp.serve_http", refuse_to_serve)
    port = free_port()
    status, out, err = run_main(
        capsys, "serve", "tests.mcp_catalog:local", "--http", f"127.0.0.1:{port}", *authentication
    )
    assert (status, out) == (2, "")
    assert "opgate.LocalPolicy" in err
    assert "opgate.ScopePolicy or a policy of your own" in err
    assert "serving" not in err


# -- the port is bound before the server says it serves ------------------------------------


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


def test_the_serving_line_counts_in_words() -> None:
    assert cli._serving_line(1, "127.0.0.1", 8000) == (
        "opgate: serving 1 operation at http://127.0.0.1:8000/mcp"
    )
    assert (
        cli._serving_line(4, "::1", 8000) == "opgate: serving 4 operations at http://[::1]:8000/mcp"
    )


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
