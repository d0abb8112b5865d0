"""Tests of ``opgate._invoke_request``: an invoke request's options and arguments.

The option checks (``input_support``, ``progress``, ``input_expiry``, ``lifetime``) and
the argument checks in their order: the byte budget (measured in C, whatever a ``str``
or ``bytes`` subclass says of itself), the strict parse with the numeric profile, the
object check and the input schema, with messages that never echo argument values.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from invoke_support import code, invoke, make
from opgate import Completed, FailureCode, Invocation, Limits, Result, Text, finish

pytestmark = pytest.mark.anyio


async def test_arguments_as_bytes_and_mapping() -> None:
    reg, handler = make()
    assert isinstance(await invoke(reg, b'{"order": 7}'), Completed)
    assert isinstance(await invoke(reg, {"order": 7, "amount": 0.01}), Completed)
    assert handler.arguments[-1]["amount"] == Decimal("0.01")


@pytest.mark.parametrize(
    "arguments",
    [
        "[1, 2]",
        '"text"',
        "null",
        "7",
        b"\xff\xfe",
        '{"order": 7, "order": 8}',
        '{"order": 1e1000000000}',
        '{"order": NaN}',
        '{"order": 7',
        '{"order": 7} trailing',
        "[" * 100_000 + "]" * 100_000,
        '{"order": "7"}',
        '{"order": 0}',
        '{"order": 7, "extra": 1}',
        '{"note": "x"}',
        '{"order": 7, "amount": 0.001}',
        ["not", "a", "mapping"],
        None,
        12,
    ],
)
async def test_invalid_arguments(arguments: Any) -> None:
    reg, handler = make()
    outcome = await invoke(reg, arguments)
    assert code(outcome) is FailureCode.INVALID_ARGUMENTS
    assert handler.calls == []


async def test_oversize_arguments_rejected_before_parsing() -> None:
    reg, _ = make()
    big = '{"order": 7, "note": "' + "x" * (10 * 1024 * 1024) + '"}'
    outcome = await invoke(reg, big)
    assert code(outcome) is FailureCode.INVALID_ARGUMENTS
    assert "bytes" in outcome.failure.message
    assert len(outcome.failure.message) < 200


async def test_failure_messages_do_not_echo_argument_values() -> None:
    reg, _ = make()
    secret = "s3cr3t-" + "v" * 100
    outcome = await invoke(reg, json.dumps({"order": 7, "note": secret}))
    assert code(outcome) is FailureCode.INVALID_ARGUMENTS
    assert "s3cr3t" not in outcome.failure.message
    assert "/note" in outcome.failure.message
    dup = await invoke(reg, '{"' + secret + '": 1, "' + secret + '": 2}')
    assert code(dup) is FailureCode.INVALID_ARGUMENTS
    assert secret not in dup.failure.message


@pytest.mark.parametrize(
    "options",
    [
        {"input_support": "form"},
        {"input_support": {"form-ish"}},
        {"input_support": 7},
        {"progress": "not callable"},
        {"input_expiry": 5},
        {"input_expiry": __import__("datetime").timedelta(0)},
        {"lifetime": object()},
    ],
)
async def test_bad_invoke_options_are_invalid_requests(options: dict[str, Any]) -> None:
    reg, handler = make()
    outcome = await invoke(reg, **options)
    assert code(outcome) is FailureCode.INVALID_REQUEST
    assert handler.calls == []


async def test_integral_arguments_reach_the_handler_as_int() -> None:
    seen: list[Any] = []

    def handler(invocation: Invocation) -> Any:
        seen.append(invocation.arguments)
        return finish(Result([Text("ok")], structured={"refunded": 7}))

    reg, _ = make(
        handler, input_schema={"type": "object", "properties": {"order": {"type": "integer"}}}
    )
    for spelling in ("3.0", "3e0", "30E-1", "3"):
        assert isinstance(await invoke(reg, f'{{"order": {spelling}, "rate": 2.50}}'), Completed)
    for arguments in seen:
        assert arguments == {"order": 3, "rate": Decimal("2.5")}
        assert type(arguments["order"]) is int
        assert str(arguments["rate"]) == "2.5"
    assert list(range(seen[0]["order"])) == [0, 1, 2]


async def test_argument_messages_may_name_the_agents_own_members() -> None:
    reg, _ = make(input_schema={"type": "object", "properties": {"my_field": {"type": "string"}}})
    outcome = await invoke(reg, '{"my_field": 1}')
    assert code(outcome) is FailureCode.INVALID_ARGUMENTS
    assert "my_field" in outcome.failure.message


class _Unencoded(str):
    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b""


class _Lengthless(bytes):
    def __len__(self) -> int:
        return 0


class _LengthlessArray(bytearray):
    def __len__(self) -> int:
        return 0


async def test_the_argument_budget_counts_the_bytes_of_str_and_bytes_subclasses() -> None:
    # The budget measured the text with its own encode / __len__: a subclass that
    # overrode them had arguments of any size parsed and passed to the handler.
    reg, handler = make(limits=Limits(argument_bytes=256))
    text = '{"order": 7' + " " * 300 + "}"
    for arguments in (
        text,
        _Unencoded(text),
        text.encode(),
        _Lengthless(text.encode()),
        _LengthlessArray(text.encode()),
    ):
        outcome = await invoke(reg, arguments)
        assert code(outcome) is FailureCode.INVALID_ARGUMENTS, type(arguments)
        assert "312 bytes, over the limit of 256 bytes" in outcome.failure.message
    assert handler.calls == []


BIG_INPUT = {
    "type": "object",
    "properties": {
        "x": {
            "type": "array",
            "items": {"type": "integer", "multipleOf": 3, "minimum": Decimal("1e3999")},
        },
        "m": {"type": "integer", "maximum": 2 * 10**4000, "exclusiveMinimum": Decimal("1e4000")},
        "c": {"const": 10**4000},
        "e": {"enum": [Decimal("3e4000"), 1]},
        "u": {"type": "array", "uniqueItems": True},
    },
    "additionalProperties": False,
}


async def test_many_large_exponents_reach_the_handler_exactly() -> None:
    reg, handler = make(input_schema=BIG_INPUT, output_schema=None)
    text = (
        '{"x": [' + ",".join(["3e4000"] * 17) + '], "m": 15e3999, "c": 1.0e4000,'
        ' "e": 30e3999, "u": [1e4000, 2e4000]}'
    )
    outcome = await invoke(reg, text)
    assert isinstance(outcome, Completed), outcome
    seen = handler.arguments[-1]
    assert seen == {
        "x": [3 * 10**4000] * 17,
        "m": 15 * 10**3999,
        "c": 10**4000,
        "e": 3 * 10**4000,
        "u": [10**4000, 2 * 10**4000],
    }
    # a large exponent stays a normalized Decimal: exact, and as short as its text
    assert all(type(item) is Decimal for item in seen["x"])
    assert str(seen["m"]) == "1.5E+4000"
    # every check stays exact at these sizes
    for broken, pointer in (
        ('{"x": [3e4000, 3e4000, 1e4000]}', "/x/2"),  # not a multiple of 3
        ('{"x": [9e3998]}', "/x/0"),  # below the minimum
        ('{"x": [1.5]}', "/x/0"),  # not an integer
        ('{"m": 1e4000}', "/m"),  # not above the exclusive minimum
        ('{"m": 20000000000000000000001e3978}', "/m"),  # above the maximum by one part in 1e22
        ('{"c": 10000000000000000000001e3978}', "/c"),
        ('{"e": 3000000000000000000001e3979}', "/e"),
        ('{"u": [1e4000, 10e3999]}', "/u"),  # equal values
    ):
        failed = await invoke(reg, broken)
        assert code(failed) is FailureCode.INVALID_ARGUMENTS, broken
        assert pointer in failed.failure.message, (broken, failed.failure.message)
