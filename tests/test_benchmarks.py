"""The benchmark suite (benchmarks/) at a tiny scale: it runs, and its tables make sense.

No timing assertions (CI machines vary); only shapes and sane numbers. The
comparison packages (the ``bench`` extra) are never needed here.
"""

from __future__ import annotations

import gc
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_adversarial_json
import bench_chart
import bench_construction
import bench_gateway
import bench_interaction
import bench_invoke
import bench_mcp
import bench_mcp_floor
import bench_mcp_http
import bench_openapi
import bench_real
import bench_registry
import bench_relevance
import bench_startup
import common

NAME = re.compile(r"[a-z_]+\.[a-z_]+\.[a-z]+_[0-9]+")
NAME_OF_METHOD = re.compile(r"[a-z0-9]+(\.[A-Za-z0-9]+)+")


def _column(rows: list[dict[str, Any]], name: str) -> list[Any]:
    return [row[name] for row in rows]


def test_registry_benchmark_tiny() -> None:
    build, search, memory = bench_registry.run((300,), runs=50, compare=False, memory_size=300)
    assert build.rows[0]["catalog"] == 300
    assert 0 < build.rows[0]["Registry() s"] < 60
    assert build.rows[0]["distinct schemas"] > 10
    assert len(search.rows) == 2 * len(bench_registry.QUERIES)
    assert {row["policy"] for row in search.rows} == {"allow all", "1%"}
    for row in search.rows:
        assert set(search.columns) >= set(row)
        assert 0 < row["median µs"] <= row["p90 µs"] < 1_000_000
        assert 0 <= row["items"] <= 5
        assert isinstance(row["ok"], bool)
        assert row["target µs"] == 500
        if row["query"] == "exact name":
            assert row["items"] == 1
    full = {"common term", "empty browse", "second page (cursor)"}  # match plenty even at 300
    allow_all = [row for row in search.rows if row["policy"] == "allow all"]
    assert [row["items"] for row in allow_all if row["query"] in full] == [5, 5, 5]
    (probe,) = memory.rows
    assert probe["catalog"] == 300
    assert probe["registry traced MiB"] > 0


def test_relevance_benchmark_harness_tiny() -> None:
    # The harness on a handmade catalog: the rule finds only the all-terms query, the
    # relevance ranking both; the fixed query sets parse and name real operations.
    def operation(name: str, summary: str) -> Any:
        return bench_relevance.Operation(name, summary, bench_relevance._handler, group="g")

    catalog = bench_relevance.QualityCatalog(
        "tiny",
        [operation("g.RebootInstances", "Reboots instances."), operation("g.Other", "Other.")],
        [
            bench_relevance.Query("reboot instances", frozenset({"g.RebootInstances"})),
            bench_relevance.Query("restart reboot", frozenset({"g.RebootInstances"})),
        ],
        "handmade",
    )
    quality, timing, build = bench_relevance.run([catalog], rounds=1)
    scores = {row["ranking"]: row for row in quality.rows}
    assert scores["rule (seed)"]["recall@1"] == "50.0 % (1/2)"
    assert scores["relevance"]["recall@1"] == "100.0 % (2/2)"
    assert {row["ranking"] for row in timing.rows} == {
        "rule (seed)",
        "relevance",
        "hybrid (toy embedder)",
    }
    assert scores["hybrid (toy embedder)"]["recall@1"] == "100.0 % (2/2)"
    assert build.rows[0]["relevance index CPU s"] >= 0
    assert scores["relevance"]["gold in 10"] == 1.0
    root = Path(bench_relevance.__file__).parent
    for name, least in (("aws", 100), ("github", 30)):
        queries = bench_relevance.load_queries(root / f"relevance_queries_{name}.json")
        assert len(queries) >= least
        assert all(2 <= len(q.text.split()) <= 6 and q.relevant for q in queries)


def test_google_catalog_reads_each_apis_latest_stable_version(tmp_path: Path) -> None:
    # The bench extra's google-api-python-client ships the documents; the tests (dev
    # extra only) give a folder of their own in the same layout.
    def document(api: str, version: str, resources: dict[str, Any]) -> None:
        text = json.dumps({"name": api, "version": version, "resources": resources})
        (tmp_path / f"{api}.{version}.json").write_text(text, encoding="utf-8")

    def method(name: str, text: str) -> dict[str, Any]:
        return {"id": name, "description": text}

    files = {"methods": {"create": method("drive.files.create", "Creates a file. Or a folder.")}}
    nested = {"comments": {"methods": {"list": method("drive.files.comments.list", "")}}}
    document(
        "drive", "v2", {"files": {"methods": {"create": method("drive.files.create", "Old.")}}}
    )
    document("drive", "v3", {"files": {**files, "resources": nested}})
    document("drive", "v4beta1", {"files": {"methods": {"x": method("drive.files.x", "Beta.")}}})
    document("mirror", "v1", {"files": {"methods": {"create": method("drive.files.create", "")}}})
    catalog = bench_relevance.google_catalog(tmp_path)
    ops = {op.name: op for op in catalog.operations}
    assert sorted(ops) == ["drive.files.comments.list", "drive.files.create"]
    assert ops["drive.files.create"].group == "drive"  # kept by the first API, by name
    assert ops["drive.files.create"].summary == "Creates a file."
    assert ops["drive.files.comments.list"].summary == "drive.files.comments.list"
    assert bench_relevance._stable_version("v1.4") == (1, 4)
    assert bench_relevance._stable_version("v2beta1") is None
    # the request set: 45 requests of 3-11 words, each with operations that answer it
    assert len(catalog.queries) == 45
    assert all(3 <= len(q.text.split()) <= 11 and q.relevant for q in catalog.queries)
    assert all(NAME_OF_METHOD.fullmatch(name) for q in catalog.queries for name in q.relevant)


def test_livemcpbench_catalog_is_in_the_project_and_splits_in_halves() -> None:
    # The copy under benchmarks/data (never ../shared): 527 tools, 94 tasks naming one of
    # them, two halves of 47 fixed by the task ids' hashes.
    catalog = bench_relevance.livemcpbench_catalog()
    assert len(catalog.operations) == 527
    assert len({op.name for op in catalog.operations}) == 527
    assert len(catalog.queries) == 94
    halves = [q.split for q in catalog.queries]
    assert halves.count("development") == halves.count("held-out") == 47
    names = {op.name for op in catalog.operations}
    for query in catalog.queries:
        assert query.gold
        assert all(tool <= names for tool in query.gold)
        assert len(query.text.encode()) <= 256
    again = bench_relevance.split_tasks(["c", "a", "b"])
    assert again == bench_relevance.split_tasks(["b", "c", "a"])
    assert sorted(again.values()) == ["development", "development", "held-out"]


def test_livemcpbench_servers_are_one_operation_each_with_the_same_tasks() -> None:
    tools = bench_relevance.livemcpbench_catalog()
    servers = bench_relevance.livemcpbench_servers_catalog()
    assert len(servers.operations) == len({op.group for op in tools.operations}) == 70
    names = {op.name for op in servers.operations}
    assert all(op.group == "" for op in servers.operations)
    assert [q.text for q in servers.queries] == [q.text for q in tools.queries]
    assert [q.split for q in servers.queries] == [q.split for q in tools.queries]
    for by_tool, by_server in zip(tools.queries, servers.queries, strict=True):
        # each gold server offers a gold tool of the task, and every gold tool has one
        assert by_server.relevant <= names
        assert by_server.relevant == {name.split(".")[0] for name in by_tool.relevant}
        assert len(by_server.gold) == len(set(by_server.gold))


def test_gold_share_counts_each_tool_once() -> None:
    query = bench_relevance.Query(
        "q", frozenset({"a.x", "b.x", "a.y"}), (frozenset({"a.x", "b.x"}), frozenset({"a.y"}))
    )
    scores = bench_relevance.Scores.of_results([["b.x", "a.x", "c.z"]], [query])
    assert scores.hits1 == 1
    assert scores.gold10 == 0.5


def test_clip_query_cuts_at_whitespace_within_the_limit() -> None:
    assert bench_relevance.clip_query("short one") == "short one"
    clipped = bench_relevance.clip_query("ab " * 200)
    assert len(clipped.encode()) <= 256
    assert clipped.endswith("ab")
    assert len(bench_relevance.clip_query("é" * 300).encode()) <= 256


def test_real_catalog_benchmark_harness_tiny() -> None:
    # The harness on a synthetic stand-in (botocore is not needed): two copies of 120
    # operations, a handful of queries; the construction probe runs in a child process.
    build, search = bench_real.run(
        (1, 2), queries=6, repeat=1, source="synthetic:120", guest_runs=(1, 2)
    )
    assert [row["catalog"] for row in build.rows] == [120, 240]
    for row in build.rows:
        assert 0 < row["Registry() s"] < 60
        assert row["target s"] in (3.0, 15.0)
    scenarios = {row["scenario"] for row in search.rows}
    assert {"page 1", "group filter", "1% policy, page 1"} <= scenarios
    assert "guest sees 2, empty search, with hook" in scenarios
    for row in search.rows:
        assert set(row) <= set(search.columns)
        assert row["catalog"] in (120, 240)
        assert 0 < row["median ms"] <= row["p90 ms"] <= row["p99 ms"] <= row["max ms"] < 10_000
    assert len(bench_real.catalog_for("synthetic:30", 3)) == 90
    with pytest.raises(ValueError, match="unknown catalog source"):
        bench_real.catalog_for("nothing", 1)


def test_construction_benchmark_tiny() -> None:
    # A synthetic stand-in (botocore is not needed), each size in a fresh child process.
    (table,) = bench_construction.run((1, 2), source="synthetic:120")
    assert [row["catalog"] for row in table.rows] == [120, 240]
    for row in table.rows:
        assert set(row) <= set(table.columns)
        assert 0 < row["CPU s"] < 60
        assert 0 < row["wall s"] < 60
        assert 0 < row["schema CPU s"] + row["revision CPU s"] <= row["CPU s"]
        assert row["target MB"] in (150.0, 300.0)


def test_startup_benchmark_tiny() -> None:
    # Memory rows in fresh children; cold starts of opgate serve over stdio (no FastMCP).
    memory = bench_startup.memory_table("synthetic:60")
    assert [row["registry"] for row in memory.rows] == [
        "rule",
        "relevance",
        "relevance index alone",
    ]
    for row in memory.rows:
        assert 0 < row["traced retained MiB"] <= row["traced peak MiB"]
        assert 0 <= row["CPU s"] < 60
    start = bench_startup.start_table("synthetic:30", 1, compare=False)
    assert [row["server"] for row in start.rows] == [
        "opgate serve (rule)",
        "opgate serve (rule), first start",
        "opgate serve --ranking relevance",
    ]
    for row in start.rows:
        assert 0 < row["best s"] <= row["median s"] < 120
        assert row["tools listed"] == 3


def test_real_catalog_benchmark_search_only_tiny() -> None:
    # --search-only: no construction probe, operations registered without their schemas.
    (search,) = bench_real.run(
        (1,),
        queries=4,
        repeat=1,
        source="synthetic:60",
        guest_runs=(1, 1),
        build=False,
        schemas=False,
    )
    assert {row["catalog"] for row in search.rows} == {60}
    catalog = bench_real.catalog_for("synthetic:5", 1)
    bare = bench_real.to_operations(catalog, schemas=False)
    assert all(op.input_schema is None for op in bare)
    assert [op.input_schema for op in bench_real.to_operations(catalog)] == [
        op.input_schema for op in catalog
    ]


def test_chart_benchmark_tiny(tmp_path: Path) -> None:
    table = bench_chart.run((50, 120), runs=5, compare=False)
    assert [row["catalog"] for row in table.rows] == [50, 120]
    for row in table.rows:
        assert set(row) <= set(table.columns)
        assert 0 < row["opgate ms"] < 10_000
    assert {shape.label for shape in bench_chart.SHAPES} == {
        "common term",
        "rare term",
        "two terms",
    }
    written = bench_chart.plot(table, tmp_path / "chart.png")
    if written is not None:  # matplotlib (the bench extra) is installed
        assert written.read_bytes().startswith(b"\x89PNG")


def test_invoke_benchmark_tiny() -> None:
    (table,) = bench_invoke.run(runs=50, compare=False)
    paths = _column(table.rows, "path")
    assert paths == ["opgate, JSON text", "opgate, mapping", "opgate, sync handler (thread)"]
    for row in table.rows:
        assert set(row) <= set(table.columns)
        assert 0 < row["handler µs"] < row["call µs"]
        assert row["overhead µs"] == pytest.approx(row["call µs"] - row["handler µs"])
    assert table.rows[0]["vs opgate"] == pytest.approx(1.0)
    assert table.rows[0]["target µs"] == bench_invoke.TARGET_US
    assert table.rows[-1]["target µs"] is None  # the sync variant is for information


def test_interaction_benchmark_tiny() -> None:
    round_trip, capacity = bench_interaction.run(runs=50, pending=200)
    pair, prompt = round_trip.rows
    assert pair["through registry µs"] > pair["handler alone µs"] > 0
    assert pair["target µs"] == bench_interaction.TARGET_US
    assert prompt["through registry µs"] < pair["through registry µs"]
    assert _column(capacity.rows, "form") == list(bench_interaction.FORMS)
    small, large = capacity.rows
    for row in capacity.rows:
        assert row["ledger B/each"] > 2 * 1024  # at least the two fixed charges
        assert row["retained B/each"] > 0
        assert row["retained ÷ ledger"] == pytest.approx(
            row["retained B/each"] / row["ledger B/each"]
        )
        assert row["conservative"] == (row["ledger B/each"] >= row["retained B/each"])
    assert large["form schema B"] > small["form schema B"]
    assert large["ledger B/each"] > small["ledger B/each"]


def _check_mcp_round_trips(trips: common.Table, runs: int, comparison: str) -> None:
    eras = [era for era, _ in bench_mcp.ERAS]
    assert [(row["call"], row["era"]) for row in trips.rows] == [
        (call, era) for era in eras for call in ("search", "search", "invoke", "invoke")
    ]
    opgate = trips.rows[0::2]
    others = trips.rows[1::2]
    assert {row["server"] for row in opgate} == {"opgate"}
    for row in opgate:
        assert set(row) <= set(trips.columns)
        assert row["runs"] == runs
        assert 0 < row["median ms"] <= row["p90 ms"] <= row["p99 ms"] <= row["max ms"] < 60_000
        assert 0 < row["CPU median ms"] < 60_000
        if row["call"] == "search":
            assert 0 <= row["items"] <= 5
            assert row["target ms"] == bench_mcp.TARGET_SEARCH_US / 1_000
            assert isinstance(row["ok"], bool)
        else:
            assert row["items"] == 1  # one text block
            assert row["target ms"] is None
    for row in others:
        assert row["server"].startswith("FastMCP")
        assert row["median ms"] == comparison
        assert row.get("FastMCP ÷ opgate") is None


def test_mcp_benchmark_tiny() -> None:
    trips, overhead, profile = bench_mcp.run(300, runs=20, compare=False, profile_calls=20)
    _check_mcp_round_trips(trips, 20, "comparison skipped")
    eras = [era for era, _ in bench_mcp.ERAS]
    assert [(row["call"], row["era"]) for row in overhead.rows] == [
        (call, era) for era in eras for call in ("search", "invoke")
    ]
    for row in overhead.rows:
        assert 0 < row["registry µs"] < row["round trip µs"]
        assert row["adapter + SDK µs"] == pytest.approx(row["round trip µs"] - row["registry µs"])
        assert row["registry share"].endswith("%")
        assert 0 < row["CPU: registry µs"] < row["CPU: round trip µs"]
    packages = _column(profile.rows, "package")
    assert len(packages) == len(set(packages)) == len(bench_mcp._GROUPS) + 1
    for era in eras:
        shares = _column(profile.rows, f"{era} %")
        assert sum(shares) == pytest.approx(100)
        assert all(share >= 0 for share in shares)
    registry_row = next(row for row in profile.rows if row["package"].startswith("opgate registry"))
    assert all(registry_row[f"{era} %"] > 0 for era in eras)


def test_mcp_benchmark_without_fastmcp_runs_the_opgate_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "fastmcp", None)  # importing it now fails
    trips, overhead = bench_mcp.run(200, runs=10, compare=True, profile_calls=0)
    _check_mcp_round_trips(trips, 10, "not installed")
    assert len(overhead.rows) == 4


def test_mcp_http_benchmark_tiny() -> None:
    trips, collector = bench_mcp_http.run("synthetic:200", calls=5, pins=2)
    assert [row["call"] for row in trips.rows] == ["search", "invoke", "pinned tool"]
    for row in trips.rows:
        assert set(row) <= set(trips.columns)
        assert row["runs"] == 5
        assert 0 < row["median ms"] <= row["p99 ms"] <= row["max ms"] < 60_000
        assert 0 < row["client CPU median ms"] <= row["client CPU max ms"]
        assert row["server CPU mean ms"] is None
        assert row["tools/list runs per call"] in (0, 1)
    (row,) = collector.rows
    assert row["frozen objects"] == 0
    assert row["tracked objects"] > 0
    assert 0 < row["full gc.collect() min ms"] <= row["full gc.collect() max ms"]


def test_mcp_http_benchmark_freezes_the_heap_for_its_run() -> None:
    _, collector = bench_mcp_http.run("synthetic:200", calls=2, pins=0, freeze=True)
    assert collector.rows[0]["frozen objects"] > 10_000
    assert gc.get_freeze_count() == 0  # the run unfreezes what it froze


def test_mcp_http_benchmark_against_opgate_serve_tiny() -> None:
    trips, collector = bench_mcp_http.run("synthetic:200", calls=5, pins=1, serve=True)
    assert trips.rows[0]["call"] == "search"
    for row in trips.rows:
        assert row["runs"] == 5
        assert 0 < row["server CPU mean ms"] < row["max ms"] * 10
        assert row["tools/list runs per call"] is None
    assert trips.title.startswith("MCP over streamable HTTP at 201 operations")  # + collector
    (row,) = collector.rows
    assert row["frozen objects"] > 10_000  # opgate serve froze its heap
    assert row["tracked objects"] < row["frozen objects"]


def test_gateway_benchmark_tiny() -> None:
    # opgate serve --upstreams over two synthetic stdio upstreams (botocore not needed).
    search, invoke, start, profile = bench_gateway.run(
        2,
        5,
        runs=5,
        invoke_runs=10,
        start_servers=1,
        repeats=1,
        compare=False,
        profile_calls=5,
        source="synthetic",
    )
    (row,) = search.rows
    assert row["gateway"] == "opgate"
    assert row["tools/list"] == 3  # search, inspect, invoke
    assert row["runs"] == 5
    assert 0 <= row["items"] <= 5
    assert 0 < row["median ms"] <= row["p99 ms"] <= row["max ms"] < 60_000
    assert [r["path"] for r in invoke.rows] == ["direct", "through gateway"]
    through = invoke.rows[1]
    assert through["overhead median ms"] == pytest.approx(
        through["median ms"] - invoke.rows[0]["median ms"]
    )
    assert through["target ms"] == bench_gateway.TARGET_OVERHEAD_MS
    assert isinstance(through["ok"], bool)
    (first,) = start.rows
    assert 0 < first["first list median s"] <= first["first search median s"] < 60
    packages = _column(profile.rows, "package")
    assert packages[-1] == "total"
    assert len(set(packages)) == len(bench_gateway._GROUPS) + 2
    total = profile.rows[-1]
    assert total["invoke ms"] > 0
    assert total["search ms"] > 0


def test_gateway_catalog_inlines_references_and_names_tools_in_snake_case() -> None:
    schema = {
        "type": "object",
        "properties": {"tag": {"$ref": "#/$defs/Tag"}},
        "$defs": {"Tag": {"type": "string", "maxLength": 8}},
    }
    assert bench_gateway.inline_schema(schema) == {
        "type": "object",
        "properties": {"tag": {"type": "string", "maxLength": 8}},
    }
    looped = {
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"properties": {"n": {"$ref": "#/$defs/Node"}}}},
    }
    assert bench_gateway.inline_schema(looped) is None
    assert bench_gateway.snake_case("ListTagsForResource") == "list_tags_for_resource"
    assert bench_gateway.snake_case("GetACLPolicy") == "get_acl_policy"
    catalog = bench_gateway.gateway_catalog(3, 4, "synthetic")
    assert list(catalog) == ["s0", "s1", "s2"]
    assert all(len(tools) == 4 for tools in catalog.values())


def test_mcp_floor_benchmark_tiny() -> None:
    calls, throughput = bench_mcp_floor.run(
        "synthetic:200", calls=5, transports=("stdio", "http"), clients=(1, 2), seconds=0.5
    )
    keys = [(row["transport"], row["era"], row["call"]) for row in calls.rows]
    assert keys == [
        (transport, era, call)
        for transport in ("stdio", "http")
        for era in bench_mcp_floor.ERAS
        for call in ("search", "invoke")
    ]
    for row in calls.rows:
        assert set(row) <= set(calls.columns)
        assert row["runs"] == 5
        assert 0 < row["floor CPU median ms"] <= row["floor CPU p99 ms"]
        assert 0 < row["opgate CPU median ms"] <= row["opgate CPU p99 ms"]
        difference = row["opgate CPU median ms"] - row["floor CPU median ms"]
        assert row["difference ms"] == pytest.approx(difference)
    assert [row["clients"] for row in throughput.rows] == [1, 2]
    for row in throughput.rows:
        assert row["opgate req/s"] > 0
        assert row["floor req/s"] > 0
        assert row["opgate / floor"] == pytest.approx(row["opgate req/s"] / row["floor req/s"])


def test_query_mix_is_seeded_and_drawn_from_the_catalog_vocabulary() -> None:
    vocabulary = set(common.query_vocabulary())
    assert {"pending", "chargeback", "invoices", "billing", "approve"} <= vocabulary
    assert not {"the", "a", "of"} & vocabulary
    mix = common.query_mix(300)
    assert mix == common.query_mix(300)
    assert mix != common.query_mix(300, seed=12)
    lengths = [len(query.split()) for query in mix]
    assert set(lengths) == {1, 2, 3}
    for query in mix:
        words = query.split()
        assert len(set(words)) == len(words)
        assert set(words) <= vocabulary


def test_timing_summary_has_percentiles_and_max() -> None:
    timing = common.summarize(list(range(1, 201)))
    assert timing.runs == 200
    assert timing.median_ns == pytest.approx(100.5)
    assert (timing.p90_ns, timing.p99_ns, timing.max_ns) == (181, 199, 200)
    few = common.summarize([5, 1, 3])
    assert (few.median_ns, few.p90_ns, few.p99_ns, few.max_ns) == (3, 5, 5, 5)


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=3))
def test_synthetic_catalog_is_deterministic_and_realistic(size: int, seed: int) -> None:
    catalog = common.synthetic_catalog(size, seed=seed)
    assert catalog == common.synthetic_catalog(size, seed=seed)
    assert len({op.name for op in catalog}) == size
    for op in catalog:
        assert NAME.fullmatch(op.name), op.name
        assert op.name.startswith(f"{op.group}.{op.resource}.{op.verb}_")
        assert op.resource in common.GROUPS[op.group]
        assert op.summary.endswith(".")
        assert op.summary.count(". ") == 0
        assert len(op.description.split()) > 30
        assert op.input_schema["type"] == "object"


def test_one_percent_policy_admits_about_one_percent() -> None:
    names = [op.name for op in common.synthetic_catalog(20_000)]
    share = sum(map(common.admitted, names)) / len(names)
    assert 0.005 < share < 0.015
    policy = common.OnePercent()
    admitted = next(name for name in names if common.admitted(name))
    denied = next(name for name in names if not common.admitted(name))
    assert policy.authorize(None, _Request(admitted)) is None
    assert policy.authorize(None, _Request(denied)) is not None


class _Request:
    def __init__(self, name: str) -> None:
        self.name = name


def test_format_table_prints_every_column_and_row() -> None:
    table = common.Table("T", ("a", "b µs", "ok"))
    table.add(a="x", **{"b µs": 1234.5678, "ok": True})
    table.add(a="y", **{"b µs": 0.123})
    text = common.format_table(table)
    assert text.splitlines()[2] == "| a | b µs | ok |"
    assert "| x | 1,235 | yes |" in text
    assert "| y | 0.12 |  |" in text
    with pytest.raises(KeyError):
        table.add(c=1)


def test_timing_and_machine_helpers() -> None:
    timing = common.time_sync(lambda: sum(range(100)), runs=30)
    assert timing.runs == 30
    assert 0 < timing.median_ns <= timing.p90_ns
    assert common.rss_bytes() > 1 << 20
    assert "Python" in common.machine_info() or "CPython" in common.machine_info()


def test_openapi_benchmark_tiny(tmp_path: Path) -> None:
    import json

    from openapi_app import document

    spec = tmp_path / "shop.json"
    spec.write_text(json.dumps(document()))
    (table,) = bench_openapi.run(spec, runs=2)
    (row,) = table.rows
    assert row["document"] == "shop.json"
    assert row["operations"] == 15
    assert row["skipped"] == 0
    assert 0 < row["plan s"] + row["registry s"] <= row["beyond parsing s"] * 1.5 + 0.01
    assert row["target s"] == bench_openapi.TARGET_SECONDS


def test_adversarial_json_benchmark_tiny() -> None:
    (table,) = bench_adversarial_json.run(runs=3)
    # Three entries per shape, and a fourth (a mapping, as MCP delivers) per JSON object.
    mappings = sum(
        bench_adversarial_json._as_mapping(make()) is not None
        for make in bench_adversarial_json.SHAPES.values()
    )
    assert len(table.rows) == 3 * len(bench_adversarial_json.SHAPES) + mappings
    assert {row["entry"] for row in table.rows} == {
        "parse, profiled",
        "parse",
        "invoke",
        "invoke, mapping",
    }
    for row in table.rows:
        assert set(row) <= set(table.columns)
        assert row["bytes"] <= bench_adversarial_json.SIZE
        assert 0 < row["median ms"] <= row["p90 ms"] <= row["p99 ms"] <= row["max ms"]
        assert isinstance(row["ok"], bool)
