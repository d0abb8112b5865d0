"""Strict JSON with exact numbers: parsing, numeric work profile, canonical bytes, copies.

Every JSON entry point of opgate goes through this module: schemas, arguments,
answers, private state and structured results.

Parsing (``parse``) is strict:

* duplicate member names in one object fail;
* ``NaN``, ``Infinity``, ``-Infinity``, lone surrogates (escaped or raw), invalid
  UTF-8 and trailing garbage fail;
* nesting deeper than ``MAX_DEPTH`` fails with ``JSONError``, never ``RecursionError``.

Numbers are exact. An integer token becomes an ``int`` (however long: Python's
4,300-digit ``int``/``str`` conversion limit is never hit); any token with a
fraction or an exponent becomes a ``decimal.Decimal``, except that a zero such as
``0e999999999`` or ``-0.0`` becomes ``Decimal(0)`` directly, without expanding its
exponent. A nonzero number whose exponent Python's ``decimal`` cannot represent
(beyond ±999,999,999,999,999,999) is rejected. No float is ever produced.

The numeric work profile (``check_profile`` or ``parse(..., profile=True)``) is the
spec's module validation limit, applied before any schema work: for nonzero numbers
the absolute written exponent and the absolute decimal adjustment are each at most
4,096, and normalized coefficient digits plus the absolute normalized exponent total
at most 4,096. Zero always passes.

Canonical bytes (``canonical_bytes``): UTF-8, object keys sorted by UTF-16 code
units, no insignificant whitespace, strings escaped as RFC 8785 does (``\\"``,
``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as ``\\u00xx``, everything else
literal). Numbers are written from their exact normalized decimal value
(coefficient without trailing zeros, exponent), so ``1``, ``1.0``, ``1e0`` and
``10e-1`` all give ``1`` and ``-0`` gives ``0``. The spelling is that of
ECMAScript's ``Number::toString`` applied to the exact decimal value: with ``n`` the
scientific exponent (``d.ddd * 10^n``), numbers with ``-7 < n < 21`` are written
positionally (``100``, ``0.001``, ``123.45``), all others as ``d[.ddd]e±n``
(``1e+21``, ``1.5e-7``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from json.encoder import encode_basestring
from typing import Any, TypeAlias

from ._failures import short_prefix

__all__ = [
    "MAX_DEPTH",
    "PROFILE_LIMIT",
    "JSONError",
    "JSONValue",
    "canonical_bytes",
    "check_profile",
    "detach",
    "from_python",
    "number_text",
    "parse",
    "pointer",
]

JSONValue: TypeAlias = (
    bool | int | Decimal | str | list["JSONValue"] | dict[str, "JSONValue"] | None
)

#: Deepest nesting of arrays and objects accepted anywhere; far above any real schema
#: or argument object, far below the interpreter's recursion limit.
MAX_DEPTH = 128

#: The numeric work profile's bound (spec 003, "Schema and numeric profile").
PROFILE_LIMIT = 4096

# Integers up to this many digits convert with plain ``int()``; longer ones go through
# Decimal, which has no conversion limit (CPython's default limit is 4,300 digits).
_INT_FAST_DIGITS = 4000

_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JSONError(ValueError):
    """Invalid JSON, or JSON outside the numeric work profile.

    ``pointer`` is the RFC 6901 pointer of the offending value (``""`` for the root,
    ``None`` when only a line and column are known); ``reason`` says what
    is wrong without quoting more than a short prefix of the input.
    """

    def __init__(self, reason: str, pointer: str | None = None) -> None:
        self.reason = reason
        self.pointer = pointer
        if pointer is None:
            super().__init__(reason)
        else:
            super().__init__(f"{reason} (at {pointer or 'the root'})")


def pointer(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """Format path parts as an RFC 6901 JSON pointer (``""`` is the root)."""
    return "".join(
        "/" + (str(p) if isinstance(p, int) else p.replace("~", "~0").replace("/", "~1"))
        for p in parts
    )


# --- numbers -----------------------------------------------------------------------


class _OutOfProfile:
    """Placeholder the parser leaves for a number outside the profile; the walk reports it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _normalized_violation(significant: str, exponent: int) -> str | None:
    """Check adjustment and normalized size of ``significant * 10^exponent`` (nonzero)."""
    adjusted = exponent + len(significant) - 1
    if abs(adjusted) > PROFILE_LIMIT:
        return "number magnitude exceeds the numeric work profile (|adjusted exponent| ≤ 4096)"
    coefficient = significant.rstrip("0")
    normalized_exponent = exponent + (len(significant) - len(coefficient))
    if len(coefficient) + abs(normalized_exponent) > PROFILE_LIMIT:
        return (
            "number exceeds the numeric work profile "
            "(coefficient digits + |exponent| ≤ 4096 after normalization)"
        )
    return None


def _parse_int_token(token: str) -> int:
    if len(token) <= _INT_FAST_DIGITS:
        return int(token)
    return int(Decimal(token))


def _parse_int_profiled(token: str) -> int | _OutOfProfile:
    digits = token.lstrip("-")
    if digits != "0":
        reason = _normalized_violation(digits, 0)
        if reason is not None:
            return _OutOfProfile(reason)
    return _parse_int_token(token)


def _split_number(token: str) -> tuple[str, str, str]:
    """Split a JSON number token into (integer digits, fraction digits, exponent text)."""
    mantissa, _, exponent = token.replace("E", "e").partition("e")
    mantissa = mantissa.lstrip("-")
    whole, _, fraction = mantissa.partition(".")
    return whole, fraction, exponent


def _parse_float_token(token: str) -> Decimal:
    whole, fraction, _exponent = _split_number(token)
    if not (whole + fraction).strip("0"):
        return Decimal(0)
    try:
        value = Decimal(token)
    except InvalidOperation:
        raise JSONError(f"number {short_prefix(token)} is too large to represent") from None
    if not value.is_finite():  # pragma: no cover - JSON grammar cannot produce these
        raise JSONError("non-finite number")
    return value


def _parse_float_profiled(token: str) -> Decimal | _OutOfProfile:
    whole, fraction, exponent = _split_number(token)
    digits = whole + fraction
    if not digits.strip("0"):
        return Decimal(0)
    exponent_digits = exponent.lstrip("+-").lstrip("0")
    if len(exponent_digits) > 6:  # |written exponent| ≥ 1,000,000: out of profile
        return _OutOfProfile("number exponent exceeds the numeric work profile (|exponent| ≤ 4096)")
    written = int(exponent) if exponent else 0
    if abs(written) > PROFILE_LIMIT:
        return _OutOfProfile("number exponent exceeds the numeric work profile (|exponent| ≤ 4096)")
    reason = _normalized_violation(digits.lstrip("0"), written - len(fraction))
    if reason is not None:
        return _OutOfProfile(reason)
    return Decimal(token)


def _reject_constant(name: str) -> None:
    raise JSONError(f"{name} is not a JSON number")


def _decimal_violation(value: Decimal) -> str | None:
    """The work profile for a Decimal given as a Python value (its exponent is the written one)."""
    if value.is_zero():
        return None
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if abs(exponent) > PROFILE_LIMIT:
        return "number exponent exceeds the numeric work profile (|exponent| ≤ 4096)"
    return _normalized_violation("".join(map(str, digits)).lstrip("0"), exponent)


def _int_violation(value: int) -> str | None:
    if -(10**18) < value < 10**18:
        return None
    if value.bit_length() > 14000:  # more than 4,214 digits: certainly out of profile
        return _normalized_violation("1" * (PROFILE_LIMIT + 1), 0)
    return _normalized_violation(str(abs(value)), 0)


# --- parsing -----------------------------------------------------------------------


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONError(f"duplicate object member name {short_prefix(key)}")
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_reject_duplicates,
    parse_float=_parse_float_token,
    parse_int=_parse_int_token,
    parse_constant=_reject_constant,
)
_PROFILED_DECODER = json.JSONDecoder(
    object_pairs_hook=_reject_duplicates,
    parse_float=_parse_float_profiled,
    parse_int=_parse_int_profiled,
    parse_constant=_reject_constant,
)


def _check_nesting(text: str, max_depth: int) -> None:
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    for match in _BRACKET.finditer(_STRING_TOKEN.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONError(f"nesting deeper than {max_depth} levels")
        else:
            depth -= 1


def parse(data: str | bytes | bytearray, *, profile: bool = False) -> JSONValue:
    """Parse JSON text strictly into exact values; see the module docstring.

    With ``profile=True`` every number must also pass the numeric work profile.
    Raises ``JSONError`` for any problem.
    """
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONError(f"invalid UTF-8 at byte {exc.start}") from None
    elif isinstance(data, str):
        text = data
    else:
        raise JSONError(f"expected JSON text, got {type(data).__name__}")
    _check_nesting(text, MAX_DEPTH)
    decoder = _PROFILED_DECODER if profile else _DECODER
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise JSONError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:  # pragma: no cover - _check_nesting bounds depth first
        raise JSONError(f"nesting deeper than {MAX_DEPTH} levels") from None
    if profile or ("\\u" in text or "\\U" in text) or _SURROGATE.search(text):
        _verify_parsed(value, [])
    return value  # type: ignore[no-any-return]


def _verify_parsed(value: Any, path: list[str | int]) -> None:
    """Report placeholders and lone surrogates left by the decoder, with their pointer."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise JSONError("string contains a lone surrogate", pointer(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            path.append(key)
            if _SURROGATE.search(key):
                raise JSONError("member name contains a lone surrogate", pointer(path))
            _verify_parsed(item, path)
            path.pop()
    elif isinstance(value, list):
        for index, item in enumerate(value):
            path.append(index)
            _verify_parsed(item, path)
            path.pop()
    elif isinstance(value, _OutOfProfile):
        raise JSONError(value.reason, pointer(path))


# --- Python values -------------------------------------------------------------------


def from_python(value: object, *, profile: bool = False) -> JSONValue:
    """Validate a Python value as JSON and return a detached, normalized copy.

    Accepts ``None``, ``bool``, ``int``, ``Decimal``, ``float``, ``str``, mappings with
    ``str`` keys, and lists or tuples (which become lists). A float is taken at its
    shortest ``repr`` (``0.01`` means ``Decimal("0.01")``); NaN and infinities, lone
    surrogates, non-string keys, other types and nesting deeper than ``MAX_DEPTH``
    raise ``JSONError``. With ``profile=True`` numbers must pass the work profile.
    """
    return _convert(value, [], profile)


def _convert(value: object, path: list[str | int], profile: bool) -> JSONValue:
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise JSONError("string contains a lone surrogate", pointer(path))
        return str.__str__(value)
    if isinstance(value, int):
        number = int(value)
        if profile and (reason := _int_violation(number)) is not None:
            raise JSONError(reason, pointer(path))
        return number
    if isinstance(value, float | Decimal):
        number_value = Decimal(repr(value)) if isinstance(value, float) else value
        if not number_value.is_finite():
            raise JSONError("NaN and infinities are not JSON numbers", pointer(path))
        if profile and (reason := _decimal_violation(number_value)) is not None:
            raise JSONError(reason, pointer(path))
        return Decimal(0) if number_value.is_zero() else number_value
    if len(path) >= MAX_DEPTH:
        raise JSONError(f"nesting deeper than {MAX_DEPTH} levels", pointer(path))
    if isinstance(value, Mapping):
        result: dict[str, JSONValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise JSONError(
                    f"object member names must be strings, not {type(key).__name__}",
                    pointer(path),
                )
            path.append(key)
            if _SURROGATE.search(key):
                raise JSONError("member name contains a lone surrogate", pointer(path))
            result[str.__str__(key)] = _convert(item, path, profile)
            path.pop()
        return result
    if isinstance(value, list | tuple):
        items: list[JSONValue] = []
        for index, item in enumerate(value):
            path.append(index)
            items.append(_convert(item, path, profile))
            path.pop()
        return items
    raise JSONError(f"{type(value).__name__} is not a JSON value", pointer(path))


def check_profile(value: JSONValue) -> None:
    """Raise ``JSONError`` (with the pointer) if a number in ``value`` is outside the profile."""
    _check_profile(value, [])


def _check_profile(value: JSONValue, path: list[str | int]) -> None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if (reason := _int_violation(value)) is not None:
            raise JSONError(reason, pointer(path))
    elif isinstance(value, Decimal):
        if (reason := _decimal_violation(value)) is not None:
            raise JSONError(reason, pointer(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            path.append(key)
            _check_profile(item, path)
            path.pop()
    else:
        for index, item in enumerate(value):
            path.append(index)
            _check_profile(item, path)
            path.pop()


def detach(value: JSONValue) -> JSONValue:
    """A deep copy of a value this module produced (containers copied, scalars shared)."""
    if isinstance(value, dict):
        return {key: detach(item) for key, item in value.items()}
    if isinstance(value, list):
        return [detach(item) for item in value]
    return value


# --- canonical bytes ----------------------------------------------------------------


def number_text(value: int | Decimal) -> str:
    """The canonical spelling of an exact number (see the module docstring)."""
    if isinstance(value, int):
        if -(10**21) < value < 10**21:
            return str(value)
        value = Decimal(value)
    if value.is_zero():
        return "0"
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    scientific = exponent + len(digits) - 1
    prefix = "-" if sign else ""
    if -7 < scientific < 21:
        if exponent >= 0:
            return prefix + digits + "0" * exponent
        point = len(digits) + exponent
        if point > 0:
            return prefix + digits[:point] + "." + digits[point:]
        return prefix + "0." + "0" * -point + digits
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{prefix}{mantissa}e{'+' if scientific > 0 else '-'}{abs(scientific)}"


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _write(value: JSONValue, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(encode_basestring(value))
    elif isinstance(value, int | Decimal):
        out.append(number_text(value))
    elif isinstance(value, dict):
        keys = list(value)
        if all(key.isascii() for key in keys):
            keys.sort()
        else:
            keys.sort(key=_utf16_order)
        out.append("{")
        for index, key in enumerate(keys):
            if index:
                out.append(",")
            out.append(encode_basestring(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")


def canonical_bytes(value: JSONValue) -> bytes:
    """The canonical UTF-8 encoding of a value this module produced."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def canonical_text(value: JSONValue) -> str:
    """``canonical_bytes`` as a ``str``."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)
