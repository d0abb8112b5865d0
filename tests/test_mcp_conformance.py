"""The official MCP conformance suite (0.2.0-alpha.12) against ``opgate serve`` over HTTP.

One ``opgate serve mcp_conformance_app:server --http 127.0.0.1:PORT`` (the fixture
catalog, every conformance tool pinned) is tested at both wires, with the suite's
frozen requirement sets: ``conformance server --requirements 2025-11-25`` and
``--requirements 2026-07-28`` (each also runs that revision's pending, extension and
added-after-release scenarios). Every check of every applicable scenario must pass
(``SUCCESS``, or the suite's non-failing ``INFO``/``SKIPPED``/``WARNING``), except:

* ``NOT_APPLICABLE``: scenarios for features opgate does not offer, with the reason;
* ``NOT_APPLICABLE_CHECKS``: single checks of otherwise applicable scenarios that probe
  such a feature;
* ``KNOWN_GAPS``: checks the adapter fails today, each with what it would take. This
  list is strict: a gap that starts passing fails the test, so it is removed here
  (and from ``docs/mcp.md``) when fixed.

An applicable scenario missing from the suite's output fails the test too. The pass
count is printed (``pytest -s`` shows it). The node tools come from
``tests/node_tools.py`` (a cache outside the clone); a run takes about 25 seconds.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from node_tools import NodeTools, ensure_node_tools

TESTS = Path(__file__).resolve().parent
WIRES = ("2025-11-25", "2026-07-28")
SCENARIO_TIMEOUT_MS = 30_000
RUN_TIMEOUT_SECONDS = 240
STARTUP_TIMEOUT_SECONDS = 30

_RESOURCES = "resources are not offered: opgate serves tools only"
_PROMPTS = "prompts are not offered: opgate serves tools only"
_SAMPLING = "sampling is not offered: operations cannot ask the client's model"
_ROOTS = "roots are not offered: operations cannot ask for the client's roots"
_TASKS = "the tasks extension is not offered"
_MULTI = "one InputRequiredResult carries one prompt: a handler awaits one input at a time"

#: Scenarios that need a feature opgate does not offer (docs/mcp.md lists the same).
NOT_APPLICABLE: dict[str, str] = {
    "completion-complete": "completion/complete is not offered (no prompts or resource templates)",
    "resources-list": _RESOURCES,
    "resources-read-text": _RESOURCES,
    "resources-read-binary": _RESOURCES,
    "resources-templates-read": _RESOURCES,
    "resources-subscribe": _RESOURCES,
    "resources-unsubscribe": _RESOURCES,
    "sep-2164-resource-not-found": _RESOURCES,
    "prompts-list": _PROMPTS,
    "prompts-get-simple": _PROMPTS,
    "prompts-get-with-args": _PROMPTS,
    "prompts-get-embedded-resource": _PROMPTS,
    "prompts-get-with-image": _PROMPTS,
    "tools-call-sampling": _SAMPLING,
    "tools-call-with-logging": (
        "operations have no log channel: test_tool_with_logging must send three "
        "notifications/message of its own (the adapter only logs its sanitized failure lines)"
    ),
    "server-sse-polling": (
        "test_reconnection must close the SSE stream mid-call (SEP-1699 polling); a handler "
        "cannot reach the transport (the scenario is pending in the suite)"
    ),
    "input-required-result-basic-sampling": _SAMPLING,
    "input-required-result-basic-list-roots": _ROOTS,
    "input-required-result-multiple-input-requests": f"{_MULTI}; it also needs sampling and roots",
    "input-required-result-non-tool-request": "prompts/get: " + _PROMPTS,
    "input-required-result-capability-check": (
        "needs a sampling-only inputRequest for a client without elicitation: " + _SAMPLING
    ),
    **{
        f"tasks-{name}": _TASKS
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
}

#: Single checks that probe a feature opgate does not offer: (scenario, check id).
NOT_APPLICABLE_CHECKS: dict[tuple[str, str], str] = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): (
        "test_missing_capability must need sampling and answer -32021 naming it: " + _SAMPLING
    ),
    ("server-stateless", "sep-2575-missing-capability-http-400"): (
        "the HTTP 400 of that -32021 answer: " + _SAMPLING
    ),
    ("caching", "sep-2549-prompts-list-caching-hints"): _PROMPTS,
    ("caching", "sep-2549-resources-list-caching-hints"): _RESOURCES,
    ("caching", "sep-2549-resources-templates-list-caching-hints"): _RESOURCES,
}

#: Checks the adapter fails today (strict: each must still fail; remove it when fixed).
KNOWN_GAPS: dict[tuple[str, str], str] = {}

#: Non-failing statuses the suite reports besides SUCCESS (it counts only FAILURE as failed).
NON_FAILING = frozenset({"SUCCESS", "INFO", "SKIPPED", "WARNING"})

_RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")


@dataclass(frozen=True, slots=True)
class Check:
    scenario: str
    id: str
    status: str
    message: str


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"opgate serve exited with status {server.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"opgate serve did not listen on port {port} in {STARTUP_TIMEOUT_SECONDS}s")


@pytest.fixture(scope="module")
def node() -> NodeTools:
    return ensure_node_tools()


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("opgate-serve") / "server.log"
    command = [sys.executable, "-m", "opgate", "serve", "mcp_conformance_app:server"]
    command += ["--http", f"127.0.0.1:{port}"]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, cwd=TESTS, stdout=sink, stderr=subprocess.STDOUT)
    try:
        try:
            _wait_listening(port, server)
        except RuntimeError as exc:
            pytest.fail(f"{exc}\n{log.read_text(errors='replace')[-3000:]}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_suite(node: NodeTools, url: str, wire: str, out: Path) -> list[Check]:
    """Run one requirement set; return every check of every scenario it ran."""
    command = [str(node.conformance), "server", "--url", url, "--requirements", wire]
    command += ["--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(out)]
    done = subprocess.run(
        command,
        env=node.env(home=out.parent),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    checks: list[Check] = []
    for result in sorted(out.glob("server-*/checks.json")):
        match = _RESULT_DIR.fullmatch(result.parent.name)
        assert match is not None, result.parent.name
        for entry in json.loads(result.read_text()):
            checks.append(
                Check(
                    match["scenario"],
                    entry["id"],
                    entry["status"],
                    entry.get("errorMessage") or "",
                )
            )
    assert checks, f"the suite produced no results (exit {done.returncode}):\n{done.stdout[-3000:]}"
    return checks


#: The applicable scenarios each requirement set must run (and pass).
APPLICABLE: dict[str, frozenset[str]] = {
    "2025-11-25": frozenset(
        {
            "server-initialize",
            "logging-set-level",
            "ping",
            "tools-list",
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-error",
            "tools-call-with-progress",
            "tools-call-elicitation",
            "elicitation-sep1034-defaults",
            "elicitation-sep1330-enums",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
            "server-session-lifecycle",
            "json-schema-2020-12",
        }
    ),
    "2026-07-28": frozenset(
        {
            "server-stateless",
            "tools-list",
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-error",
            "tools-call-with-progress",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
            "caching",
            "input-required-result-basic-elicitation",
            "input-required-result-request-state",
            "input-required-result-multi-round",
            "input-required-result-missing-input-response",
            "input-required-result-result-type",
            "input-required-result-unsupported-methods",
            "input-required-result-tampered-state",
            "input-required-result-ignore-extra-params",
            "input-required-result-validate-input",
            "json-schema-2020-12",
            "http-header-validation",
            "http-custom-header-server-validation",
        }
    ),
}


@pytest.mark.parametrize("wire", WIRES)
def test_conformance_suite(
    wire: str, node: NodeTools, server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    checks = run_suite(node, server_url, wire, tmp_path / "results")
    took = time.monotonic() - started
    ran = {check.scenario for check in checks}
    assert APPLICABLE[wire] <= ran, f"scenarios not run: {sorted(APPLICABLE[wire] - ran)}"
    assert not ran & APPLICABLE[wire] & NOT_APPLICABLE.keys()
    unexpected = ran - APPLICABLE[wire] - NOT_APPLICABLE.keys()
    assert not unexpected, f"new scenarios to classify (applicable or not): {sorted(unexpected)}"

    failures: list[str] = []
    gaps_seen: set[tuple[str, str]] = set()
    counts: Counter[str] = Counter()
    for check in checks:
        if check.scenario in NOT_APPLICABLE:
            counts["not applicable"] += 1
            continue
        key = (check.scenario, check.id)
        if key in NOT_APPLICABLE_CHECKS:
            counts["not applicable"] += 1
            continue
        if key in KNOWN_GAPS:
            gaps_seen.add(key)
            if check.status in NON_FAILING:
                failures.append(f"{key} passes now: remove it from KNOWN_GAPS and docs/mcp.md")
            counts["known gap"] += 1
            continue
        counts[check.status] += 1
        if check.status not in NON_FAILING:
            failures.append(f"{check.scenario}: {check.id} {check.status}: {check.message}")
    applicable_gaps = {key for key in KNOWN_GAPS if key[0] in APPLICABLE[wire]}
    assert gaps_seen == applicable_gaps, f"known gaps not reported: {applicable_gaps - gaps_seen}"

    with capsys.disabled():
        print(
            f"\nMCP conformance {wire}: {counts['SUCCESS']} checks passed in "
            f"{len(APPLICABLE[wire])} applicable scenarios "
            f"({counts['WARNING']} warnings, {counts['SKIPPED']} skipped, "
            f"{counts['known gap']} known gaps, {counts['not applicable']} not-applicable "
            f"checks) in {took:.1f}s"
        )
    assert not failures, "\n".join(failures)


def test_exclusions_name_their_reasons() -> None:
    for table in (NOT_APPLICABLE, NOT_APPLICABLE_CHECKS, KNOWN_GAPS):
        assert all(isinstance(reason, str) and len(reason) > 20 for reason in table.values())
    assert not {scenario for scenario, _ in NOT_APPLICABLE_CHECKS} & NOT_APPLICABLE.keys()
    assert not {scenario for scenario, _ in KNOWN_GAPS} & NOT_APPLICABLE.keys()
