"""Prompts for a person: ``FormInput``, ``URLInput``, the form profile and answer checks.

A handler that needs a human asks with ``await_input(FormInput(...))`` or
``await_input(URLInput(...))``. Both constructors snapshot their parts, validate
everything and raise ``ConfigurationError`` (with what to fix) or ``TypeError``
(for a wrong type); nothing is checked later on the handler's behalf.

The form profile is exactly the MCP 2025-11-25 elicitation ``requestedSchema``
shape, so a form that constructs can be sent to a client unchanged::

    {"$schema"?: 2020-12 only, "type": "object", "properties": {name: P, ...},
     "required"?: [declared names], "additionalProperties"?: false}

where every property ``P`` is one of (each may add ``title``, ``description``,
``default``):

* string: ``{"type": "string", minLength?, maxLength?, format?}`` with ``format``
  one of ``email``, ``uri``, ``date``, ``date-time`` (asserted on answers);
* number: ``{"type": "number" | "integer", minimum?, maximum?}``;
* boolean: ``{"type": "boolean"}``;
* single choice: ``{"type": "string", "enum": [str, ...], enumNames?}`` (legacy
  ``enumNames`` must have one title per choice) or titled
  ``{"type": "string", "oneOf": [{"const": str, "title": str}, ...]}``;
* multiselect: ``{"type": "array", "maxItems": n, minItems?, "items": I}`` with
  ``I`` either ``{"type": "string", "enum": [str, ...]}`` or titled
  ``{"anyOf": [{"const": str, "title": str}, ...]}``; ``maxItems`` is required.

Anything else fails construction with a message naming the property: nested
objects, arbitrary arrays, references, combinators (other than the two titled
shapes), unknown keywords, ``additionalProperties: true``. Decisions beyond the
MCP shape: choices must be nonempty and distinct; ``minLength``/``minItems``/
``minimum`` may not exceed their maximum; a multiselect may not require more items
than it has choices, and its answers may not repeat a choice; an ``integer`` field's
bounds must admit an integer; a ``default`` must itself be a valid answer for its
property (it stays schema data and is never inserted); property names are nonempty.
Numbers obey the numeric work profile and counts are integers in 0..2,147,483,647,
as for operation schemas.

``FormInput`` and ``URLInput`` are final: they cannot be subclassed, and the
registry accepts only instances their own constructors completed
(``is_genuine_prompt``), so every prompt that reaches a person passed these checks.

State is private JSON kept for the handler (an intent or job key, never a
credential); it never appears in the prompt, ``repr`` or ``form()``. Because a
``str`` is always read as JSON *text*, JSON ``null`` is passed as the text
``"null"``; Python ``None`` means "no state" and is rejected by ``FormInput``. A
``URLInput`` may carry state too (``state=``, beyond the spec, whose URL input has
none): without it the handler's resume gets ``None``.
"""

from __future__ import annotations

import enum
import ipaddress
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Final, final
from urllib.parse import urlsplit

from ._failures import ConfigurationError, short_prefix
from ._json import JSONError, JSONValue, canonical_bytes, detach, from_python, parse, pointer
from ._schema import MAX_COUNT, CompiledSchema, SchemaRole, compile_schema
from ._sealed import Seal, Sealed, is_genuine
from ._text import has_surrogate

__all__ = [
    "FORM_CHECKS_CACHED",
    "FORM_DIALECTS",
    "FORM_FORMATS",
    "FormChecks",
    "FormInput",
    "FormPrompt",
    "InputMode",
    "StoredPrompt",
    "URLInput",
    "URLPrompt",
    "is_genuine_prompt",
]

#: The string formats MCP clients know; each is asserted on answers.
FORM_FORMATS = frozenset({"email", "uri", "date", "date-time"})

#: The only dialect a form may declare: MCP elicitation schemas are draft 2020-12.
FORM_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    }
)


class InputMode(enum.StrEnum):
    """How a person is asked: an in-band form, or consent to open an HTTPS URL."""

    FORM = "form"
    URL = "url"


# --- the form profile ----------------------------------------------------------------

_ANNOTATIONS = frozenset({"title", "description", "default"})
_ROOT_KEYWORDS = frozenset({"$schema", "type", "properties", "required", "additionalProperties"})
_STRING_KEYWORDS = _ANNOTATIONS | {"type", "minLength", "maxLength", "format"}
_NUMBER_KEYWORDS = _ANNOTATIONS | {"type", "minimum", "maximum"}
_BOOLEAN_KEYWORDS = _ANNOTATIONS | {"type"}
_ENUM_KEYWORDS = _ANNOTATIONS | {"type", "enum", "enumNames"}
_TITLED_KEYWORDS = _ANNOTATIONS | {"type", "oneOf"}
_MULTISELECT_KEYWORDS = _ANNOTATIONS | {"type", "items", "minItems", "maxItems"}
_CHOICE_KEYS = frozenset({"const", "title"})
_REFERENCES = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "$id", "$anchor"}
    | {"$dynamicAnchor", "$recursiveAnchor", "$vocabulary"}
)
_COMBINATORS = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"}
    | {"dependentRequired", "dependencies"}
)
_TYPES = "string, number, integer, boolean or array"
_MULTISELECT_RULE = (
    "arrays must be string-enum multiselects: items {type: string, enum: [...]} "
    "or {anyOf: [{const, title}, ...]}"
)


def _is_number(value: JSONValue) -> bool:
    return isinstance(value, int | Decimal) and not isinstance(value, bool)


def _is_integral(value: JSONValue) -> bool:
    """An integer, or a decimal with an integral value (``2.0`` is the count 2)."""
    if isinstance(value, Decimal):
        return value == value.to_integral_value()
    return isinstance(value, int) and not isinstance(value, bool)


class _Profile:
    """One walk over a form schema; ``fail`` raises ``ConfigurationError`` naming the place."""

    def __init__(self, schema: dict[str, JSONValue]) -> None:
        self.schema = schema

    @staticmethod
    def fail(path: tuple[str | int, ...], rule: str) -> ConfigurationError:
        where = pointer(path)
        if len(path) >= 2 and path[0] == "properties":
            name = path[1]
            assert isinstance(name, str)
            return ConfigurationError(f"form property {short_prefix(name)} (at {where}): {rule}")
        return ConfigurationError(f"form schema (at {where or 'the root'}): {rule}")

    def check(self) -> None:
        schema = self.schema
        for keyword in schema:
            if keyword not in _ROOT_KEYWORDS:
                raise self.fail((keyword,), self.unsupported(keyword, "the form root"))
        if "$schema" in schema and schema["$schema"] not in FORM_DIALECTS:
            raise self.fail(
                ("$schema",),
                "forms use JSON Schema draft 2020-12 only: "
                "omit $schema or use https://json-schema.org/draft/2020-12/schema",
            )
        if schema.get("type") != "object":
            raise self.fail(("type",), 'a form needs "type": "object" at its root')
        if "additionalProperties" in schema and schema["additionalProperties"] is not False:
            raise self.fail(
                ("additionalProperties",),
                "additionalProperties may only be omitted or false (true is unsupported; "
                "answers may contain only declared fields)",
            )
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            raise self.fail(("properties",), "a form needs a properties object (it may be {})")
        for name, prop in properties.items():
            if not name:
                raise self.fail(("properties", name), "property names must be nonempty")
            self.check_property(name, prop)
        if "required" in schema:
            self.check_required(schema["required"], properties)

    def check_required(self, required: JSONValue, properties: dict[str, JSONValue]) -> None:
        if not isinstance(required, list):
            raise self.fail(("required",), "required must be an array of property names")
        seen: set[str] = set()
        for index, name in enumerate(required):
            if not isinstance(name, str):
                raise self.fail(("required", index), "required names must be strings")
            if name not in properties:
                raise self.fail(
                    ("required", index),
                    f"required name {short_prefix(name)} is not a declared property",
                )
            if name in seen:
                raise self.fail(("required", index), f"{short_prefix(name)} is listed twice")
            seen.add(name)

    @staticmethod
    def unsupported(keyword: str, place: str) -> str:
        if keyword in _REFERENCES:
            return f"references ({short_prefix(keyword)}) are not supported in forms"
        if keyword in _COMBINATORS:
            return (
                f"combinators ({short_prefix(keyword)}) are not supported in forms, except "
                "the titled choice shapes (string oneOf / items anyOf of {const, title})"
            )
        return (
            f"keyword {short_prefix(keyword)} is not allowed in {place} "
            "(the form profile is the MCP elicitation schema)"
        )

    def check_property(self, name: str, prop: JSONValue) -> None:
        here = ("properties", name)
        if not isinstance(prop, dict):
            raise self.fail(here, "a property must be a schema object (boolean schemas fail)")
        for keyword in prop:
            if keyword in _REFERENCES:
                raise self.fail((*here, keyword), self.unsupported(keyword, "a property"))
        kind = prop.get("type")
        if kind is None:
            for keyword in prop:
                if keyword in _COMBINATORS:
                    raise self.fail((*here, keyword), self.unsupported(keyword, "a property"))
            raise self.fail(here, f"a property needs a type: {_TYPES}")
        if kind == "object":
            raise self.fail((*here, "type"), "nested objects are not supported; forms are flat")
        if kind == "string":
            if "oneOf" in prop:
                allowed = _TITLED_KEYWORDS
            elif "enum" in prop:
                allowed = _ENUM_KEYWORDS
            else:
                allowed = _STRING_KEYWORDS
        elif kind in ("number", "integer"):
            allowed = _NUMBER_KEYWORDS
        elif kind == "boolean":
            allowed = _BOOLEAN_KEYWORDS
        elif kind == "array":
            allowed = _MULTISELECT_KEYWORDS
        else:
            raise self.fail((*here, "type"), f"type must be one of {_TYPES}")
        for keyword in prop:
            if keyword not in allowed:
                place = f"a {kind} property" if kind != "string" else "this string property"
                if keyword == "enumNames":
                    rule = "enumNames needs an enum of the same length"
                else:
                    rule = self.unsupported(keyword, place)
                raise self.fail((*here, keyword), rule)
        for keyword in ("title", "description"):
            if keyword in prop and not isinstance(prop[keyword], str):
                raise self.fail((*here, keyword), f"{keyword} must be a string")
        if allowed is _STRING_KEYWORDS:
            self.check_bounds(here, prop, "minLength", "maxLength", count=True)
            if "format" in prop and prop["format"] not in FORM_FORMATS:
                raise self.fail(
                    (*here, "format"), "format must be one of email, uri, date, date-time"
                )
        elif allowed is _ENUM_KEYWORDS:
            choices = self.check_choices((*here, "enum"), prop["enum"])
            if "enumNames" in prop:
                names = prop["enumNames"]
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise self.fail((*here, "enumNames"), "enumNames must be an array of strings")
                if len(names) != len(choices):
                    raise self.fail(
                        (*here, "enumNames"),
                        f"enumNames has {len(names)} titles for {len(choices)} choices",
                    )
        elif allowed is _TITLED_KEYWORDS:
            self.check_titled((*here, "oneOf"), prop["oneOf"])
        elif allowed is _NUMBER_KEYWORDS:
            self.check_bounds(here, prop, "minimum", "maximum", count=False)
            if kind == "integer" and "minimum" in prop and "maximum" in prop:
                low, high = prop["minimum"], prop["maximum"]
                assert _is_number(low)
                assert _is_number(high)
                if math.ceil(low) > math.floor(high):  # type: ignore[arg-type]
                    raise self.fail(
                        (*here, "minimum"),
                        "no integer lies between minimum and maximum; "
                        "the field could never be answered",
                    )
        elif allowed is _MULTISELECT_KEYWORDS:
            self.check_multiselect(here, prop)

    def check_bounds(
        self, here: tuple[str, ...], prop: dict[str, JSONValue], low: str, high: str, *, count: bool
    ) -> None:
        for keyword in (low, high):
            if keyword not in prop:
                continue
            value = prop[keyword]
            if count:
                if not _is_integral(value):
                    raise self.fail((*here, keyword), f"{keyword} must be an integer")
                if not 0 <= value <= MAX_COUNT:  # type: ignore[operator]
                    raise self.fail((*here, keyword), f"{keyword} must be within 0..{MAX_COUNT}")
            elif not _is_number(value):
                raise self.fail((*here, keyword), f"{keyword} must be a number")
        if low in prop and high in prop and prop[low] > prop[high]:  # type: ignore[operator]
            raise self.fail((*here, low), f"{low} exceeds {high}")

    def check_choices(self, path: tuple[str, ...], choices: JSONValue) -> list[str]:
        if not isinstance(choices, list) or not choices:
            raise self.fail(path, "choices must be a nonempty array of strings")
        seen: set[str] = set()
        for index, choice in enumerate(choices):
            if not isinstance(choice, str):
                raise self.fail((*path, str(index)), "choices must be strings")
            if choice in seen:
                raise self.fail((*path, str(index)), f"choice {short_prefix(choice)} repeats")
            seen.add(choice)
        return choices  # type: ignore[return-value]

    def check_titled(self, path: tuple[str, ...], options: JSONValue) -> int:
        if not isinstance(options, list) or not options:
            raise self.fail(path, "titled choices must be a nonempty array of {const, title}")
        seen: set[str] = set()
        for index, option in enumerate(options):
            where = (*path, str(index))
            if (
                not isinstance(option, dict)
                or option.keys() != _CHOICE_KEYS
                or not isinstance(option["const"], str)
                or not isinstance(option["title"], str)
            ):
                raise self.fail(where, 'a titled choice is exactly {"const": str, "title": str}')
            const = option["const"]
            assert isinstance(const, str)
            if const in seen:
                raise self.fail(where, f"choice {short_prefix(const)} repeats")
            seen.add(const)
        return len(seen)

    def check_multiselect(self, here: tuple[str, ...], prop: dict[str, JSONValue]) -> None:
        if "maxItems" not in prop:
            raise self.fail(here, "a multiselect array needs maxItems (arrays must be bounded)")
        self.check_bounds(here, prop, "minItems", "maxItems", count=True)
        items = prop.get("items")
        where = (*here, "items")
        if not isinstance(items, dict):
            raise self.fail(where, _MULTISELECT_RULE)
        if items.keys() == {"type", "enum"} and items["type"] == "string":
            choices = len(self.check_choices((*where, "enum"), items["enum"]))
        elif items.keys() == {"anyOf"}:
            choices = self.check_titled((*where, "anyOf"), items["anyOf"])
        else:
            for keyword in items:
                if keyword in _REFERENCES or keyword in _COMBINATORS - {"anyOf"}:
                    raise self.fail((*where, keyword), self.unsupported(keyword, "items"))
            raise self.fail(where, _MULTISELECT_RULE)
        minimum = prop.get("minItems", 0)
        assert isinstance(minimum, int | Decimal)
        if minimum > choices:
            raise self.fail(
                (*here, "minItems"),
                f"minItems ({minimum}) exceeds the {choices} choices; answers cannot repeat "
                "a choice, so the field could never be answered",
            )


# --- values ---------------------------------------------------------------------------


def _check_message(owner: str, message: object) -> str:
    if not isinstance(message, str):
        raise TypeError(f"{owner} message must be a str, not {type(message).__name__}")
    if not message.strip():
        raise ConfigurationError(f"{owner} needs a nonblank message to show the person")
    if has_surrogate(message):
        raise ConfigurationError(f"{owner} message contains a lone surrogate")
    return str.__str__(message)


# What a caller may pass as state: JSON text, or a Python JSON value other than None.
_STATE_TYPES = (str, bytes, bytearray, Mapping, list, tuple, int, float, Decimal)


def _json_argument(owner: str, what: str, value: object, *, profile: bool) -> JSONValue:
    """Read JSON text (``str``/``bytes``) or a Python JSON value, raising with ``what``."""
    try:
        if isinstance(value, str | bytes | bytearray):
            return parse(value, profile=profile)
        return from_python(value, profile=profile)
    except JSONError as exc:
        if what == "schema" and exc.pointer is not None:
            path = _split_pointer(exc.pointer)
            if len(path) >= 2 and path[0] == "properties":
                raise _Profile.fail(path, exc.reason) from None
        raise ConfigurationError(f"{owner} {what} is not valid JSON: {exc}") from None


def _split_pointer(where: str) -> tuple[str, ...]:
    """The unescaped segments of an RFC 6901 pointer."""
    if not where:
        return ()
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in where.split("/")[1:])


@dataclass(frozen=True, slots=True)
class FormPrompt:
    """What a person is shown for a form: ``message`` and the canonical ``schema_bytes``.

    ``schema`` parses ``schema_bytes`` again on every access, so callers may change
    the returned ``dict`` freely. The prompt never carries the handler's state.
    """

    message: str
    schema_bytes: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.message, str):
            raise TypeError("FormPrompt message must be a str")
        if not isinstance(self.schema_bytes, bytes):
            raise TypeError("FormPrompt schema_bytes must be bytes")

    @property
    def schema(self) -> dict[str, JSONValue]:
        """A fresh parsed copy of the form schema."""
        value = parse(self.schema_bytes)
        assert isinstance(value, dict)
        return value

    @property
    def mode(self) -> InputMode:
        return InputMode.FORM


@dataclass(frozen=True, slots=True)
class URLPrompt:
    """What a person is shown for a URL hand-off: exactly ``message`` and ``url``."""

    message: str
    url: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str) or not isinstance(self.url, str):
            raise TypeError("URLPrompt message and url must be str")

    @property
    def mode(self) -> InputMode:
        return InputMode.URL


# Stamped only at the end of the prompt constructors; an instance without it is a forgery.
_SEAL: Final = Seal()


def is_genuine_prompt(prompt: object) -> bool:
    """Whether ``prompt`` is a ``FormInput`` or ``URLInput`` its constructor completed."""
    return type(prompt) in (FormInput, URLInput) and is_genuine(prompt)


class _Prompt(Sealed):
    """Behaviour shared by the two prompt classes: sealed, immutable, copied as themselves."""

    __slots__ = ()

    _refusal = (
        "{name}: FormInput and URLInput cannot be subclassed; "
        "construct them and let their checks run"
    )
    _immutable = "{type} is immutable"


@final
@_SEAL.mints
class FormInput(_Prompt):
    """Ask a person to fill a form, keeping private JSON ``state`` for the handler.

    ``FormInput(message, schema, state)``:

    * ``message``: nonblank ``str`` shown to the person;
    * ``schema``: the form, as JSON text (``str``/``bytes``) or a mapping, in the form
      profile (see the module docstring); numbers obey the numeric work profile;
    * ``state``: private JSON the handler gets back on resume (``inv.resume.state``):
      JSON text (``str``/``bytes``; ``"null"`` is JSON null) or a Python JSON value
      (mapping, list, number, bool). Python ``None`` is rejected: state is
      required, so write ``"null"`` to keep JSON null. Use it for an intent or job
      key, never a credential.

    The constructor snapshots all three, so later changes to the caller's objects
    have no effect. It raises ``TypeError`` for a wrong type and ``ConfigurationError``
    for anything outside the profile, naming the property and the rule. The class is
    final; copies are the object itself and pickles rebuild it through the constructor.
    """

    __slots__ = (
        "_compiled",
        "_declared",
        "_message",
        "_required",
        "_schema_bytes",
        "_state",
        "_state_bytes",
    )

    mode: ClassVar[InputMode] = InputMode.FORM

    _message: str
    _declared: frozenset[str]
    _required: tuple[str, ...]
    _schema_bytes: bytes
    _state: JSONValue
    _state_bytes: bytes
    _compiled: CompiledSchema

    def __init__(self, message: str, schema: object, state: object) -> None:
        message = _check_message("FormInput", message)
        if schema is None:
            raise ConfigurationError("FormInput needs a form schema (a JSON object)")
        if not isinstance(schema, str | bytes | bytearray | Mapping):
            raise TypeError(
                f"FormInput schema must be JSON text or a mapping, not {type(schema).__name__}"
            )
        schema_value = _json_argument("FormInput", "schema", schema, profile=True)
        if not isinstance(schema_value, dict):
            raise ConfigurationError("FormInput schema must be a JSON object")
        _Profile(schema_value).check()
        if state is None:
            raise ConfigurationError(
                "FormInput state is required: Python None is not JSON state; "
                'pass the JSON text "null" to keep JSON null'
            )
        if not isinstance(state, _STATE_TYPES):
            raise TypeError(
                f"FormInput state must be JSON text or a JSON value, not {type(state).__name__}"
            )
        state_value = _json_argument("FormInput", "state", state, profile=False)
        compiled = _compile(schema_value)
        _check_defaults(schema_value)
        object.__setattr__(self, "_message", message)
        properties = schema_value["properties"]
        required = schema_value.get("required", [])
        assert isinstance(properties, dict)
        assert isinstance(required, list)
        object.__setattr__(self, "_declared", frozenset(properties))
        object.__setattr__(self, "_required", tuple(str(name) for name in required))
        object.__setattr__(self, "_schema_bytes", canonical_bytes(schema_value))
        object.__setattr__(self, "_state", state_value)
        object.__setattr__(self, "_state_bytes", canonical_bytes(state_value))
        object.__setattr__(self, "_compiled", compiled)
        _SEAL.stamp(self)

    def _rebuild(self) -> tuple[Any, ...]:  # through the constructor's checks
        return (FormInput, (self._message, self._schema_bytes, self._state_bytes))

    def __repr__(self) -> str:
        if not is_genuine_prompt(self):
            return "FormInput(<not constructed>)"
        return (
            f"FormInput(message={short_prefix(self._message)}, schema=<{self.schema_size} bytes>)"
        )

    @property
    def message(self) -> str:
        """The message shown to the person."""
        return self._message

    def form(self) -> bytes:
        """The canonical schema bytes (immutable, so detached); never the state."""
        return self._schema_bytes

    def prompt(self) -> FormPrompt:
        """The public prompt: message and canonical schema bytes."""
        return FormPrompt(self._message, self._schema_bytes)

    # -- internal, for the registry and the ledger --

    @property
    def schema_size(self) -> int:
        """Length of the canonical schema bytes."""
        return len(self._schema_bytes)

    @property
    def state_bytes(self) -> bytes:
        """Canonical bytes of the private state."""
        return self._state_bytes

    def state_value(self) -> JSONValue:
        """A fresh detached copy of the private state."""
        return detach(self._state)

    def validate_answers(self, answers: JSONValue) -> str | None:
        """Check decoded answers against the original form; a message naming the field, or None.

        Only declared fields, required fields present, no coercion (``"true"`` is not
        ``true``), formats asserted, nothing inserted.
        """
        if not isinstance(answers, dict):
            return "answers must be a JSON object"
        if not self._declared.issuperset(answers):  # the first undeclared name, sorted
            for name in sorted(answers):
                if name not in self._declared:
                    return f"answer field {short_prefix(name)} is not declared by the form"
        for name in self._required:
            if name not in answers:
                return f"answer field {short_prefix(name)} is required"
        violation = self._compiled.first_violation(answers)
        if violation is None:
            return None
        message = violation.message
        if violation.keyword in ("oneOf", "anyOf"):  # only the titled choice shapes use them
            message = "is not one of the allowed choices"
        elif violation.keyword == "uniqueItems":  # only multiselects have it (added by _compile)
            message = "repeats a choice; each choice may be selected once"
        return _describe(violation.pointer, message)


def _describe(where: str, message: str) -> str:
    """Name the answer field (and the item, inside a multiselect) a violation points at."""
    parts = _split_pointer(where)
    if not parts:
        return f"answers: {message}"
    item = f" item {parts[1]}" if len(parts) > 1 and parts[1].isdigit() else ""
    return f"answer field {short_prefix(parts[0])}{item}: {message}"


def _compile(schema: dict[str, JSONValue]) -> CompiledSchema:
    """The answer check for a profile-valid form: the schema, with every multiselect
    also requiring distinct items (the public schema is unchanged)."""
    checked = detach(schema)
    assert isinstance(checked, dict)
    properties = checked.get("properties")
    if isinstance(properties, dict):
        for prop in properties.values():
            if isinstance(prop, dict) and prop.get("type") == "array":
                prop["uniqueItems"] = True
    return compile_schema(checked, role=SchemaRole.FORM, where="form schema")


def _check_defaults(schema: dict[str, JSONValue]) -> None:
    """Every default must be an acceptable answer for its own property."""
    properties = schema["properties"]
    assert isinstance(properties, dict)
    defaults = {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and "default" in prop
    }
    if not defaults:
        return
    checker = _compile({"type": "object", "properties": detach(properties)})
    violation = checker.first_violation(defaults)
    if violation is not None:
        name = _split_pointer(violation.pointer)[0]
        raise _Profile.fail(
            ("properties", name, "default"),
            f"the default is not a valid answer for this property ({violation.message})",
        )


# --- URL input ----------------------------------------------------------------------------

# Characters RFC 3986 allows in a URI (unreserved, reserved and the percent sign).
_URI_CHARACTER = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _url_problem(url: str) -> str | None:
    """Why ``url`` is not an absolute HTTPS URL without user information, or None."""
    if not url:
        return "the URL is empty"
    for index, char in enumerate(url):
        if _URI_CHARACTER.fullmatch(char):
            continue
        if char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F:
            return f"the URL contains whitespace or a control character at index {index}"
        if not char.isascii():
            return (
                f"the URL contains a non-ASCII character at index {index}: "
                "percent-encode it (and write the host in punycode)"
            )
        return f"the URL contains {short_prefix(char)} at index {index}, not allowed in a URI"
    if _BAD_PERCENT.search(url):
        return "the URL contains a malformed percent escape"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "the URL's host or port is malformed"
    if parts.scheme.lower() != "https":
        return "the URL must use https (plain http is never accepted)"
    if not parts.netloc:
        return "the URL must be absolute: https://host/..."
    if "@" in parts.netloc:
        return "the URL must not contain user information (user@ or user:password@)"
    if not parts.hostname:
        return "the URL has no host"
    if port is None and parts.netloc.endswith(":"):
        return "the URL has an empty port"
    if port == 0:
        return "the URL's port must be 1 to 65535"
    return _host_problem(parts.netloc, parts.hostname)


#: One DNS label as RFC 1123 allows it in a host name (lower case: urlsplit folds it).
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
#: Longest host name in characters (RFC 1035: 255 octets on the wire).
_MAX_HOST_CHARS = 253


def _host_problem(netloc: str, host: str) -> str | None:
    """Why ``host`` (from ``netloc``) is not a host name or IP literal, or None."""
    if netloc.startswith("[") or netloc.rpartition("@")[2].startswith("["):
        if "%" in host:
            return "the URL's IPv6 host must not carry a zone (%25...)"
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "the URL's bracketed host is not an IPv6 address"
        return None
    labels = host.split(".")
    if labels[-1].isdigit():  # a numeric top label can only be an IPv4 address
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return "the URL's host is neither a host name nor a dotted-quad IPv4 address"
        return None
    if len(host) > _MAX_HOST_CHARS:
        return f"the URL's host is longer than {_MAX_HOST_CHARS} characters"
    for label in labels:
        if _LABEL.fullmatch(label) is None:
            return (
                "the URL's host is not a valid host name (labels of 1 to 63 letters, digits "
                "and inner hyphens; punycode for international names)"
            )
    return None


@final
@_SEAL.mints
class URLInput(_Prompt):
    """Ask a person to open an HTTPS URL of the application (consent to navigate).

    ``URLInput(message, url, *, state=None)``: ``message`` is a nonblank ``str``; ``url``
    is an absolute ``https`` URL with a host and without user information, written as
    an ASCII URI (no whitespace or control characters). ``state`` is private JSON the
    handler gets back on resume, as for ``FormInput`` (``None``: no state, and the
    resume's ``state`` is ``None``). Plain ``http`` is always rejected, loopback
    included. The library never opens, fetches or redirects to the URL; acceptance
    means the person consented to navigate, and the application must verify the
    outcome of its own external flow. ``url()`` exposes only the message and the URL.
    The host must be a DNS host name (letters, digits and inner hyphens, labels of at
    most 63 characters, 253 in all; write internationalized names in punycode), a
    dotted-quad IPv4 address or a bracketed IPv6 address without a zone; a port, if
    given, is 1 to 65535. The class is final, like ``FormInput``.
    """

    __slots__ = ("_message", "_state_bytes", "_url")

    mode: ClassVar[InputMode] = InputMode.URL

    _message: str
    _url: str
    _state_bytes: bytes

    def __init__(self, message: str, url: str, *, state: object = None) -> None:
        message = _check_message("URLInput", message)
        if not isinstance(url, str):
            raise TypeError(f"URLInput url must be a str, not {type(url).__name__}")
        problem = _url_problem(url)
        if problem is not None:
            raise ConfigurationError(f"URLInput url {short_prefix(url)}: {problem}")
        state_bytes = b""
        if state is not None:
            if not isinstance(state, _STATE_TYPES):
                raise TypeError(
                    f"URLInput state must be JSON text or a JSON value, not {type(state).__name__}"
                )
            state_bytes = canonical_bytes(_json_argument("URLInput", "state", state, profile=False))
        object.__setattr__(self, "_message", message)
        object.__setattr__(self, "_url", str.__str__(url))
        object.__setattr__(self, "_state_bytes", state_bytes)
        _SEAL.stamp(self)

    def _rebuild(self) -> tuple[Any, ...]:  # through the constructor's checks
        if not self._state_bytes:
            return (URLInput, (self._message, self._url))
        return (_url_input, (self._message, self._url, self._state_bytes))

    def __repr__(self) -> str:
        if not is_genuine_prompt(self):
            return "URLInput(<not constructed>)"
        return f"URLInput(message={short_prefix(self._message)}, url={short_prefix(self._url)})"

    @property
    def message(self) -> str:
        """The message shown to the person."""
        return self._message

    def url(self) -> URLPrompt:
        """The public prompt: exactly the message and the URL."""
        return URLPrompt(self._message, self._url)

    def prompt(self) -> URLPrompt:
        """Same as ``url()``: the public prompt."""
        return self.url()

    # -- internal, for the registry and the ledger --

    @property
    def state_bytes(self) -> bytes:
        """Canonical bytes of the private state (empty without state)."""
        return self._state_bytes


def _url_input(message: str, url: str, state: bytes) -> URLInput:
    """A pickled ``URLInput`` with state, rebuilt through its constructor."""
    return URLInput(message, url, state=state)


@dataclass(frozen=True, slots=True)
class StoredPrompt:
    """What the continuation ledger retains of a prompt: plain bytes and strings.

    A ``FormInput`` carries parsed and compiled structures several times the size of
    its JSON; the ledger keeps only this compact copy, so its byte accounting can
    stay conservative, and checks answers through ``FormChecks``.
    """

    mode: InputMode
    message: str
    schema_bytes: bytes = b""  # canonical form schema (forms only)
    state_bytes: bytes = b""  # canonical private state (empty: a URL hand-off without)
    url: str = ""  # URL hand-offs only

    @classmethod
    def of(cls, prompt: FormInput | URLInput) -> StoredPrompt:
        """The compact copy of ``prompt``."""
        if isinstance(prompt, FormInput):
            return cls(InputMode.FORM, prompt.message, prompt.form(), prompt.state_bytes)
        return cls(
            InputMode.URL, prompt.message, state_bytes=prompt.state_bytes, url=prompt.url().url
        )

    def public(self) -> FormPrompt | URLPrompt:
        """What the person is shown (never the state)."""
        if self.mode is InputMode.FORM:
            return FormPrompt(self.message, self.schema_bytes)
        return URLPrompt(self.message, self.url)

    def state_value(self) -> JSONValue:
        """A fresh copy of the private state (``None`` for a URL hand-off without)."""
        return parse(self.state_bytes) if self.state_bytes else None

    @property
    def size(self) -> int:
        """Bytes of the retained texts."""
        return (
            len(self.message.encode("utf-8"))
            + len(self.schema_bytes)
            + len(self.state_bytes)
            + len(self.url)
        )


#: Distinct forms whose compiled answer checks are kept; a miss recompiles the form.
FORM_CHECKS_CACHED = 256

#: Canonical schema bytes whose compiled checks are kept at most. A compiled form holds
#: about ten times its JSON in Python objects (a 15 KiB form: 157 KiB), so this bounds
#: the cache near 10 MiB however large the forms, outside the ledger's budget.
FORM_CHECKS_BYTES = 1024 * 1024


class FormChecks:
    """Answer checks for stored forms, compiled once per distinct schema (LRU, thread-safe).

    Bounded both in forms (``capacity``) and in their canonical schema bytes
    (``max_bytes``), so large forms cannot make the cache hold more than its share.
    """

    __slots__ = ("_bytes", "_capacity", "_forms", "_lock", "_max_bytes")

    def __init__(
        self, capacity: int = FORM_CHECKS_CACHED, max_bytes: int = FORM_CHECKS_BYTES
    ) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._forms: dict[bytes, FormInput] = {}
        self._lock = threading.Lock()

    @property
    def cached_bytes(self) -> int:
        """Canonical schema bytes of the forms currently cached."""
        return self._bytes

    def validate(self, schema_bytes: bytes, answers: JSONValue) -> str | None:
        """``FormInput.validate_answers`` for the form whose canonical schema is given."""
        with self._lock:
            form = self._forms.pop(schema_bytes, None)
            if form is not None:
                self._forms[schema_bytes] = form  # most recently used last
        if form is None:
            form = FormInput("stored form", schema_bytes, "null")
            with self._lock:
                if schema_bytes not in self._forms:
                    self._forms[schema_bytes] = form
                    self._bytes += len(schema_bytes)
                while self._forms and (
                    len(self._forms) > self._capacity or self._bytes > self._max_bytes
                ):
                    oldest = next(iter(self._forms))
                    del self._forms[oldest]
                    self._bytes -= len(oldest)
        return form.validate_answers(answers)
