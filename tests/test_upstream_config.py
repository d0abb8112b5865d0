"""``opgate.upstream.load_config``: the ``mcpServers`` file read into frozen values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from opgate.upstream import (
    Config,
    ConfigError,
    HTTPServer,
    StdioServer,
    ToolFilter,
    load_config,
)

ENV = {"TOKEN": "s3cret", "EMPTY": "", "HOME": "/home/op"}


def config(servers: dict[str, Any], **top: Any) -> Config:
    return load_config({"mcpServers": servers, **top}, environ=ENV)


def error(servers: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config(servers)
    return caught.value


def test_stdio_and_http_entries_in_file_order() -> None:
    loaded = config(
        {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            "web": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}},
        }
    )
    time, web = loaded.servers
    assert time == StdioServer("time", "uvx", ("mcp-server-time",), {"TZ": "UTC"})
    assert web == HTTPServer("web", "https://mcp.example.com/mcp", {"X-Key": "k"})
    assert [server.name for server in loaded] == ["time", "web"]
    assert len(loaded) == 2


def test_values_are_frozen() -> None:
    (server,) = config({"a": {"command": "x", "env": {"K": "v"}}}).servers
    assert isinstance(server, StdioServer)
    with pytest.raises(dataclasses.FrozenInstanceError):
        server.command = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        server.env["K"] = "w"  # type: ignore[index]
    assert isinstance(server.args, tuple)


def test_path_text_and_bytes_sources(tmp_path: Path) -> None:
    document = {"mcpServers": {"a": {"command": "run", "cwd": "/srv"}}}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document), "utf-8")
    expected = Config((StdioServer("a", "run", cwd="/srv"),))
    assert load_config(path, environ={}) == expected
    assert load_config(json.dumps(document), environ={}) == expected
    assert load_config(json.dumps(document).encode(), environ={}) == expected


def test_unreadable_file_and_bad_json_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config('{"mcpServers": {"a": {"command": "x", "command": "y"}}}')
    with pytest.raises(TypeError):
        load_config(42)


def test_other_top_level_members_are_ignored() -> None:
    loaded = config({"a": {"command": "x"}}, globalShortcut="Ctrl+Space")
    assert [server.name for server in loaded] == ["a"]


def test_variables_in_env_and_headers_come_from_the_environment() -> None:
    stdio, http = config(
        {
            "a": {"command": "x", "env": {"T": "${TOKEN}", "MIX": "pre-${TOKEN}-$HOME-$"}},
            "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }
    ).servers
    assert isinstance(stdio, StdioServer)
    assert isinstance(http, HTTPServer)
    assert dict(stdio.env) == {"T": "s3cret", "MIX": "pre-s3cret-$HOME-$"}
    assert dict(http.headers) == {"Authorization": "Bearer s3cret"}


def test_defaults_apply_when_unset_or_empty() -> None:
    (server,) = config(
        {
            "a": {
                "command": "x",
                "env": {"U": "${NOPE:-fallback}", "E": "${EMPTY:-d}", "S": "${TOKEN:-d}"},
            }
        }
    ).servers
    assert isinstance(server, StdioServer)
    assert dict(server.env) == {"U": "fallback", "E": "d", "S": "s3cret"}


def test_an_empty_variable_without_default_is_used_as_it_is() -> None:
    (server,) = config({"a": {"command": "x", "env": {"E": "${EMPTY}"}}}).servers
    assert isinstance(server, StdioServer)
    assert dict(server.env) == {"E": ""}


def test_a_missing_variable_names_the_upstream_the_variable_and_the_path() -> None:
    problem = error(
        {"github": {"url": "https://h/mcp", "headers": {"Authorization": "${GH_TOKEN}"}}}
    )
    assert problem.pointer == "/mcpServers/github/headers/Authorization"
    assert "'github'" in str(problem)
    assert "GH_TOKEN" in str(problem)
    assert str(problem).startswith("/mcpServers/github/headers/Authorization: ")


def test_variables_elsewhere_are_not_expanded_and_are_warned_about() -> None:
    loaded = config(
        {
            "a": {"command": "${TOKEN}", "args": ["-v", "${TOKEN}"], "cwd": "/${X}"},
            "b": {"url": "https://h/${TOKEN}/mcp"},
            "c": {"command": "x", "args": ["$TOKEN"]},
        }
    )
    server = loaded.servers[0]
    assert isinstance(server, StdioServer)
    assert server.command == "${TOKEN}"
    assert server.args == ("-v", "${TOKEN}")
    assert [w.partition(": ")[0] for w in loaded.warnings] == [
        "/mcpServers/a/command",
        "/mcpServers/a/cwd",
        "/mcpServers/a/args/1",
        "/mcpServers/b/url",
    ]
    assert "only env and headers values are expanded" in loaded.warnings[0]


@pytest.mark.parametrize("kind", [[], {}, ["stdio"], 1, True])
def test_a_type_that_is_not_a_string_is_an_error(kind: object) -> None:
    problem = error({"a": {"command": "x", "type": kind}})
    assert problem.pointer == "/mcpServers/a/type"
    assert "must be a string" in str(problem)


def test_a_nested_reference_in_a_default_is_an_error() -> None:
    problem = error({"a": {"url": "https://h/mcp", "headers": {"A": "${X:-${TOKEN}}"}}})
    assert problem.pointer == "/mcpServers/a/headers/A"
    assert "do not nest" in str(problem)


def test_a_literal_reference_is_written_with_two_dollars() -> None:
    env = {"A": "$${HOME}", "B": "$$${HOME}", "C": "$$HOME", "D": "cost: $5 ${TOKEN:-}"}
    (server,) = config({"a": {"command": "x", "env": env}}).servers
    assert isinstance(server, StdioServer)
    assert dict(server.env) == {
        "A": "${HOME}",
        "B": "$${HOME}",
        "C": "$$HOME",
        "D": "cost: $5 s3cret",
    }


@pytest.mark.parametrize(
    ("url", "headers", "warned"),
    [
        ("http://api.example.com/mcp", {"Authorization": "Bearer ${TOKEN}"}, True),
        ("http://u:pw@10.0.0.5/mcp", {}, True),
        ("http://api.example.com/mcp", {"Accept": "application/json"}, False),
        ("https://api.example.com/mcp", {"Authorization": "x"}, False),
        ("http://127.0.0.1:8000/mcp", {"Authorization": "x"}, False),
        ("http://localhost/mcp", {"Authorization": "x"}, False),
        ("http://[::1]/mcp", {"Authorization": "x"}, False),
    ],
)
def test_credentials_over_plain_http_to_another_machine_are_warned_about(
    url: str, headers: dict[str, str], warned: bool
) -> None:
    loaded = config({"a": {"url": url, "headers": headers}})
    assert bool(loaded.warnings) is warned
    for warning in loaded.warnings:
        assert warning.startswith("/mcpServers/a/url: credentials (")
        assert "s3cret" not in warning
        assert "pw" not in warning.replace("password", "")


@pytest.mark.parametrize("value", ["${}", "${1X}", "${A B}", "${TOKEN", "x${TOKEN}${"])
def test_malformed_references_are_errors(value: str) -> None:
    problem = error({"a": {"command": "x", "env": {"V": value}}})
    assert problem.pointer == "/mcpServers/a/env/V"


def test_secrets_stay_out_of_repr() -> None:
    stdio, http = config(
        {
            "a": {"command": "x", "env": {"KEY": "${TOKEN}"}},
            "b": {"url": "https://user:pw@h/mcp?key=${TOKEN}", "headers": {"X-Key": "${TOKEN}"}},
        }
    ).servers
    for shown in (
        repr(stdio),
        repr(http),
        repr(config({"a": {"command": "x", "env": {"K": "${TOKEN}"}}})),
    ):
        assert "s3cret" not in shown
    assert "KEY" in repr(stdio)
    assert "X-Key" in repr(http)
    assert "pw" not in repr(http)
    assert "key=" not in repr(http)


def test_tool_filters() -> None:
    allow, deny, everything = config(
        {
            "a": {"command": "x", "tools": {"allow": ["one", "two"]}},
            "b": {"url": "https://h/mcp", "tools": {"deny": ["three"]}},
            "c": {"command": "x"},
        }
    ).servers
    assert allow.tools == ToolFilter(allow=frozenset({"one", "two"}))
    assert allow.tools.admits("one")
    assert not allow.tools.admits("three")
    assert deny.tools.admits("one")
    assert not deny.tools.admits("three")
    assert everything.tools == ToolFilter()
    assert everything.tools.admits("anything")


@pytest.mark.parametrize(
    ("tools", "pointer"),
    [
        ({"allow": ["a"], "deny": ["b"]}, "/mcpServers/a/tools"),
        ({}, "/mcpServers/a/tools"),
        ({"only": ["a"]}, "/mcpServers/a/tools"),
        ({"allow": "a"}, "/mcpServers/a/tools/allow"),
        ({"allow": ["a", "a"]}, "/mcpServers/a/tools/allow"),
        ({"deny": ["a", 3]}, "/mcpServers/a/tools/deny/1"),
        ({"deny": [""]}, "/mcpServers/a/tools/deny/0"),
        (["a"], "/mcpServers/a/tools"),
    ],
)
def test_bad_tool_filters(tools: Any, pointer: str) -> None:
    assert error({"a": {"command": "x", "tools": tools}}).pointer == pointer


def test_disabled_entries_are_left_out_unread() -> None:
    loaded = config(
        {
            "off": {"command": "x", "disabled": True, "env": {"K": "${NOT_SET}"}},
            "on": {"command": "y", "disabled": False},
        }
    )
    assert [server.name for server in loaded] == ["on"]
    assert loaded.disabled == ("off",)


@pytest.mark.parametrize(
    ("entry", "pointer", "words"),
    [
        ({}, "/mcpServers/a", "needs command"),
        ({"command": "x", "url": "https://h"}, "/mcpServers/a", "either"),
        ({"command": ""}, "/mcpServers/a/command", "empty"),
        ({"command": 3}, "/mcpServers/a/command", "string"),
        ({"command": "x\0"}, "/mcpServers/a/command", "NUL"),
        ({"command": "x", "args": "a b"}, "/mcpServers/a/args", "array"),
        ({"command": "x", "args": ["a", 1]}, "/mcpServers/a/args/1", "string"),
        ({"command": "x", "env": []}, "/mcpServers/a/env", "object"),
        ({"command": "x", "env": {"K": 1}}, "/mcpServers/a/env/K", "string"),
        ({"command": "x", "env": {"A=B": "v"}}, "/mcpServers/a/env/A=B", "'='"),
        ({"command": "x", "cwd": ""}, "/mcpServers/a/cwd", "empty"),
        ({"command": "x", "header": {}}, "/mcpServers/a/header", "unknown member"),
        ({"url": "https://h", "env": {}}, "/mcpServers/a/env", "unknown member"),
        ({"url": "ftp://h/mcp"}, "/mcpServers/a/url", "http"),
        ({"url": "https:///mcp"}, "/mcpServers/a/url", "host"),
        ({"url": "https://h:99999/mcp"}, "/mcpServers/a/url", "valid"),
        ({"url": "https://h/m cp"}, "/mcpServers/a/url", "spaces"),
        (
            {"url": "https://h", "headers": {"Bad Name": "v"}},
            "/mcpServers/a/headers/Bad Name",
            "token",
        ),
        ({"url": "https://h", "headers": {"X": "a\r\nB: c"}}, "/mcpServers/a/headers/X", "CR"),
        ({"url": "https://h", "type": "sse"}, "/mcpServers/a/type", "SSE"),
        ({"url": "https://h", "type": "stdio"}, "/mcpServers/a/type", "needs command"),
        ({"command": "x", "type": "http"}, "/mcpServers/a/type", "needs url"),
        ({"command": "x", "type": "pipe"}, "/mcpServers/a/type", "must be"),
        ({"command": "x", "disabled": "yes"}, "/mcpServers/a/disabled", "true or false"),
    ],
)
def test_bad_entries_name_their_pointer(entry: dict[str, Any], pointer: str, words: str) -> None:
    problem = error({"a": entry})
    assert problem.pointer == pointer
    assert words in str(problem)


def test_known_types_are_accepted() -> None:
    servers = config(
        {
            "a": {"command": "x", "type": "stdio"},
            "b": {"url": "https://h/mcp", "type": "http"},
            "c": {"url": "https://h/mcp", "type": "streamable-http"},
            "d": {"url": "https://h/mcp", "type": "streamableHttp"},
        }
    ).servers
    assert [type(server) for server in servers] == [StdioServer, HTTPServer, HTTPServer, HTTPServer]


@pytest.mark.parametrize("name", ["", "has.dot", "has space", "x" * 65, "ünï"])
def test_upstream_names_follow_the_rule(name: str) -> None:
    problem = error({name: {"command": "x"}})
    assert "[A-Za-z0-9_-]" in str(problem)


def test_pointers_escape_slashes_and_tildes() -> None:
    problem = error({"a": {"command": "x", "env": {"a/b~c": 1}}})
    assert problem.pointer == "/mcpServers/a/env/a~1b~0c"


@pytest.mark.parametrize(
    ("document", "pointer"),
    [
        ("[]", ""),
        ({}, ""),
        ({"mcpServers": []}, "/mcpServers"),
        ({"mcpServers": {"a": "x"}}, "/mcpServers/a"),
    ],
)
def test_bad_shapes(document: Any, pointer: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(document, environ={})
    assert caught.value.pointer == pointer


def test_the_default_environment_is_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPGATE_TEST_UPSTREAM_VALUE", "from-env")
    (server,) = load_config(
        {"mcpServers": {"a": {"command": "x", "env": {"V": "${OPGATE_TEST_UPSTREAM_VALUE}"}}}}
    ).servers
    assert isinstance(server, StdioServer)
    assert server.env["V"] == "from-env"
