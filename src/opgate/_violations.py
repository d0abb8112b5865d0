"""What a failed check says: the first violation of an instance, and its message.

``SchemaViolation`` carries the instance pointer, the failing keyword, its schema
location and a message built here from jsonschema-rs's error kind (``describe``),
which never contains the instance value (schema limits may be quoted, as written in
the schema). ``str()`` cuts long member names in the pointer; ``public()`` leaves the
pointer out, for data the caller did not send. The compiler's own errors reuse
``describe`` for their reason (``_schema``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import jsonschema_rs
from jsonschema_rs import ValidationErrorKind as Kind

from . import _json
from ._failures import PREFIX_CHARS, short_prefix
from ._json import JSONValue

__all__ = [
    "POINTER_CHARS",
    "POINTER_SEGMENT_CHARS",
    "SchemaViolation",
    "ViolationDetail",
    "describe",
    "violation",
]


@dataclass(frozen=True, slots=True)
class SchemaViolation:
    """The first way an instance fails its schema.

    ``pointer`` is the RFC 6901 pointer into the *instance* (``""`` is the root);
    ``keyword`` the schema keyword that failed (``"false"`` for a ``false`` subschema
    that no keyword such as ``additionalProperties`` or ``items`` names);
    ``message`` says what is wrong without quoting the instance value;
    ``location`` is the pointer into the *schema* of the failing keyword (through
    references, as jsonschema-rs reports it), so it holds only the schema's names.
    """

    pointer: str
    keyword: str
    message: str
    location: str = field(default="", compare=False)

    def __str__(self) -> str:
        """``pointer: message``; member names in the pointer are cut to a short prefix."""
        return f"{_shown_pointer(self.pointer) or '(root)'}: {self.message}"

    def public(self) -> str:
        """The message with the schema location instead of the instance pointer.

        For data the caller did not send (an operation's result): it names nothing
        from the instance, neither member names nor values.
        """
        location = _shown_pointer(self.location) or "the root"
        return f"{self.message} (keyword {self.keyword!r} at schema {location})"


class ViolationDetail(ValueError):
    """The private detail of a public violation message: ``str()`` adds the instance pointer.

    Set as ``Failure.cause``, which is never serialized or shown to a caller.
    """

    def __init__(self, violation: SchemaViolation) -> None:
        super().__init__(str(violation))
        self.violation = violation


#: Characters of one pointer segment (an instance member name) that ``str()`` shows.
POINTER_SEGMENT_CHARS: Final = PREFIX_CHARS

#: Characters of a whole pointer that ``str()`` shows: deep instances stay readable.
POINTER_CHARS: Final = 256


def _shown_pointer(pointer: str) -> str:
    """The pointer with long segments (and the whole) cut, marked with an ellipsis."""
    if len(pointer) <= POINTER_SEGMENT_CHARS + 1:
        return pointer
    segments = pointer.split("/")
    shown = "/".join(
        part if len(part) <= POINTER_SEGMENT_CHARS else part[:POINTER_SEGMENT_CHARS] + "…"
        for part in segments
    )
    return shown if len(shown) <= POINTER_CHARS else shown[:POINTER_CHARS] + "…"


def _number(value: object) -> str:
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return _json.number_text(value)
    if isinstance(value, float):
        return repr(value).removesuffix(".0")
    return short_prefix(str(value))


def _schema_number(document: JSONValue | None, error: Any, reported: object) -> str:
    """The limit as written in the schema when it sits at the error's schema path."""
    node = document
    for part in error.schema_path:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
            continue
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            continue
        return _number(reported)
    if isinstance(node, int | Decimal) and not isinstance(node, bool):
        return _json.number_text(node)
    return _number(reported)


def _last_keyword(error: Any, choices: frozenset[str], default: str) -> str:
    for part in reversed(error.schema_path):
        if isinstance(part, str):
            return part if part in choices else default
    return default


def _false_schema_keyword(schema_path: Sequence[str | int]) -> str:
    """The keyword whose value was the failing ``false`` schema, or ``"false"``."""
    if schema_path and isinstance(schema_path[-1], int):
        schema_path = schema_path[:-1]  # an entry of prefixItems / draft-07 array items
    if not schema_path or not isinstance(schema_path[-1], str):
        return "false"
    keyword = schema_path[-1]
    parent = schema_path[-2] if len(schema_path) > 1 else None
    if keyword in _FALSE_SCHEMA_MESSAGES and parent not in _MEMBER_CONTAINERS:
        return keyword
    return "false"


# Where a false schema usually sits, and what its failure means for the instance.
_FALSE_SCHEMA_MESSAGES: Final = {
    "additionalProperties": "has a property the schema does not allow",
    "unevaluatedProperties": "has a property the schema does not allow",
    "propertyNames": "has a property name the schema does not allow",
    "items": "is an item the schema does not allow",
    "prefixItems": "is an item the schema does not allow",
    "additionalItems": "is an item the schema does not allow",
    "unevaluatedItems": "is an item the schema does not allow",
}
# Keywords whose members are named by the schema author (a member may be called "items").
_MEMBER_CONTAINERS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

_CONTAINS_KEYWORDS: Final = frozenset({"contains", "minContains", "maxContains"})
_REQUIRED_KEYWORDS: Final = frozenset({"required", "dependentRequired", "dependencies"})


def describe(kind: Any, error: Any, document: JSONValue | None) -> tuple[str, str, str | None]:
    """(keyword, message, member) for an error kind; ``member`` extends the pointer."""
    match kind:
        case Kind.Type(types):
            return "type", "expected type " + " or ".join(types), None
        case Kind.Required(name):
            keyword = _last_keyword(error, _REQUIRED_KEYWORDS, "required")
            return keyword, f"missing required property {short_prefix(name)}", None
        case Kind.Enum():
            return "enum", "is not one of the allowed values", None
        case Kind.Constant():
            return "const", "does not equal the required constant", None
        case Kind.MaxLength(limit):
            return "maxLength", f"exceeds maximum length {limit}", None
        case Kind.MinLength(limit):
            return "minLength", f"is shorter than minimum length {limit}", None
        case Kind.MaxItems(limit):
            return "maxItems", f"has more than {limit} items", None
        case Kind.MinItems(limit):
            return "minItems", f"has fewer than {limit} items", None
        case Kind.MaxProperties(limit):
            return "maxProperties", f"has more than {limit} properties", None
        case Kind.MinProperties(limit):
            return "minProperties", f"has fewer than {limit} properties", None
        case Kind.Maximum(limit):
            return "maximum", f"exceeds maximum {_schema_number(document, error, limit)}", None
        case Kind.Minimum(limit):
            return "minimum", f"is below minimum {_schema_number(document, error, limit)}", None
        case Kind.ExclusiveMaximum(limit):
            text = _schema_number(document, error, limit)
            return "exclusiveMaximum", f"must be less than {text}", None
        case Kind.ExclusiveMinimum(limit):
            text = _schema_number(document, error, limit)
            return "exclusiveMinimum", f"must be greater than {text}", None
        case Kind.MultipleOf(multiple_of):
            text = _schema_number(document, error, multiple_of)
            return "multipleOf", f"is not a multiple of {text}", None
        case Kind.Pattern(pattern):
            return "pattern", f"does not match the pattern {short_prefix(pattern)}", None
        case Kind.Format(name):
            return "format", f"is not a valid {short_prefix(name)}", None
        case Kind.AdditionalProperties(unexpected):
            member = unexpected[0] if unexpected else None
            return "additionalProperties", "is a property the schema does not allow", member
        case Kind.UnevaluatedProperties(unexpected):
            member = unexpected[0] if unexpected else None
            return "unevaluatedProperties", "is a property the schema does not allow", member
        case Kind.UnevaluatedItems():
            # jsonschema-rs lists the offending items' values here, not their indices.
            return "unevaluatedItems", "has items the schema does not allow", None
        case Kind.AdditionalItems(limit):
            return "additionalItems", f"has more than the {limit} items the schema allows", None
        case Kind.AnyOf():
            return "anyOf", "does not match any of the allowed schemas", None
        case Kind.OneOfNotValid():
            return "oneOf", "does not match any of the alternative schemas", None
        case Kind.OneOfMultipleValid():
            return "oneOf", "matches more than one of the alternative schemas", None
        case Kind.Not():
            return "not", "matches a schema it must not match", None
        case Kind.FalseSchema():
            keyword = _false_schema_keyword(error.schema_path)
            return keyword, _FALSE_SCHEMA_MESSAGES.get(keyword, "is not allowed here"), None
        case Kind.Contains():
            keyword = _last_keyword(error, _CONTAINS_KEYWORDS, "contains")
            if keyword == "minContains":
                return keyword, "has too few items matching the contains schema", None
            if keyword == "maxContains":
                return keyword, "has too many items matching the contains schema", None
            return keyword, "has no item matching the contains schema", None
        case Kind.UniqueItems():
            return "uniqueItems", "has duplicate items", None
        case Kind.PropertyNames(inner):
            _inner_keyword, reason, _member = describe(inner.kind, inner, None)
            offending = inner.instance if isinstance(inner.instance, str) else None
            message = f"is a property name the schema does not allow: {reason}"
            return "propertyNames", message, offending
        case Kind.BacktrackLimitExceeded() | Kind.RegexEngineFailure():
            return "pattern", "could not be checked against the pattern (regex engine limit)", None
        case Kind.ContentEncoding() | Kind.ContentMediaType() | Kind.FromUtf8():
            return kind.name, "has content that could not be decoded", None  # pragma: no cover
        case Kind.Referencing():
            return "$ref", "refers to a schema that could not be resolved", None
        case Kind.Custom(keyword, _message):
            return keyword, "does not match the schema", None  # pragma: no cover
    return str(kind.name), "does not match the schema", None  # pragma: no cover


def violation(error: jsonschema_rs.ValidationError, document: JSONValue) -> SchemaViolation:
    """The first violation ``error`` reports, described from the parsed schema ``document``."""
    keyword, message, member = describe(error.kind, error, document)
    parts: list[str | int] = list(error.instance_path)
    if member is not None:
        parts.append(member)
    location = _json.pointer(list(error.schema_path))
    return SchemaViolation(_json.pointer(parts), keyword, message, location)
