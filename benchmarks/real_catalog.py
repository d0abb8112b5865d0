"""The real catalog: every operation model in botocore, as opgate operations.

``real_catalog(copies=1)`` converts every AWS operation that botocore describes (about
20,000 across 445 services) into a ``RealOperation``:

* name ``service.OperationName`` (``s3.PutObject``), group = the service name;
* summary = the first sentence of the operation's documentation, description = the
  rest, with the HTML markup stripped and entities decoded (an undocumented operation
  gets ``"OperationName."``);
* input schema = the operation's input shape as a JSON Schema 2020-12 document: the
  root structure inline, every shape it reaches in ``$defs``, referenced with
  ``{"$ref": "#/$defs/Shape"}`` (recursive shapes stay recursive). Structures become
  closed objects with their ``required`` members, unions objects with exactly one
  member, lists arrays, maps objects with ``propertyNames`` and
  ``additionalProperties``, strings keep ``enum``, ``pattern`` and their length
  bounds, numbers their bounds, timestamps ``format: date-time``, blobs
  ``contentEncoding: base64``, documents any value.

A pattern jsonschema-rs cannot compile with opgate's default linear-time engine
(botocore's are Java regular expressions; a few use lookaround or syntax Rust's engines
refuse) is left out, and so is a length bound beyond the
schema profile's ``MAX_COUNT``: the catalog must build, and the benchmark measures
opgate, not botocore's regex dialect. The count of dropped patterns is in
``ConversionStats``.

``copies=5`` makes the 100,000-operation catalog: five copies of every service, the
first under its own name, the others renamed ``service-r2`` … ``service-r5`` (names
and groups change; texts and schemas are shared).

Loading botocore's models takes about a minute, so the converted catalog is cached as
gzipped JSON under ``$OPGATE_BENCH_CACHE`` (default ``~/.cache/opgate-bench``), keyed by
the botocore version and this converter's version; nothing is written inside the
repository.

``real_queries(catalog, count, seed=...)`` draws a seeded list of one- to three-word
queries from the catalog's own vocabulary (see its docstring).
"""

from __future__ import annotations

import gzip
import html
import json
import os
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CONVERTER_VERSION",
    "ConversionStats",
    "RealOperation",
    "cache_directory",
    "convert_service",
    "real_catalog",
    "real_queries",
    "strip_markup",
    "summary_and_description",
]

#: Bumped whenever the conversion changes, so a stale cache is never read.
CONVERTER_VERSION = 2


_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s+|$)", re.DOTALL)
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_WORD = re.compile(r"[a-z][a-z0-9]+")


@dataclass(frozen=True, slots=True)
class RealOperation:
    """One converted operation, independent of any library's definition type."""

    name: str
    group: str
    summary: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class ConversionStats:
    """What the conversion had to leave out."""

    services: int = 0
    operations: int = 0
    dropped_patterns: int = 0
    dropped_bounds: int = 0


def strip_markup(text: str) -> str:
    """Documentation text without HTML tags, entities decoded, whitespace collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub(" ", text))).strip()


def summary_and_description(name: str, documentation: str) -> tuple[str, str]:
    """(first sentence, the rest) of an operation's documentation, markup stripped."""
    text = strip_markup(documentation)
    match = _SENTENCE.match(text)
    if not text:
        return f"{name}.", ""
    if match is None:
        return text, ""
    return match.group(1).strip(), text[match.end() :].strip()


class _PatternCheck:
    """Remembers which patterns jsonschema-rs compiles with the linear-time regex engine.

    The engine ``Registry`` uses without ``regex_backtrack_limit``: a pattern only the
    backtracking engine accepts would fail construction.
    """

    def __init__(self) -> None:
        import jsonschema_rs

        self._validator_for = jsonschema_rs.Draft202012Validator
        self._options = jsonschema_rs.RegexOptions()
        self._known: dict[str, bool] = {}

    def __call__(self, pattern: str) -> bool:
        known = self._known.get(pattern)
        if known is None:
            try:
                self._validator_for(
                    {"type": "string", "pattern": pattern}, pattern_options=self._options
                )
                known = True
            except Exception:
                known = False
            self._known[pattern] = known
        return known


def _count(value: object) -> int | None:
    from opgate.schema import MAX_COUNT  # here: loading the cached catalog imports no opgate

    if isinstance(value, int | float) and not isinstance(value, bool):
        number = int(value)
        if number == value and 0 <= number <= MAX_COUNT:
            return number
    return None


def _shape_schema(
    shape: dict[str, Any], patterns: _PatternCheck, stats: ConversionStats
) -> dict[str, Any]:
    """One botocore shape as a schema whose shape references are ``$ref``s."""
    kind = shape["type"]

    def ref(member: dict[str, Any]) -> dict[str, Any]:
        return {"$ref": f"#/$defs/{member['shape']}"}

    schema: dict[str, Any]
    if kind == "structure":
        if shape.get("document"):
            return {}
        members = shape.get("members", {})
        schema = {
            "type": "object",
            "properties": {name: ref(member) for name, member in members.items()},
            "additionalProperties": False,
        }
        required = [name for name in shape.get("required", ()) if name in members]
        if required:
            schema["required"] = required
        if shape.get("union"):
            schema["minProperties"] = 1
            schema["maxProperties"] = 1
        return schema
    if kind == "list":
        schema = {"type": "array", "items": ref(shape["member"])}
        bounds = (("min", "minItems"), ("max", "maxItems"))
    elif kind == "map":
        schema = {
            "type": "object",
            "propertyNames": ref(shape["key"]),
            "additionalProperties": ref(shape["value"]),
        }
        bounds = (("min", "minProperties"), ("max", "maxProperties"))
    elif kind == "string":
        schema = {"type": "string"}
        if "enum" in shape:
            schema["enum"] = list(dict.fromkeys(shape["enum"]))
        pattern = shape.get("pattern")
        if pattern is not None:
            if patterns(pattern):
                schema["pattern"] = pattern
            else:
                stats.dropped_patterns += 1
        bounds = (("min", "minLength"), ("max", "maxLength"))
    elif kind in ("integer", "long"):
        schema = {"type": "integer"}
        for key, keyword in (("min", "minimum"), ("max", "maximum")):
            if isinstance(shape.get(key), int | float) and not isinstance(shape[key], bool):
                schema[keyword] = int(shape[key]) if kind != "float" else shape[key]
        return schema
    elif kind in ("float", "double"):
        schema = {"type": "number"}
        for key, keyword in (("min", "minimum"), ("max", "maximum")):
            value = shape.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                schema[keyword] = int(value) if float(value).is_integer() else value
        return schema
    elif kind == "boolean":
        return {"type": "boolean"}
    elif kind == "timestamp":
        return {"type": "string", "format": "date-time"}
    elif kind == "blob":
        return {"type": "string", "contentEncoding": "base64"}
    else:  # pragma: no cover - botocore has no other shape types
        return {}
    for key, keyword in bounds:
        if key in shape:
            count = _count(shape[key])
            if count is None:
                stats.dropped_bounds += 1
            else:
                schema[keyword] = count
    return schema


def _reached(shapes: dict[str, Any], root: str) -> list[str]:
    """Every shape reachable from ``root``'s members (not ``root`` itself unless recursive)."""
    seen: dict[str, None] = {}
    stack = [root]
    first = True
    while stack:
        name = stack.pop()
        if not first:
            if name in seen:
                continue
            seen[name] = None
        first = False
        shape = shapes[name]
        kind = shape["type"]
        if kind == "structure":
            children = [member["shape"] for member in shape.get("members", {}).values()]
        elif kind == "list":
            children = [shape["member"]["shape"]]
        elif kind == "map":
            children = [shape["key"]["shape"], shape["value"]["shape"]]
        else:
            children = []
        stack.extend(reversed(children))
    return sorted(seen)


def convert_service(
    service: str,
    model: dict[str, Any],
    patterns: _PatternCheck | None = None,
    stats: ConversionStats | None = None,
) -> list[RealOperation]:
    """Every operation of one botocore service model."""
    patterns = patterns or _PatternCheck()
    stats = stats if stats is not None else ConversionStats()
    shapes = model.get("shapes", {})
    converted: dict[str, dict[str, Any]] = {}

    def shape_schema(name: str) -> dict[str, Any]:
        schema = converted.get(name)
        if schema is None:
            schema = converted[name] = _shape_schema(shapes[name], patterns, stats)
        return schema

    operations = []
    for name, operation in sorted(model.get("operations", {}).items()):
        summary, description = summary_and_description(name, operation.get("documentation", ""))
        root = operation.get("input", {}).get("shape")
        schema: dict[str, Any]
        if root is None:
            schema = {"type": "object", "additionalProperties": False}
        else:
            schema = dict(shape_schema(root))
            if schema.get("type") != "object" or "propertyNames" in schema:
                schema = {"type": "object", "additionalProperties": False}
            reached = _reached(shapes, root)
            if reached:
                schema = {**schema, "$defs": {shape: shape_schema(shape) for shape in reached}}
        operations.append(RealOperation(f"{service}.{name}", service, summary, description, schema))
    stats.operations += len(operations)
    stats.services += 1
    return operations


def cache_directory() -> Path:
    """Where converted catalogs are kept: ``$OPGATE_BENCH_CACHE`` or ``~/.cache/opgate-bench``."""
    configured = os.environ.get("OPGATE_BENCH_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "opgate-bench"


def _convert_all() -> tuple[list[RealOperation], ConversionStats]:
    from botocore.loaders import Loader

    loader = Loader()
    patterns = _PatternCheck()
    stats = ConversionStats()
    catalog: list[RealOperation] = []
    for service in sorted(loader.list_available_services("service-2")):
        model = loader.load_service_model(service, "service-2")
        catalog.extend(convert_service(service, model, patterns, stats))
    return catalog, stats


def _base_catalog() -> list[RealOperation]:
    import botocore

    path = cache_directory() / f"botocore-{botocore.__version__}-v{CONVERTER_VERSION}.json.gz"
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as cached:
            rows = json.load(cached)["operations"]
        return [RealOperation(*row) for row in rows]
    catalog, stats = _convert_all()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=6) as out:
        json.dump(
            {
                "botocore": botocore.__version__,
                "stats": {
                    "services": stats.services,
                    "operations": stats.operations,
                    "dropped_patterns": stats.dropped_patterns,
                    "dropped_bounds": stats.dropped_bounds,
                },
                "operations": [
                    [op.name, op.group, op.summary, op.description, op.input_schema]
                    for op in catalog
                ],
            },
            out,
        )
    partial.replace(path)
    return catalog


_LOADED: list[RealOperation] | None = None


def real_catalog(copies: int = 1) -> list[RealOperation]:
    """The botocore catalog, ``copies`` times (renamed services after the first), by name."""
    global _LOADED
    if _LOADED is None:
        _LOADED = _base_catalog()
    base = _LOADED
    if copies == 1:
        return list(base)
    catalog = list(base)
    for copy in range(2, copies + 1):
        suffix = f"-r{copy}"
        catalog.extend(
            RealOperation(
                op.group + suffix + op.name[len(op.group) :],
                op.group + suffix,
                op.summary,
                op.description,
                op.input_schema,
            )
            for op in base
        )
    return catalog


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _name_words(name: str) -> list[str]:
    operation = name.rpartition(".")[2]
    return [word.casefold() for word in _CAMEL.findall(operation) if len(word) > 1]


def real_queries(catalog: Sequence[RealOperation], count: int, *, seed: int = 10) -> list[str]:
    """``count`` seeded queries of one to three words drawn from the catalog's vocabulary.

    Each query starts from a random operation: with probability 0.8 all its words come
    from that operation's own name words (CamelCase split), summary and description
    (so most queries match something, often across tiers); otherwise each word comes
    from a different random operation (queries that may match nothing, the walks with
    the longest tails). One word with probability 0.4, two 0.35, three 0.25. Words are
    lower-case runs of letters and digits of at least two characters.
    """
    rng = random.Random(seed)
    queries: list[str] = []

    def pool(op: RealOperation) -> list[str]:
        return _name_words(op.name) + _words(op.summary) + _words(op.description)

    while len(queries) < count:
        size = rng.choices((1, 2, 3), weights=(40, 35, 25))[0]
        if rng.random() < 0.8:
            words = pool(rng.choice(catalog))
            if not words:
                continue
            chosen = [rng.choice(words) for _ in range(size)]
        else:
            chosen = []
            for _ in range(size):
                words = pool(rng.choice(catalog))
                if words:
                    chosen.append(rng.choice(words))
            if not chosen:
                continue
        queries.append(" ".join(dict.fromkeys(chosen)))
    return queries


def iter_services(catalog: Sequence[RealOperation]) -> Iterator[str]:
    """The distinct groups of a catalog, in first-seen order."""
    return iter(dict.fromkeys(op.group for op in catalog))
