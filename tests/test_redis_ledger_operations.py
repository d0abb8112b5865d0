"""Operating the shared ledger: how Redis's password is given, and what a replica does
while Redis is down.

Every test here runs ``opgate serve --http`` processes (benchmarks/replicas.py) against a
real ``redis-server`` and drives them with the official MCP client.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
import redis.asyncio as redis_client

import opgate.redis._ledger as redis_ledger
from opgate import (
    Completed,
    Failed,
    FailureCode,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate.redis import RedisLedger

from conftest import ROOT, SECRET, Ctx, TeamPolicy, free_port, serve_environment
from redis_server import RedisServer

sys.path.insert(0, str(ROOT / "benchmarks"))

from replicas import ReplicaSet, RoundRobinTransport, client

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
LEGACY = "legacy"  # 2025-11-25
PASSWORD = "redis-PASSWORD-marker-7f3a"
YES = types.ElicitResult(action="accept", content={"ok": True})
CONFIRM = {"name": "orders.confirm", "arguments": {"id": 7}}
ECHO = {"name": "util.echo", "arguments": {"text": "hello"}}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FORM_SUPPORT = {InputMode.FORM}


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


# -- item 8: Redis down stops only what needs it ----------------------------------------------


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def error_of(result: Any) -> tuple[str, str] | None:
    if isinstance(result, types.CallToolResult) and result.is_error:
        error = result.structured_content["error"]
        return str(error["code"]), str(error["message"])
    return None


async def calls_while_down(replicas: ReplicaSet, era: str) -> None:
    """What a form-capable client gets from a replica whose Redis is down."""
    async with client(RoundRobinTransport(replicas.ports), era, elicitation=accept) as session:
        plain = await session.call_tool("invoke", ECHO)
        assert error_of(plain) is None, plain
        assert text_of(plain) == "echo hello"
        prompting = await session.call_tool("invoke", CONFIRM)
        assert error_of(prompting) is not None, prompting
        code, message = error_of(prompting)  # type: ignore[misc]
        assert code == "confirmation_required"
        assert "prompts are unavailable" in message
        assert "try again" in message
        assert text_of(prompting).count("confirmation_required") == 1
        assert isinstance(
            await session.call_tool("search", {"query": "orders"}), types.CallToolResult
        )


async def test_a_replica_serves_what_needs_no_ledger_while_redis_is_down(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)  # its port is known; it is not running yet
    try:
        with ReplicaSet(1, ledger_url=redis.url, prefix="down", log_dir=tmp_path) as replicas:
            assert "is unreachable" in replicas.log(0)  # said at startup
            assert "serving anyway" in replicas.log(0)
            for era in (MODERN, LEGACY):
                await calls_while_down(replicas, era)
            # Redis comes up: prompts work again without a restart of the replica
            redis.start()
            with anyio.fail_after(30):
                while True:
                    async with client(
                        RoundRobinTransport(replicas.ports), MODERN, elicitation=accept
                    ) as session:
                        first = await session.session.call_tool(
                            "invoke", CONFIRM, allow_input_required=True
                        )
                    if isinstance(first, types.InputRequiredResult):
                        break
                    await anyio.sleep(0.2)
            assert "available again" in replicas.log(0)
            # Redis goes down between the prompt and its answer: the answer is busy,
            # said once, and the plain call still works
            redis.stop()
            async with client(
                RoundRobinTransport(replicas.ports), MODERN, elicitation=accept
            ) as session:
                answered = await session.session.call_tool(
                    "invoke",
                    CONFIRM,
                    request_state=first.request_state,
                    input_responses={"opgate": YES},
                )
                assert error_of(answered) == (
                    "busy",
                    "the continuation store is unavailable; try again shortly",
                ), (answered, replicas.log(0))
                assert text_of(answered).startswith("busy: the continuation store")
                assert text_of(answered).count("busy") == 1
                assert error_of(await session.call_tool("invoke", ECHO)) is None
            log = replicas.log(0)
            # one line per change of health, not one per call
            assert log.count("is unavailable (") == 1, log  # the startup line said the first
    finally:
        redis.stop()


# -- attacks: a hung Redis, a flapping Redis ------------------------------------------------


def plain_and_prompting(calls: list[str]) -> list[Operation]:
    async def notes(inv: Invocation) -> Any:
        calls.append("notes")
        return finish(Result([Text("notes")]))

    async def confirm(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("Sure?", FORM, 1))
        calls.append("confirmed")
        return finish(Result([Text("confirmed")]))

    return [
        Operation("notes.list", "List notes", notes),
        Operation("orders.confirm", "Confirm an order", confirm),
    ]


async def timed(reg: Registry, name: str, **kwargs: Any) -> tuple[float, Any]:
    started = time.monotonic()
    outcome = await reg.invoke(Ctx(), name, "{}", input_support=FORM_SUPPORT, **kwargs)
    return time.monotonic() - started, outcome


async def test_a_hung_redis_costs_one_wait_per_retry_not_one_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis paused (SIGSTOP): a call waits for it once; while it is down, one call at a
    time (and at most one a second) tries it and the others do not wait; when it
    resumes, prompts work again. The wait is longer than the retry interval, so a
    second try while the first still waits would show."""
    monkeypatch.setattr(redis_ledger, "CALL_TIMEOUT", 1.5)
    server = RedisServer(tmp_path)
    server.start()
    calls: list[str] = []
    reg = Registry(
        plain_and_prompting(calls),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger(server.url, prefix="hung"),
    )
    pid = server._process.pid  # type: ignore[union-attr]
    try:
        assert isinstance((await timed(reg, "orders.confirm"))[1], Pending)
        os.kill(pid, signal.SIGSTOP)
        waited, outcome = await timed(reg, "notes.list")
        assert isinstance(outcome, Completed), outcome
        assert waited >= 1.5  # the call that found it hung
        spans: list[tuple[float, float]] = []

        async def one() -> None:
            started = time.monotonic()
            elapsed, outcome = await timed(reg, "notes.list")
            assert isinstance(outcome, Completed), outcome
            spans.append((started, started + elapsed))

        async with anyio.create_task_group() as group:
            for _ in range(80):  # a call every 50 ms for four seconds
                group.start_soon(one)
                await anyio.sleep(0.05)
        assert len(spans) == 80
        slow = sorted(span for span in spans if span[1] - span[0] >= 1.0)
        assert 1 <= len(slow) <= 3, spans  # Redis was tried again, not by everyone
        for before, after in itertools.pairwise(slow):
            assert after[0] >= before[1], slow  # never two tries at once
        os.kill(pid, signal.SIGCONT)
        with anyio.fail_after(20):
            while not isinstance((await timed(reg, "orders.confirm"))[1], Pending):
                await anyio.sleep(0.1)
        said = [r.getMessage() for r in caplog.records if r.name == "opgate.redis"]
        assert sum("is unavailable" in line for line in said) == 1, said
        assert sum("available again" in line for line in said) == 1, said
    finally:
        os.kill(pid, signal.SIGCONT)
        await reg.aclose()
        server.stop()


async def test_a_flapping_redis_never_runs_an_answer_twice(tmp_path: Path) -> None:
    """Redis stopped and started five times between prompts and their answers: plain
    calls always work, prompts are refused while it is down, and every answer runs its
    handler once or is refused (busy, then expired once Redis lost the prompt)."""
    server = RedisServer(tmp_path)
    server.start()
    calls: list[str] = []
    reg = Registry(
        plain_and_prompting(calls),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger(server.url, prefix="flap"),
    )
    answered = 0
    try:
        for _ in range(5):
            with anyio.fail_after(20):
                while not isinstance(pending := (await timed(reg, "orders.confirm"))[1], Pending):
                    await anyio.sleep(0.1)
            kept = (await timed(reg, "orders.confirm"))[1]
            assert isinstance(kept, Pending)
            answer = (kept.continuation, InputResponse.accept({"ok": True}))
            assert isinstance((await timed(reg, "orders.confirm", resume=answer))[1], Completed)
            answered += 1
            server.stop()
            assert isinstance((await timed(reg, "notes.list"))[1], Completed)
            refused = (await timed(reg, "orders.confirm"))[1]
            assert isinstance(refused, Failed)
            assert refused.failure.code in (FailureCode.CONFIRMATION_REQUIRED, FailureCode.BUSY)
            late = (pending.continuation, InputResponse.accept({"ok": True}))
            down = (await timed(reg, "orders.confirm", resume=late))[1]
            assert isinstance(down, Failed)
            assert down.failure.code is FailureCode.BUSY
            # the replay of the answered one is busy too: it never runs again
            again = (await timed(reg, "orders.confirm", resume=answer))[1]
            assert isinstance(again, Failed)
            assert again.failure.code is FailureCode.BUSY
            server.start()
        assert calls.count("confirmed") == answered
    finally:
        await reg.aclose()
        server.stop()


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


def test_a_redis_ledger_is_never_pickled_or_copied_with_its_credentials() -> None:
    import copy
    import pickle

    for ledger in (
        RedisLedger(f"redis://:{PASSWORD}@127.0.0.1:1/0"),
        RedisLedger("redis://127.0.0.1:1/0", password=PASSWORD),
    ):
        assert PASSWORD not in repr(ledger)
        for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match="cannot be pickled") as refused:
                attempt(ledger)
            assert PASSWORD not in str(refused.value)
    reg = Registry(
        plain_and_prompting([]),
        TeamPolicy(),
        secret=SECRET,
        ledger=RedisLedger("redis://127.0.0.1:1/0", password=PASSWORD),
    )
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(reg._ledger)
    with pytest.raises(ValueError, match="twice"):
        RedisLedger(f"redis://:{PASSWORD}@127.0.0.1:1/0", password="another")


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


# -- the answer room: the Redis script against the in-memory ledger -------------------------


async def rooms_of(reg: Registry) -> tuple[int, int]:
    """``(used, rooms)`` of either ledger, the rooms checked against their parts."""
    from opgate._ledger import Ledger

    ledger: Any = reg._ledger
    if isinstance(ledger, Ledger):
        assert sum(ledger._rooms.values()) == ledger.rooms
        return ledger.used, ledger.rooms
    store = redis_client.Redis.from_url(ledger._url)
    try:
        head = ledger._key_prefix
        rooms = {k: int(v) for k, v in (await store.hgetall(head + "rooms")).items()}
        total = int(await store.get(head + "roomsum") or 0)
        assert sum(rooms.values()) == total
        return int(await store.get(head + "used") or 0), total
    finally:
        await store.aclose()


async def test_the_redis_answer_rooms_follow_the_in_memory_ledger(redis_server: Any) -> None:
    """Random new calls, answers of random sizes that prompt again or finish, and answers
    the policy refuses, from six principals on a small ledger, made on both ledgers at
    once: every outcome, the bytes used and the rooms kept agree after every step, and
    after everything expired nothing is left on either."""
    import random

    from opgate import Limits

    note = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 20000}}}

    async def ask(inv: Invocation) -> Any:
        size = int(inv.arguments["size"])
        if inv.resume is None or (inv.arguments["again"] and inv.resume.state["step"] == 1):
            step = 1 if inv.resume is None else 2
            return await_input(FormInput("note?", note, {"s": "x" * size, "step": step}))
        return finish(Result([Text("done")]))

    ID = {
        "type": "object",
        "properties": {"size": {"type": "integer"}, "again": {"type": "boolean"}},
        "required": ["size", "again"],
    }
    limits = Limits(ledger_bytes=2 * 1024 * 1024, principal_bytes=512 * 1024)
    now = [3_000_000.0]
    registries = []
    for ledger in (None, RedisLedger(redis_server.url, prefix=f"differential-{free_port()}")):
        options: dict[str, Any] = {"secret": SECRET, "ledger": ledger} if ledger else {}
        registries.append(
            Registry(
                [Operation("ask", "Ask", ask, input_schema=ID)],
                TeamPolicy(),
                limits=limits,
                clock=lambda: now[0],
                **options,
            )
        )
    pending: list[list[tuple[str, str, Pending]]] = [[], []]  # (principal, args, prompt)
    seen: set[tuple[str, Any]] = set()
    rng = random.Random(19016)
    try:
        for step in range(400):
            if step % 100 == 99:  # everything expires: both ledgers give it all back
                now[0] += limits.input_lifetime.total_seconds() + 1
                pending = [[], []]
                for _ in range(100):  # Redis sweeps a batch per call
                    if (await registries[1]._ledger.statistics()).live == 0:
                        break
                registries[0]._ledger.sweep()  # type: ignore[attr-defined]
                assert await rooms_of(registries[0]) == await rooms_of(registries[1]) == (0, 0)
            now[0] += 1
            principal = f"p{rng.randrange(6)}"
            deny = rng.random() < 0.15
            text = "y" * rng.choice([0, 10, 3000, limits.answer_bytes - 16])
            answering = bool(pending[0]) and rng.random() < 0.45
            index = rng.randrange(len(pending[0])) if answering else 0
            again = "true" if rng.random() < 0.5 else "false"
            arguments = f'{{"size": {rng.randrange(6000)}, "again": {again}}}'
            outcomes: list[Any] = []
            for side, reg in enumerate(registries):
                policy: Any = reg._policy
                policy.deny_execute.clear()
                if deny:
                    policy.deny_execute.add("ask")
                if answering:
                    who, args, waiting = pending[side][index]
                    resume = (waiting.continuation, InputResponse.accept({"note": text}))
                    ctx = Ctx(principal=who)
                    outcomes.append(
                        await reg.invoke(
                            ctx, "ask", args, input_support=FORM_SUPPORT, resume=resume
                        )
                    )
                else:
                    ctx = Ctx(principal=principal)
                    outcomes.append(
                        await reg.invoke(ctx, "ask", arguments, input_support=FORM_SUPPORT)
                    )
            shapes = [
                (type(o).__name__, o.failure.message if isinstance(o, Failed) else None)
                for o in outcomes
            ]
            assert shapes[0] == shapes[1], (step, answering, outcomes)
            seen.add((shapes[0][0], answering))
            for side, outcome in enumerate(outcomes):
                if answering:
                    who, args, _ = pending[side][index]
                    if isinstance(outcome, Pending | Completed):
                        pending[side].pop(index)
                    if isinstance(outcome, Pending):
                        pending[side].append((who, args, outcome))
                elif isinstance(outcome, Pending):
                    pending[side].append((principal, arguments, outcome))
            assert await rooms_of(registries[0]) == await rooms_of(registries[1]), step
        # every kind of step happened: prompts, refusals, answers prompting and finishing
        assert {("Pending", False), ("Failed", False), ("Pending", True)} <= seen, seen
        assert {("Completed", True), ("Failed", True)} <= seen, seen
    finally:
        for reg in registries:
            await reg.aclose()
