"""Hostile OpenAPI documents: small texts that expand enormously must fail fast and clearly.

Each import runs in a child process under a memory cap and a time limit
(``tests/openapi_bombs.py``), so a regression fails here instead of hanging the suite.
Legitimate documents that share parts (YAML aliases, a ``$ref`` used by many
operations) still import; the real-world corpus runs in ``tests/test_openapi_corpus.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opgate.openapi import DocumentError, build_catalog, load_document

from conftest import ROOT, serve_environment
from openapi_bombs import (
    import_bounded,
    many_operations_each_with_its_own_extra,
    many_operations_one_id,
    many_operations_reaching_a_chain,
    many_operations_sharing_a_ref,
    many_parameters,
    ref_bomb,
    yaml_alias_bomb,
    yaml_merge_bomb,
    yaml_pairs_bomb,
    yaml_schema_alias_bomb,
)

#: A hostile document is refused within this many seconds (well under one, unloaded).
FAST = 2.0


def test_a_yaml_alias_bomb_is_refused_fast_and_says_why() -> None:
    ran = import_bounded(yaml_alias_bomb(), limit=30)
    assert ran.error is not None, ran
    assert ran.error.startswith("DocumentError: "), ran
    assert "aliases" in ran.error
    assert "100,000" in ran.error
    assert ran.seconds < FAST
    assert ran.peak_mib < 200


def test_aliases_inside_a_schema_are_refused_fast() -> None:
    ran = import_bounded(yaml_schema_alias_bomb(), limit=30)
    assert ran.error is not None, ran
    assert ran.error.startswith("DocumentError: "), ran
    assert ran.seconds < FAST


def test_aliases_inside_pairs_are_counted_too() -> None:
    ran = import_bounded(yaml_pairs_bomb(), limit=60)
    assert ran.error is not None, ran
    assert "aliases" in ran.error, ran
    assert ran.seconds < FAST


def test_pairs_sets_and_huge_integers_read_as_json_values() -> None:
    text = "openapi: 3.1.0\nx-p: !!pairs [a: 1, b: 2]\nx-s: !!set {? y, ? x}\npaths: {}\n"
    data = load_document(text).data
    assert data["x-p"] == [["a", 1], ["b", 2]]
    assert data["x-s"] == ["x", "y"]
    for huge in (
        "openapi: 3.0.0\nx: " + "1" * 5000,
        '{"openapi": "3.0.0", "x": ' + "1" * 5000 + "}",
    ):
        with pytest.raises(DocumentError, match="unreadable"):
            load_document(huge)


def test_merge_keys_of_merge_keys_do_not_expand() -> None:
    ran = import_bounded(yaml_merge_bomb(), limit=30)
    assert ran.error is None, ran
    assert ran.seconds < FAST


def test_yaml_aliases_a_real_document_uses_still_load() -> None:
    shared = "{type: object, properties: {code: {type: integer}, message: {type: string}}}"
    paths = "\n".join(
        f"  /r{i}:\n    get:\n      responses: {{'400': *error, '200': {{description: ok}}}}"
        for i in range(300)
    )
    error = f"{{description: bad, content: {{application/json: {{schema: {shared}}}}}}}"
    text = (
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n"
        f"x-error: &error {error}\n"
        f"paths:\n{paths}\n"
    )
    document = load_document(text)
    assert document.data["paths"]["/r299"]["get"]["responses"]["400"]["description"] == "bad"
    assert len(build_catalog(text, base_url="https://x.invalid").operations) == 300


def test_the_alias_budget_grows_with_the_document() -> None:
    # 250,000 values through aliases, in a document of more than 250,000 bytes: allowed.
    leaf = "[" + ", ".join(["v"] * 50) + "]"
    rows = "\n".join(f"  k{i}: &a{i} {leaf}\n  u{i}: *a{i}" for i in range(2500))
    text = f"openapi: 3.1.0\ninfo: {{title: t, version: '1'}}\nx-rows:\n{rows}\npaths: {{}}\n"
    assert len(text) > 250_000
    assert len(load_document(text).data["x-rows"]) == 5000
    with pytest.raises(DocumentError, match="aliases"):
        load_document(yaml_alias_bomb(levels=6, width=9))  # 531,441 values from 400 bytes


def test_an_inlined_reference_bomb_skips_its_operation_fast() -> None:
    ran = import_bounded(ref_bomb(), limit=30)
    assert ran.error is None, ran
    assert ran.operations == 0
    assert [kind for kind, _ in ran.skipped] == ["definition too large"]
    assert "Limits.definition_bytes (65536)" in ran.skipped[0][1]
    assert ran.seconds < FAST


def test_many_operations_sharing_a_large_inlined_reference_are_fast() -> None:
    ran = import_bounded(many_operations_sharing_a_ref(), limit=60)
    assert ran.error is None, ran
    assert len(ran.skipped) == 200
    assert {kind for kind, _ in ran.skipped} == {"definition too large"}
    assert ran.seconds < FAST


def test_many_operations_with_one_operation_id_are_named_in_linear_time() -> None:
    ran = import_bounded(many_operations_one_id(5000), limit=60)
    assert ran.error is None, ran
    assert ran.operations == 5000
    assert ran.seconds < 2 * FAST  # the registry of 5,000 operations included
    from opgate.openapi._naming import Namer

    namer = Namer()
    names = [namer.name("get", "/", "same") for _ in range(20_000)]
    assert names[:3] == ["same", "same_2", "same_3"]
    assert names[-1] == "same_20000"


def test_an_operation_with_many_parameters_is_planned_in_linear_time() -> None:
    ran = import_bounded(many_parameters(), limit=60)
    assert ran.error is None, ran
    assert [kind for kind, _ in ran.skipped] == ["definition too large"]
    assert ran.seconds < FAST


def test_operations_reaching_a_long_chain_of_components_are_fast() -> None:
    ran = import_bounded(many_operations_reaching_a_chain(), limit=120)
    assert ran.error is None, ran
    assert len(ran.skipped) == 3000
    assert {kind for kind, _ in ran.skipped} == {"definition too large"}
    assert "the components it reaches are more than 65536 bytes" in ran.skipped[0][1]
    assert ran.seconds < FAST


def test_operations_with_their_own_extra_components_are_fast_too() -> None:
    ran = import_bounded(many_operations_each_with_its_own_extra(), limit=120)
    assert ran.error is None, ran
    assert len(ran.skipped) == 3000
    assert {kind for kind, _ in ran.skipped} == {"definition too large"}
    assert ran.seconds < FAST


def test_a_shared_inlined_reference_that_fits_is_inlined_everywhere() -> None:
    document = json.loads(many_operations_sharing_a_ref(operations=300, levels=3, width=4))
    catalog = build_catalog(document, base_url="https://x.invalid")
    assert len(catalog.operations) == 300
    body = catalog.plans["post_op299"].input_schema["properties"]["body"]
    assert body["properties"]["p3"]["properties"]["p0"]["type"] == "string"


def test_a_recursive_inlined_reference_is_still_unsupported() -> None:
    document = json.loads(ref_bomb(levels=3, width=2))
    document["x-levels"]["l0"] = {"type": "array", "items": {"$ref": "#/x-levels/l2"}}
    catalog = build_catalog(document, base_url="https://x.invalid")
    assert [(i.kind, i.reason[:13]) for i in catalog.report.skipped] == [
        ("unsupported $ref", "recursive $re")
    ]


def test_a_deep_chain_of_shared_inlined_references_is_too_deep() -> None:
    levels = {"l0": {"type": "string"}}
    for level in range(1, 70):
        levels[f"l{level}"] = {"type": "array", "items": {"$ref": f"#/x-levels/l{level - 1}"}}
    shallow = {"type": "array", "items": {"$ref": "#/x-levels/l30"}}
    paths = {
        "/shallow": {"post": _body_of(shallow)},
        "/deep": {"post": _body_of({"$ref": "#/x-levels/l69"})},
        "/also-shallow": {"post": _body_of({"$ref": "#/x-levels/l30"})},
    }
    document = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}}
    catalog = build_catalog(
        {**document, "x-levels": levels, "paths": paths}, base_url="https://x.invalid"
    )
    assert sorted(catalog.plans) == ["post_also-shallow", "post_shallow"]
    assert [i.kind for i in catalog.report.skipped] == ["schema too deep"]


def _body_of(schema: object) -> dict[str, object]:
    return {
        "requestBody": {"content": {"application/json": {"schema": schema}}},
        "responses": {"200": {"description": "ok"}},
    }


def test_a_mapping_with_shared_parts_is_bounded_per_operation() -> None:
    yaml = pytest.importorskip("yaml")
    shared = yaml.safe_load(yaml_schema_alias_bomb())  # aliases left as shared objects
    catalog = build_catalog(shared, base_url="https://x.invalid")
    assert [i.kind for i in catalog.report.skipped] == ["definition too large"]
    assert "limits=Limits(definition_bytes=...)" in catalog.report.skipped[0].reason


def _serve(spec: Path, *, wait: float) -> tuple[int | None, str, float]:
    """``opgate serve --openapi spec`` for at most ``wait`` s: exit code (None if still
    serving), stderr, and the seconds until it exited or printed its import summary."""
    command = [sys.executable, "-m", "opgate", "serve", "--openapi", str(spec)]
    command += ["--base-url", "http://127.0.0.1:9/api"]
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=ROOT, env=serve_environment(), stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while time.monotonic() - started < wait:
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line)
            if " imported, " in line:
                break
        took = time.monotonic() - started
    finally:
        process.kill()
        code = process.wait(timeout=10)
        lines.append(process.stderr.read())
        process.stderr.close()
        assert process.stdin is not None
        process.stdin.close()
    return (code if code != -9 else None), "".join(lines), took


def test_opgate_serve_refuses_an_alias_bomb_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(yaml_alias_bomb())
    code, stderr, took = _serve(spec, wait=20)
    assert code == 2, stderr
    assert "expands to more than 100,000 values through its aliases" in stderr
    assert took < 10  # interpreter start included


def test_opgate_serve_starts_beside_a_reference_bomb(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.json"
    spec.write_text(ref_bomb())
    _code, stderr, took = _serve(spec, wait=20)
    assert "0 operations imported, 1 skipped" in stderr, stderr
    assert took < 10


def test_an_operation_too_large_by_its_components_keeps_its_warnings() -> None:
    document = json.loads(many_operations_reaching_a_chain(operations=3000))
    document["paths"] = {"/p0": {"post": document["paths"]["/p0"]["post"]}}
    document["paths"]["/p0"]["servers"] = [{"url": "https://elsewhere.invalid"}]
    catalog = build_catalog(document, base_url="https://x.invalid")
    assert [i.kind for i in catalog.report.skipped] == ["definition too large"]
    assert [i.kind for i in catalog.report.warnings] == ["servers"]
