"""``opgate serve``'s checks on what it is to serve: a ``GatewayServer`` target keeps
its own registry options, and a ``LocalPolicy`` registry is for stdio only."""

from __future__ import annotations

import pytest

from conftest import free_port, run_main


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
