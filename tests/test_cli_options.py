"""``opgate serve``'s options together: each option that needs another is refused
without it, never ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_main

HTTP_LIMITS = [
    ["--max-sessions", "3"],
    ["--principal-sessions", "3"],
    ["--session-idle-timeout", "3"],
    ["--principal-requests", "3"],
    ["--max-connections", "3"],
    ["--header-timeout", "3"],
    ["--body-timeout", "3"],
    ["--keep-alive-timeout", "3"],
    ["--send-timeout", "3"],
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
        *(
            ([option, "3"], f"{option} needs --upstreams")
            for option in ("--start-timeout", "--call-timeout", "--hold-timeout")
        ),
        (["--lock", "opgate.lock"], "--lock needs --upstreams"),
        (["--accept", "kit.echo"], "--accept needs --lock"),
        (["--accept-all"], "--accept-all needs --lock"),
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
    from opgate.cli._options import NEEDS

    tested = {"--issuer-url", "--resource-url", "--required-scope", "--token-verifier"}
    tested |= {"--allowed-host", "--allowed-origin", "--allow-unauthenticated"}
    tested |= {limit[0] for limit in HTTP_LIMITS}
    tested |= {"--base-url", "--header", "--confirm", "--output-schemas", "--check"}
    tested |= {"--lock", "--accept", "--accept-all"}
    tested |= {"--ledger-prefix", "--ledger-lease", "--ledger-password-file"}
    tested |= {"--start-timeout", "--call-timeout", "--hold-timeout"}
    assert {option for option, *_ in NEEDS} == tested


def test_ledger_options_are_accepted_with_the_ledger_url_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPGATE_LEDGER_URL", "ftp://not-redis")
    status, _, err = run_main(capsys, "serve", "x:y", "--ledger-prefix", "p")
    assert status == 2
    assert "needs --ledger" not in err
    assert "$OPGATE_LEDGER_URL must be a redis://" in err  # it got as far as the URL


# -- --openapi over HTTP: authenticated callers only ---------------------------------------

#: An OpenAPI document with one operation.
DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "One", "version": "1"},
    "paths": {"/items": {"get": {"responses": {"200": {"description": "ok"}}}}},
}


async def refuse_to_serve(*args: object, **kwargs: object) -> None:
    raise AssertionError("served")


@pytest.mark.parametrize("address", ["127.0.0.1:0", "0.0.0.0:0"])
@pytest.mark.parametrize("unauthenticated", [[], ["--allow-unauthenticated"]])
def test_openapi_over_http_needs_a_token_verifier(
    address: str,
    unauthenticated: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Its policy lets every caller call every operation with the API's credentials, as
    # LocalPolicy does (refused over --http); without a verifier every caller is one
    # principal.
    spec = tmp_path / "one.json"
    spec.write_text(json.dumps(DOCUMENT))
    monkeypatch.setattr("opgate.mcp.serve_http", refuse_to_serve)
    status, out, err = run_main(
        capsys,
        *("serve", "--openapi", str(spec), "--base-url", "http://h"),
        *("--http", address, *unauthenticated),
    )
    assert (status, out) == (2, "")
    assert "opgate serve: --openapi over --http needs --token-verifier" in err
    assert "every authenticated caller may call every operation" in err
    assert "imported" not in err  # refused before the document is read
    assert "serving" not in err


def test_openapi_over_http_with_a_token_verifier_reads_the_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run_main(
        capsys,
        *("serve", "--openapi", "missing.json", "--base-url", "http://h", "--http", "127.0.0.1:0"),
        *("--token-verifier", "tests.mcp_catalog:TokenVerifier"),
    )
    assert (status, out) == (2, "")
    assert "needs --token-verifier" not in err
    assert "cannot read missing.json" in err  # it got as far as the document


# -- --upstreams over HTTP: authenticated callers only -------------------------------------


@pytest.mark.parametrize("address", ["127.0.0.1:0", "0.0.0.0:0"])
@pytest.mark.parametrize("unauthenticated", [[], ["--allow-unauthenticated"]])
def test_upstreams_over_http_needs_a_token_verifier(
    address: str,
    unauthenticated: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The same allow-everything policy as --openapi, with the upstreams' rights.
    monkeypatch.setattr("opgate.mcp.serve_http", refuse_to_serve)
    status, out, err = run_main(
        capsys, "serve", "--upstreams", "missing.json", "--http", address, *unauthenticated
    )
    assert (status, out) == (2, "")
    assert "opgate serve: --upstreams over --http needs --token-verifier" in err
    assert "every authenticated caller may call every tool of every upstream" in err
    assert "cannot read" not in err  # refused before the file is read
    assert "serving" not in err


def test_upstreams_over_http_with_a_token_verifier_reads_the_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run_main(
        capsys,
        *("serve", "--upstreams", "missing.json", "--http", "127.0.0.1:0"),
        *("--token-verifier", "tests.mcp_catalog:TokenVerifier"),
    )
    assert (status, out) == (2, "")
    assert "needs --token-verifier" not in err
    assert "cannot read 'missing.json'" in err  # it got as far as the file
