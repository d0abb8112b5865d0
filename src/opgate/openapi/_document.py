"""Reading an OpenAPI document, and following the references inside it.

``load_document(source)`` accepts

* a ``pathlib.Path`` (or any ``os.PathLike``): the file is read; JSON or YAML;
* ``str`` or ``bytes``: the document's text, for example what the host fetched
  from a URL (opgate never fetches anything itself); JSON or YAML;
* a ``Mapping``: an already-parsed document (it is not modified).

JSON text is read with exact numbers (``int`` and ``Decimal``, never ``float``);
NaN and infinities are refused. YAML needs the ``openapi`` extra (PyYAML); it is
read with the safe loader, and what YAML has beyond JSON is normalised: mapping
keys become strings (``200:`` is the response ``"200"``), dates and times become
ISO 8601 strings, floats become ``Decimal`` by their shortest repr, and non-finite
floats are refused. YAML aliases (``*name``) are copied where they are used, within a
budget: the document may expand to at most one value per byte of its text, or
``MIN_YAML_VALUES``, whichever is more; a document of aliases of aliases that would
expand further is refused with a ``DocumentError`` as soon as it passes the budget.
A mapping is taken as it is (like what ``json.loads`` returns, it should be a tree;
schemas are bounded per operation either way, see ``_schemas``).

``Document.resolve(value)`` follows ``$ref`` chains inside the document
(``#/components/parameters/...`` and any other internal JSON pointer). References to
other files or URLs are never fetched: they come back as a ``RefError`` that the
caller turns into a skipped operation.
"""

from __future__ import annotations

import datetime
import importlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

__all__ = ["Document", "DocumentError", "RefError", "load_document", "split_pointer"]

#: Longest ``$ref`` chain followed (a chain of references to references).
MAX_REF_CHAIN = 32
#: Values a YAML document may always expand to through its aliases (and one per byte beyond).
MIN_YAML_VALUES = 100_000


_MISSING = object()


class DocumentError(ValueError):
    """The input is not an OpenAPI 3.0 or 3.1 document; the message says why."""


class RefError(ValueError):
    """A ``$ref`` that cannot be followed (external, dangling, or a cycle of references)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def split_pointer(fragment: str) -> list[str]:
    """The tokens of a URI-fragment JSON pointer (``"/a~1b/c"`` → ``["a/b", "c"]``)."""
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        raise RefError("unsupported $ref", f"$ref fragment {fragment[:80]!r} is not a JSON pointer")
    return [
        unquote(token).replace("~1", "/").replace("~0", "~") for token in fragment[1:].split("/")
    ]


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed OpenAPI document.

    ``data`` is the whole document (JSON values, ``Decimal`` for non-integers);
    ``version`` is ``"3.0"`` or ``"3.1"``; ``openapi`` the exact version string.
    """

    data: Mapping[str, Any]
    version: str
    openapi: str
    _found: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def title(self) -> str:
        info = self.data.get("info")
        title = info.get("title") if isinstance(info, Mapping) else None
        return title if isinstance(title, str) else ""

    def pointer(self, ref: object) -> Any:
        """The value a local ``$ref`` (``#/...``) names; ``RefError`` otherwise."""
        if isinstance(ref, str):
            found = self._found.get(ref, _MISSING)
            if found is not _MISSING:
                return found
        value = self._pointer(ref)
        if isinstance(ref, str):
            self._found[ref] = value
        return value

    def _pointer(self, ref: object) -> Any:
        if not isinstance(ref, str):
            raise RefError("unsupported $ref", "$ref is not a string")
        if not ref.startswith("#"):
            raise RefError("external $ref", f"external $ref {ref[:120]!r} is not followed")
        value: Any = self.data
        for token in split_pointer(ref[1:]):
            if isinstance(value, Mapping) and token in value:
                value = value[token]
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                raise RefError("dangling $ref", f"$ref {ref[:120]!r} names nothing")
        return value

    def resolve(self, value: Any) -> Any:
        """Follow ``value``'s ``$ref`` chain (for non-schema objects) to a concrete value."""
        seen: list[str] = []
        while isinstance(value, Mapping) and "$ref" in value:
            ref = value["$ref"]
            if ref in seen or len(seen) >= MAX_REF_CHAIN:
                raise RefError("circular $ref", f"$ref chain through {str(ref)[:120]!r} loops")
            seen.append(ref)
            value = self.pointer(ref)
        return value


def load_document(source: object) -> Document:
    """Read ``source`` (path, text, bytes or mapping) as an OpenAPI 3.0/3.1 document.

    Raises ``DocumentError`` when it cannot be read or is not OpenAPI 3.0/3.1
    (Swagger 2.0 included), ``OSError`` when a file cannot be read, and
    ``DocumentError`` naming the extra when YAML is needed but PyYAML is missing.
    """
    if isinstance(source, os.PathLike):
        data = _parse(Path(source).read_bytes())
    elif isinstance(source, str | bytes | bytearray):
        data = _parse(bytes(source, "utf-8") if isinstance(source, str) else bytes(source))
    elif isinstance(source, Mapping):
        data = source
    else:
        raise TypeError(
            "an OpenAPI source is a pathlib.Path, the document's text (str or bytes) "
            f"or a mapping, not {type(source).__name__}"
        )
    if not isinstance(data, Mapping):
        raise DocumentError(
            "the document is not a JSON/YAML object (to read a file, pass a pathlib.Path)"
        )
    version = data.get("openapi")
    if not isinstance(version, str):
        if "swagger" in data:
            raise DocumentError("Swagger 2.0 is not supported: convert it to OpenAPI 3 first")
        raise DocumentError("not an OpenAPI document: it has no 'openapi' version string")
    if version.startswith("3.0"):
        family = "3.0"
    elif version.startswith("3.1"):
        family = "3.1"
    else:
        raise DocumentError(f"OpenAPI {version[:20]!r} is not supported (3.0.x and 3.1.x are)")
    paths = data.get("paths", {})
    if paths is not None and not isinstance(paths, Mapping):
        raise DocumentError("'paths' must be an object")
    return Document(data, family, version)


def _refuse_constant(name: str) -> Any:
    raise DocumentError(f"the document contains {name}, which is not JSON")


def _parse(raw: bytes) -> Any:
    text = raw.decode("utf-8-sig", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text, parse_float=Decimal, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
        except RecursionError:
            raise DocumentError("the JSON document is nested too deeply") from None
        except ValueError as exc:  # an integer beyond Python's digit limit
            raise DocumentError(f"the JSON document holds an unreadable number: {exc}") from None
    return _parse_yaml(text, max(MIN_YAML_VALUES, len(raw)))


def _parse_yaml(text: str, budget: int) -> Any:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise DocumentError(
            "this document is YAML, which needs PyYAML: pip install 'opgate[openapi]'"
        ) from None
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DocumentError(f"invalid YAML{where}") from None
    except RecursionError:
        raise DocumentError("the YAML document is nested too deeply") from None
    except ValueError as exc:  # an integer beyond Python's digit limit, a bad timestamp
        raise DocumentError(f"the YAML document holds an unreadable value: {exc}") from None
    return _Normaliser(budget).value(data, 0)


class _Normaliser:
    """YAML values as JSON values (see the module docstring), at most ``budget`` of them.

    PyYAML builds an alias as the very object its anchor names, so the loaded graph is
    as small as the text; copying it into a tree is where aliases of aliases would
    multiply, hence the count of every value copied.
    """

    __slots__ = ("budget", "left")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.left = budget

    def value(self, value: Any, depth: int) -> Any:
        self.left -= 1
        if self.left < 0:
            raise DocumentError(
                f"the YAML document expands to more than {self.budget:,} values through its "
                f"aliases (*name): the budget is one value per byte of the document, at least "
                f"{MIN_YAML_VALUES:,}; write repeated parts once and share them with $ref"
            )
        if depth > 512:
            raise DocumentError("the YAML document is nested too deeply")
        if isinstance(value, dict):
            return {_key(k): self.value(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):  # tuples: !!pairs and !!omap entries
            return [self.value(v, depth + 1) for v in value]
        if isinstance(value, set | frozenset):  # !!set: its members are scalars
            return [self.value(v, depth + 1) for v in sorted(value, key=repr)]
        return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DocumentError("the document contains a non-finite number (.inf or .nan)")
        return Decimal(repr(value))
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, datetime.date | datetime.datetime):
        return key.isoformat()
    return str(key)
