"""Hostile OpenAPI documents, and a bounded run of their import in a child process.

Each builder returns the document's text: small, but it expands enormously when its
YAML aliases are copied or its ``$ref``s inlined. ``import_bounded(text)`` imports it
with ``build_catalog`` in a fresh interpreter under a memory cap and a wall-clock
limit, so a regression fails the test instead of hanging or swapping the machine;
it returns how the import ended, its time and the child's peak memory.

``python tests/openapi_bombs.py`` prints the figures kept in
``benchmarks/results/openapi-bombs-2026-12-01.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BOMBS",
    "Bounded",
    "import_bounded",
    "many_operations_each_with_its_own_extra",
    "many_operations_one_id",
    "many_operations_reaching_a_chain",
    "many_operations_sharing_a_ref",
    "many_parameters",
    "ref_bomb",
    "yaml_alias_bomb",
    "yaml_merge_bomb",
    "yaml_pairs_bomb",
    "yaml_schema_alias_bomb",
]

ROOT = Path(__file__).resolve().parents[1]
#: Address space the child may use: far above a legitimate import, far below the machine.
MEMORY_CAP = 1024 * 1024 * 1024
_HEAD = "openapi: 3.0.3\ninfo: {title: bomb, version: '1'}\n"


def yaml_alias_bomb(levels: int = 9, width: int = 9) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before (9**9 leaves)."""
    lines = [_HEAD.rstrip("\n"), "x-bomb:", f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    lines.append("paths: {}")
    return "\n".join(lines) + "\n"


def yaml_merge_bomb(levels: int = 9, width: int = 9) -> str:
    """Merge keys (``<<``) of merge keys: each level merges the one before ``width`` times."""
    lines = [_HEAD.rstrip("\n"), "x-bomb:", "  m0: &m0 {a: 1}"]
    for level in range(1, levels):
        merged = ", ".join([f"*m{level - 1}"] * width)
        lines.append(f"  m{level}: &m{level} {{<<: [{merged}], k{level}: 1}}")
    lines.append("paths: {}")
    return "\n".join(lines) + "\n"


def yaml_pairs_bomb(levels: int = 8, width: int = 9) -> str:
    """The alias bomb inside ``!!pairs``, which PyYAML builds as tuples."""
    lines = [_HEAD.rstrip("\n"), "x-pairs: !!pairs", f"  - l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"  - l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    lines.append("paths: {}")
    return "\n".join(lines) + "\n"


def yaml_schema_alias_bomb(levels: int = 9, width: int = 9) -> str:
    """Aliases inside a request body schema: every property of a level is the level below."""
    lines = [_HEAD.rstrip("\n"), "x-schemas:", "  s0: &s0 {type: string}"]
    for level in range(1, levels):
        props = ", ".join(f"p{i}: *s{level - 1}" for i in range(width))
        lines.append(f"  s{level}: &s{level} {{type: object, properties: {{{props}}}}}")
    lines += [
        "paths:",
        "  /boom:",
        "    post:",
        "      requestBody:",
        f"        content: {{application/json: {{schema: *s{levels - 1}}}}}",
        "      responses: {'200': {description: ok}}",
    ]
    return "\n".join(lines) + "\n"


def _ref_levels(levels: int, width: int) -> dict[str, object]:
    """``x-l0`` … ``x-l{levels-1}``: each level's properties all ``$ref`` the level below
    (outside ``components.schemas``, so they are inlined, not shared as ``$defs``)."""
    defs: dict[str, object] = {"l0": {"type": "string", "description": "leaf " * 10}}
    for level in range(1, levels):
        defs[f"l{level}"] = {
            "type": "object",
            "properties": {f"p{i}": {"$ref": f"#/x-levels/l{level - 1}"} for i in range(width)},
        }
    return defs


def ref_bomb(levels: int = 9, width: int = 9) -> str:
    """One operation whose body schema inlines ``width ** levels`` copies of a leaf."""
    document = {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "x-levels": _ref_levels(levels, width),
        "paths": {
            "/boom": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": f"#/x-levels/l{levels - 1}"}}
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    return json.dumps(document, separators=(",", ":"))


def many_operations_sharing_a_ref(operations: int = 200, levels: int = 5, width: int = 9) -> str:
    """``operations`` operations whose body is the same ``levels``-deep inlined reference."""
    body = {
        "requestBody": {
            "content": {"application/json": {"schema": {"$ref": f"#/x-levels/l{levels - 1}"}}}
        },
        "responses": {"200": {"description": "ok"}},
    }
    document = {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "x-levels": _ref_levels(levels, width),
        "paths": {f"/op{i}": {"post": body} for i in range(operations)},
    }
    return json.dumps(document, separators=(",", ":"))


def many_operations_one_id(operations: int = 5000) -> str:
    """``operations`` operations that all give the same ``operationId``."""
    document = {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "paths": {
            f"/p{i}": {"get": {"operationId": "same", "responses": {}}} for i in range(operations)
        },
    }
    return json.dumps(document, separators=(",", ":"))


def many_parameters(parameters: int = 20_000) -> str:
    """One operation with ``parameters`` query parameters (about 1 MB)."""
    declared = [{"name": f"q{i}", "in": "query", "schema": {}} for i in range(parameters)]
    document = {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "paths": {"/p": {"get": {"parameters": declared, "responses": {}}}},
    }
    return json.dumps(document, separators=(",", ":"))


def many_operations_reaching_a_chain(operations: int = 3000) -> str:
    """``operations`` operations whose body is a component at the head of a chain of
    ``operations`` components (each property the next): every operation reaches them all."""
    chain = {
        f"C{i}": {"type": "object", "properties": {"n": {"$ref": f"#/components/schemas/C{i + 1}"}}}
        for i in range(operations)
    }
    chain[f"C{operations}"] = {"type": "string"}
    body = {
        "requestBody": {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/C0"}}}
        },
        "responses": {},
    }
    document = {
        "openapi": "3.1.0",
        "info": {"title": "bomb", "version": "1"},
        "components": {"schemas": chain},
        "paths": {f"/p{i}": {"post": body} for i in range(operations)},
    }
    return json.dumps(document, separators=(",", ":"))


def many_operations_each_with_its_own_extra(operations: int = 3000) -> str:
    """As ``many_operations_reaching_a_chain``, but each body is ``allOf`` the chain's head
    and a component of its own, so no two operations reach the same set."""
    document = json.loads(many_operations_reaching_a_chain(operations))
    schemas = document["components"]["schemas"]
    for i in range(operations):
        schemas[f"L{i}"] = {"type": "string"}
        head = {"$ref": "#/components/schemas/C0"}
        own = {"$ref": f"#/components/schemas/L{i}"}
        body = {"content": {"application/json": {"schema": {"allOf": [head, own]}}}}
        document["paths"][f"/p{i}"] = {"post": {"requestBody": body, "responses": {}}}
    return json.dumps(document, separators=(",", ":"))


#: Name → builder of each hostile document.
BOMBS = {
    "yaml_alias_bomb": yaml_alias_bomb,
    "yaml_merge_bomb": yaml_merge_bomb,
    "yaml_pairs_bomb": yaml_pairs_bomb,
    "yaml_schema_alias_bomb": yaml_schema_alias_bomb,
    "ref_bomb": ref_bomb,
    "many_operations_sharing_a_ref": many_operations_sharing_a_ref,
    "many_operations_one_id": many_operations_one_id,
    "many_parameters": many_parameters,
    "many_operations_reaching_a_chain": many_operations_reaching_a_chain,
    "many_operations_each_with_its_own_extra": many_operations_each_with_its_own_extra,
}

_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
    from opgate.openapi import DocumentError, build_catalog
    text = sys.stdin.read()
    start = time.perf_counter()
    try:
        catalog = build_catalog(text, base_url="https://api.example.invalid")
        catalog.registry(type("P", (), {{
            "scope_key": lambda self, ctx: "p", "authorize": lambda self, ctx, r: None}})())
        ended = {{"error": None, "operations": len(catalog.operations),
                 "skipped": [[i.kind, i.reason] for i in catalog.report.skipped]}}
    except DocumentError as exc:
        ended = {{"error": "DocumentError: " + str(exc)}}
    except BaseException as exc:
        ended = {{"error": "CRASH " + type(exc).__name__ + ": " + str(exc)[:200]}}
    ended["seconds"] = time.perf_counter() - start
    # VmHWM, not ru_maxrss: after exec, ru_maxrss still holds the forking parent's peak
    with open("/proc/self/status") as status:
        hwm = [line for line in status if line.startswith("VmHWM:")]
    ended["peak_kib"] = int(hwm[0].split()[1]) if hwm else 0
    print(json.dumps(ended))
    """
)


@dataclass(frozen=True)
class Bounded:
    """How a bounded import ended: ``error`` (``None`` when it built), its figures."""

    error: str | None
    seconds: float
    peak_mib: float
    operations: int = 0
    skipped: tuple[tuple[str, str], ...] = ()
    size: int = 0


def import_bounded(text: str, *, limit: float = 30.0) -> Bounded:
    """Import ``text`` in a child under ``MEMORY_CAP``; a child past ``limit`` s is killed
    and reported as ``error="TIMEOUT"``."""
    child = _CHILD.format(cap=MEMORY_CAP)
    try:
        done = subprocess.run(
            [sys.executable, "-c", child],
            input=text,
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Bounded("TIMEOUT", limit, 0.0, size=len(text.encode()))
    if done.returncode != 0 or not done.stdout.strip():
        return Bounded(f"CRASH exit {done.returncode}: {done.stderr[-300:]}", 0.0, 0.0)
    ended = json.loads(done.stdout.strip().splitlines()[-1])
    return Bounded(
        ended["error"],
        ended["seconds"],
        ended["peak_kib"] / 1024,
        ended.get("operations", 0),
        tuple((k, r) for k, r in ended.get("skipped", [])),
        len(text.encode()),
    )


def main() -> None:
    print("| document | bytes | outcome | import s | peak MiB |")
    print("| --- | --- | --- | --- | --- |")
    for name, build in BOMBS.items():
        ran = import_bounded(build(), limit=120)
        if ran.error is not None:
            outcome = ran.error[:90]
        else:
            kinds = sorted({kind for kind, _ in ran.skipped})
            outcome = f"{ran.operations} imported, {len(ran.skipped)} skipped ({', '.join(kinds)})"
        print(f"| {name} | {ran.size:,} | {outcome} | {ran.seconds:.3f} | {ran.peak_mib:.0f} |")


if __name__ == "__main__":
    main()
