"""Strict JSON with exact numbers: parsing, numeric work profile, canonical bytes, copies.

Every JSON entry point of opgate goes through this module: schemas, arguments,
answers, private state and structured results.

Parsing (``parse``) is strict:

* duplicate member names in one object fail (names compare after decoding escapes);
* ``NaN``, ``Infinity``, ``-Infinity``, lone surrogates (escaped such as ``"\\ud800"``,
  or raw surrogate characters in ``str`` input, in strings and member names),
  invalid UTF-8 and trailing garbage fail;
* nesting deeper than ``MAX_DEPTH`` arrays/objects fails with ``JSONError``, never
  ``RecursionError``; brackets inside strings do not count.

Numbers are exact and normalized (``normalized``). An integer token becomes an
``int`` (however long: Python's 4,300-digit ``int``/``str`` conversion limit is never
hit); a token with a fraction or an exponent becomes an ``int`` when its value is
integral with a normalized exponent below ``INT_EXPONENT`` (``3.0``, ``3e0``,
``1.5e3``), else a ``decimal.Decimal`` without trailing zeros (``2.5``, ``1E+4000``:
a short token never expands); every zero (``-0``, ``-0.0``, ``0e999999999``) becomes
``0`` directly, without expanding its exponent. A nonzero number whose exponent
Python's ``decimal`` cannot hold (beyond about ±10**18) is rejected. No float is ever
produced.

The numeric work profile (``check_profile``, ``parse(..., profile=True)`` and
``from_python(..., profile=True)``) is spec 003's module validation limit, applied
before any schema work. Zero always passes. A nonzero number written
``[-]W[.F][e±X]`` has three quantities, each checked against ``PROFILE_LIMIT``
(4,096):

1. the *written exponent* ``X`` (0 when absent): ``|X| ≤ 4096``;
2. the *decimal adjustment* ``A = X - len(F)``, the exponent once the decimal point
   is moved behind the last written digit (``12.50e3`` is ``1250 x 10^1``):
   ``|A| ≤ 4096`` (read this way because the other reading, the scientific
   exponent, is already bounded by rule 3);
3. the normalized form ``c x 10^n`` (``c`` without leading or trailing zeros):
   ``digits(c) + |n| ≤ 4096``.

So ``1e4095``, ``1e-4095``, ``0.5e4096`` and a 4,096-digit integer pass; ``1e4096``,
``1e-4096`` and a 4,097-digit integer fail rule 3, ``0.001e4097`` fails rule 1 and
``1.`` followed by 4,097 zeros fails rule 2. A Python ``Decimal`` is its own written
form: its exponent is both ``X`` and ``A`` (``Decimal("1.50")`` is ``150 x 10^-2``); an
``int`` has ``X = A = 0``; a ``float`` is its shortest ``repr`` as a ``Decimal``. Text
and Python values therefore agree whenever the text has no fraction part.

Canonical bytes (``canonical_bytes``): UTF-8, object keys sorted by UTF-16 code
units, no insignificant whitespace, strings escaped as RFC 8785 does (``\\"``,
``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as lowercase ``\\u00xx``, everything
else literal). Numbers are written from their exact normalized decimal value, so
``1``, ``1.0``, ``1e0`` and ``10e-1`` all give ``1`` and ``-0`` gives ``0``. The
spelling is that of ECMAScript's ``Number::toString`` applied to the exact decimal
value: with ``n`` the scientific exponent (``d.ddd x 10^n``), numbers with
``-7 < n < 21`` are written positionally (``100``, ``0.000001``, ``123.45``,
``100000000000000000000``), all others as ``d[.ddd]e±n`` (``1e+21``, ``1e-7``,
``-1.5e-10``).

Every ``JSONError`` says what is wrong and where (a JSON pointer, or a line and
column for syntax errors) and quotes at most a short prefix of the input.
"""

from __future__ import annotations

import functools
import gc
import json
import marshal
import math
import operator
import pickle
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from itertools import accumulate, chain, compress
from json.encoder import encode_basestring
from typing import Any, Final, TypeAlias, cast

import orjson

from ._failures import short_prefix

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

#: An integral number ``c x 10^n`` (``c`` without trailing zeros) becomes an ``int``
#: when ``0 <= n < INT_EXPONENT``, else it stays a normalized ``Decimal``: a short token
#: then never stands for a long ``int``.
INT_EXPONENT = 100

#: Longest JSON pointer an error message shows; longer ones (hostile member names) are cut.
_POINTER_CHARS = 64

#: A number token without an exponent and at most this long always passes the profile
#: (its digits and fraction length are each below half the limit), so it skips the checks.
_SHORT_PLAIN_TOKEN = PROFILE_LIMIT // 2

# Integers at or above this magnitude have more than 4,096 digits (profile rule 3).
_INT_PROFILE_BOUND = 10**PROFILE_LIMIT
# ECMAScript writes integers below 10**21 positionally.
_POSITIONAL_BOUND = 10**21

_ZERO = Decimal(0)
# Enough precision and exponent range that normalizing never rounds or overflows.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, clamp=0)
_NAN = Decimal("NaN")

_OUT_OF_PROFILE = "number exceeds the numeric work profile"
_RULE_WRITTEN = f"{_OUT_OF_PROFILE} (|written exponent| ≤ {PROFILE_LIMIT})"
_RULE_ADJUSTED = f"{_OUT_OF_PROFILE} (|exponent - fraction digits| ≤ {PROFILE_LIMIT})"
_RULE_NORMALIZED = (
    f"{_OUT_OF_PROFILE} (normalized coefficient digits + |exponent| ≤ {PROFILE_LIMIT})"
)
_NESTING = f"nesting deeper than {MAX_DEPTH} levels"
_DUPLICATE = "duplicate object member name"
_DECODED_CONTAINERS = frozenset((dict, list))
_DICT = frozenset((dict,))

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_ZERO_TOKEN = re.compile(r"-?0(?:\.0+)?(?:[eE][-+]?[0-9]+)?")
# A string from its opening quote to its closing quote, or to the end of the text when
# it is unterminated. Once started at a quote it always matches (possessively, so it
# never backtracks), and a scan never fails at a quote to restart one character
# later: every scan below is linear in the text.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?'
_STRINGS = re.compile(_STRING, re.DOTALL)
_CLOSED_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
# Splits text into gaps and strings, keeping the strings (one pass for both, see below).
_STRING_PARTS = re.compile(f"({_STRING})", re.DOTALL)
# Strings and brackets, for the nesting walk.
# Splits text into gaps and tokens (strings and numbers), keeping the tokens.
_TOKEN_SPLIT = re.compile(f"({_STRING}|(?<![0-9.eE+\\-])-?[0-9][0-9.eE+\\-]*)", re.DOTALL)
# What may follow a number token and extend it: the decoder reads the longest number.
_MORE_DIGITS = re.compile(r"[0-9]")
_MORE_FRACTION = re.compile(r"[0-9]|\.[0-9]|[eE][-+]?[0-9]")
_MORE_EXPONENT = re.compile(r"[0-9]|[eE][-+]?[0-9]")
# Splits text (with strings replaced) at brackets, for finding the n-th bracket.
_BRACKET_SPLIT = re.compile(r"[\[\]{}]")
# Every token that can carry a problem: strings, punctuation, numbers, non-numbers.
_TOKEN = re.compile(
    _STRING + r"|[\[\]{}:,]|NaN|-?Infinity|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?",
    re.DOTALL,
)
# An integer token of more than ``PROFILE_LIMIT`` digits outside strings (in text with
# strings removed). The lookbehind lets a match start only where a digit run starts, and the
# run is taken possessively, so the search is linear.
_LONG_INTEGER = re.compile(rf"(?<![0-9.eE+-])-?[1-9][0-9]{{{PROFILE_LIMIT},}}+(?![.eE])")
# Turns every ASCII digit into "0" and every other byte into a space (after non-ASCII
# characters became "?"), so that a run of more than ``PROFILE_LIMIT`` digits anywhere is
# a substring search (in C, linear; a regex tries every position and costs about 2 ms at
# 64 KiB). Bytes, because ``str.translate`` is fast only on ASCII text: one character past
# U+007F made it about 30 times slower.
_DIGIT_BYTES = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * (PROFILE_LIMIT + 1)
# Deletes every ASCII character but brackets (``str.translate`` runs it in C).
_KEEP_BRACKETS = str.maketrans(dict.fromkeys(set(map(chr, range(128))) - set("[]{}")))
# Depth change per bracket.
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}.__getitem__
# Maximal runs of openers or of closers in a string of brackets: they alternate.
_BRACKET_RUNS = re.compile(r"[\[{]+|[\]}]+")


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


class _Rejected(Exception):
    """Raised inside the decoder's hooks; ``parse`` locates the problem and re-raises."""

    def __init__(self, reason: str, token: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        #: The number token refused by a ``parse_float`` hook (``_locate_number`` finds it).
        self.token = token


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
    """The exact value of a fraction/exponent token (zero normalized), ``None`` if too big."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        value = _NAN
    if not value:
        return _ZERO
    if value.is_nan():  # the exponent overflowed (a quiet NaN when the context does not trap)
        return _ZERO if _ZERO_TOKEN.fullmatch(token) else None
    return value


def normalized(value: Decimal) -> int | Decimal:
    """The normal form of a finite number: ``int`` if integral with a normalized
    exponent below ``INT_EXPONENT`` (``3.0``, ``3e0`` and ``1.5e3`` give ints), else a
    ``Decimal`` without trailing zeros (``Decimal("2.50")`` gives ``Decimal("2.5")``,
    ``1e4000`` gives ``Decimal("1E+4000")``).

    Exact, whatever the decimal context. A short token never expands: ``1e4000`` is
    7 characters and stays 7 characters' worth of ``Decimal``, not a 4,001-digit ``int``.
    An integral value of more than ``PROFILE_LIMIT`` digits (possible only outside the
    numeric work profile) stays a ``Decimal`` too: converting it is then linear.
    """
    if not value:
        return 0
    value = value.normalize(_EXACT)  # drops trailing zeros, never rounds
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if 0 <= exponent < INT_EXPONENT and len(digits) + exponent <= PROFILE_LIMIT:
        return int(value)
    return value


def _exact_float_slow(token: str) -> int | Decimal:
    value = _decimal(token)
    if value is None:
        raise _Rejected(f"number {short_prefix(token)} is too large to represent", token)
    return normalized(value)


def _profiled_float_slow(token: str) -> int | Decimal:
    if len(token) > _SHORT_PLAIN_TOKEN or "e" in token or "E" in token:
        reason = _token_violation(token)
        if reason is not None:
            raise _Rejected(reason, token)
    value = _decimal(token)
    assert value is not None  # nonzero numbers in the profile have small exponents
    return normalized(value)


# Longest mantissa (and exponent text) the fast path of ``_float_hook`` reads itself.
_FAST_MANTISSA = 64
_FAST_EXPONENT = 6


def _float_hook(slow: Callable[[str], int | Decimal]) -> Callable[[str], int | Decimal]:
    """The ``parse_float`` hook: a fast path for the common shapes, else ``slow``.

    The C scanner calls it once per token with a fraction or an exponent, so it reads
    the token's text with a few C string calls instead of ``Decimal.as_tuple``. A
    token ``[-]W[.F][e±X]`` with a short mantissa and exponent whose decimal adjustment
    ``A = X - len(F)`` satisfies ``len(WF) + |A| ≤ 4096`` (and ``|X| ≤ 4096``) is
    inside the profile (``digits(c) + |n| ≤ len(WF) + |A|``); it is integral when
    ``A ≥ 0`` (its value is then ``int(WF) x 10^A``), and when ``A < 0`` and its last
    digit is not 0 it is not integral and ``Decimal(token)`` is already normal. A
    short fraction without exponent loses its trailing zeros (and its point, if then
    integral).
    Anything else (trailing zeros, long tokens, big exponents, rejections) goes to
    ``slow``, which is exact.
    """

    def hook(token: str) -> int | Decimal:
        if "e" in token or "E" in token:
            mantissa, _, written_text = token.replace("E", "e").partition("e")
            if len(written_text) > _FAST_EXPONENT or len(mantissa) > _FAST_MANTISSA:
                return slow(token)
            written = int(written_text)
            dot = mantissa.find(".")
            adjusted = written - len(mantissa) + dot + 1 if dot >= 0 else written
        elif len(token) <= _FAST_MANTISSA:
            if token[-1] != "0":
                return Decimal(token)  # a fraction without trailing zeros
            token = token.rstrip("0")
            return int(token[:-1]) if token[-1] == "." else Decimal(token)
        else:
            return slow(token)
        if (
            -PROFILE_LIMIT <= written <= PROFILE_LIMIT
            and len(mantissa) + abs(adjusted) <= PROFILE_LIMIT
        ):
            if 0 <= adjusted < INT_EXPONENT - len(mantissa):
                return int(mantissa.replace(".", "")) * int(10**adjusted)
            if adjusted < 0 and mantissa[-1] != "0":
                return Decimal(token)
        elif not mantissa.strip("-.0"):
            return 0  # zero, whatever its exponent
        return slow(token)

    return hook


# Results are immutable (int, Decimal), so a repeated token (``0.5``, ``1.0``, or an
# attacker's ``1e4095`` written ten thousand times) is answered by the cache, in C. The
# bound keeps it under about 2 MB (a cached value has at most 4,096 digits).
_exact_float = functools.lru_cache(maxsize=1024)(_float_hook(_exact_float_slow))
_profiled_float = functools.lru_cache(maxsize=1024)(_float_hook(_profiled_float_slow))


def _big_int(token: str) -> int | Decimal:
    try:
        return int(token)
    except ValueError:  # beyond the interpreter's int/str digit limit: linear as a Decimal
        return normalized(Decimal(token))


def _profiled_int(token: str) -> int | Decimal:
    if len(token) > PROFILE_LIMIT and len(token.lstrip("-")) > PROFILE_LIMIT:
        raise _Rejected(_RULE_NORMALIZED, token)
    return _big_int(token)


def _reject_constant(name: str) -> None:
    raise _Rejected(f"{name} is not a JSON number", name)


def _token_problem(token: str, *, profile: bool) -> str | None:
    """Why the parser rejects a number-like token, or ``None`` (used to locate a rejection)."""
    if token[-1] in "Ny":  # NaN, Infinity, -Infinity
        return f"{token} is not a JSON number"
    if "." not in token and "e" not in token and "E" not in token:
        if profile and len(token.lstrip("-")) > PROFILE_LIMIT:
            return _RULE_NORMALIZED
        return None
    if profile:
        return _token_violation(token)
    if _decimal(token) is None:
        return f"number {short_prefix(token)} is too large to represent"
    return None


# --- parsing -----------------------------------------------------------------------


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Rejected(_DUPLICATE)
    return result


def _decoder(
    *, profile: bool, native_int: bool, strict_objects: bool = False
) -> Callable[[str, int], tuple[Any, int]]:
    if native_int:
        parse_int: Callable[[str], int | Decimal] = int  # the C scanner's own fast path
    else:
        parse_int = _profiled_int if profile else _big_int
    decoder = json.JSONDecoder(
        object_pairs_hook=_reject_duplicates if strict_objects else None,
        parse_float=_profiled_float if profile else _exact_float,
        parse_int=parse_int,
        parse_constant=_reject_constant,
    )
    scan: Callable[[str, int], tuple[Any, int]] = cast(Any, decoder).scan_once
    return scan


# The decoders build objects in C (no hook per object); duplicate member names are
# checked afterwards (``_duplicate``). Native ``int`` raises ValueError past the
# interpreter's digit limit; ``parse`` then retries with the hooked variant. In the
# profile, native ints are used unless the text holds an integer token of more than
# 4,096 digits outside strings (one regex pass).
_SCAN_EXACT = _decoder(profile=False, native_int=True)
_SCAN_EXACT_BIG = _decoder(profile=False, native_int=False)
_SCAN_PROFILED = _decoder(profile=True, native_int=True)
_SCAN_PROFILED_BIG = _decoder(profile=True, native_int=False)
# The same with the duplicate check as an object hook, for syntax errors only: a
# duplicate in an object closed before the error is the first problem.
_STRICT = {
    scan: _decoder(profile=profile, native_int=native, strict_objects=True)
    for scan, profile, native in (
        (_SCAN_EXACT, False, True),
        (_SCAN_EXACT_BIG, False, False),
        (_SCAN_PROFILED, True, True),
        (_SCAN_PROFILED_BIG, True, False),
    )
}


# Every scalar kept as text (no hook, no conversion): for finding pointers and names.
_SCAN_TEXT: Callable[[str, int], tuple[Any, int]] = cast(
    Any, json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=str)
).scan_once


class _Members(tuple):  # type: ignore[type-arg]
    """An object decoded as its ``(name, value)`` pairs, repeated names kept.

    A tuple subclass, so that objects and the plain tuples of their pairs can be told
    apart by type; built in C by the decoder.
    """

    __slots__ = ()


# The same with objects as ``_Members``, so that repeated names are all kept.
_SCAN_POINTER: Callable[[str, int], tuple[Any, int]] = cast(
    Any,
    json.JSONDecoder(
        object_pairs_hook=_Members, parse_float=str, parse_int=str, parse_constant=str
    ),
).scan_once


def _profiled_scan(text: str) -> Callable[[str, int], tuple[Any, int]]:
    """The profiled decoder for ``text``: native ints unless an integer breaks the profile."""
    if (
        len(text) > PROFILE_LIMIT
        and _has_long_digit_run(text)
        and _LONG_INTEGER.search(_STRINGS.sub("", text))
    ):
        return _SCAN_PROFILED_BIG  # hooked: the rejection is then located exactly
    return _SCAN_PROFILED


def _without_strings(text: str) -> tuple[str, list[str]]:
    """``text`` with every string replaced by ``""``, and its strings in order, from one
    regex pass (``_STRINGS.sub`` and ``_STRINGS.findall`` are two)."""
    parts = _STRING_PARTS.split(text)
    return '""'.join(parts[::2]), parts[1::2]


def _syntax_error(message: str, text: str, position: int) -> JSONError:
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    return JSONError(f"invalid JSON: {message} at line {line} column {column}")


def _has_long_digit_run(text: str) -> bool:
    """Whether ``text`` holds more than ``PROFILE_LIMIT`` ASCII digits in a row (C passes)."""
    return _LONG_RUN in text.encode("ascii", "replace").translate(_DIGIT_BYTES)


def _brackets(stripped: str) -> str:
    """The brackets of a text whose strings were removed, in order (C passes).

    Characters past U+007F (none in JSON outside strings, but a BOM or garbage may be
    there) are dropped first: ``str.translate`` is fast only on ASCII text.
    """
    if not stripped.isascii():
        stripped = stripped.encode("ascii", "ignore").decode("ascii")
    return stripped.translate(_KEEP_BRACKETS)


def _check_nesting(text: str, profile: bool) -> None:
    """Raise ``JSONError`` if arrays/objects outside strings nest deeper than ``MAX_DEPTH``.

    Linear in ``text``, and every pass runs in C: one regex pass replaces every string
    by ``""`` (an unterminated one runs to the end of the text, so its brackets never
    count), ``str.translate`` keeps the brackets and the running depth is summed. Only
    when the bound is passed is the first problem in document order reported: an
    earlier syntax error or rejected value if decoding the text before the offending
    bracket finds one, else the nesting itself with the pointer of the offending
    container (read from a decode of that prefix, closed just after it).
    """
    stripped = _STRINGS.sub('""', text)
    brackets = _brackets(stripped)
    if _deepest(brackets) <= MAX_DEPTH:
        return
    index, closers = _first_too_deep(brackets)  # the offending bracket, counting brackets only
    # Its position in ``stripped``: the lengths of the pieces between brackets, plus the
    # brackets themselves; then in ``text``: each ``""`` before it stands for a string.
    pieces = _BRACKET_SPLIT.split(stripped, index + 1)
    at = index + sum(map(len, pieces[: index + 1]))
    strings = stripped.count('"', 0, at) // 2
    position = at + sum(map(len, _STRINGS.findall(text)[:strings])) - 2 * strings
    fast = _nesting_problem(text[:position], closers, profile)
    if fast is not None:
        raise fast
    earlier = _prefix_problem(text[:position], profile)
    if earlier is not None:
        raise earlier
    located = _nesting_pointer(text[:position], closers)
    if located is None:  # pragma: no cover - unusual spellings: walk the tokens instead
        located = _locate(text[: position + 1], profile=False, max_depth=MAX_DEPTH)
    if located is not None:
        raise JSONError(*located)
    raise _syntax_error(_NESTING, text, position)  # pragma: no cover - the walk finds it


def _first_too_deep(brackets: str) -> tuple[int, str]:
    """The index of the first bracket of ``brackets`` that opens level ``MAX_DEPTH + 1``
    (there is one), and the closers of the ``MAX_DEPTH`` containers open around it
    (``_closers``). In C passes: over its runs of brackets, or over every bracket if
    its runs are short (see ``_short_runs``)."""
    if _short_runs(brackets):
        depths = list(accumulate(map(_DEPTH_STEP, brackets)))
        index = depths.index(MAX_DEPTH + 1)
        closers = _closers_at(brackets, depths[:index])
        return index, closers if closers is not None else _closers(brackets[:index])
    runs, lengths = _run_lengths(brackets)
    depths = list(accumulate(lengths))  # after each run
    k = bisect_left(list(accumulate(depths, max)), MAX_DEPTH + 1)  # an opener run
    before = depths[k - 1] if k else 0
    index = sum(map(len, runs[:k])) + MAX_DEPTH - before
    return index, _closers(brackets[:index])


def _short_runs(brackets: str) -> bool:
    """Whether the runs of openers and closers of ``brackets`` are short (four or
    fewer brackets on average): a step per bracket then costs less than one per run
    (a regex match each)."""
    turns = (
        brackets.count("][") + brackets.count("]{") + brackets.count("}[") + brackets.count("}{")
    )
    return turns * 8 > len(brackets)


def _run_lengths(brackets: str) -> tuple[list[str], list[int]]:
    """The runs of openers and of closers of a string of brackets, and their lengths
    with the closers' negated (the depth change of each run), in C passes."""
    runs = _BRACKET_RUNS.findall(brackets)
    lengths = list(map(len, runs))
    if runs:
        closers = 0 if runs[0][0] in "]}" else 1  # runs alternate: index of the first closers
        lengths[closers::2] = map(operator.neg, lengths[closers::2])
    return runs, lengths


def _closers(brackets: str) -> str:
    """The closers of the containers left open by ``brackets``, innermost first.

    In C passes. Over runs of brackets: read from the end, the balance of the brackets
    after a point reaches ``level`` for the first time at the opener of the
    ``level``-th container still open, counting from the innermost. Over every
    bracket when runs are short (``_closers_at``), unless the running depth leaves
    ``bytes``' range (a text before a syntax error may close more than it opened).
    """
    if _short_runs(brackets):
        closers = _closers_at(brackets, accumulate(map(_DEPTH_STEP, brackets)))
        if closers is not None:
            return closers
    runs, lengths = _run_lengths(brackets)
    if not runs:
        return ""
    balance = list(accumulate(reversed(lengths)))  # after each run, from the end
    reached = list(accumulate(balance, max))
    openers = []
    for level in range(1, balance[-1] + 1):
        k = bisect_left(reached, level)  # an opener run: the balance rose there
        run = runs[len(runs) - 1 - k]
        openers.append(run[len(run) - (level - (balance[k - 1] if k else 0))])
    return "".join(openers).translate(_CLOSER_OF)


def _closers_at(brackets: str, running: Iterable[int]) -> str | None:
    """``_closers`` from the running depth after each bracket: the opener of the
    container open at ``level`` is the bracket after the last point at ``level - 1``.
    ``None`` if the depth leaves ``bytes``' range (a text before a syntax error may
    close more than it opened): read over runs then."""
    try:
        depths = bytes(running)
    except ValueError:
        return None
    if not depths:
        return ""
    return "".join(
        brackets[depths.rfind(level - 1) + 1] for level in range(depths[-1], 0, -1)
    ).translate(_CLOSER_OF)


_CLOSER_OF: Final = str.maketrans("[{", "]}")


def _deepest(brackets: str) -> int:
    """The deepest running depth of a string of brackets (0 for none), in C passes.

    The depth peaks at the end of a run of openers, so the runs' lengths, with the
    closers' negated, are summed instead of every bracket: 64 KiB of blocks nested 126
    deep is about 500 runs rather than 65,000 brackets.
    """
    if (
        brackets.count("][") + brackets.count("]{") + brackets.count("}[") + brackets.count("}{")
    ) * 8 > len(brackets):  # many short runs: one step per bracket costs less
        return max(accumulate(map(_DEPTH_STEP, brackets), initial=0))
    lengths = list(map(len, _BRACKET_RUNS.findall(brackets)))
    if not lengths:
        return 0
    closers = 0 if brackets[0] in "]}" else 1  # index of the first run of closers
    lengths[closers::2] = map(operator.neg, lengths[closers::2])
    return max(accumulate(lengths, initial=0))


def _nesting_problem(prefix: str, closers: str, profile: bool) -> JSONError | None:
    """The first problem of a document whose bracket at the end of ``prefix`` nests one
    level too deep, or ``None`` when this fast path cannot tell (``_check_nesting``
    then decodes the prefix on its own).

    ``prefix`` holds ``MAX_DEPTH`` open containers, whose ``closers`` are given. It is
    closed with a placeholder value and those closers and decoded once, in C: a number
    it refuses, a repeated name, or else the nesting at the pointer of the
    placeholder's container.
    """
    document = _closed(prefix, closers)
    if document is None:  # pragma: no cover - see _closed
        return None
    scan = _profiled_scan(document) if profile else _SCAN_EXACT
    start = _WHITESPACE.match(document).end()  # type: ignore[union-attr]
    try:
        value, end = scan(document, start)
    except _Rejected as exc:
        located = _locate_number(prefix, exc.token, exc.reason) if exc.token else None
        return JSONError(*located) if located is not None else None
    except (ValueError, StopIteration, RecursionError):  # syntax errors, long integers
        return None
    if end != len(document):  # a whole value ended before: extra data
        return None
    if _may_repeat_names(value, document):
        located = _repeated_name(document, start)
        return JSONError(*located) if located is not None else None
    return JSONError(_NESTING, pointer(_last_path(value, MAX_DEPTH)))


def _nesting_pointer(prefix: str, closers: str) -> tuple[str, str] | None:
    """The first problem of a document whose bracket at the end of ``prefix`` nests too
    deep and that has no other problem but repeated names before it; ``None`` for
    spellings ``_closed`` does not handle."""
    document = _closed(prefix, closers)
    if document is None:  # pragma: no cover - see _closed
        return None
    start = _WHITESPACE.match(document).end()  # type: ignore[union-attr]
    try:
        duplicate = _repeated_name(document, start)
        if duplicate is not None:
            return duplicate
        tree, _ = _SCAN_POINTER(document, start)
    except (ValueError, StopIteration):  # pragma: no cover - the prefix had no problem
        return None
    path: list[str | int] = []
    for _ in range(MAX_DEPTH):
        if isinstance(tree, list):
            path.append(len(tree) - 1)
            tree = tree[-1]
        else:
            name, tree = tree[-1]
            path.append(name)
    return (_NESTING, pointer(path))


def _prefix_problem(
    prefix: str, profile: bool, scan: Callable[[str, int], tuple[Any, int]] | None = None
) -> JSONError | None:
    """The first problem of ``prefix`` that is not merely its end, or ``None``.

    ``prefix`` is a document cut just before a bracket that nests too deep, so it
    nests at most ``MAX_DEPTH`` deep and decoding it is safe. A repeated member name
    is not reported here (``_nesting_pointer`` finds it) unless a syntax error follows it.
    ``scan`` overrides the decoder (the hooked one, after a long integer).
    """
    if scan is None:
        scan = _profiled_scan(prefix) if profile else _SCAN_EXACT
    start = _WHITESPACE.match(prefix).end()  # type: ignore[union-attr]
    try:
        _, end = scan(prefix, start)
    except _Rejected as exc:
        located = None
        if exc.token is not None:
            located = _locate_number(prefix, exc.token, exc.reason)
        if located is None:
            located = _locate(prefix, profile=profile)
        return JSONError(*located) if located is not None else JSONError(exc.reason)
    except json.JSONDecodeError as exc:
        if exc.pos < len(prefix):
            return _duplicate_before(prefix, scan, exc.pos) or _syntax_error(
                exc.msg, prefix, exc.pos
            )
        return None
    except StopIteration as exc:  # a value expected where it stops (in an array, too)
        if exc.value < len(prefix):
            return _duplicate_before(prefix, scan, exc.value) or _syntax_error(
                "Expecting value", prefix, exc.value
            )
        return None
    except ValueError:  # an integer past the interpreter's int/str digit limit
        if scan is _SCAN_EXACT:
            return _prefix_problem(prefix, profile, _SCAN_EXACT_BIG)
        raise  # pragma: no cover - the profiled scan rejects such integers first
    except RecursionError:  # pragma: no cover - the prefix nests at most MAX_DEPTH deep
        return None
    # A whole value ended before the offending bracket: what follows is extra data.
    extra = _WHITESPACE.match(prefix, end).end()  # type: ignore[union-attr]
    return _duplicate_before(prefix, scan, extra) or _syntax_error("Extra data", prefix, extra)


def _duplicate_before(
    text: str, scan: Callable[[str, int], tuple[Any, int]], position: int
) -> JSONError | None:
    try:
        _raise_duplicate_before(text, scan, position)
    except JSONError as exc:
        return exc
    return None


def _locate(text: str, *, profile: bool, max_depth: int | None = None) -> tuple[str, str] | None:
    """Find the first problem in document order: ``(reason, pointer)``, or ``None``.

    Walks the tokens of ``text`` keeping the JSON pointer of the current value. It is
    used only after the fast decoder has failed, so the text is valid JSON up to the
    failure, which lies at or after the first problem this walk reports. With
    ``max_depth`` it reports only the first container nested deeper than that.
    """
    path: list[str | int] = []
    names: list[set[str] | None] = []  # per open container: names seen, None for arrays
    expect_name = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            if expect_name and names and (seen := names[-1]) is not None:
                try:
                    name = json.loads(token) if "\\" in token else token[1:-1]
                except ValueError:
                    return None
                path[-1] = name
                if max_depth is None and name in seen:
                    return (f"{_DUPLICATE} {short_prefix(name)}", pointer(path))
                seen.add(name)
                expect_name = False
        elif first in "[{":
            if max_depth is not None and len(names) >= max_depth:
                return (_NESTING, pointer(path))
            names.append(None if first == "[" else set())
            path.append(0 if first == "[" else "")
            expect_name = first == "{"
        elif first in "]}":
            if not names:
                return None
            names.pop()
            path.pop()
            expect_name = False
        elif first == ",":
            if not names:
                return None
            if names[-1] is None:
                index = path[-1]
                assert isinstance(index, int)
                path[-1] = index + 1
            else:
                expect_name = True
        elif first == ":" or max_depth is not None:
            continue
        elif len(token) > _SHORT_PLAIN_TOKEN or token[-1] in "Ny" or "e" in token or "E" in token:
            reason = _token_problem(token, profile=profile)
            if reason is not None:
                return (reason, pointer(path))
    return None


def parse(data: str | bytes | bytearray, *, profile: bool = False) -> JSONValue:
    """Parse JSON text strictly into exact values; see the module docstring.

    ``data`` is a ``str`` or UTF-8 ``bytes``/``bytearray``. With ``profile=True``
    every number must also pass the numeric work profile. Raises ``JSONError`` for any
    problem, and no other exception.
    """
    # A subclass's own methods (count, find, decode, ...) are never called: the passes
    # below read an exact str.
    if isinstance(data, str):
        text = data if type(data) is str else str.__str__(data)
        may_hold_raw_surrogates = not text.isascii()
    elif isinstance(data, bytes | bytearray):
        try:
            text = data.decode("utf-8") if type(data) is bytes else str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise JSONError(f"invalid UTF-8 at byte {exc.start}") from None
        may_hold_raw_surrogates = False  # the strict codec refuses encoded surrogates
    else:
        raise JSONError(f"expected JSON text, got {type(data).__name__}")
    return _parse_text(text, profile, may_hold_raw_surrogates)


def _parse_text(text: str, profile: bool, may_hold_raw_surrogates: bool) -> JSONValue:
    # With more openers than the bound the text may nest too deep. The C decoder is
    # safe at any depth (it raises RecursionError past the interpreter's limit), so
    # depth is measured on the decoded value, and the exact, first-in-document-order
    # report (``_check_nesting``) is made only when it is too deep or decoding failed.
    # When arrays dominate (fewer than one member per four openers), measuring the
    # decoded value level by level costs more than the pre-scan (which also stops a
    # document that nests too deep early), and repeated names are found from the
    # objects' sizes (``_repeated_name``, C passes) when two members could repeat one.
    surrogates = (may_hold_raw_surrogates and _SURROGATE.search(text)) or (
        "\\u" in text and _ESCAPED_SURROGATE.search(text)
    )
    try:
        # (Both checks return None at once for a short text, or one without an e.)
        if (
            profile
            and len(text) > PROFILE_LIMIT
            and (problem := _long_integer_problem(text)) is not None
        ):
            raise problem
        openers = text.count("[") + text.count("{")
        deep = openers > MAX_DEPTH
        strict = deep and 4 * text.count(":") < openers
        if strict:
            _check_nesting(text, profile)
            deep = False
        scan = _SCAN_PROFILED if profile else _SCAN_EXACT
        value = _decode(text, scan, profile, deep, strict)
    except JSONError:
        if surrogates:  # a lone surrogate before the problem found comes first
            _raise_lone_surrogate(text, profile)
        raise
    if surrogates:
        try:
            _raise_lone_surrogate(text)
        except JSONError:
            del value  # see _decode: the traceback keeps this frame
            raise
    return value  # type: ignore[no-any-return]


def _problem_before(prefix: str, profile: bool) -> bool:
    """Whether a document has a problem before a string that starts where ``prefix``
    ends (the string itself, and repeated names, aside): the string is replaced by
    ``""`` and the text up to it checked, in C passes."""
    if not prefix.strip(" \t\n\r"):
        return False  # the string is the root value
    probe = prefix + '""'
    try:
        if profile and _long_integer_problem(probe) is not None:
            return True
        if probe.count("[") + probe.count("{") > MAX_DEPTH:
            _check_nesting(probe, profile)
    except JSONError:
        return True
    return _prefix_problem(probe, profile) is not None


def _long_integer_problem(text: str) -> JSONError | None:
    """The first problem of ``text`` when it holds an integer token of more than
    ``PROFILE_LIMIT`` digits outside strings (which the profile refuses), else ``None``.

    Found without a decode that calls a hook per integer: one pass finds the first such
    token, then ``_problem_at_number`` reports it or an earlier problem.
    """
    if len(text) <= PROFILE_LIMIT or not _has_long_digit_run(text):
        return None
    stripped, tokens = _without_strings(text)
    found = _LONG_INTEGER.search(stripped)
    if found is None:
        return None

    at = found.start()
    return _problem_at_number(text, stripped, tokens, at, _RULE_NORMALIZED, True)


def _problem_at_number(
    text: str,
    stripped: str,
    tokens: list[str],
    at: int,
    reason: str,
    profile: bool,
) -> JSONError:
    """The first problem of ``text`` when the number token at ``at`` in ``stripped``
    (``text`` without its strings, see ``_without_strings``) breaks a rule: that rule,
    or a problem before it. The text before the token is checked with the token replaced
    by ``0`` (a value where the decoder expects one, a syntax error where it does not,
    like the token).
    """
    strings = stripped.count('"', 0, at) // 2  # each ``""`` before it stands for a string
    position = at + sum(map(len, tokens[:strings])) - 2 * strings
    prefix = text[:position]
    if not prefix.strip(" \t\n\r"):
        return JSONError(reason, "")  # the root
    if prefix.count("[") + prefix.count("{") > MAX_DEPTH:
        _check_nesting(prefix + "0", profile)  # raises for a too-deep bracket before it
    earlier = _prefix_problem(prefix + "0", profile)
    if earlier is not None:
        return earlier
    located = _problem_at(prefix, reason, stripped[:at])
    if located is None:  # pragma: no cover - see _closed
        return JSONError(reason)
    return JSONError(*located)


def _decode(
    text: str,
    scan: Callable[[str, int], tuple[Any, int]],
    profile: bool,
    deep: bool = False,
    strict: bool = False,
) -> Any:
    """Decode ``text`` in C and report its first problem in document order.

    With ``deep`` (more openers than ``MAX_DEPTH``) a too-deep bracket may be the
    first problem: ``_check_nesting`` runs before any other problem is reported, and
    after a successful decode only if the value is too deep.
    """
    start = 0 if text[:1] not in " \t\n\r" else _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    try:
        value, end = scan(text, start)
    except _Rejected as exc:
        if deep:
            _check_nesting(text, profile)
        located = None
        if exc.token is not None:
            located = _locate_number(text, exc.token, exc.reason)
        if located is None:  # pragma: no cover - a spelling _locate_number misses: walk
            located = _locate(text, profile=profile)
        if located is None:  # pragma: no cover - the walk finds what the decoder refused
            raise JSONError(exc.reason) from None
        raise JSONError(*located) from None
    except json.JSONDecodeError as exc:
        if deep:
            _check_nesting(text, profile)
        _raise_duplicate_before(text, scan, exc.pos)
        raise _syntax_error(exc.msg, text, exc.pos) from None
    except StopIteration as exc:
        if deep:
            _check_nesting(text, profile)
        _raise_duplicate_before(text, scan, exc.value)
        raise _syntax_error("Expecting value", text, exc.value) from None
    except ValueError:  # an integer past the interpreter's int/str digit limit
        if scan is _SCAN_EXACT:
            return _decode(text, _SCAN_EXACT_BIG, profile, deep, strict)
        if scan is _SCAN_PROFILED:
            return _decode(text, _SCAN_PROFILED_BIG, profile, deep, strict)
        raise  # pragma: no cover - the hooked variants never raise ValueError
    except RecursionError:  # nested past the interpreter's limit
        _check_nesting(text, profile)
        raise JSONError(_NESTING) from None  # pragma: no cover - _check_nesting raises
    if end != len(text):
        end = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
        if end != len(text):
            if deep:
                _check_nesting(text, profile)
            _raise_duplicate_before(text, scan, end)
            raise _syntax_error("Extra data", text, end)
    # On a problem the decoded value is dropped first: the error's traceback keeps this frame.
    if strict:  # depth checked before; a repeat needs two members
        if text.count(":") >= 2 and (located := _repeated_name(text, start)) is not None:
            del value
            raise JSONError(*located)
        return value
    depth, repeated = _shape(value, text, deep)
    if depth > MAX_DEPTH:
        del value
        _check_nesting(text, profile)
        raise JSONError(_NESTING)  # pragma: no cover - _check_nesting raises
    if repeated:
        located = _repeated_name(text, start)
        if located is not None:
            del value
            raise JSONError(*located)
    return value


def _raise_duplicate_before(
    text: str, scan: Callable[[str, int], tuple[Any, int]], position: int
) -> None:
    """On a syntax error at ``position``: raise the first repeated name before it, if any.

    The text before the error is valid JSON so far: it is closed where it stops and
    decoded once in C (``_duplicate_in_prefix``). Spellings that cannot be closed
    that way are decoded again with the duplicate check as an object hook.
    """
    if not text.count(":", 0, position):  # a repeat needs a member and a name after it
        return
    prefix = text[:position]
    located = _duplicate_in_prefix(prefix)
    if located is _UNKNOWN:  # the error may be inside a string: drop that string
        parts = _TOKEN_SPLIT.split(prefix)
        if len(parts) > 2 and parts[-2][:1] == '"' and not _CLOSED_STRING.fullmatch(parts[-2]):
            located = _duplicate_in_prefix(prefix[: -len(parts[-2]) - len(parts[-1])])
    if located is not _UNKNOWN:
        if located is not None:
            raise JSONError(*located)
        return
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    try:
        _STRICT[scan](text, start)
    except _Rejected as exc:
        if exc.token is None and exc.reason == _DUPLICATE:
            found = _locate(text, profile=False)
            if found is not None:
                raise JSONError(*found) from None
    except (ValueError, StopIteration, RecursionError):
        pass


_UNKNOWN = ("", "")


def _open_depth(brackets: str) -> int:
    """How many containers are open after a string of brackets (in C)."""
    return brackets.count("[") + brackets.count("{") - brackets.count("]") - brackets.count("}")


def _duplicate_in_prefix(prefix: str) -> tuple[str, str] | None:
    """The first repeated name in ``prefix`` (valid JSON so far), ``None`` if there is
    none, or ``_UNKNOWN`` if the prefix cannot be closed by ``_closed``."""
    bracket_text = _brackets(_STRINGS.sub("", prefix))
    depth = _open_depth(bracket_text)
    if depth > MAX_DEPTH:  # pragma: no cover - _check_nesting ran before
        return _UNKNOWN
    if depth:
        document = _closed(prefix, _closers(bracket_text), ended=True)
    else:
        document = prefix.rstrip(" \t\n\r")
    if not document or not document.strip(" \t\n\r"):
        return None if document is not None else _UNKNOWN
    start = _WHITESPACE.match(document).end()  # type: ignore[union-attr]
    try:
        return _repeated_name(document, start)  # ``None`` when no name repeats
    except (ValueError, StopIteration):
        head = len(prefix.rstrip(" \t\n\r"))
        if not depth or document[head - 1 : head] != '"':
            return _UNKNOWN
    # The prefix ends with a member name: give it a placeholder value.
    document = document[:head] + ":0" + document[head:]
    try:
        return _repeated_name(document, start)
    except (ValueError, StopIteration):
        return _UNKNOWN


def _shape(value: Any, text: str, deep: bool) -> tuple[int, bool]:
    """The nesting depth of ``value`` (decoded from valid JSON ``text``) when ``deep``
    (else 0), and whether one of its objects repeated a name.

    Every member written is one colon outside strings, and the decoder keeps one entry
    per distinct name. The containers are reached level by level with
    ``gc.get_referents`` (in C); only the items themselves are looked at in Python, by
    type. Linear, and a fraction of a decode.
    """
    colons = text.count(":")
    if not deep and (colons < 2 or (type(value) is dict and len(value) == colons)):
        # Every member kept is one colon outside strings, so members <= colons: an
        # object holding as many members itself as the text has colons repeats nothing
        # (the common flat object, found without the walk).
        return (0, False)
    return _walk_shape(value, text, deep, colons)


def _walk_shape(value: Any, text: str, deep: bool, colons: int) -> tuple[int, bool]:
    """``_shape`` by the walk over every level (``colons``: the text's colons)."""
    members = 0
    depth = 0
    level: list[Any] = [value]
    while level:
        kinds = list(map(type, level))
        containers = list(compress(level, map(_DECODED_CONTAINERS.__contains__, kinds)))
        if not containers:
            break
        depth += 1
        members += sum(map(len, compress(level, map(_DICT.__contains__, kinds))))
        level = gc.get_referents(*containers)
    repeated = colons >= 2 and members != colons and members != _STRINGS.sub("", text).count(":")
    return (depth if deep else 0, repeated)


def _may_repeat_names(value: Any, text: str) -> bool:
    """Whether some object of ``value``, decoded from valid JSON ``text``, repeated a name."""
    return _shape(value, text, False)[1]


def _repeated_name(document: str, start: int) -> tuple[str, str] | None:
    """The first repeated member name in document order in ``document`` (valid JSON
    from ``start`` to its end): ``(reason, pointer)``, or ``None``.

    Linear, in C passes and one walk down at most ``MAX_DEPTH`` levels. A decode that
    hands every object's pairs to ``list.append`` (in C) lists the objects in the order
    they close; the first one that repeats a name is found by comparing sizes in C.
    Every object that closed before it repeats nothing, so the first repeat in document
    order is in it or in one of the objects still open around it (whose repeated names
    all come before it, since it sits in their last member). The text up to its closing
    brace, closed, is decoded with objects as ``_Members`` (as plain dicts when none of
    those repeats a name); the walk down its last items reports the outermost object
    that repeats a name, at its first repeat. Raises
    ``ValueError`` or ``StopIteration`` if ``document`` is not one JSON value.
    """
    objects: list[list[tuple[str, Any]]] = []
    decoder = json.JSONDecoder(
        object_pairs_hook=objects.append, parse_float=str, parse_int=str, parse_constant=str
    )
    _, end = cast(Any, decoder).scan_once(document, start)
    if _WHITESPACE.match(document, end).end() != len(document):  # type: ignore[union-attr]
        raise ValueError("extra data")
    repeats = list(map(operator.ne, map(len, objects), map(len, map(dict, objects))))
    if True not in repeats:
        return None
    closing = repeats.index(True)
    if closing == len(objects) - 1 and document[start] == "{":  # the root: nothing around it
        name = objects[closing][_first_repeat(objects[closing])][0]
        return (f"{_DUPLICATE} {short_prefix(name)}", pointer([name]))
    # Its closing brace is the ``closing + 1``-th one outside strings.
    stripped, tokens = _without_strings(document)
    at = closing + sum(map(len, stripped.split("}", closing + 1)[: closing + 1]))
    strings = stripped.count('"', 0, at) // 2  # each ``""`` before it stands for a string
    position = at + sum(map(len, tokens[:strings])) - 2 * strings + 1
    bracket_text = _brackets(stripped[: at + 1])
    prefix = document[:position]
    depth = _open_depth(bracket_text)
    if depth:
        closed = _closed(prefix, _closers(bracket_text), ended=True)
        if closed is None:  # pragma: no cover - a prefix ending with "}" always closes
            return None
        prefix = closed
    if True not in repeats[closing + 1 :]:
        # No object around it repeats a name: as plain dicts (built faster), they keep
        # their members in document order, and it is ``depth`` levels down.
        path = _last_path(_SCAN_TEXT(prefix, start)[0], depth)
        name = objects[closing][_first_repeat(objects[closing])][0]
        path.append(name)
        return (f"{_DUPLICATE} {short_prefix(name)}", pointer(path))
    path = []
    node, _ = _SCAN_POINTER(prefix, start)
    while True:  # at most MAX_DEPTH levels: it ends at an object that repeats a name
        if type(node) is _Members:
            if len(dict(node)) != len(node):
                name = node[_first_repeat(node)][0]
                path.append(name)
                return (f"{_DUPLICATE} {short_prefix(name)}", pointer(path))
            name, node = node[-1]
            path.append(name)
        else:
            path.append(len(node) - 1)
            node = node[-1]


def _first_repeat(members: Any) -> int:
    """The position of the first member of ``members`` whose name came before."""
    seen: set[str] = set()
    for position, (name, _) in enumerate(members):
        if name in seen:
            return position
        seen.add(name)
    raise AssertionError("called only on objects that repeat a name")  # pragma: no cover


def _locate_number(text: str, token: str, reason: str) -> tuple[str, str] | None:
    """``(reason, pointer)`` for the first occurrence of number (or constant, such as
    ``NaN``) ``token`` outside strings.

    The decoder refuses a token by its text alone, so its first occurrence as a whole
    token is the one refused. A duplicate name before it comes first and is reported
    instead. Linear, in C passes: strings are dropped, the token is found with
    ``str.find`` (a match inside a longer number is skipped), and the text before it
    is decoded once.
    """
    stripped = _STRINGS.sub('""', text)
    if token[-1] in "Ny":  # NaN, Infinity, -Infinity: nothing extends them
        extends = None
    elif "e" in token or "E" in token:
        extends = _MORE_DIGITS
    elif "." in token:
        extends = _MORE_EXPONENT
    else:
        extends = _MORE_FRACTION
    at = stripped.find(token)
    while at >= 0 and (
        (at and stripped[at - 1] not in "[,: \t\n\r")
        or (extends is not None and extends.match(stripped, at + len(token)))
    ):  # part of a longer number: only an accepted one can come before the refused token
        at = stripped.find(token, at + 1)
    if at < 0:  # pragma: no cover - the token is in the text
        return None
    strings = stripped.count('"', 0, at) // 2  # each ``""`` before it stands for a string
    position = at + sum(map(len, _STRINGS.findall(text)[:strings])) - 2 * strings
    return _problem_at(text[:position], reason, stripped[:at])


def _problem_at(prefix: str, reason: str, stripped: str | None = None) -> tuple[str, str] | None:
    """The first problem of a document whose value starting at the end of ``prefix``
    (valid JSON so far, but for repeated names) has problem ``reason``: a repeated name
    before it, else ``reason`` with that value's pointer; ``None`` for spellings
    ``_closed`` does not handle. ``stripped`` is ``prefix`` with its strings replaced, if
    the caller has it."""
    bracket_text = _brackets(_STRINGS.sub("", prefix) if stripped is None else stripped)
    closers = _closers(bracket_text)
    if not closers:
        return (reason, "")  # the root
    document = _closed(prefix, closers)
    if document is None:  # pragma: no cover - see _closed
        return None
    start = _WHITESPACE.match(document).end()  # type: ignore[union-attr]
    try:
        value, end = _SCAN_TEXT(document, start)
    except (ValueError, StopIteration):  # pragma: no cover - the prefix had no problem
        return None
    if end != len(document):  # pragma: no cover - the prefix had no problem
        return None
    if _may_repeat_names(value, document):
        return _repeated_name(document, start)
    return (reason, pointer(_last_path(value, len(closers))))


def _last_path(value: Any, depth: int) -> list[str | int]:
    """The path to the last value written ``depth`` levels down (objects without repeats)."""
    path: list[str | int] = []
    for _ in range(depth):
        if isinstance(value, list):
            path.append(len(value) - 1)
            value = value[-1]
        else:
            name = next(reversed(value))
            path.append(name)
            value = value[name]
    return path


def _closed(prefix: str, closers: str, *, ended: bool = False) -> str | None:
    """``prefix`` closed with a placeholder value ``0`` where the next value starts and
    ``closers`` (those of its open containers, innermost first: ``_closers``); with
    ``ended``, a prefix that ends with a value is closed after it. ``None`` for
    spellings this does not handle."""
    if not closers:  # pragma: no cover - callers close only prefixes with open containers
        return None
    head = prefix.rstrip(" \t\n\r")
    last = head[-1:]
    if closers[0] == "}" and last == "{":
        return head + '"":0' + closers
    if closers[0] == "}" and last == ",":
        return head[:-1] + closers
    if last == ":" or (closers[0] == "]" and last in ("[", ",")):
        return head + "0" + closers
    if ended and last and last in '}]"0123456789el':
        return head + closers  # checked by decoding: a name without its value fails
    return None  # pragma: no cover - e.g. a value without a comma before the bracket


def _raise_lone_surrogate(text: str, profile: bool | None = None) -> None:
    """Raise for the first string or member name of ``text`` (in document order) that
    decodes to a lone surrogate; return if there is none.

    ``text`` is valid JSON, or, with ``profile`` given, a text with another problem:
    then the string is reported only if the text before it has no problem (checked
    with ``""`` in its place, like the decoder would meet it), and nothing is raised
    if a string the decoder refuses comes first.

    In C passes: the strings' tokens are decoded together as one array, the decoded
    strings joined and searched (a Python string holds a surrogate only when it is
    lone), and the string holding the first one found by the running lengths. Its
    pointer is read from the text before it, closed.
    """
    tokens = _STRINGS.findall(text)
    try:
        decoded: list[str] = json.loads("[" + ",".join(tokens) + "]")
    except ValueError:  # a string the decoder refuses (only with another problem)
        return
    found = _SURROGATE.search("".join(decoded))
    if found is None:
        return
    index = bisect_right(list(accumulate(map(len, decoded))), found.start())
    stripped = _STRINGS.sub('""', text)
    quotes = 2 * index  # the opening quote of string ``index`` is the one after these
    at = quotes + sum(map(len, stripped.split('"', quotes + 1)[: quotes + 1]))
    position = at + sum(map(len, tokens[:index])) - quotes
    end = position + len(tokens[index])
    if profile is not None and _problem_before(text[:position], profile):
        return
    if text[_WHITESPACE.match(text, end).end() :][:1] == ":":  # type: ignore[union-attr]
        reason = "member name contains a lone surrogate"
        located = _problem_at(text[:end] + ":", reason, stripped[: at + 2] + ":")
    else:
        reason = "string contains a lone surrogate"
        located = _problem_at(text[:position], reason, stripped[:at])
    if located is None:  # pragma: no cover - see _closed
        raise JSONError(reason)
    raise JSONError(*located)


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
    a value; a Python walk costs about a microsecond per container (issue 9).
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
    surrogates, numbers inside the profile); ``None`` if it nests too deep."""
    if text.count("[") + text.count("{") > MAX_DEPTH and (
        _deepest(_brackets(_STRINGS.sub('""', text))) > MAX_DEPTH
    ):
        return None
    scan = _SCAN_PROFILED if profile else _SCAN_EXACT
    try:
        return cast(JSONValue, scan(text, 0)[0])
    except (ValueError, StopIteration, RecursionError):  # pragma: no cover - written by orjson
        return None


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
        _raise_first_problem_of(value)  # located in C passes
        return None  # pragma: no cover - it raised
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


_NON_FINITE_TOKEN: Final = re.compile(r"NaN|-?Infinity")
_NON_FINITE: Final = "NaN and infinities are not JSON numbers"


def _raise_first_problem_of(value: dict[Any, Any] | list[Any]) -> None:
    """Raise ``from_python``'s error for a value of plain types whose only problems are
    lone surrogates and floats that are NaN or infinite: the first in document order,
    located in its JSON text by C passes rather than by the general conversion's walk.

    The standard encoder writes the text (NaN and the infinities as ``NaN``,
    ``Infinity``); a lone surrogate is reported if no such number comes before it
    (``_raise_lone_surrogate``), else the first of those numbers.
    """
    text = _standard_text(value)
    if text is None:  # pragma: no cover - an int past the int/str digit limit
        return
    _raise_lone_surrogate(text, profile=False)
    first = _NON_FINITE_TOKEN.search(_STRINGS.sub('""', text))
    located = _locate_number(text, first.group(), _NON_FINITE) if first else None
    if located is not None:
        raise JSONError(*located)


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

    A container is copied by a marshal round trip (a pickle one if it holds a
    ``Decimal``), which runs in C: a Python walk costs about a microsecond per item,
    which at 64 KiB of small items passed the 20 ms budget of ``Registry.invoke`` on
    its own (issue 9, item 1).
    """
    if isinstance(value, dict | list):
        try:  # marshal knows every JSON type but Decimal and keeps no memo: about twice
            # as fast as pickle for 64 KiB of small or nested containers
            return marshal.loads(marshal.dumps(value))  # type: ignore[no-any-return]
        except ValueError:  # a Decimal somewhere
            return _copy_with_decimals(value)
    return value


def _copy_with_decimals(value: dict[str, Any] | list[Any]) -> JSONValue:
    """``detach`` of a container holding a ``Decimal`` (which marshal refuses).

    A pickle round trip writes each ``Decimal`` as text and parses it back (about
    0.8 µs each: 28,000 distinct fractions in 64 KiB took 21 ms). Decimals are
    immutable, so they may be shared: when they outnumber the containers, the
    containers are rebuilt level by level from the deepest, each with one C pass
    over its items that swaps the containers for their copies (about 1.5 µs per
    container); otherwise the pickle round trip is cheaper.
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
    # "e" without a precision writes every coefficient digit, in C (the digit tuple of
    # ``as_tuple`` joined in Python cost ~25 us per 300-digit int: an MCP client's 1e300
    # floats, made ints, took seconds to measure before their size was refused).
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
    # it grew): kept as they are, the real 20 k catalog's 22 MB of schemas held 61 MB.
    # An exact copy costs a memcpy.
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
    budget costs microseconds per large number (an MCP client's 1e300 floats).
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
    return len(text.encode("utf-8", "surrogatepass"))


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
