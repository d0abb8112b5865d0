"""A catalog for the wire tests: numbers, forms and schemas the SDK's own JSON would bend.

``opgate serve tests.mcp_wire_catalog:build_registry`` serves it (16 KiB results,
4 KiB definitions). Every operation reports what it received as canonical JSON, so a
test reads the exact values the handler saw.
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from typing import Any

from opgate import (
    FormInput,
    InputAction,
    Invocation,
    Limits,
    Operation,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate._json import canonical_text

#: The structured result of ``wire.numbers``: no double holds either number.
HUGE = Decimal("1" * 400 + ".5")
TINY = Decimal("1e-400")

#: 3,680 bytes as JSON escapes it (1,880 raw UTF-8 bytes): quotes, backslashes, control
#: characters and non-ASCII text, which the 2026-07-28 HTTP transport writes as escapes.
ESCAPED_DESCRIPTION = '"\\' * 800 + "\x01é😀" * 40

#: A form of 24 numbers bounded by 1e4000: 7 bytes each in canonical JSON, 4,001 digits
#: each when written as integers (about 96 KB against a 16 KiB budget).
WIDE_FORM = {
    "type": "object",
    "properties": {
        f"n{index:02d}": {"type": "number", "maximum": Decimal("1e4000")} for index in range(24)
    },
}

#: A form only 2025-11-25 and later can show: a multiselect and a titled choice.
RICH_FORM = {
    "type": "object",
    "properties": {
        "colours": {
            "type": "array",
            "maxItems": 2,
            "items": {"type": "string", "enum": ["red", "green", "blue"]},
        },
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
    },
}

#: A form of the 2025-06-18 profile: primitives only.
PLAIN_FORM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "Confirm"}, "note": {"type": "string"}},
    "required": ["ok"],
}

#: An input schema of 40 properties bounded by 1e4000 (1,022 bytes as written here).
WIDE_SCHEMA = {
    "type": "object",
    "properties": {f"p{index:02d}": {"maximum": Decimal("1e4000")} for index in range(40)},
}


def seen(inv: Invocation) -> str:
    return canonical_text(dict(inv.arguments))


def echo(inv: Invocation) -> Any:
    return finish(Result([Text(seen(inv))], structured=dict(inv.arguments)))


#: 12,000 bytes of UTF-8 text, 24,000 once written ASCII-only (``\\u754c`` each).
WIDE_TEXT = "\u754c" * 4000


def wide_text(inv: Invocation) -> Any:
    return finish(Result([Text(WIDE_TEXT)]))


async def wide_prompt(inv: Invocation) -> Any:
    if inv.resume is not None:
        return finish(Result([Text(inv.resume.action.value)]))
    return await_input(FormInput("\u754c" * 4500, PLAIN_FORM, state={"n": 0}))


def noisy(inv: Invocation) -> Any:
    """Writes to stdout (Python's and descriptor 1) and reads stdin: over stdio neither
    may touch the wire."""
    print("noise on sys.stdout", flush=True)
    os.write(1, b"noise on fd 1\n")
    read = sys.stdin.read()
    return finish(Result([Text(f"read {read!r}")]))


def numbers(inv: Invocation) -> Any:
    return finish(Result(structured={"huge": HUGE, "tiny": TINY}))


def ask(form: dict[str, Any]) -> Any:
    async def handler(inv: Invocation) -> Any:
        if inv.resume is None:
            return await_input(FormInput("Fill in the form", form, state={"n": 0}))
        if inv.resume.action is not InputAction.ACCEPT:
            return finish(Result([Text(inv.resume.action.value)]))
        answers = inv.resume.answers
        return finish(Result([Text(canonical_text(answers))], structured=answers))

    return handler


NUMBER_FORM = {
    "type": "object",
    "properties": {"n": {"type": "number", "maximum": Decimal("0.3")}},
    "required": ["n"],
}


def operations() -> list[Operation]:
    bounded = {"type": "object", "properties": {"n": {"type": "number", "maximum": 0.3}}}
    return [
        Operation("wire.echo", "Echo the arguments exactly", echo, group="wire"),
        Operation("wire.bounded", "A number up to 0.3", echo, group="wire", input_schema=bounded),
        Operation(
            "wire.numbers",
            "Numbers no double holds",
            numbers,
            group="wire",
            output_schema={"type": "object"},
        ),
        Operation("wire.noisy", "Prints and reads stdin", noisy, group="wire"),
        Operation("wire.wide_text", "Text of 4,000 CJK characters", wide_text, group="wire"),
        Operation(
            "wire.wide_prompt", "A prompt of 4,500 CJK characters", wide_prompt, group="wire"
        ),
        Operation("wire.wide_form", "A form of large bounds", ask(WIDE_FORM), group="wire"),
        Operation("wire.rich_form", "A 2025-11-25 form", ask(RICH_FORM), group="wire"),
        Operation("wire.plain_form", "A 2025-06-18 form", ask(PLAIN_FORM), group="wire"),
        Operation("wire.number_form", "A number up to 0.3", ask(NUMBER_FORM), group="wire"),
        Operation(
            "wire.escaped_text",
            "A description written in escapes",
            echo,
            group="wire",
            description=ESCAPED_DESCRIPTION,
        ),
        Operation(
            "wire.wide_schema",
            "A schema of large bounds",
            echo,
            group="wire",
            input_schema=WIDE_SCHEMA,
        ),
    ]


class AllowAll:
    def scope_key(self, ctx: Any) -> str:
        return "everyone"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


LIMITS = Limits(result_bytes=16 * 1024, definition_bytes=4 * 1024)


def build_registry() -> Registry:
    return Registry(operations(), AllowAll(), limits=LIMITS)
