"""``opgate.cli._ledger``: ``opgate serve``'s shared ledger from the command line.

Redis's password is never a command-line value: ``--ledger`` refuses a URL that holds
one; it comes from ``OPGATE_LEDGER_PASSWORD``, ``--ledger-password-file`` or a whole
URL in ``OPGATE_LEDGER_URL`` (``/proc/PID/cmdline`` checked), each given once. The
ledger is tried at start: a Redis that refuses the replica (wrong password, missing
rights, a certificate that fails verification) stops it; a password that would travel
in clear to another machine is warned about.

The first tests run ``opgate serve --http`` processes (benchmarks/replicas.py) against
a real ``redis-server`` and drive them with the official MCP client; the last ones call
``shared_ledger`` directly.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import redis.asyncio as redis_client

from opgate.cli._ledger import shared_ledger
from opgate.cli._parser import build_parser
from opgate.cli._usage import UsageError
from opgate.redis import RedisLedger

from conftest import ROOT, free_port, serve_environment
from redis_server import RedisServer

sys.path.insert(0, str(ROOT / "benchmarks"))

from replicas import ReplicaSet, RoundRobinTransport, client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
PASSWORD = "redis-PASSWORD-marker-7f3a"
YES = types.ElicitResult(action="accept", content={"ok": True})
CONFIRM = {"name": "orders.confirm", "arguments": {"id": 7}}


async def accept(context: Any, params: Any) -> types.ElicitResult:
    return YES


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that wants ``PASSWORD`` (``requirepass``)."""
    server = RedisServer(tmp_path_factory.mktemp("locked"), arguments=("--requirepass", PASSWORD))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def serve(
    *arguments: str, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``opgate serve`` run to its exit (for the refusals)."""
    return subprocess.run(
        [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry", *arguments],
        cwd=ROOT,
        env={**serve_environment(), "OPGATE_SECRET": "x" * 40, **(environment or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def confirm_on(replicas: ReplicaSet) -> types.CallToolResult:
    """One confirmed ``orders.confirm`` through the ledger (2026-07-28): its final result."""
    async with client(RoundRobinTransport(replicas.ports), MODERN, elicitation=accept) as session:
        pending = await session.session.call_tool("invoke", CONFIRM, allow_input_required=True)
        assert isinstance(pending, types.InputRequiredResult), pending
        done = await session.session.call_tool(
            "invoke",
            CONFIRM,
            request_state=pending.request_state,
            input_responses={"opgate": YES},
        )
    assert isinstance(done, types.CallToolResult)
    return done


# -- item 7: the password is never a command-line value ------------------------------------


@pytest.mark.parametrize("how", ["password-env", "password-file", "url-env"])
async def test_the_redis_password_is_given_outside_the_command_line(
    locked_redis: RedisServer, tmp_path: Path, how: str
) -> None:
    prefix = f"pw-{how}"
    plain_url = locked_redis.url
    secret_url = plain_url.replace("redis://", f"redis://:{PASSWORD}@")
    ledger_url: str | None = plain_url
    environment: dict[str, str] = {}
    arguments: list[str] = []
    if how == "password-env":
        environment["OPGATE_LEDGER_PASSWORD"] = PASSWORD
    elif how == "password-file":
        password_file = tmp_path / "redis-password"
        password_file.write_text(PASSWORD + "\n")
        arguments = ["--ledger-password-file", str(password_file)]
    else:
        ledger_url = None
        environment["OPGATE_LEDGER_URL"] = secret_url
        arguments = ["--ledger-prefix", prefix]
    with ReplicaSet(
        1,
        ledger_url=ledger_url,
        prefix=prefix,
        log_dir=tmp_path,
        environment=environment,
        arguments=arguments,
    ) as replicas:
        pid = replicas.processes[0].pid
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"serve" in command_line
        assert PASSWORD.encode() not in command_line
        done = await confirm_on(replicas)
        assert not done.is_error, done
        assert done.structured_content == {"id": 7}
        log = replicas.log(0)
    assert PASSWORD not in log
    # the prompt really went through this Redis (the one that wants the password)
    store = redis_client.Redis.from_url(secret_url)
    try:
        assert await store.keys(f"{{{prefix}}}:*")
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://user:{PASSWORD}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={PASSWORD}",
        f"rediss://:{PASSWORD}@127.0.0.1:1/0",
        f"unix:///tmp/opgate-no-such.sock?password={PASSWORD}",
    ],
)
def test_a_password_on_the_command_line_is_refused(url: str) -> None:
    completed = serve("--http", "127.0.0.1:0", "--ledger", url)
    assert completed.returncode == 2, completed.stderr
    assert "process list" in completed.stderr
    assert "OPGATE_LEDGER_PASSWORD" in completed.stderr
    assert PASSWORD not in completed.stderr


def test_the_ledger_url_and_password_are_given_once(tmp_path: Path) -> None:
    url = "redis://127.0.0.1:1/0"
    both = serve("--http", "127.0.0.1:0", "--ledger", url, environment={"OPGATE_LEDGER_URL": url})
    assert both.returncode == 2
    assert "once" in both.stderr
    twice = serve(
        "--http",
        "127.0.0.1:0",
        environment={
            "OPGATE_LEDGER_URL": f"redis://:{PASSWORD}@127.0.0.1:1/0",
            "OPGATE_LEDGER_PASSWORD": "another",
        },
    )
    assert twice.returncode == 2
    assert "already holds a password" in twice.stderr
    assert PASSWORD not in twice.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    no_password = serve("--ledger", url, "--ledger-password-file", str(empty))
    assert no_password.returncode == 2
    assert "empty" in no_password.stderr
    without_ledger = serve("--ledger-password-file", str(empty))
    assert without_ledger.returncode == 2
    assert "needs --ledger" in without_ledger.stderr


def test_a_wrong_or_missing_password_stops_the_start(locked_redis: RedisServer) -> None:
    """A Redis that refuses the replica's credentials will not heal by itself."""
    for environment in ({"OPGATE_LEDGER_PASSWORD": "wrong-password"}, {}):
        completed = serve(
            "--http", "127.0.0.1:0", "--ledger", locked_redis.url, environment=environment
        )
        assert completed.returncode == 2, completed.stderr
        assert "refused this replica" in completed.stderr
        assert "AuthenticationError" in completed.stderr
        assert "wrong-password" not in completed.stderr


# -- attacks: other URL forms (TLS, a unix socket) ------------------------------------------


def make_certificates(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 that it signed: ``(ca, cert, key)`` PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    address = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName([address]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / f"{name}-ca.pem", directory / f"{name}.pem", directory / f"{name}.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, str]]:
    """A redis-server with a TLS port and a unix socket, wanting ``PASSWORD``; with the
    TLS URL (and ``ssl_ca_certs``) of it."""
    directory = tmp_path_factory.mktemp("tls")
    ca, certificate, key = make_certificates(directory, "server")
    make_certificates(directory, "other")
    tls_port = free_port()
    arguments = (
        "--requirepass", PASSWORD, "--tls-port", str(tls_port),
        "--tls-cert-file", str(certificate), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no",
        "--unixsocket", str(directory / "redis.sock"), "--unixsocketperm", "700",
    )  # fmt: skip
    server = RedisServer(directory, arguments=arguments)
    server.start()
    try:
        yield server, f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}"
    finally:
        server.stop()


@pytest.mark.parametrize("form", ["rediss", "unix"])
async def test_tls_and_unix_socket_ledgers_take_the_password_from_the_environment(
    tls_redis: tuple[RedisServer, str], tmp_path: Path, form: str
) -> None:
    server, tls_url = tls_redis
    url = tls_url if form == "rediss" else f"unix://{server.directory / 'redis.sock'}?db=0"
    with ReplicaSet(
        1,
        ledger_url=url,
        prefix=f"form-{form}",
        log_dir=tmp_path,
        environment={"OPGATE_LEDGER_PASSWORD": PASSWORD},
    ) as replicas:
        command_line = Path(f"/proc/{replicas.processes[0].pid}/cmdline").read_bytes()
        assert PASSWORD.encode() not in command_line
        assert "is reachable" in replicas.log(0)
        done = await confirm_on(replicas)
        assert not done.is_error, done
        log = replicas.log(0)
    assert PASSWORD not in log
    assert "ssl_ca_certs" not in log  # the log shows the URL without its options


def test_a_tls_certificate_that_fails_verification_stops_the_start(
    tls_redis: tuple[RedisServer, str],
) -> None:
    _, tls_url = tls_redis
    other = tls_url.replace("server-ca.pem", "other-ca.pem")
    environment = {"OPGATE_LEDGER_PASSWORD": PASSWORD}
    refused = serve("--http", "127.0.0.1:0", "--ledger", other, environment=environment)
    assert refused.returncode == 2, refused.stderr
    assert "certificate verification" in refused.stderr
    assert "ssl_ca_certs" in refused.stderr
    assert PASSWORD not in refused.stderr
    unverified = tls_url.split("?")[0] + "?ssl_cert_reqs=none"
    # (no password given: after the warning, Redis refuses it and the start stops)
    warned = serve("--http", "127.0.0.1:0", "--ledger", unverified)
    assert warned.returncode == 2, warned.stderr
    assert "turns TLS certificate verification off" in warned.stderr
    assert "AuthenticationError" in warned.stderr  # it did talk to Redis over TLS


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server with ACL users: ``opgate`` (every right) and ``weak`` (PING only),
    both with ``PASSWORD``; the default user is off."""
    arguments = (
        "--user", "opgate", "on", f">{PASSWORD}", "~*", "&*", "+@all",
        "--user", "weak", "on", f">{PASSWORD}", "~*", "+ping",
        "--user", "default", "off",
    )  # fmt: skip
    server = RedisServer(tmp_path_factory.mktemp("acl"), arguments=arguments)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_an_acl_user_with_its_password_from_the_environment(
    acl_redis: RedisServer, tmp_path: Path
) -> None:
    url = acl_redis.url.replace("redis://", "redis://opgate@")
    with ReplicaSet(
        1,
        ledger_url=url,
        prefix="acl",
        log_dir=tmp_path,
        environment={"OPGATE_LEDGER_PASSWORD": PASSWORD},
    ) as replicas:
        done = await confirm_on(replicas)
        assert not done.is_error, done
        log = replicas.log(0)
    assert "is reachable" in log
    assert "in clear" not in log  # loopback: no warning
    assert "opgate@" not in log  # the user is not shown either


def test_a_user_without_the_rights_stops_the_start(acl_redis: RedisServer) -> None:
    url = acl_redis.url.replace("redis://", "redis://weak@")
    refused = serve(
        "--http", "127.0.0.1:0", "--ledger", url, environment={"OPGATE_LEDGER_PASSWORD": PASSWORD}
    )
    assert refused.returncode == 2, refused.stderr
    assert "NoPermissionError" in refused.stderr
    assert "rights" in refused.stderr


def test_a_password_sent_in_clear_to_another_machine_is_warned_about() -> None:
    # 192.0.2.0/24 is TEST-NET-1: nothing answers. The warning is the first line, before
    # the startup check; the process is then killed.
    command = [sys.executable, "-m", "opgate", "serve", "tests.mcp_catalog:build_registry",
               "--http", "127.0.0.1:0", "--ledger", "redis://192.0.2.1:6379/0"]  # fmt: skip
    environment = {**serve_environment(), "OPGATE_SECRET": "x" * 40, "OPGATE_LEDGER_PASSWORD": "pw"}
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=environment,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stderr is not None
            first = process.stderr.readline()
        finally:
            process.kill()
    assert "travels in clear" in first
    assert "rediss://" in first


# -- shared_ledger, called directly -----------------------------------------------------------


@pytest.fixture
def no_ledger_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPGATE_LEDGER_URL", raising=False)
    monkeypatch.delenv("OPGATE_LEDGER_PASSWORD", raising=False)


def ledger_of(*options: str) -> Any:
    return shared_ledger(build_parser().parse_args(["serve", "x:y", *options]))


@pytest.mark.usefixtures("no_ledger_environment")
def test_no_ledger_url_is_no_ledger() -> None:
    assert ledger_of() is None


@pytest.mark.usefixtures("no_ledger_environment")
def test_the_ledger_options_reach_the_redis_ledger(tmp_path: Path) -> None:
    password_file = tmp_path / "password"
    password_file.write_bytes(b"pw\n")
    ledger = ledger_of(
        "--ledger", "redis://127.0.0.1:1/0", "--ledger-prefix", "blue",
        "--ledger-lease", "3.5", "--ledger-password-file", str(password_file),
    )  # fmt: skip
    assert isinstance(ledger, RedisLedger)
    assert (ledger._prefix, ledger._lease, ledger._password) == (
        "blue",
        timedelta(seconds=3.5),
        "pw",
    )
    assert ledger_of("--ledger", "redis://127.0.0.1:1/0")._prefix == "opgate"


@pytest.mark.usefixtures("no_ledger_environment")
def test_a_url_that_is_not_redis_is_refused_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UsageError, match=r"^--ledger must be a redis://"):
        ledger_of("--ledger", "localhost:6379")
    monkeypatch.setenv("OPGATE_LEDGER_URL", "http://127.0.0.1:6379")
    with pytest.raises(UsageError, match=r"^\$OPGATE_LEDGER_URL must be a redis://"):
        ledger_of()


@pytest.mark.usefixtures("no_ledger_environment")
def test_a_password_file_must_hold_utf8_text(tmp_path: Path) -> None:
    password_file = tmp_path / "password"
    password_file.write_bytes(b"\xff\xfe\n")
    with pytest.raises(UsageError, match="must hold UTF-8 text"):
        ledger_of("--ledger", "redis://127.0.0.1:1/0", "--ledger-password-file", str(password_file))
    with pytest.raises(UsageError, match="cannot read --ledger-password-file"):
        ledger_of("--ledger", "redis://127.0.0.1:1/0", "--ledger-password-file", str(tmp_path))
