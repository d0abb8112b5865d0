"""OpenAPI Schema Objects as JSON Schema 2020-12, with ``components.schemas`` as ``$defs``.

``SchemaConverter(document)`` converts schemas for one document. Each component is
converted once per direction (request or response) and cached; an operation's
schema then carries, as ``$defs``, exactly the components it reaches.

What is converted and how
-------------------------
* ``$ref: "#/components/schemas/X"`` becomes ``"#/$defs/X'"``, where ``X'`` is ``X``
  with every character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (made unique with a
  numeric suffix, in document order). Other local references (into ``paths``,
  ``components.parameters``, or into the inside of a component) are inlined; a
  recursive one of those is unsupported. Each is converted once per direction and
  the result shared wherever it is used. A reference to another file or a URL is
  never followed: the operation is skipped.
* Budget: every schema is measured as it is built (a lower bound of its compact
  JSON, inlined references counted at each use); one that passes ``budget`` bytes
  (``Limits.definition_bytes``, which it could never fit) is unsupported as
  ``definition too large`` at once, so a small document whose references expand
  enormously costs no more than the budget.
* OpenAPI 3.0 (``nullable``): ``nullable: true`` adds ``"null"`` to ``type``; without a
  ``type`` (``$ref``, ``allOf``, ``oneOf``, ``anyOf``) the schema becomes
  ``anyOf: [schema, {"type": "null"}]``. As OpenAPI 3.0.3 specifies, ``enum`` is not
  widened: an enum that should accept null must list it.
* OpenAPI 3.0 boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the numeric
  2020-12 keywords (``minimum: 5, exclusiveMinimum: true`` → ``exclusiveMinimum: 5``).
* OpenAPI 3.0 ``$ref`` siblings are ignored, as 3.0 specifies, except ``description``,
  ``title`` and ``nullable``.
* OpenAPI 3.1 schemas are JSON Schema 2020-12 already and are taken as they are
  (a ``$schema`` naming the OpenAPI dialect or 2020-12 is dropped; another is
  unsupported).
* Both: annotations the validator does not need are dropped to keep definitions
  small (``example``, ``examples``, ``xml``, ``externalDocs``, ``discriminator``,
  ``$comment``, ``x-*`` extensions and any keyword JSON Schema does not define);
  ``description`` is cut to ``MAX_SCHEMA_DESCRIPTION`` characters.
* Direction: in request schemas, ``readOnly`` properties are removed from ``required``
  (OpenAPI: they are sent by the server only); in response schemas, ``writeOnly``
  ones are.
* Constraints the compiler cannot hold (a count over 2**31-1, a negative or
  fractional count, a ``type`` JSON Schema does not have, such as 3.0-era ``file``)
  are dropped with a warning: the schema becomes looser, never stricter, and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from opgate.schema import (
    COUNT_KEYWORDS,
    MAX_COUNT,
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
    TYPE_NAMES,
)

from ._document import Document, RefError, split_pointer

__all__ = [
    "MAX_SCHEMA_DESCRIPTION",
    "Converted",
    "Direction",
    "SchemaConverter",
    "Unsupported",
    "def_ref",
    "dumps",
]

Direction = Literal["request", "response"]

#: Longest ``description`` kept inside a schema: the whole operation must fit
#: ``Limits.definition_bytes`` (64 KiB by default).
MAX_SCHEMA_DESCRIPTION = 500
#: Deepest schema nesting converted (deeper documents are unsupported, not a crash).
MAX_DEPTH = 64

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
# The 2020-12 schema positions; contentSchema is an annotation the compiler never
# asserts, so it is dropped like the other keywords not kept below.
_SINGLE = SUBSCHEMA_KEYWORDS - {"contentSchema"}
_ARRAY = SUBSCHEMA_ARRAY_KEYWORDS
_MAP = SUBSCHEMA_MAP_KEYWORDS
_SCHEMAS = _SINGLE | _ARRAY | _MAP
_NUMBERS = frozenset({"minimum", "maximum", "multipleOf"})
# Kept as they are (data or plain annotations).
_KEEP = frozenset(
    {
        "type",
        "enum",
        "const",
        "format",
        "pattern",
        "title",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "uniqueItems",
        "required",
        "dependentRequired",
        "contentEncoding",
        "contentMediaType",
    }
)
_OAS_DIALECTS = frozenset(
    {
        "https://spec.openapis.org/oas/3.1/dialect/base",
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft/2020-12/schema",
    }
)
_COMPONENT_PREFIX = "#/components/schemas/"


class Unsupported(Exception):
    """A schema cannot be represented; ``kind`` groups the report, the message explains."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def def_ref(name: str) -> str:
    """The ``$ref`` to a ``$defs`` member (names are already pointer- and URI-safe)."""
    return "#/$defs/" + name


@dataclass(slots=True)
class Converted:
    """A converted schema: the value, the components it references, and its warnings.

    ``size`` is a lower bound of the bytes of ``schema`` as compact JSON, and ``height``
    how deep it nests; both count inlined references at every use.
    """

    schema: Any
    refs: set[str] = field(default_factory=set)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    size: int = 0
    height: int = 0
    _merged: set[int] = field(default_factory=set, repr=False)


@dataclass(slots=True)
class _Component:
    converted: Converted | None = None
    error: Unsupported | None = None
    busy: bool = False


class SchemaConverter:
    """Converts one document's schemas; safe to reuse for all of its operations."""

    def __init__(self, document: Document, *, budget: int = 65536) -> None:
        self._document = document
        self._budget = budget
        self._legacy = document.version == "3.0"
        components = document.data.get("components")
        schemas = components.get("schemas") if isinstance(components, Mapping) else None
        self._schemas: Mapping[str, Any] = schemas if isinstance(schemas, Mapping) else {}
        self._names: dict[str, str] = {}
        taken: set[str] = set()
        for original in self._schemas:
            base = _NAME_UNSAFE.sub("_", str(original))[:100] or "_"
            candidate, number = base, 2
            while candidate in taken:
                candidate, number = f"{base}_{number}", number + 1
            taken.add(candidate)
            self._names[str(original)] = candidate
        self._cache: dict[tuple[str, Direction], _Component] = {}
        self._memo: dict[tuple[int, Direction], Converted | Unsupported] = {}
        self._inlined: dict[tuple[str, Direction], Converted | Unsupported] = {}
        self._inlining: set[tuple[str, Direction]] = set()
        self._defs: dict[
            tuple[frozenset[str], Direction],
            tuple[dict[str, Any], list[tuple[str, str]], tuple[str, ...]] | Unsupported,
        ] = {}
        self._sizes: dict[tuple[str, Direction], int] = {}

    def convert(self, schema: Any, direction: Direction) -> Converted:
        """Convert one schema (``Unsupported`` if it cannot be represented).

        Results are memoized by the identity of ``schema`` (shared parameters and
        bodies are converted once); callers must not mutate what they get.
        """
        key = (id(schema), direction)
        memo = self._memo.get(key)
        if memo is not None:
            if isinstance(memo, Unsupported):
                raise memo
            return memo
        out = Converted(None)
        try:
            out.schema = self._node(schema, direction, out, 0)
        except Unsupported as exc:
            self._memo[key] = exc
            raise
        self._memo[key] = out
        return out

    def size(self, name: str, direction: Direction) -> int:
        """Bytes of the converted component ``name`` as compact JSON (memoized)."""
        key = (name, direction)
        size = self._sizes.get(key)
        if size is None:
            size = self._sizes[key] = len(dumps(self._component(name, direction).schema))
        return size

    def def_name(self, name: str) -> str:
        """The ``$defs`` name of component ``name``."""
        return self._names[name]

    def defs(
        self, refs: set[str], direction: Direction
    ) -> tuple[dict[str, Any], list[tuple[str, str]], tuple[str, ...]]:
        """The ``$defs`` for ``refs`` and everything they reach, their warnings, and the
        names of the components reached (as written in the document).

        Raises ``Unsupported`` when a reached component cannot be represented, and
        ``definition too large`` as soon as the components reached pass the budget (the
        walk stops there). Memoized by ``refs``, and each of several refs is first
        looked up alone, so one component whose closure passes the budget decides at
        once; operations that reach the same components share one result (callers must
        not mutate it).
        """
        key = (frozenset(refs), direction)
        found = self._defs.get(key)
        if found is None:
            try:
                if len(refs) > 1:  # one component over the budget decides at once
                    for name in sorted(refs, reverse=True):  # the walk's order
                        self.defs({name}, direction)
                found = self._walk(refs, direction)
            except Unsupported as exc:
                found = exc
            self._defs[key] = found
        if isinstance(found, Unsupported):
            raise Unsupported(found.kind, str(found))
        return found

    def _walk(
        self, refs: set[str], direction: Direction
    ) -> tuple[dict[str, Any], list[tuple[str, str]], tuple[str, ...]]:
        result: dict[str, Any] = {}
        reached: list[str] = []
        warnings: list[tuple[str, str]] = []
        total = 0
        pending = sorted(refs)
        while pending:
            name = pending.pop()
            safe = self._names[name]
            if safe in result:
                continue
            converted = self._component(name, direction)
            total += self.size(name, direction) + len(safe) + 4
            if total > self._budget:
                raise Unsupported(
                    "definition too large",
                    f"the components it reaches are more than {self._budget} bytes, over "
                    f"Limits.definition_bytes ({self._budget}): raise it with "
                    "limits=Limits(definition_bytes=...)",
                )
            result[safe] = converted.schema
            reached.append(name)
            warnings.extend(converted.warnings)
            pending.extend(sorted(r for r in converted.refs if self._names[r] not in result))
        return dict(sorted(result.items())), warnings, tuple(sorted(reached))

    def _component(self, name: str, direction: Direction) -> Converted:
        key = (name, direction)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = _Component()
            entry.busy = True
            try:
                entry.converted = self.convert(self._schemas[name], direction)
            except Unsupported as exc:
                entry.error = Unsupported(exc.kind, f"components.schemas.{name}: {exc}")
            except RecursionError:
                entry.error = Unsupported("schema too deep", f"components.schemas.{name}")
            finally:
                entry.busy = False
        if entry.error is not None:
            raise entry.error
        assert entry.converted is not None
        return entry.converted

    # -- one node ------------------------------------------------------------------

    def _grow(self, out: Converted, size: int) -> None:
        """Count ``size`` more bytes of ``out``; unsupported once it passes the budget."""
        out.size += size
        if out.size > self._budget:
            raise Unsupported(
                "definition too large",
                f"a schema expands to more than {self._budget} bytes (references outside "
                "components.schemas are inlined, and counted, at every use), over "
                f"Limits.definition_bytes ({self._budget}): raise it with "
                "limits=Limits(definition_bytes=...)",
            )

    def _node(self, node: Any, direction: Direction, out: Converted, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Unsupported("schema too deep", f"a schema is nested deeper than {MAX_DEPTH}")
        out.height = max(out.height, depth)
        if isinstance(node, bool):
            self._grow(out, 4)
            return node
        if not isinstance(node, Mapping):
            raise Unsupported("invalid schema", f"a schema is a {type(node).__name__}")
        if "$ref" in node:
            return self._reference(node, direction, out, depth)
        self._grow(out, 2)
        result: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SINGLE:
                result[key] = self._node(value, direction, out, depth + 1)
            elif key in _ARRAY:
                if not isinstance(value, list) or not value:
                    out.warnings.append(("invalid keyword", f"dropped a malformed {key}"))
                    continue
                self._grow(out, 2)
                result[key] = [self._node(v, direction, out, depth + 1) for v in value]
            elif key in _MAP:
                if not isinstance(value, Mapping):
                    out.warnings.append(("invalid keyword", f"dropped a malformed {key}"))
                    continue
                self._grow(out, 2)
                members: dict[str, Any] = {}
                for k, v in value.items():
                    self._grow(out, len(str(k)) + 3)
                    members[str(k)] = self._node(v, direction, out, depth + 1)
                result[key] = members
            elif key in COUNT_KEYWORDS:
                count = _count(value)
                if count is None:
                    out.warnings.append(
                        ("constraint dropped", f"dropped {key}: {str(value)[:40]} is not a count")
                    )
                else:
                    result[key] = count
            elif key in _NUMBERS:
                if _is_number(value) and (key != "multipleOf" or value > 0):
                    result[key] = value
                else:
                    out.warnings.append(("constraint dropped", f"dropped a malformed {key}"))
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                if _is_number(value):
                    result[key] = value
                elif not isinstance(value, bool):
                    out.warnings.append(("constraint dropped", f"dropped a malformed {key}"))
            elif key == "description":
                if isinstance(value, str):
                    result[key] = _cut(value, MAX_SCHEMA_DESCRIPTION)
            elif key == "$schema":
                if value not in _OAS_DIALECTS:
                    raise Unsupported("schema dialect", f"$schema {str(value)[:80]!r}")
            elif key in ("$dynamicRef", "$recursiveRef"):
                raise Unsupported("unsupported $ref", f"{key} is not supported")
            elif key in _KEEP:
                result[key] = value
        for key, value in result.items():
            kept = 0 if key in _SCHEMAS else _measure(value, self._budget - out.size)
            self._grow(out, len(key) + 3 + kept)
        self._exclusive(node, result)
        self._check_type(result, out)
        self._required(result, direction)
        if self._legacy and node.get("nullable") is True:
            return _nullable(result)
        return result

    def _reference(
        self, node: Mapping[str, Any], direction: Direction, out: Converted, depth: int
    ) -> Any:
        ref = node["$ref"]
        if not isinstance(ref, str):
            raise Unsupported("unsupported $ref", "a $ref is not a string")
        if not ref.startswith("#"):
            raise Unsupported("external $ref", f"external $ref {ref[:120]!r} is not followed")
        tokens = _tokens(ref)
        target: Any
        component = (
            len(tokens) == 3
            and tokens[0] == "components"
            and tokens[1] == "schemas"
            and tokens[2] in self._names
        )
        if component:
            out.refs.add(tokens[2])
            target = {"$ref": def_ref(self._names[tokens[2]])}
            self._grow(out, 11 + len(target["$ref"]))
        else:
            target = self._inline(ref, direction, out, depth + 1)
        if isinstance(target, dict):
            target = dict(target)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if self._legacy:  # 3.0: siblings are ignored, except these annotations and nullable
            if not isinstance(target, dict):
                return target
            for key in ("description", "title"):
                if isinstance(siblings.get(key), str):
                    target[key] = _cut(siblings[key], MAX_SCHEMA_DESCRIPTION)
            return _nullable(target) if siblings.get("nullable") is True else target
        if not siblings:  # 3.1: siblings apply, as in JSON Schema 2020-12
            return target
        converted = self._node(siblings, direction, out, depth + 1)
        if isinstance(converted, dict) and component:
            converted.update(target)
            return converted
        return {"allOf": [target, converted]}

    def _inline(self, ref: str, direction: Direction, out: Converted, depth: int) -> Any:
        """The converted target of ``ref`` (not a component), counted into ``out`` at ``depth``.

        The target is converted once per direction, starting at the depth of its first
        use, and shared afterwards; a failure is kept too, except "too deep", which
        depends on where the reference is used.
        """
        key = (ref, direction)
        found = self._inlined.get(key)
        if found is None:
            if key in self._inlining:
                raise Unsupported(
                    "unsupported $ref", f"recursive $ref {ref[:120]!r} outside components.schemas"
                )
            inner = Converted(None)
            self._inlining.add(key)
            try:
                value = self._document.pointer(ref)
                inner.schema = self._node(value, direction, inner, depth)
                inner.height -= depth
                found = inner
            except RefError as exc:
                found = Unsupported(exc.kind, str(exc))
            except Unsupported as exc:
                if exc.kind == "schema too deep":
                    raise
                found = exc
            finally:
                self._inlining.discard(key)
            self._inlined[key] = found
        if isinstance(found, Unsupported):
            raise Unsupported(found.kind, str(found))
        if depth + found.height > MAX_DEPTH:
            raise Unsupported("schema too deep", f"a schema is nested deeper than {MAX_DEPTH}")
        out.height = max(out.height, depth + found.height)
        if id(found) not in out._merged:
            out._merged.add(id(found))
            out._merged |= found._merged
            out.refs |= found.refs
            known = set(out.warnings)
            out.warnings.extend(w for w in found.warnings if w not in known)
        self._grow(out, found.size)
        return found.schema

    def _exclusive(self, node: Mapping[str, Any], result: dict[str, Any]) -> None:
        """3.0 boolean exclusiveMinimum/Maximum become the numeric keywords."""
        for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if node.get(flag) is True and bound in result:
                result[flag] = result.pop(bound)

    def _check_type(self, result: dict[str, Any], out: Converted) -> None:
        kind = result.get("type")
        if kind is None:
            return
        kinds = kind if isinstance(kind, list) else [kind]
        if not kinds or not all(isinstance(k, str) and k in TYPE_NAMES for k in kinds):
            del result["type"]
            out.warnings.append(
                ("constraint dropped", f"dropped type {str(kind)[:40]} (not a JSON Schema type)")
            )
        elif isinstance(kind, list) and len(set(kinds)) != len(kinds):
            result["type"] = list(dict.fromkeys(kinds))

    def _required(self, result: dict[str, Any], direction: Direction) -> None:
        required = result.get("required")
        if required is None:
            return
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            del result["required"]
            return
        properties = result.get("properties")
        hidden = "readOnly" if direction == "request" else "writeOnly"
        if isinstance(properties, dict):
            required = [
                name
                for name in required
                if not (isinstance(properties.get(name), dict) and properties[name].get(hidden))
            ]
        required = list(dict.fromkeys(required))
        if required:
            result["required"] = required
        else:
            del result["required"]


def dumps(value: Any) -> bytes:
    """Compact JSON bytes of a converted schema (for size estimates only)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode(
        "utf-8", "replace"
    )


def _measure(value: Any, room: int) -> int:
    """A lower bound of the bytes of ``value`` as compact JSON, counted up to past ``room``."""
    size = 0
    stack = [value]
    while stack and size <= room:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, Mapping):
            size += 2 + sum(len(str(k)) + 3 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            size += 2
            stack.extend(item)
        else:
            size += 1
    return size


def _tokens(ref: str) -> list[str]:
    try:
        return split_pointer(ref[1:])
    except RefError as exc:
        raise Unsupported(exc.kind, str(exc)) from None


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"] if kind != "null" else kind
        return schema
    if isinstance(kind, list):
        if "null" not in kind:
            schema["type"] = [*kind, "null"]
        return schema
    if any(k in schema for k in ("$ref", "allOf", "anyOf", "oneOf")):
        wrapped: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]}
        for key in ("description", "title"):
            if key in schema:
                wrapped[key] = schema.pop(key)
        return wrapped
    return schema


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | Decimal | float)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
