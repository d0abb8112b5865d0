"""Strict JSON with exact numbers: parsing, the numeric work profile, canonical bytes, copies.

Every JSON entry point of opgate goes through this module: schemas, arguments, answers,
private state and structured results.

Operations
----------

``parse(data, profile=False)``
    JSON text (``str`` or UTF-8 ``bytes``) to an exact value, or ``JSONError``.
``from_python(value, profile=False)``, ``check_profile(value)``, ``is_plain(value)``
    A Python value to a detached, normalized JSON value; the profile alone; a test.
``canonical_bytes``, ``canonical_text``, ``parsed_canonical_bytes``, ``number_text``
    Canonical JSON (below); the last for values this module made, written by orjson.
``detach``, ``written_size``, ``normalized``, ``pointer``
    A deep copy; a size bound found before converting; one number; an RFC 6901 pointer.

Goals, with their worst cases
-----------------------------

* **Strict.** Duplicate member names (compared after decoding escapes), ``NaN`` and
  the infinities, lone surrogates (escaped such as ``"\\ud800"``, or raw surrogate
  characters in ``str`` input), invalid UTF-8 and trailing garbage fail; nesting deeper
  than ``MAX_DEPTH`` fails with ``JSONError``, never ``RecursionError``; brackets
  inside strings do not count.
* **Exact.** No float is ever produced (below, "Numbers").
* **Located.** A ``JSONError`` reports the *first* problem in document order, with the
  JSON pointer of the offending value (or a line and column for a syntax error), and
  quotes at most a short prefix of the input.
* **Linear.** Every operation is linear in its input, whatever the input. A valid
  document costs one C decode (a hook call per fraction and per constant) and, when it
  has many openers or colons, one visit of the decoded value per level. A refused one
  costs that decode and one Python walk over its value tokens up to the first problem:
  on a hostile 64 KiB document the walk is the largest cost: up to about 35 ms on the
  development machine, where the per-problem C-pass locators it replaced held about
  12-16 ms. That is the price of one simple error path, paid only by malformed
  requests (docs/security.md, "JSON: one parser", has the figures of
  ``benchmarks/bench_adversarial_json.py`` before and after).

Plan
----

1. *Text.* An exact ``str``: bytes decoded strictly; a ``str`` or ``bytes`` subclass
   is read through the base type, never through its own methods.
2. *Fast path* (``_decode``). The standard library's C decoder with hooks:
   ``parse_constant`` refuses ``NaN`` and the infinities, ``parse_float`` makes exact
   numbers and applies the profile, ``parse_int`` is ``int`` (a hook only after a run
   of more than ``PROFILE_LIMIT`` digits, found by one C pass, or when ``int`` refuses
   a token past the interpreter's digit limit). Where it stops, and why, is the
   document's syntax error, if any.
3. *Checks in C* (each only when it could find something): the decoded strings, when
   the text holds a surrogate, raw or escaped (``_holds_lone_surrogate``); the depth
   and the members the decoder kept, against the colons outside strings, when the
   text has more openers than ``MAX_DEPTH`` or several colons
   (``_too_deep_or_repeating``: the decoder keeps the last of repeated names).
4. *Slow path*, when step 2 or 3 finds anything (``_first_problem``): ``_locate``
   walks the value tokens up to where the decoder stopped, keeping the JSON pointer,
   and reports the first problem; if there is none there, the syntax error is first.

Numbers
-------

Numbers are exact and normalized (``normalized``). An integer token becomes an ``int``
(however long: Python's 4,300-digit ``int``/``str`` conversion limit is never hit). A
token with a fraction or an exponent becomes an ``int`` when it is integral with a
normalized exponent below ``INT_EXPONENT`` (``3.0``, ``3e0``, ``1.5e3``), else a
``decimal.Decimal`` without trailing zeros (``2.5``, ``1E+4000``): a short token never
expands in memory. Every zero (``-0``, ``-0.0``, ``0e999999999``) becomes ``0``
without expanding its exponent. A nonzero number whose exponent Python's ``decimal``
cannot hold (beyond about ±10**18) is refused.

The numeric work profile (``check_profile``, ``parse(..., profile=True)``,
``from_python(..., profile=True)``) is spec 003's module validation limit, applied
before any schema work. Zero always passes. A nonzero number written
``[-]W[.F][e±X]`` has three quantities, each checked against ``PROFILE_LIMIT`` (4,096):

1. the *written exponent* ``X`` (0 when absent): ``|X| ≤ 4096``;
2. the *decimal adjustment* ``A = X - len(F)``, the exponent once the decimal point is
   moved behind the last written digit (``12.50e3`` is ``1250 x 10^1``): ``|A| ≤ 4096``;
3. the normalized form ``c x 10^n`` (``c`` without leading or trailing zeros):
   ``digits(c) + |n| ≤ 4096``.

So ``1e4095``, ``1e-4095``, ``0.5e4096`` and a 4,096-digit integer pass; ``1e4096``,
``1e-4096`` and a 4,097-digit integer fail rule 3, ``0.001e4097`` fails rule 1 and
``1.`` followed by 4,097 zeros fails rule 2. A Python ``Decimal`` is its own written
form: its exponent is both ``X`` and ``A`` (``Decimal("1.50")`` is ``150 x 10^-2``); an
``int`` has ``X = A = 0``; a ``float`` is its shortest ``repr`` as a ``Decimal``.

Canonical bytes
---------------

UTF-8, object names sorted by UTF-16 code units, no insignificant whitespace, strings
escaped as RFC 8785 does (``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as
lowercase ``\\u00xx``, everything else literal). Numbers are written from their exact
value, so ``1``, ``1.0``, ``1e0`` and ``10e-1`` all give ``1`` and ``-0`` gives ``0``,
in the spelling of ECMAScript's ``Number::toString`` applied to the exact value: with
``n`` the scientific exponent, ``-7 < n < 21`` is written positionally (``100``,
``0.000001``, ``123.45``), anything else as ``d[.ddd]e±n`` (``1e+21``, ``-1.5e-10``).

Warnings
--------

* ``_locate`` is right only on text that is valid JSON up to where it stops: give it
  the decoder's stopping point (the whole text when a hook refused a value: the walk
  then meets that value first).
* The checks and the decoder must agree on where strings are: ``_STRING`` matches
  exactly what the decoder reads as a string, from an opening quote; and on what a
  number token is: ``_TOKEN`` spells the decoder's own number pattern.
* Every regex here is linear: possessive quantifiers, and a long run only where one
  starts (a look-behind).
* Decimals are made and changed only with an explicit context (``_EXACT``), so no
  result depends on the caller's decimal context.
"""

from __future__ import annotations

import functools
import gc
import json
import marshal
import math
import pickle
import re
from collections.abc import Callable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from itertools import chain, compress
from json.encoder import encode_basestring
from typing import Any, Final, TypeAlias, cast

import orjson

from ._failures import short_prefix
from ._text import utf8_size

__all__ = [
    "INT_EXPONENT",
    "MAX_DEPTH",
    "PROFILE_LIMIT",
    "WRITTEN_PER_CANONICAL",
    "JSONError",
    "JSONValue",
    "canonical_bytes",
    "canonical_text",
    "check_profile",
    "detach",
    "from_python",
    "is_plain",
    "normalized",
    "number_text",
    "parse",
    "parsed_canonical_bytes",
    "pointer",
    "written_size",
]

JSONValue: TypeAlias = (
    bool | int | Decimal | str | list["JSONValue"] | dict[str, "JSONValue"] | None
)

#: Deepest nesting of arrays and objects accepted anywhere; far above any real schema
#: or argument object, far below the interpreter's recursion limit.
MAX_DEPTH = 128

#: The numeric work profile's bound (spec 003, "Schema and numeric profile").
PROFILE_LIMIT = 4096

#: An integral number ``c x 10^n`` (``c`` without trailing zeros) written with a
#: fraction or an exponent becomes an ``int`` when ``0 <= n < INT_EXPONENT``, else it
#: stays a normalized ``Decimal``: a short token then never stands for a long ``int``.
INT_EXPONENT = 100

#: Longest JSON pointer an error message shows; longer ones (hostile member names) are cut.
_POINTER_CHARS = 64

#: A number token without an exponent and at most this long always passes the profile
#: (its digits and fraction length are each below half the limit).
_SHORT_PLAIN_TOKEN = PROFILE_LIMIT // 2

# Integers at or above this magnitude have more than 4,096 digits (profile rule 3).
_INT_PROFILE_BOUND = 10**PROFILE_LIMIT
# ECMAScript writes integers below 10**21 positionally.
_POSITIONAL_BOUND = 10**21

_ZERO = Decimal(0)
# Enough precision and exponent range that normalizing never rounds or overflows.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, clamp=0)

_OUT_OF_PROFILE = "number exceeds the numeric work profile"
_RULE_WRITTEN = f"{_OUT_OF_PROFILE} (|written exponent| ≤ {PROFILE_LIMIT})"
_RULE_ADJUSTED = f"{_OUT_OF_PROFILE} (|exponent - fraction digits| ≤ {PROFILE_LIMIT})"
_RULE_NORMALIZED = (
    f"{_OUT_OF_PROFILE} (normalized coefficient digits + |exponent| ≤ {PROFILE_LIMIT})"
)
_NESTING = f"nesting deeper than {MAX_DEPTH} levels"
_DUPLICATE = "duplicate object member name"
_NON_FINITE: Final = "NaN and infinities are not JSON numbers"

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_ZERO_TOKEN = re.compile(r"-?0(?:\.0+)?(?:[eE][-+]?[0-9]+)?")
# A string from its opening quote to its closing quote, or to the end of the text when
# it is unterminated; possessive, so a scan never backtracks.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?'
_STRINGS = re.compile(_STRING, re.DOTALL)
# Digits as "0", every other byte a space (``_has_long_digit_run``).
_DIGIT_BYTES = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * (PROFILE_LIMIT + 1)
_CLOSED_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
# Every value token and bracket of JSON text; what lies between them is whitespace,
# commas and colons in valid text, which the walk can do without.
_TOKEN = re.compile(
    _STRING + r"|[\[\]{}]|NaN|-?Infinity|true|false|null"
    r"|-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?",
    re.DOTALL,
)


class JSONError(ValueError):
    """Invalid JSON, a value that is not JSON, or JSON outside the numeric work profile.

    ``reason`` says what is wrong without quoting more than a short prefix of the
    input. ``pointer`` is the exact RFC 6901 pointer of the offending value (``""``
    for the root, ``None`` when only a line and column are known, which ``reason``
    then states). ``str(error)`` adds the pointer cut to a bounded length, so it is
    safe to show; ``pointer`` itself may be as long as the input's member names.
    """

    def __init__(self, reason: str, pointer: str | None = None) -> None:
        self.reason = reason
        self.pointer = pointer
        if pointer is None:
            super().__init__(reason)
        elif not pointer:
            super().__init__(f"{reason} (at the root)")
        elif len(pointer) <= _POINTER_CHARS and pointer.isprintable():
            super().__init__(f"{reason} (at {pointer})")
        else:
            super().__init__(f"{reason} (at {short_prefix(pointer, _POINTER_CHARS)})")

    def __reduce__(self) -> tuple[type[JSONError], tuple[str, str | None]]:
        return (type(self), (self.reason, self.pointer))


def pointer(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """Format path parts as an RFC 6901 JSON pointer (``""`` is the root)."""
    return "".join(
        "/" + (str(p) if isinstance(p, int) else p.replace("~", "~0").replace("/", "~1"))
        for p in parts
    )


# --- numbers -----------------------------------------------------------------------


def _coefficient_violation(significant: str, exponent: int) -> str | None:
    """Profile rules 2 and 3 for ``significant x 10^exponent`` (no leading zeros, nonzero)."""
    if abs(exponent) > PROFILE_LIMIT:
        return _RULE_ADJUSTED
    coefficient = significant.rstrip("0")
    normalized_exponent = exponent + len(significant) - len(coefficient)
    if len(coefficient) + abs(normalized_exponent) > PROFILE_LIMIT:
        return _RULE_NORMALIZED
    return None


def _token_violation(token: str) -> str | None:
    """The profile rule a JSON number token breaks, or ``None`` (see the module docstring)."""
    mantissa, _, exponent_text = token.replace("E", "e").partition("e")
    whole, _, fraction = mantissa.lstrip("-").partition(".")
    significant = (whole + fraction).lstrip("0")
    if not significant:
        return None  # zero
    written = 0
    if exponent_text:
        if len(exponent_text.lstrip("+-").lstrip("0")) > len(str(PROFILE_LIMIT)):
            return _RULE_WRITTEN  # far too long to convert
        written = int(exponent_text)
        if abs(written) > PROFILE_LIMIT:
            return _RULE_WRITTEN
    return _coefficient_violation(significant, written - len(fraction))


def _decimal_violation(value: Decimal) -> str | None:
    """The profile rule a finite ``Decimal`` breaks (its exponent is the written one)."""
    if not value:
        return None
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if abs(exponent) > PROFILE_LIMIT:
        return _RULE_WRITTEN
    if len(digits) > 2 * PROFILE_LIMIT + 1:
        # digits(c) + |n| >= digits(c) + n = len(digits) + exponent > PROFILE_LIMIT.
        return _RULE_NORMALIZED
    return _coefficient_violation("".join(map(str, digits)), exponent)


def _int_violation(value: int) -> str | None:
    if -_INT_PROFILE_BOUND < value < _INT_PROFILE_BOUND:
        return None
    return _RULE_NORMALIZED


def _decimal(token: str) -> Decimal | None:
    """The exact value of a number token (zero normalized), ``None`` if too big."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        return _ZERO if _ZERO_TOKEN.fullmatch(token) else None
    if not value:
        return _ZERO
    if value.is_nan():  # the exponent overflowed (a quiet NaN when the context does not trap)
        return _ZERO if _ZERO_TOKEN.fullmatch(token) else None
    return value


def normalized(value: Decimal) -> int | Decimal:
    """The normal form of a finite number: an ``int`` if it is integral with a normalized
    exponent below ``INT_EXPONENT`` (``3.0``, ``3e0`` and ``1.5e3`` give ints), else a
    ``Decimal`` without trailing zeros (``Decimal("2.50")`` gives ``Decimal("2.5")``,
    ``1e4000`` gives ``Decimal("1E+4000")``).

    Exact, whatever the decimal context. An integral value of more than
    ``PROFILE_LIMIT`` digits (possible only outside the numeric work profile) stays a
    ``Decimal`` too.
    """
    if not value:
        return 0
    value = value.normalize(_EXACT)  # drops trailing zeros, never rounds
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if 0 <= exponent < INT_EXPONENT and len(digits) + exponent <= PROFILE_LIMIT:
        return int(value)
    return value


def _number_problem(token: str, profile: bool) -> str | None:
    """Why ``parse`` refuses a number-like token (``NaN`` included), or ``None``."""
    if token[-1] in "Ny":  # NaN, Infinity, -Infinity
        return f"{token} is not a JSON number"
    plain = "e" not in token and "E" not in token
    if plain and len(token) <= _SHORT_PLAIN_TOKEN:
        return None
    if profile:
        return _token_violation(token)
    if plain:
        return None
    if _decimal(token) is None:
        return f"number {short_prefix(token)} is too large to represent"
    return None


class _Refused(Exception):
    """Raised by the decoder's hooks; ``parse`` then finds the first problem itself."""


def _fraction(token: str, profile: bool) -> int | Decimal:
    """The ``parse_float`` hook: a token with a fraction or an exponent, exact."""
    if "e" not in token and "E" not in token and len(token) <= _SHORT_PLAIN_TOKEN:
        if token[-1] != "0":
            return Decimal(token)  # not integral, and already without trailing zeros
    elif not _short_and_inside(token) and _number_problem(token, profile) is not None:
        raise _Refused
    value = _decimal(token)
    assert value is not None  # refused above otherwise
    return normalized(value)


def _short_and_inside(token: str) -> bool:
    """Whether a short token ``[-]W[.F]e±X`` is certainly inside the profile, by rules
    1 and 2 and a bound on rule 3: ``digits(c) + |n| <= len(WF) + |A|``."""
    if len(token) > 24:
        return False
    mantissa, _, written = token.replace("E", "e").partition("e")
    exponent = int(written)
    dot = mantissa.find(".")
    adjusted = exponent - (len(mantissa) - dot - 1 if dot >= 0 else 0)
    return abs(exponent) <= PROFILE_LIMIT and len(mantissa) + abs(adjusted) <= PROFILE_LIMIT


# Results are immutable, so a repeated token is answered by the cache (in C).
_exact_fraction = functools.lru_cache(maxsize=1024)(functools.partial(_fraction, profile=False))
_profiled_fraction = functools.lru_cache(maxsize=1024)(functools.partial(_fraction, profile=True))


def _long_int(token: str) -> int | Decimal:
    """The ``parse_int`` hook after a long digit run: ``int`` or, past the interpreter's
    digit limit, the exact value by ``Decimal`` (linear)."""
    try:
        return int(token)
    except ValueError:
        return normalized(Decimal(token))


def _profiled_long_int(token: str) -> int | Decimal:
    if len(token.lstrip("-")) > PROFILE_LIMIT:
        raise _Refused
    return _long_int(token)


def _refuse(token: str) -> None:
    raise _Refused


def _scanner(profile: bool, long_ints: bool) -> Callable[[str, int], tuple[Any, int]]:
    if long_ints:
        parse_int: Callable[[str], Any] = _profiled_long_int if profile else _long_int
    else:
        parse_int = int
    decoder = json.JSONDecoder(
        parse_float=_profiled_fraction if profile else _exact_fraction,
        parse_int=parse_int,
        parse_constant=_refuse,
    )
    return cast(Any, decoder).scan_once  # type: ignore[no-any-return]


_SCANNERS = {(p, long): _scanner(p, long) for p in (False, True) for long in (False, True)}


# --- parsing -----------------------------------------------------------------------


def parse(data: str | bytes | bytearray, *, profile: bool = False) -> JSONValue:
    """Parse JSON text strictly into exact values; see the module docstring.

    ``data`` is a ``str`` or UTF-8 ``bytes``/``bytearray``. With ``profile=True``
    every number must also pass the numeric work profile. Raises ``JSONError`` for any
    problem (the first in document order), and no other exception.
    """
    if isinstance(data, str):
        text = data if type(data) is str else str.__str__(data)
        raw_surrogates = not text.isascii() and _SURROGATE.search(text) is not None
    elif isinstance(data, bytes | bytearray):
        try:
            text = data.decode("utf-8") if type(data) is bytes else str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise JSONError(f"invalid UTF-8 at byte {exc.start}") from None
        raw_surrogates = False  # the strict codec refuses encoded surrogates
    else:
        raise JSONError(f"expected JSON text, got {type(data).__name__}")
    long_ints = profile and len(text) > PROFILE_LIMIT and _has_long_digit_run(text)
    value, stop, syntax = _decode(text, profile, long_ints)
    if (
        value is _FAILED
        or raw_surrogates
        or _holds_lone_surrogate(text)
        or _too_deep_or_repeating(value, text)
    ):
        del value  # the error's traceback keeps this frame
        raise _first_problem(text, profile, stop, syntax)
    return cast(JSONValue, value)


_FAILED: Final = object()


def _decode(text: str, profile: bool, long_ints: bool) -> tuple[Any, int, str | None]:
    """The fast path: ``(value, len(text), None)`` when the C decoder reads all of
    ``text``, else ``_FAILED``, where it stopped and the syntax error there (``None``
    when a hook refused a value, or the nesting passed the interpreter's limit: the
    text is valid JSON up to that point, and the walk finds it)."""
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    try:
        value, end = _SCANNERS[profile, long_ints](text, start)
    except (_Refused, RecursionError):
        return _FAILED, len(text), None
    except json.JSONDecodeError as exc:
        return _FAILED, exc.pos, exc.msg
    except StopIteration as exc:
        return _FAILED, exc.value, "Expecting value"
    except ValueError:  # an integer past the interpreter's int/str digit limit
        return _decode(text, profile, True)
    end = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        return _FAILED, end, "Extra data"
    return value, end, None


def _too_deep_or_repeating(value: Any, text: str) -> bool:
    """Whether ``value``, decoded from ``text``, nests deeper than ``MAX_DEPTH`` or
    repeated a member name (which the decoder then dropped).

    Every member written is one colon outside strings, and the decoder keeps one
    member per distinct name: the members kept and the colons tell. The containers
    are visited level by level with ``gc.get_referents`` (C calls per level, at most
    ``MAX_DEPTH + 1`` levels); a text with few openers and colons needs no visit.
    """
    colons = text.count(":")
    deep = text.count("[") + text.count("{") > MAX_DEPTH
    if not deep and (colons < 2 or (type(value) is dict and len(value) == colons)):
        return False  # members <= colons: a root object holding them all repeats nothing
    members = depth = 0
    level: list[Any] = [value]
    while True:
        kinds = list(map(type, level))
        containers = list(compress(level, map(_DECODED_CONTAINERS.__contains__, kinds)))
        if not containers:
            break
        depth += 1
        if depth > MAX_DEPTH:
            return True
        members += sum(map(len, compress(level, map(_DICT.__contains__, kinds))))
        level = gc.get_referents(*containers)
    return members != colons and members != _STRINGS.sub("", text).count(":")


def _has_long_digit_run(text: str) -> bool:
    """Whether ``text`` holds more than ``PROFILE_LIMIT`` ASCII digits in a row: digits
    become ``0`` and the rest spaces (bytes, in C), then one substring search."""
    return _LONG_RUN in text.encode("ascii", "replace").translate(_DIGIT_BYTES)


def _holds_lone_surrogate(text: str) -> bool:
    """Whether a string of ``text`` may decode to a lone surrogate (escapes decoded in C)."""
    if "\\u" not in text or _ESCAPED_SURROGATE.search(text) is None:
        return False
    try:
        decoded = json.loads("[" + ",".join(_STRINGS.findall(text)) + "]")
    except ValueError:
        return True  # a broken string: the slow path says what is wrong
    return _SURROGATE.search("".join(decoded)) is not None


def _first_problem(text: str, profile: bool, stop: int, syntax: str | None) -> JSONError:
    """The slow path: the first problem of ``text`` in document order, located. The
    decoder stopped reading at ``stop`` with the syntax error ``syntax``, if any."""
    located = _locate(text, profile=profile, stop=stop)
    if located is not None:
        return JSONError(*located)
    if syntax is not None:
        line = text.count("\n", 0, stop) + 1
        column = stop - text.rfind("\n", 0, stop)
        return JSONError(f"invalid JSON: {syntax} at line {line} column {column}")
    return JSONError("invalid JSON")  # pragma: no cover - the walk finds what a hook refused


def _locate(text: str, *, profile: bool, stop: int | None = None) -> tuple[str, str] | None:
    """The first problem of ``text[:stop]`` in document order, as ``(reason, pointer)``,
    or ``None``; syntax errors aside.

    One walk over the value tokens and brackets, keeping the JSON pointer of the
    current value: repeated member names, lone surrogates in strings and names,
    refused numbers and constants, and nesting deeper than ``MAX_DEPTH``. The text
    must be valid JSON up to ``stop`` (where the standard decoder stops reading it),
    so commas and colons need not be read: in an object a string is a name when a
    value (or the opening brace) came before it, and an array's index counts its
    values.
    """
    stop = len(text) if stop is None else stop
    surrogates = _ESCAPED_SURROGATE.search(text, 0, stop) is not None or (
        not text.isascii() and _SURROGATE.search(text, 0, stop) is not None
    )
    tokens = _TOKEN.findall(text, 0, stop)
    if tokens and tokens[-1][0] == '"' and not _CLOSED_STRING.fullmatch(tokens[-1]):
        tokens.pop()  # a string the decoder did not read to its end
    path: list[str | int] = []
    names: list[set[str] | None] = []  # per open container: names seen, None for arrays
    in_array = in_object = expect_name = False  # expect_name: in an object, before a name
    for token in tokens:
        first = token[0]
        if expect_name and first == '"':  # a member name
            name = _string(token)
            path[-1] = name
            if surrogates and _SURROGATE.search(name):
                return ("member name contains a lone surrogate", pointer(path))
            seen = names[-1]
            assert seen is not None
            if name in seen:
                return (f"{_DUPLICATE} {short_prefix(name)}", pointer(path))
            seen.add(name)
            expect_name = False
            continue
        if first == "]" or first == "}":
            names.pop()
            path.pop()
            in_array = bool(names) and names[-1] is None
            in_object = expect_name = bool(names) and not in_array
            continue
        if in_array:  # a value in an array: the next index
            path[-1] += 1  # type: ignore[operator]
        if first == "[" or first == "{":
            if len(names) == MAX_DEPTH:
                return (_NESTING, pointer(path))
            in_array = first == "["
            in_object = expect_name = not in_array
            names.append(None if in_array else set())
            path.append(-1 if in_array else "")
            continue
        if first == '"':
            if surrogates and _SURROGATE.search(_string(token)):
                return ("string contains a lone surrogate", pointer(path))
        elif first in "-0123456789NI" and (
            len(token) > _SHORT_PLAIN_TOKEN or "e" in token or "E" in token or token[-1] in "Ny"
        ):
            reason = _number_problem(token, profile)
            if reason is not None:
                return (reason, pointer(path))
        expect_name = in_object  # a member's value ended
    return None


def _string(token: str) -> str:
    """A string token's value (its escapes decoded in C)."""
    return cast(str, json.loads(token)) if "\\" in token else token[1:-1]


# --- Python values -------------------------------------------------------------------


def from_python(value: object, *, profile: bool = False) -> JSONValue:
    """Validate a Python value as JSON and return a detached, normalized copy.

    Accepts ``None``, ``bool``, ``int``, ``Decimal``, ``float``, ``str``, mappings with
    ``str`` keys, and lists or tuples (which become lists); subclasses become the
    plain types. A float is taken at its shortest ``repr`` (``0.01`` means
    ``Decimal("0.01")``); zeros become ``0``/``Decimal(0)``. NaN and infinities, lone
    surrogates, non-string or duplicate keys, other types and nesting deeper than
    ``MAX_DEPTH`` (including cycles) raise ``JSONError`` with the pointer. With
    ``profile=True`` numbers must pass the work profile.
    """
    if type(value) in _DECODED_CONTAINERS:  # dict or list: try the copies in C first
        container = cast(dict[Any, Any] | list[Any], value)
        copy = _copy_through_text(container, profile)
        if copy is None:
            copy = _plain_copy(container, profile)
        if copy is not None:
            return copy
    return _convert(value, [], profile)


_DECODED_CONTAINERS = frozenset((dict, list))
_DICT = frozenset((dict,))
_LIST = frozenset((list,))
_STR = frozenset((str,))
_INT = frozenset((int,))
_FLOAT = frozenset((float,))
# The types a plain value holds that need no conversion but floats'.
_PLAIN = frozenset((dict, list, str, int, float, bool, type(None)))


def _copy_through_text(value: dict[Any, Any] | list[Any], profile: bool) -> JSONValue | None:
    """``from_python`` of a value made of exact built-in JSON types (floats included),
    copied through JSON text in C passes; ``None`` for anything else, or any problem.

    ``marshal`` accepts exact built-in types only; orjson then refuses what marshal
    accepts but JSON has not (bytes, sets, complex numbers, ...), names that are not
    ``str``, lone surrogates and ints beyond 64 bits, and writes the text, floats at
    their shortest round-trip digits (those of ``repr``). It writes NaN and the
    infinities as ``null``: a text holding ``null`` is checked by the C encoder of
    the standard library, which refuses them. The text is decoded as ``parse`` would
    (numbers converted, nesting measured), less the checks whose problems it cannot
    have (repeated names, lone surrogates). An MCP client's arguments arrive as such
    a value.
    """
    try:
        marshal.dumps(value, 2)  # refuses every type but the exact built-in ones
        written = orjson.dumps(value)
        if written.find(b"null") >= 0:  # not ``in`` (``in`` first tries an int operand)
            json.dumps(value, allow_nan=False, check_circular=False)
    except (ValueError, TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None
    return _decode_distinct(written.decode("utf-8"), profile)


def _decode_distinct(text: str, profile: bool) -> JSONValue | None:
    """Decode JSON ``text`` written from a Python value (no repeated names, no lone
    surrogates); ``None`` if it nests too deep or breaks the profile."""
    value, _, _ = _decode(text, profile, False)
    if value is _FAILED or _too_deep_or_repeating(value, text):
        return None
    return cast(JSONValue, value)


def _plain_copy(value: dict[Any, Any] | list[Any], profile: bool) -> JSONValue | None:
    """A copy of ``value`` if it is made only of the types ``from_python`` returns
    unchanged (and floats) and breaks no rule, else ``None`` (the general conversion
    then decides and names the problem).

    In C passes: the containers are visited level by level, checking every item's
    exact type, member names, depth, integers against the profile, floats for NaN and
    infinities and, joined, strings for lone surrogates; then a marshal round trip
    copies the value (without floats) or the C encoder of the standard library writes
    it as text that is decoded again (with floats, to convert them). For the values
    ``_copy_through_text`` cannot take: ints beyond 64 bits.
    """
    strings: list[str] = []
    integers: list[int] = []
    floats: list[float] = []
    level: list[Any] = [value]
    depth = 0
    while True:
        kinds = list(map(type, level))
        present = set(kinds)
        if not _PLAIN.issuperset(present):
            return None
        if len(present) == 1:  # one type: no selection needed
            one: list[Any] = level
            dicts, lists = (
                (one, []) if dict in present else ([], one) if list in present else ([], [])
            )
            if str in present:
                strings += one
            elif int in present:
                integers += one
            elif float in present:
                floats += one
        else:
            if str in present:
                strings += compress(level, map(_STR.__contains__, kinds))
            if int in present:
                integers += compress(level, map(_INT.__contains__, kinds))
            if float in present:
                floats += compress(level, map(_FLOAT.__contains__, kinds))
            dicts = list(compress(level, map(_DICT.__contains__, kinds))) if dict in present else []
            lists = list(compress(level, map(_LIST.__contains__, kinds))) if list in present else []
        if not dicts and not lists:
            break
        depth += 1
        if depth > MAX_DEPTH:  # also every cycle
            return None
        if dicts:
            names = list(chain.from_iterable(dicts))
            if not _STR.issuperset(map(type, names)):
                return None
            strings += names
            level = [*chain.from_iterable(map(dict.values, dicts)), *chain.from_iterable(lists)]
        else:
            level = list(chain.from_iterable(lists))
    if (
        profile
        and integers
        and not -_INT_PROFILE_BOUND < min(integers) <= max(integers) < _INT_PROFILE_BOUND
    ):
        return None
    joined = "".join(strings)
    if (floats and not all(map(math.isfinite, floats))) or (
        not joined.isascii() and _SURROGATE.search(joined)
    ):
        return None  # the general conversion names the first problem
    if floats:
        text = _standard_text(value)
        return None if text is None else _decode_distinct(text, profile)
    blob = marshal.dumps(value, 2)  # exact plain types, at most MAX_DEPTH deep
    return cast(JSONValue, marshal.loads(blob))


_COMPACT: Final = (",", ":")


def _standard_text(value: dict[Any, Any] | list[Any]) -> str | None:
    """A plain value as compact JSON text by the standard library's C encoder (floats at
    their ``repr``, NaN and the infinities spelled ``NaN``, ``Infinity``, names in their
    order), or ``None`` for an int past the interpreter's int/str digit limit."""
    try:
        return json.dumps(value, ensure_ascii=False, check_circular=False, separators=_COMPACT)
    except ValueError:
        return None


_EXACT_FLOAT_INTS = 2.0**53


@functools.lru_cache(maxsize=1024)
def _float_value(value: float) -> int | Decimal:
    """The normal form of a finite float taken at its shortest ``repr``.

    Always inside the numeric work profile (at most 17 digits, exponent within ±324),
    and already normal: an integral float is the ``int`` its ``repr`` spells, and the
    shortest ``repr`` of any other float has no trailing zeros. A few C calls instead of the general
    ``Decimal`` checks: an MCP client's arguments arrive as Python floats.
    """
    if -_EXACT_FLOAT_INTS < value < _EXACT_FLOAT_INTS and value.is_integer():
        return int(value)  # below 2**53 the float is the integer its ``repr`` spells
    if value.is_integer():
        return normalized(Decimal(float.__repr__(value)))  # 1e308 is 10**308
    return Decimal(float.__repr__(value))


def _number(value: object, path: list[str | int], profile: bool) -> int | Decimal | None:
    """Convert an int, float or Decimal (``None`` if ``value`` is none of these)."""
    if isinstance(value, int):
        number = int(value)
        if profile and (reason := _int_violation(number)) is not None:
            raise JSONError(reason, pointer(path))
        return number
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JSONError(_NON_FINITE, pointer(path))
        return _float_value(float(value))  # always inside the profile
    if type(value) is Decimal:
        _, digits, exponent = value.as_tuple()
        if (
            type(exponent) is int
            and exponent < 0
            and digits[-1]
            and len(digits) - exponent <= PROFILE_LIMIT
        ):  # not integral, already normal (no trailing zero) and inside the profile
            return value
    if isinstance(value, Decimal):
        exact = Decimal(value)  # a plain Decimal; exact, whatever the context
    else:
        return None
    if not exact.is_finite():
        raise JSONError(_NON_FINITE, pointer(path))
    if profile and (reason := _decimal_violation(exact)) is not None:
        raise JSONError(reason, pointer(path))
    return normalized(exact)


def _convert(value: object, path: list[str | int], profile: bool) -> JSONValue:
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        if not value.isascii() and _SURROGATE.search(value):
            raise JSONError("string contains a lone surrogate", pointer(path))
        return value
    if kind is int:
        assert isinstance(value, int)
        if profile and not -_INT_PROFILE_BOUND < value < _INT_PROFILE_BOUND:
            raise JSONError(_RULE_NORMALIZED, pointer(path))
        return value
    if value is None or kind is bool:
        return value  # type: ignore[return-value]
    if kind is dict:
        assert isinstance(value, dict)
        return _convert_dict(value, path, profile)
    if kind is list:
        assert isinstance(value, list)
        return _convert_list(value, path, profile)
    if isinstance(value, str):
        return _convert(str.__str__(value), path, profile)
    number = _number(value, path, profile)
    if number is not None:
        return number
    if len(path) >= MAX_DEPTH:
        raise JSONError(_NESTING, pointer(path))
    if isinstance(value, Mapping):
        return _convert_mapping(value, path, profile)
    if isinstance(value, list | tuple):
        return _convert_list(value, path, profile)
    raise JSONError(f"{type(value).__name__} is not a JSON value", pointer(path))


def _convert_dict(value: dict[Any, object], path: list[str | int], profile: bool) -> JSONValue:
    """A plain dict: exact-``str`` members and scalar items converted in line (the common case)."""
    if len(path) >= MAX_DEPTH:
        raise JSONError(_NESTING, pointer(path))
    result: dict[str, JSONValue] = {}
    item: Any  # no ``cast`` in the loop: it is a Python call per member
    for key, item in value.items():
        if type(key) is not str:  # subclasses and other types: the general rules, from the start
            return _convert_mapping(value, path, profile)
        # Exact str keys of one dict are distinct: no duplicate check needed.
        kind = type(item)
        if kind is str:
            if (not key.isascii() or not item.isascii()) and (
                _SURROGATE.search(key) or _SURROGATE.search(item)
            ):
                break  # the general rules name the problem
            result[key] = item
        elif kind is bool or item is None:
            if not key.isascii() and _SURROGATE.search(key):
                break
            result[key] = item
        else:
            if not key.isascii() and _SURROGATE.search(key):
                break
            if kind is float and math.isfinite(item):
                result[key] = _float_value(item)
                continue
            path.append(key)
            result[key] = _convert(item, path, profile)
            path.pop()
    else:
        return result
    return _convert_mapping(value, path, profile)


def _convert_list(
    value: list[object] | tuple[object, ...], path: list[str | int], profile: bool
) -> JSONValue:
    if len(path) >= MAX_DEPTH:
        raise JSONError(_NESTING, pointer(path))
    items: list[JSONValue] = []
    item: Any
    for index, item in enumerate(value):
        kind = type(item)
        if kind is str and item.isascii():
            items.append(item)
            continue
        if kind is float and math.isfinite(item):
            items.append(_float_value(item))
            continue
        if kind is int and (not profile or -_INT_PROFILE_BOUND < item < _INT_PROFILE_BOUND):
            items.append(item)
            continue
        path.append(index)
        items.append(_convert(item, path, profile))
        path.pop()
    return items


def _convert_mapping(
    value: Mapping[Any, object], path: list[str | int], profile: bool
) -> JSONValue:
    """Any mapping, member by member, with every rule (and the pointer of the first broken one)."""
    if len(path) >= MAX_DEPTH:
        raise JSONError(_NESTING, pointer(path))
    result: dict[str, JSONValue] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise JSONError(
                f"object member names must be strings, not {type(key).__name__}",
                pointer(path),
            )
        name = str.__str__(key)
        path.append(name)
        if not name.isascii() and _SURROGATE.search(name):
            raise JSONError("member name contains a lone surrogate", pointer(path))
        if name in result:
            raise JSONError(f"duplicate object member name {short_prefix(name)}", pointer(path))
        result[name] = _convert(item, path, profile)
        path.pop()
    return result


def is_plain(value: object, depth: int = 0) -> bool:
    """Whether ``from_python(value, profile=True)`` would return ``value`` unchanged.

    True when ``value`` (at nesting ``depth`` of a larger document) is made only of
    exact ``dict`` (``str`` member names), ``list``, ``str``, ``int`` within the work
    profile, ``bool`` and ``None``, with no lone surrogate and no nesting beyond
    ``MAX_DEPTH``: then the conversion would copy it type for type, value for value.
    ``False`` means only "not certainly": ``from_python`` decides.
    """
    if type(value) is str:
        return value.isascii() or not _SURROGATE.search(value)
    if type(value) is int:
        return bool(-_INT_PROFILE_BOUND < value < _INT_PROFILE_BOUND)
    if type(value) is bool or value is None:
        return True
    if depth >= MAX_DEPTH:
        return False
    if type(value) is list:
        return all(is_plain(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(
            type(key) is str and is_plain(key) and is_plain(item, depth + 1)
            for key, item in value.items()
        )
    return False


def check_profile(value: object) -> None:
    """Raise ``JSONError`` (with the pointer) if a number in ``value`` is outside the profile.

    ``value`` may be anything ``from_python`` accepts (a float counts at its shortest
    ``repr``, a ``Decimal`` with its own exponent as the written one). Types that are
    not JSON, non-string member names, NaN, infinities and nesting deeper than
    ``MAX_DEPTH`` raise ``JSONError`` too; strings are not inspected.
    """
    _check_profile(value, [])


def _check_profile(value: object, path: list[str | int]) -> None:
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, Mapping):
        if len(path) >= MAX_DEPTH:
            raise JSONError(_NESTING, pointer(path))
        for key, item in value.items():
            if not isinstance(key, str):
                raise JSONError(
                    f"object member names must be strings, not {type(key).__name__}",
                    pointer(path),
                )
            path.append(key)
            _check_profile(item, path)
            path.pop()
    elif isinstance(value, list | tuple):
        if len(path) >= MAX_DEPTH:
            raise JSONError(_NESTING, pointer(path))
        for index, item in enumerate(value):
            path.append(index)
            _check_profile(item, path)
            path.pop()
    elif _number(value, path, True) is None:
        raise JSONError(f"{type(value).__name__} is not a JSON value", pointer(path))


def detach(value: JSONValue) -> JSONValue:
    """A deep copy of a value this module produced (containers copied, scalars equal).

    A container is copied by a marshal round trip (``_copy_with_decimals`` if it holds
    a ``Decimal``), which runs in C: a Python walk per item alone passed the adversarial
    benchmark's bound (issue 9, item 1).
    """
    if isinstance(value, dict | list):
        try:  # marshal knows every JSON type but Decimal and keeps no memo
            return marshal.loads(marshal.dumps(value))  # type: ignore[no-any-return]
        except ValueError:  # a Decimal somewhere
            return _copy_with_decimals(value)
    return value


def _copy_with_decimals(value: dict[str, Any] | list[Any]) -> JSONValue:
    """``detach`` of a container holding a ``Decimal`` (which marshal refuses).

    A pickle round trip writes each ``Decimal`` as text and parses it back. Decimals
    are immutable, so they may be shared: when they outnumber the containers, the
    containers are rebuilt level by level from the deepest, each with one C pass over
    its items that swaps the containers for their copies; otherwise the pickle round
    trip is cheaper (the "distinct fractions" row of the adversarial benchmark).
    """
    levels: list[list[Any]] = [[value]]
    decimals = 0
    while True:
        inner = gc.get_referents(*levels[-1])  # lists' items, dicts' names and values
        kinds = list(map(type, inner))
        decimals += kinds.count(Decimal)
        containers = list(compress(inner, map(_DECODED_CONTAINERS.__contains__, kinds)))
        if not containers:
            break
        levels.append(containers)
    if 2 * decimals < 3 * sum(map(len, levels)):
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))  # type: ignore[no-any-return]
    copies: dict[int, Any] = {}
    copied = copies.get
    for level in reversed(levels):
        for node in level:
            if type(node) is list:
                copies[id(node)] = list(map(copied, map(id, node), node))
            else:
                members = node.values()
                items = map(copied, map(id, members), members)
                copies[id(node)] = dict(zip(node, items, strict=True))
    return copies[id(value)]  # type: ignore[no-any-return]


# --- canonical bytes ----------------------------------------------------------------


def number_text(value: int | Decimal) -> str:
    """The canonical spelling of an exact number (see the module docstring).

    Raises ``JSONError`` for a ``bool``, a non-finite ``Decimal`` or a non-number.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(int(value))
    if isinstance(value, Decimal) and value.is_finite():
        return _decimal_text(value)
    raise JSONError(f"{short_prefix(repr(value))} is not an exact JSON number")


def _decimal_text(value: Decimal) -> str:
    """ECMAScript spelling of a finite Decimal."""
    if not value:
        return "0"
    scientific = value.adjusted()  # trailing zeros do not move the leading digit
    if -7 < scientific < 21:
        text = str(value)  # positional unless the exponent is positive
        if "E" in text or "e" in text:  # the context's ``capitals`` picks the letter
            return format(value, "f")  # exact digits and zeros, no point
        return text.rstrip("0").rstrip(".") if "." in text else text
    # "e" without a precision writes every coefficient digit, in C (joining the digit
    # tuple of ``as_tuple`` in Python made long numbers slow to measure and write).
    written = format(value, "e")
    mantissa = written[: written.index("e")]
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{'+' if scientific > 0 else '-'}{abs(scientific)}"


def _int_text(value: int) -> str:
    if -_POSITIONAL_BOUND < value < _POSITIONAL_BOUND:
        return int.__repr__(value)
    return _decimal_text(Decimal(value))


def _finite_decimal_text(value: Decimal) -> str:
    if not value.is_finite():
        raise _NotPlainJSON
    return _decimal_text(value)


def _null_text(value: None) -> str:
    return "null"


# The canonical text of each exact scalar type, looked up by ``type(value)``.
_SCALAR_TEXT: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    int: _int_text,
    Decimal: _finite_decimal_text,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): _null_text,
}


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


class _NotPlainJSON(Exception):
    """``_write`` met something other than the exact JSON types it expects."""


def _write(value: object, out: list[str], depth: int) -> None:
    """Append the canonical text of a container (or scalar) to ``out``."""
    kind = type(value)
    if kind is dict:
        assert isinstance(value, dict)
        if depth >= MAX_DEPTH:
            raise _NotPlainJSON
        if not value:
            out.append("{}")
            return
        keys = sorted(value) if "".join(value).isascii() else sorted(value, key=_utf16_order)
        separator = "{"
        for key in keys:
            item = value[key]
            scalar = _SCALAR_TEXT.get(type(item))
            if scalar is not None:
                out.append(f"{separator}{encode_basestring(key)}:{scalar(item)}")
            else:
                out.append(f"{separator}{encode_basestring(key)}:")
                _write(item, out, depth + 1)
            separator = ","
        out.append("}")
    elif kind is list:
        assert isinstance(value, list)
        if depth >= MAX_DEPTH:
            raise _NotPlainJSON
        if not value:
            out.append("[]")
            return
        separator = "["
        for item in value:
            scalar = _SCALAR_TEXT.get(type(item))
            if scalar is not None:
                out.append(separator + scalar(item))
            else:
                out.append(separator)
                _write(item, out, depth + 1)
            separator = ","
        out.append("]")
    else:
        scalar = _SCALAR_TEXT.get(kind)
        if scalar is None:
            raise _NotPlainJSON
        out.append(scalar(value))


def canonical_text(value: JSONValue) -> str:
    """The canonical JSON text of ``value`` (``canonical_bytes`` as a ``str``).

    ``value`` is normally one this module produced; anything else ``from_python``
    accepts is converted as ``from_python`` would, and anything it refuses raises
    ``JSONError`` with the pointer.
    """
    out: list[str] = []
    try:
        _write(value, out, 0)
    except (_NotPlainJSON, TypeError):  # subclasses, floats, tuples, bad keys, depth
        out = []
        _write(from_python(value), out, 0)
    text = "".join(out)
    if not text.isascii() and _SURROGATE.search(text):
        from_python(value)  # raises, naming the string with the lone surrogate
    return text


def canonical_bytes(value: JSONValue) -> bytes:
    """The canonical UTF-8 encoding of ``value``; see ``canonical_text`` and the module."""
    return canonical_text(value).encode("utf-8")


# orjson (C/Rust), for values ``parse``/``from_python`` returned (exact types, checked):
# with OPT_SORT_KEYS it writes ``_write``'s text — the same escapes, compact, members
# in code point order, ints in full (``_write`` switches to the exponent form at 22
# digits; a 64-bit int has at most 20), each Decimal as the ``Fragment`` of its
# canonical text — except for what goes back to ``_write``: an int beyond 64 bits
# (orjson raises TypeError) and text where names might sort differently in UTF-16
# (characters beyond the BMP and from U+E000 up: only those two ranges' orders differ).
_SORTED: Final = orjson.OPT_SORT_KEYS
_ASTRAL_UTF8: Final = re.compile(b"[\xf0-\xf4]")  # the lead byte of a 4-byte sequence
_HIGH_BMP_UTF8: Final = re.compile(b"[\xee\xef]")  # the lead byte of U+E000 to U+FFFF
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")
_HIGH_BMP: Final = re.compile("[\ue000-\uffff]")


def _fragment(value: object) -> orjson.Fragment:
    """orjson's ``default``: a Decimal's canonical text (anything else is refused)."""
    if type(value) is Decimal:
        return orjson.Fragment(_finite_decimal_text(value))
    raise TypeError


def parsed_canonical_bytes(value: JSONValue) -> bytes:
    """``canonical_bytes`` of a value ``parse`` or ``from_python`` returned, faster.

    Only for such values (exact ``dict``/``list``/``str``/``int``/``bool``/``None``/
    ``Decimal``, string member names, no lone surrogates, bounded nesting): most of
    them are written by orjson, the rest (an int beyond 64 bits; names that may sort
    differently in UTF-16) by ``canonical_bytes``; the bytes are the same either way.
    """
    try:
        written = orjson.dumps(value, option=_SORTED, default=_fragment)
    except TypeError:  # a long int (or a value this function is not for)
        return canonical_bytes(value)
    if (
        not written.isascii()
        and _ASTRAL_UTF8.search(written)
        and _HIGH_BMP_UTF8.search(written)
        and _names_sort_differently(value)
    ):
        return canonical_bytes(value)
    # orjson's bytes keep the buffer they were written in (1 KiB at least, doubled as
    # it grew), which a catalog's many schemas would hold; an exact copy is a memcpy.
    return bytes(memoryview(written))


#: The canonical bytes of a value are never fewer than its JSON text as an encoder
#: writes it (``written_size``) divided by this, but for ints of 22 digits or more: a
#: float loses at most its ``.0`` or its sign (``-0.0``, five bytes with a comma, is
#: ``0``, two), strings and names are escaped alike, and smaller ints are written in full.
WRITTEN_PER_CANONICAL = 3


def written_size(value: object) -> int | None:
    """UTF-8 bytes of ``value``'s compact JSON text as written by orjson (or, for ints
    beyond 64 bits, by the standard encoder), NaN and infinities included, Decimals at
    their canonical text; ``None`` when neither writes it (other types, names that are
    not strings, deep nesting).

    A bound found in C passes before ``from_python`` converts a mapping from outside
    (see ``WRITTEN_PER_CANONICAL``): converting and measuring a value far over its
    budget costs time per large number (an MCP client's 1e300 floats).
    """
    try:
        return len(orjson.dumps(value, default=_fragment))
    except TypeError:  # orjson.JSONEncodeError: a long int, a lone surrogate, ...
        pass
    try:
        text = json.dumps(
            value,
            ensure_ascii=False,
            check_circular=False,
            separators=_COMPACT,
            default=_quoted_decimal,
        )
    except (TypeError, ValueError, RecursionError):
        return None
    return utf8_size(text)


def _quoted_decimal(value: object) -> str:
    """The standard encoder's ``default`` in ``written_size``: a finite Decimal as its
    canonical text (quoted: two bytes more than its canonical bytes, at least three)."""
    if type(value) is Decimal and value.is_finite():
        return _decimal_text(value)
    raise TypeError


def _names_sort_differently(value: JSONValue) -> bool:
    """Whether the member names of ``value`` hold characters beyond the BMP and from
    U+E000 up, whose code point and UTF-16 orders differ (found in C passes over its
    containers, level by level)."""
    astral = high = False
    level: list[Any] = [value]
    while level:
        kinds = list(map(type, level))
        dicts = list(compress(level, map(_DICT.__contains__, kinds)))
        if dicts:
            names = "".join(chain.from_iterable(dicts))
            if not names.isascii():
                astral = astral or _ASTRAL.search(names) is not None
                high = high or _HIGH_BMP.search(names) is not None
                if astral and high:
                    return True
        containers = list(compress(level, map(_DECODED_CONTAINERS.__contains__, kinds)))
        level = gc.get_referents(*containers) if containers else []
    return False
