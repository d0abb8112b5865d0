"""Arguments to an HTTP request: path substitution, query, headers and body.

``prepare(plan, arguments)`` turns validated arguments into a ``PreparedRequest``
or raises ``ArgumentProblem`` with a message for the caller. It never decides the
host: the request holds only the path (already percent-encoded), the query pairs,
the headers that come from parameters, and the body bytes; the handler joins the
path to the host's base URL.

Path safety: every path parameter value is percent-encoded with no safe characters
(``/``, ``?``, ``#``, ``%`` and ``\\`` included), so a value can never add a segment,
a query or a fragment; a value that would make a whole segment empty, ``.`` or ``..``
is refused, so a value can never climb out of the operation's path either.

Serialization follows OpenAPI's ``style``/``explode`` rules: path ``simple``,
``label`` and ``matrix``; query ``form`` (exploded or not), ``spaceDelimited``,
``pipeDelimited`` and ``deepObject``; header ``simple``. Parameters described by
JSON ``content`` are sent as compact JSON text. Numbers are written exactly
(``Decimal`` in positional notation), booleans as ``true``/``false``; a ``null``
query or header value is left out.

Size: a request larger than the budget once written out (path, query pairs,
parameter headers, body: ``written_size``) is refused with ``ArgumentProblem``
naming the budget. Each simple value is charged as it is written, and a number is
measured before it is (``1e4000`` is 4001 digits in positional notation), so a few
bytes of arguments never grow into megabytes of request.

A JSON body is written in printable ASCII: every other character of its strings (and
``<``, ``>``, ``&`` and a space after a space) is a JSON escape (``\\u202e``, ``\\n``,
``\\u0020``), so the bytes sent are text a person can read exactly as they are (see
``_confirm``); a JSON reader gets the same values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlencode

from ._operations import OperationPlan, ParamPlan

__all__ = [
    "REQUEST_BYTES",
    "ArgumentProblem",
    "PreparedRequest",
    "json_bytes",
    "prepare",
    "quoted",
    "written_size",
]

#: Default budget of one request written out (``prepare``): 4 x the default argument budget.
REQUEST_BYTES = 4 * 64 * 1024
_TEMPLATE = re.compile(r"{([^{}]*)}")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


class ArgumentProblem(ValueError):
    """Arguments that passed the schema but cannot be sent (the message says why)."""


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """The parts of a request that come from the arguments (never the host)."""

    method: str
    path: str  # percent-encoded, starting with "/"
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    content: bytes | None
    content_type: str | None


def json_bytes(value: Any, *, ascii: bool = False) -> bytes:
    """Compact JSON with exact numbers (``Decimal`` written as it is).

    With ``ascii``, strings are written by ``quoted``: the result is printable ASCII.
    """
    return _json(value, quoted if ascii else _string).encode("utf-8")


def quoted(text: str) -> str:
    """``text`` as a JSON string of printable ASCII: anything else is a JSON escape.

    Some printable characters are escapes too, so that a client that renders the
    message as HTML or Markdown shows the same text: ``<``, ``>`` and ``&`` (no hidden
    span ``<!-- ... -->``, no entity ``&#x202e;`` turned into the character it names),
    ``[`` and ``]`` (no link whose target, up to a ``)``, is not shown), and ``"``
    and ``\\`` inside the string as ``\\u0022`` and ``\\u005c`` (Markdown drops a
    backslash before punctuation, so ``\\"`` would read as the string's end). So is
    every space after a space: two spaces look like one, and a long run would wrap
    into blank lines that push what follows out of sight.
    """
    # ensure_ascii escapes DEL too
    text = _ESCAPED_PUNCTUATION.sub(_unicode_escape, json.dumps(text))
    return _SPACE_AFTER_SPACE.sub(r"\\u0020", text).translate(_MARKUP)


def _unicode_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(1)):04x}"


_MARKUP = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "[": "\\u005b", "]": "\\u005d"}
)
# json.dumps writes '"' and '\\' as two-character escapes, found left to right
_ESCAPED_PUNCTUATION = re.compile(r'\\(["\\])')
_SPACE_AFTER_SPACE = re.compile("(?<= ) ")


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _json(value: Any, string: Callable[[str], str] = _string) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, Mapping):
        members = (f"{string(str(k))}:{_json(v, string)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json(v, string) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _positional_size(value: Decimal) -> int:
    """``len(format(value, "f"))``, computed without writing it."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):  # NaN or Infinity
        return len(format(value, "f"))
    if digits == (0,) and exponent >= 0:
        size = 1
    elif exponent >= 0:
        size = len(digits) + exponent
    elif -exponent >= len(digits):
        size = 2 - exponent  # "0." then the zeros and digits
    else:
        size = len(digits) + 1
    return size + sign


class _Budget:
    """Characters the scalars of one request may still take once written out."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, size: int) -> None:
        if size > self.left:
            raise ArgumentProblem(_over_budget(self.limit))
        self.left -= size

    def scalar(self, value: Any) -> str:
        """``value`` written as a simple (non-JSON) value, charged to the budget; a
        number is measured before it is written, so it is never written past it."""
        if isinstance(value, Decimal):
            self.spend(_positional_size(value))
            return format(value, "f")
        text = _scalar(value)
        self.spend(len(text))
        return text


def _over_budget(limit: int) -> str:
    return (
        f"the request would be larger than {limit} bytes once written out (path, query, "
        "headers and body; numbers are written in full, 1e4000 as 4001 digits), over the "
        "request budget (4 x Limits.argument_bytes): send fewer or smaller values"
    )


def _scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value
    return _json(value)  # nested objects and arrays inside a simple value


def written_size(prepared: PreparedRequest) -> int:
    """Bytes of ``prepared``'s path, query pairs, parameter headers and body, as written
    before the query is percent-encoded."""
    size = len(prepared.path) + len(prepared.content or b"")
    for pairs in (prepared.query, prepared.headers):
        size += sum(len(k.encode()) + len(v.encode()) + 2 for k, v in pairs)
    return size


def prepare(
    plan: OperationPlan, arguments: Mapping[str, Any], budget: int = REQUEST_BYTES
) -> PreparedRequest:
    """Build the argument-derived parts of ``plan``'s request (see the module docstring).

    ``ArgumentProblem`` if the request would be larger than ``budget`` bytes written
    out (``written_size``): checked as each value is written, before a large one is.
    """
    write = _Budget(budget)
    path_values: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    headers: list[tuple[str, str]] = []
    for param in plan.params:
        if param.key not in arguments:
            continue
        value = arguments[param.key]
        if param.location == "path":
            path_values[param.name] = _path_value(param, value, write)
        elif param.location == "query":
            if value is not None:
                query.extend(_query_pairs(param, value, write))
        elif value is not None:
            headers.append((param.name, _header_value(param, value, write)))
    path = _substitute(plan.path, path_values)
    content: bytes | None = None
    content_type: str | None = None
    if plan.body is not None and plan.body.key in arguments:
        body = arguments[plan.body.key]
        content_type = plan.body.media_type
        if plan.body.form:
            if not isinstance(body, Mapping):
                raise ArgumentProblem("a form-encoded body must be an object")
            content = urlencode(_form_pairs(body, write)).encode("ascii")
        else:
            content = json_bytes(body, ascii=True)
    prepared = PreparedRequest(
        plan.method, path, tuple(query), tuple(headers), content, content_type
    )
    if written_size(prepared) > budget:
        raise ArgumentProblem(_over_budget(budget))
    return prepared


def _encode(text: str) -> str:
    return quote(text, safe="")


def _path_value(param: ParamPlan, value: Any, write: _Budget) -> str:
    name = _encode(param.name)
    if param.as_json:
        return _encode(_json(value))
    if isinstance(value, list):
        items = [_encode(write.scalar(v)) for v in value]
        return _path_join(param, name, items, [f"{name}={item}" for item in items])
    if isinstance(value, Mapping):
        pairs = [(_encode(str(k)), _encode(write.scalar(v))) for k, v in value.items()]
        if param.explode:
            joined = [f"{k}={v}" for k, v in pairs]
        else:
            joined = [part for pair in pairs for part in pair]
        return _path_join(param, name, joined, joined)
    text = _encode(write.scalar(value))
    if param.style == "label":
        return "." + text
    if param.style == "matrix":
        return f";{name}={text}"
    return text


def _path_join(param: ParamPlan, name: str, items: list[str], exploded: list[str]) -> str:
    """Encoded ``items`` joined in ``param``'s style; ``exploded``: the ``;`` parts of an
    exploded ``matrix`` value."""
    if param.style == "label":
        return "." + ("." if param.explode else ",").join(items)
    if param.style == "matrix":
        if param.explode:
            return "".join(f";{part}" for part in exploded)
        return f";{name}=" + ",".join(items)
    return ",".join(items)


def _substitute(template: str, values: Mapping[str, str]) -> str:
    """Fill the template; refuse a segment a parameter made empty, ``.`` or ``..``."""
    segments = template.split("/")
    built: list[str] = []
    for segment in segments:
        if "{" not in segment:
            built.append(segment)
            continue
        filled = _TEMPLATE.sub(lambda m: values.get(m.group(1), m.group(0)), segment)
        if filled in ("", ".", ".."):
            names = ", ".join(_TEMPLATE.findall(segment))
            raise ArgumentProblem(
                f"path parameter {names} must not make a path segment empty, '.' or '..'"
            )
        built.append(filled)
    return "/".join(built)


def _query_pairs(param: ParamPlan, value: Any, write: _Budget) -> list[tuple[str, str]]:
    name = param.name
    if param.as_json:
        return [(name, _json(value))]
    if isinstance(value, list):
        items = [write.scalar(v) for v in value]
        if param.explode and param.style in ("form", "spaceDelimited", "pipeDelimited"):
            return [(name, item) for item in items]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(param.style, ",")
        return [(name, separator.join(items))]
    if isinstance(value, Mapping):
        if param.style == "deepObject":
            return [(f"{name}[{k}]", write.scalar(v)) for k, v in value.items() if v is not None]
        if param.explode:
            return [(str(k), write.scalar(v)) for k, v in value.items() if v is not None]
        flat = [part for k, v in value.items() for part in (str(k), write.scalar(v))]
        return [(name, ",".join(flat))]
    return [(name, write.scalar(value))]


def _header_value(param: ParamPlan, value: Any, write: _Budget) -> str:
    if param.as_json:
        text = _json(value)
    elif isinstance(value, list):
        text = ",".join(write.scalar(v) for v in value)
    elif isinstance(value, Mapping):
        if param.explode:
            text = ",".join(f"{k}={write.scalar(v)}" for k, v in value.items())
        else:
            text = ",".join(part for k, v in value.items() for part in (str(k), write.scalar(v)))
    else:
        text = write.scalar(value)
    if _HEADER_VALUE.fullmatch(text) is None:
        raise ArgumentProblem(
            f"header {param.name[:60]!r} may hold only printable ASCII characters"
        )
    if text != text.strip(" \t"):
        # HTTP trims such whitespace (RFC 9110, 5.5): the API would get another value.
        raise ArgumentProblem(f"header {param.name[:60]!r} may not start or end with whitespace")
    return text


def _form_pairs(body: Mapping[str, Any], write: _Budget) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, value in body.items():
        if value is None:
            continue
        if isinstance(value, list):
            pairs.extend((str(key), write.scalar(v)) for v in value)
        else:
            pairs.append((str(key), write.scalar(value)))
    return pairs
