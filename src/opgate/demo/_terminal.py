"""Asking a person at a terminal: a form (MCP ``requestedSchema``) as one prompt per field.

``fill_form(message, schema, ask, say)`` shows ``message`` (unless empty), offers to fill in,
decline or cancel, then asks each property (required ones first) with ``ask(prompt) -> str``
and converts the typed text to the property's type, asking again (with the reason) until the
value is valid:

* boolean: ``y``/``yes``/``n``/``no``;
* integer / number: the number, within ``minimum``/``maximum``;
* single choice (``enum`` or titled ``oneOf``): the choice's number or its value;
* multiselect (array of choices): comma-separated numbers or values, within the
  item bounds;
* string: within ``minLength``/``maxLength``, with a light check of the ``email``,
  ``uri``, ``date`` and ``date-time`` formats.

An empty line takes the ``default`` when there is one, skips an optional field, and
asks again for a required one. ``EOFError`` from ``ask`` (end of input) cancels. It
returns ``("accept", answers)``, ``("decline", None)`` or ``("cancel", None)``.

``Terminal`` reads those lines from a terminal in a worker thread so that the event
loop can stop the wait: ``close()`` wakes a pending ``ask`` with ``EOFError``.
"""

from __future__ import annotations

import os
import re
import select
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any, Literal, TextIO

__all__ = ["Action", "Answers", "Terminal", "fill_form", "ordered_fields", "parse_field"]

Answers = dict[str, Any]
Action = Literal["accept", "decline", "cancel"]

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_YES = {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}


class _Invalid(ValueError):
    """The typed text is not a valid value; the message says why."""


def _choices(prop: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(value, title) pairs of a single-choice or multiselect property, else ``[]``."""
    source: Mapping[str, Any] = prop
    if prop.get("type") == "array":
        source = prop.get("items", {})
    if "enum" in source:
        names = source.get("enumNames") or source["enum"]
        return [(str(v), str(t)) for v, t in zip(source["enum"], names, strict=False)]
    for key in ("oneOf", "anyOf"):
        if key in source:
            return [(str(c["const"]), str(c.get("title", c["const"]))) for c in source[key]]
    return []


def _choice(text: str, choices: list[tuple[str, str]]) -> str:
    for number, (value, title) in enumerate(choices, 1):
        if text in (str(number), value) or text.casefold() == title.casefold():
            return value
    raise _Invalid("pick one of the numbers shown")


def _number(text: str, prop: Mapping[str, Any]) -> int | float:
    try:
        value: int | float = int(text) if prop.get("type") == "integer" else float(text)
    except ValueError:
        kind = "a whole number" if prop.get("type") == "integer" else "a number"
        raise _Invalid(f"type {kind}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _Invalid("type a finite number")
    if "minimum" in prop and value < prop["minimum"]:
        raise _Invalid(f"at least {prop['minimum']}")
    if "maximum" in prop and value > prop["maximum"]:
        raise _Invalid(f"at most {prop['maximum']}")
    return value


def _string(text: str, prop: Mapping[str, Any]) -> str:
    if len(text) < prop.get("minLength", 0):
        raise _Invalid(f"at least {prop['minLength']} characters")
    if "maxLength" in prop and len(text) > prop["maxLength"]:
        raise _Invalid(f"at most {prop['maxLength']} characters")
    fmt = prop.get("format")
    try:
        if fmt == "date":
            date.fromisoformat(text)
        elif fmt == "date-time":
            datetime.fromisoformat(text)
    except ValueError:
        example = "2025-01-31" if fmt == "date" else "2025-01-31T12:00:00+00:00"
        raise _Invalid(f"type a {fmt} like {example}") from None
    if fmt == "email" and not _EMAIL.fullmatch(text):
        raise _Invalid("type an email address")
    if fmt == "uri" and not _URI.fullmatch(text):
        raise _Invalid("type an absolute URI such as https://example.com")
    return text


def parse_field(text: str, prop: Mapping[str, Any]) -> Any:
    """Convert one typed, nonempty ``text`` for ``prop``; raises ``ValueError`` with the reason."""
    text = text.strip()
    choices = _choices(prop)
    kind = prop.get("type")
    if kind == "boolean":
        if text.casefold() not in _YES:
            raise _Invalid("type y or n")
        return _YES[text.casefold()]
    if kind in ("integer", "number"):
        return _number(text, prop)
    if kind == "array":
        picked = [_choice(part.strip(), choices) for part in text.split(",") if part.strip()]
        picked = list(dict.fromkeys(picked))
        if len(picked) < prop.get("minItems", 0):
            raise _Invalid(f"pick at least {prop['minItems']}")
        if "maxItems" in prop and len(picked) > prop["maxItems"]:
            raise _Invalid(f"pick at most {prop['maxItems']}")
        return picked
    if choices:
        return _choice(text, choices)
    return _string(text, prop)


def ordered_fields(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The form's properties, required ones first (in the ``required`` order), then the rest."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    rest = [name for name in properties if name not in required]
    return [(name, properties[name]) for name in (*required, *rest)]


def _describe(name: str, prop: Mapping[str, Any], required: bool) -> str:
    title = str(prop.get("title", name))
    kind = prop.get("type")
    hint = {"boolean": "y/n", "integer": "whole number", "number": "number"}.get(str(kind), "")
    if kind == "array":
        hint = "numbers, comma-separated"
    elif _choices(prop):
        hint = "number"
    elif kind == "string":
        hint = str(prop.get("format", "text"))
    extras = [hint] if hint else []
    if "default" in prop:
        extras.append(f"default {prop['default']}")
    if not required:
        extras.append("optional")
    return f"{title} ({', '.join(extras)})" if extras else title


def fill_form(
    message: str,
    schema: Mapping[str, Any],
    ask: Callable[[str], str],
    say: Callable[[str], None],
) -> tuple[Action, Answers | None]:
    """Ask a person to fill ``schema`` (see the module docstring for the contract)."""
    if message:
        say(f"    {message}")
    try:
        first = ask("    Enter to answer, d to decline, c to cancel: ").strip().casefold()
        if first in ("d", "decline"):
            return "decline", None
        if first in ("c", "cancel"):
            return "cancel", None
        required = set(schema.get("required", []))
        answers: Answers = {}
        for name, prop in ordered_fields(schema):
            choices = _choices(prop)
            for number, (_, title) in enumerate(choices, 1):
                say(f"      {number}) {title}")
            label = _describe(name, prop, name in required)
            while True:
                text = ask(f"    {label}: ").strip()
                if not text:
                    if "default" in prop:
                        answers[name] = prop["default"]
                        break
                    if name not in required:
                        break
                    say("      (required)")
                    continue
                try:
                    answers[name] = parse_field(text, prop)
                    break
                except ValueError as problem:
                    say(f"      ({problem})")
    except EOFError:
        return "cancel", None
    return "accept", answers


class Terminal:
    """Lines typed at a terminal, read so that another thread can stop the wait.

    ``ask(prompt)`` is ``input`` for one thread: it writes ``prompt`` to ``stdout`` and
    returns the next line of ``stdin`` without its line end, and raises ``EOFError`` at
    the end of input. ``close()``, from any thread, makes a waiting ``ask`` and every
    later one raise ``EOFError``: a blocked ``input()`` could not be woken, so the
    worker thread running it kept an interrupted demo from ending. It waits with
    ``select`` on the terminal and a pipe; on Windows, where ``select`` takes only
    sockets, ``ask`` is plain ``input`` and ``close`` wakes nothing.
    """

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self._stdin = (stdin if stdin is not None else sys.stdin).fileno()
        self._stdout = stdout if stdout is not None else sys.stdout
        self._wake_read, self._wake_write = os.pipe()
        self._closed = threading.Event()
        self._pending = b""

    def ask(self, prompt: str) -> str:
        """Write ``prompt`` and return the next line typed (see the class docstring)."""
        if sys.platform == "win32":  # pragma: no cover
            return input(prompt)
        self._stdout.write(prompt)
        self._stdout.flush()
        while b"\n" not in self._pending:
            if self._closed.is_set():
                raise EOFError
            ready, _, _ = select.select([self._stdin, self._wake_read], [], [])
            if self._wake_read in ready:
                raise EOFError
            chunk = os.read(self._stdin, 4096)
            if not chunk:
                if not self._pending:
                    raise EOFError
                break
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace").removesuffix("\r")

    def close(self) -> None:
        """Stop every ``ask``, now and later, with ``EOFError``; idempotent."""
        if not self._closed.is_set():
            self._closed.set()
            os.write(self._wake_write, b"x")
