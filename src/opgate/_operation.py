"""``Operation`` definitions, the name rule, and what ``search`` and ``inspect`` return.

``search`` returns a ``SearchPage`` of ``Summary`` items; ``inspect`` returns an
``OperationSpec``.

An ``Operation`` is a plain description; the ``Registry`` snapshots it at
construction (texts, examples, schemas compiled from a private copy), so mutating
the objects it was built from afterwards changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._failures import ConfigurationError
from ._json import JSONValue, detach
from ._limits import QUERY_BYTES
from ._text import utf8_size

__all__ = ["NAME_PATTERN", "Operation", "OperationSpec", "SearchPage", "Summary", "check_name"]

#: Operation names (spec 003): case-sensitive, 1 to 128 of these characters.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid operation name, else raise ``ConfigurationError``."""
    if not isinstance(name, str):
        raise TypeError(f"operation name must be a str, not {type(name).__name__}")
    if NAME_PATTERN.fullmatch(name) is None:
        shown = repr(name[:40]) + ("…" if len(name) > 40 else "")
        raise ConfigurationError(
            f"operation name {shown} must be 1 to 128 characters from [A-Za-z0-9_.-]"
        )
    return name


def _text(value: object, what: str, *, nonblank: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if _SURROGATE.search(value):
        raise ConfigurationError(f"{what} must be valid UTF-8 (it contains a lone surrogate)")
    if nonblank and not value.strip():
        raise ConfigurationError(f"{what} must not be blank")
    return str.__str__(value)


@dataclass(frozen=True, slots=True)
class Operation:
    """One application operation offered through the registry.

    * ``name``: ``[A-Za-z0-9_.-]{1,128}``, case-sensitive, unique in a registry.
    * ``summary``: nonblank one-line description, shown in search pages.
    * ``handler``: sync or async callable taking an ``Invocation`` and returning
      ``finish(...)``, ``fail(...)`` or ``await_input(...)``.
    * ``description``, ``group``, ``examples`` (strings), ``source``: documentation,
      all searched; ``group`` is also a search filter, so it is at most 256 UTF-8
      bytes (the longest group a search accepts).
    * ``input_schema``: JSON Schema (a JSON object given as a mapping or JSON text)
      for the argument object; ``None`` accepts any object. ``output_schema``: JSON
      Schema for the structured result; ``None`` means results are not validated.

    Construction checks types, the name, and that texts are valid UTF-8; schemas
    are compiled, and all budgets checked, by the ``Registry``.
    """

    name: str
    summary: str
    handler: Callable[..., Any]
    description: str = ""
    group: str = ""
    examples: tuple[str, ...] = field(default=())
    source: str = ""
    input_schema: object = None
    output_schema: object = None

    def __post_init__(self) -> None:
        name = check_name(self.name)
        where = f"operation {name!r}"
        object.__setattr__(self, "summary", _text(self.summary, f"{where} summary", nonblank=True))
        if not callable(self.handler):
            raise TypeError(f"{where} handler must be callable")
        object.__setattr__(self, "description", _text(self.description, f"{where} description"))
        group = _text(self.group, f"{where} group")
        if utf8_size(group) > QUERY_BYTES:
            raise ConfigurationError(
                f"{where} group is {utf8_size(group)} UTF-8 bytes; a search filter "
                f"accepts at most {QUERY_BYTES}, so it could never be searched"
            )
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "source", _text(self.source, f"{where} source"))
        examples = self.examples
        if isinstance(examples, str) or not isinstance(examples, Sequence):
            raise TypeError(f"{where} examples must be a sequence of str")
        object.__setattr__(
            self,
            "examples",
            tuple(_text(e, f"{where} example {i}") for i, e in enumerate(examples)),
        )


@dataclass(frozen=True, slots=True)
class OperationSpec:
    """The full definition of an operation, as ``inspect`` returns it.

    ``input_schema`` and ``output_schema`` are detached JSON values (``None`` when
    the operation declared no output schema); every access returns a fresh copy.
    """

    name: str
    group: str
    summary: str
    description: str
    examples: tuple[str, ...]
    _input_schema: JSONValue = field(repr=False)
    _output_schema: JSONValue = field(repr=False)

    @property
    def input_schema(self) -> JSONValue:
        """The operation's input schema (a fresh detached copy)."""
        return detach(self._input_schema)

    @property
    def output_schema(self) -> JSONValue:
        """The operation's output schema, or ``None`` (a fresh detached copy)."""
        return detach(self._output_schema)


@dataclass(frozen=True, slots=True)
class Summary:
    """One search result: an operation's name, group and complete summary."""

    name: str
    group: str
    summary: str


@dataclass(frozen=True, slots=True)
class SearchPage:
    """A page of search results and, when more may follow, the cursor to continue."""

    items: tuple[Summary, ...]
    next_cursor: str | None = None
