"""Operations from typed functions (``opgate.operation``), driven through a real ``Registry``.

Every annotation kind of issue 22 item 1, the exactness of what the function receives,
sync and async functions, each kind of return value, the ``Invocation`` parameter (a form
round trip, a URL hand-off, progress) and the construction failures that name the
parameter; one test serves typed operations over MCP to the official client.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import sys
import threading
import types as types_module
import typing
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, NotRequired

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from opgate import (
    Completed,
    ConfigurationError,
    Failed,
    FailureCode,
    FormInput,
    FormPrompt,
    InputAction,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    OperationSpec,
    Outcome,
    Pending,
    ProgressUpdate,
    Registry,
    Result,
    Text,
    URLInput,
    URLPrompt,
    await_input,
    fail,
    finish,
    operation,
)

from conftest import AllowAll

pytestmark = pytest.mark.anyio


# -- types used by the operations (module level: annotations resolve in module globals) --


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


class Address(TypedDict):
    """A postal address."""

    street: str
    zip: NotRequired[int]


@dataclasses.dataclass
class Point:
    x: int
    y: Decimal


class Item(BaseModel):
    """One line of an order."""

    sku: str
    price: Decimal
    quantity: Annotated[int, Field(ge=1)] = 1


class Even(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even")
        return value


class Refund(BaseModel):
    order: int
    amount: Decimal
    color: Color


class Totals(TypedDict):
    count: int
    total: Decimal


@dataclasses.dataclass
class Receipt:
    order: int
    amount: Decimal
    tags: tuple[str, ...] = ()


class Opaque:
    """A class pydantic cannot describe."""


async def registry(*operations: Operation) -> Registry:
    return Registry(list(operations), AllowAll())


async def spec_of(op: Operation) -> OperationSpec:
    spec = await (await registry(op)).inspect(None, op.name)
    assert isinstance(spec, OperationSpec)
    return spec


async def invoke(op: Operation, arguments: str | dict[str, Any], **options: Any) -> Any:
    return await (await registry(op)).invoke(None, op.name, arguments, **options)


def completed(outcome: object) -> Result:
    assert isinstance(outcome, Completed), outcome
    return outcome.result


def failed(outcome: object) -> tuple[FailureCode, str]:
    assert isinstance(outcome, Failed), outcome
    return outcome.failure.code, outcome.failure.message


class Seen:
    """What the function received, keyed by parameter."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}


# -- texts and names -------------------------------------------------------------------


def test_bare_decorator_takes_name_summary_and_description_from_the_function() -> None:
    @operation
    def lookup_order(order: int) -> str:
        """Look up an order
        by its number.

        Returns the order's status.

        Second paragraph."""
        return "ok"

    assert isinstance(lookup_order, Operation)
    assert lookup_order.name == "lookup_order"
    assert lookup_order.summary == "Look up an order by its number."
    assert lookup_order.description == "Returns the order's status.\n\nSecond paragraph."
    assert lookup_order.group == ""
    assert lookup_order.handler.__wrapped__.__name__ == "lookup_order"  # type: ignore[attr-defined]


def test_a_group_prefixes_the_name_and_every_text_can_be_overridden() -> None:
    @operation(group="orders")
    def refund(order: int) -> str:
        """Refund an order."""
        return "ok"

    assert (refund.name, refund.group, refund.summary) == (
        "orders.refund",
        "orders",
        "Refund an order.",
    )

    @operation(
        name="orders.give-back",
        group="orders",
        summary="Give money back",
        description="Longer text",
        examples=("refund order 7",),
        source="shop.py",
    )
    def other(order: int) -> str:
        """Ignored docstring."""
        return "ok"

    assert other.name == "orders.give-back"
    assert (other.summary, other.description) == ("Give money back", "Longer text")
    assert (other.examples, other.source) == (("refund order 7",), "shop.py")


def test_names_outside_the_rule_and_missing_summaries_are_refused() -> None:
    def café(x: int) -> str:
        """Coffee."""
        return "ok"

    with pytest.raises(ConfigurationError, match=r"café.*pass name="):
        operation(café)
    assert operation(name="cafe")(café).name == "cafe"
    with pytest.raises(ConfigurationError, match=r"<lambda>.*pass name="):
        operation(lambda: "x")
    with pytest.raises(ConfigurationError, match=r"spaced out.*pass name="):
        operation(group="spaced out")(café)

    def undocumented(x: int) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match=r"undocumented.*docstring or pass summary="):
        operation(undocumented)
    assert operation(summary="Documented now")(undocumented).summary == "Documented now"


# -- input schemas ---------------------------------------------------------------------


@operation
def everything(
    count: int,
    ratio: float,
    amount: Decimal,
    label: str,
    flag: bool,
    mode: Literal["fast", "slow"],
    color: Color,
    size: Size,
    tags: list[str],
    scores: dict[str, int],
    pair: tuple[int, str],
    many: tuple[int, ...],
    address: Address,
    point: Point,
    item: Item,
    bounded: Annotated[int, Field(description="between 1 and 9", ge=1, le=9)],
    note: str | None = None,
    limit: int = 10,
    price: Decimal = Decimal("1.50"),
    weight: float = Field(0.5, description="in kilograms", gt=0),
) -> str:
    """Take one of every kind."""
    return "ok"


async def test_every_annotation_kind_has_its_schema() -> None:
    spec = await spec_of(everything)
    schema = spec.input_schema
    assert isinstance(schema, dict)
    properties = schema["properties"]
    assert properties["count"] == {"type": "integer"}
    double = Decimal("1.7976931348623157E+308")
    assert properties["ratio"] == {"type": "number", "maximum": double, "minimum": -double}
    assert properties["amount"] == {"type": "number"}  # not pydantic's number-or-string
    assert properties["label"] == {"type": "string"}
    assert properties["flag"] == {"type": "boolean"}
    assert properties["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert properties["color"] == {"$ref": "#/$defs/Color"}
    assert schema["$defs"]["Color"] == {"enum": ["red", "blue"], "title": "Color", "type": "string"}
    assert schema["$defs"]["Size"]["enum"] == [1, 2]
    assert properties["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert properties["scores"] == {"additionalProperties": {"type": "integer"}, "type": "object"}
    assert properties["pair"] == {
        "maxItems": 2,
        "minItems": 2,
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "type": "array",
    }
    assert properties["many"] == {"items": {"type": "integer"}, "type": "array"}
    address = schema["$defs"]["Address"]
    assert address["required"] == ["street"]
    assert address["description"] == "A postal address."
    assert schema["$defs"]["Point"]["properties"]["y"] == {"type": "number"}
    assert schema["$defs"]["Item"]["properties"]["quantity"] == {
        "default": 1,
        "minimum": 1,
        "type": "integer",
    }
    assert properties["bounded"] == {
        "description": "between 1 and 9",
        "maximum": 9,
        "minimum": 1,
        "type": "integer",
    }
    assert properties["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert properties["limit"] == {"default": 10, "type": "integer"}
    assert properties["price"] == {"default": Decimal("1.5"), "type": "number"}  # a number
    assert properties["weight"] == {
        "default": Decimal("0.5"),
        "description": "in kilograms",
        "exclusiveMinimum": 0,
        "maximum": double,
        "type": "number",
    }
    assert schema["additionalProperties"] is False
    assert schema["type"] == "object"
    assert schema["required"] == [
        "count", "ratio", "amount", "label", "flag", "mode", "color", "size", "tags",
        "scores", "pair", "many", "address", "point", "item", "bounded",
    ]  # fmt: skip
    assert "title" not in schema  # no internal model name
    assert all("title" not in p for p in properties.values())  # no titles from names
    assert spec.output_schema is None  # -> str


def test_the_schema_is_a_plain_operation_schema() -> None:
    assert isinstance(everything.input_schema, dict)
    assert everything.input_schema["properties"]["count"] == {"type": "integer"}
    assert everything.output_schema is None


async def test_parameters_named_like_model_attributes_and_underscores() -> None:
    @operation
    def odd(json: str, copy: int, _private: bool, model_config: str = "x") -> str:
        """Odd names."""
        return f"{json} {copy} {_private} {model_config}"

    spec = await spec_of(odd)
    assert isinstance(spec.input_schema, dict)
    assert list(spec.input_schema["properties"]) == ["_private", "copy", "json", "model_config"]
    result = completed(await invoke(odd, {"json": "j", "copy": 2, "_private": True}))
    assert result.content == (Text("j 2 True x"),)


# -- what the function receives --------------------------------------------------------


def recording(seen: Seen) -> Operation:
    @operation(name="record")
    def record(
        count: int = 0,
        ratio: float = 0.0,
        amount: Decimal = Decimal(0),
        flag: bool = False,
        mode: Literal[1, 2] = 1,
        color: Color = Color.RED,
        size: Size = Size.SMALL,
        pair: tuple[int, str] = (0, ""),
        address: Address | None = None,
        point: Point | None = None,
        items: list[Item] | None = None,
        either: int | str = 0,
        anything: Any = None,
        mapping: dict[str, Decimal] | None = None,
    ) -> str:
        """Record what arrives."""
        seen.values.update(locals())
        return "ok"

    return record


async def test_values_arrive_as_the_annotated_types() -> None:
    seen = Seen()
    op = recording(seen)
    arguments = (
        '{"count": 3, "ratio": 2.5, "amount": 0.1, "flag": true, "mode": 2, "color": "blue",'
        ' "size": 2, "pair": [1, "a"], "address": {"street": "Main"},'
        ' "point": {"x": 1, "y": 0.30}, "items": [{"sku": "s", "price": 19.99}],'
        ' "either": "5", "anything": [1.5, {"k": null}], "mapping": {"a": 1e-7}}'
    )
    completed(await invoke(op, arguments))
    v = seen.values
    assert type(v["count"]) is int
    assert v["count"] == 3
    assert type(v["ratio"]) is float
    assert v["ratio"] == 2.5
    assert type(v["amount"]) is Decimal
    assert v["amount"] == Decimal("0.1")
    assert v["flag"] is True
    assert v["mode"] == 2
    assert v["color"] is Color.BLUE
    assert v["size"] is Size.LARGE
    assert v["pair"] == (1, "a")
    assert v["address"] == {"street": "Main"}
    assert v["point"] == Point(1, Decimal("0.3"))
    assert type(v["point"].y) is Decimal
    assert v["items"] == [Item(sku="s", price=Decimal("19.99"))]
    assert str(v["items"][0].price) == "19.99"
    assert v["either"] == "5"  # a string stays a string in a union with int
    assert v["anything"] == [Decimal("1.5"), {"k": None}]  # JSON values, exact
    assert v["mapping"] == {"a": Decimal("1E-7")}


async def test_defaults_fill_what_was_left_out() -> None:
    seen = Seen()
    completed(await invoke(recording(seen), "{}"))
    assert seen.values["count"] == 0
    assert seen.values["amount"] == Decimal(0)
    assert seen.values["color"] is Color.RED
    assert seen.values["address"] is None


async def test_exact_numbers_arrive_exactly() -> None:
    seen = Seen()
    op = recording(seen)
    completed(await invoke(op, '{"amount": 0.1, "count": 1e400}'))
    assert seen.values["amount"] == Decimal("0.1")
    assert seen.values["count"] == 10**400  # integral: an exact int, no float on the way
    assert type(seen.values["count"]) is int
    completed(await invoke(op, '{"amount": 1e400}'))
    assert seen.values["amount"] == Decimal("1E+400")
    completed(await invoke(op, '{"amount": 123456789012345678901234567890.123456789}'))
    assert str(seen.values["amount"]) == "123456789012345678901234567890.123456789"
    completed(await invoke(op, '{"amount": 7}'))
    assert seen.values["amount"] == Decimal(7)
    assert type(seen.values["amount"]) is Decimal
    completed(await invoke(op, '{"count": 3.0}'))  # an integral number is an integer
    assert seen.values["count"] == 3
    assert type(seen.values["count"]) is int


async def test_no_coercion_the_schema_did_not_allow() -> None:
    seen = Seen()
    op = recording(seen)
    for arguments, pointer in [
        ('{"count": "5"}', "/count"),
        ('{"count": 2.5}', "/count"),
        ('{"count": true}', "/count"),
        ('{"flag": 1}', "/flag"),
        ('{"flag": "true"}', "/flag"),
        ('{"amount": "0.1"}', "/amount"),
        ('{"ratio": "2.5"}', "/ratio"),
        ('{"ratio": true}', "/ratio"),
        ('{"ratio": 1e400}', "/ratio"),  # beyond a double: refused, not inf
        ('{"ratio": -1e400}', "/ratio"),
        ('{"mode": true}', "/mode"),  # true is not 1
        ('{"mode": "1"}', "/mode"),
        ('{"color": "RED"}', "/color"),
        ('{"size": "1"}', "/size"),
        ('{"pair": [1, 2]}', "/pair/1"),
        ('{"pair": [1, "a", 3]}', "/pair"),
        # Optional parameters are an anyOf: the violation is reported at the parameter.
        ('{"point": {"x": "1", "y": 0}}', "/point"),
        ('{"items": [{"sku": "s", "price": "1"}]}', "/items"),
        ('{"items": [{"sku": "s", "price": 1, "quantity": 0}]}', "/items"),
        ('{"address": {"street": "s", "zip": "12345"}}', "/address"),
        ('{"mapping": {"a": "1"}}', "/mapping"),
        ('{"unknown": 1}', ""),
    ]:
        code, message = failed(await invoke(op, arguments))
        assert code is FailureCode.INVALID_ARGUMENTS, arguments
        assert pointer in message, (arguments, message)
    assert seen.values == {}  # the function never ran


class Strict(BaseModel):
    """A model in strict mode: Python values of exactly its types only."""

    model_config = ConfigDict(strict=True)

    amount: Decimal
    ratio: float
    pair: tuple[int, int]
    color: Color


async def test_strict_types_receive_what_the_schema_admitted() -> None:
    # Strict mode would refuse the JSON values themselves (an integer for a Decimal, an
    # array for a tuple, a string for an Enum); the exact validation already decided.
    seen = Seen()

    @operation
    def record(value: Strict, count: Annotated[float, Field(strict=True)]) -> str:
        """Record."""
        seen.values.update(value=value, count=count)
        return ""

    arguments = {"value": {"amount": 2, "ratio": 1, "pair": [1, 2], "color": "red"}, "count": 3}
    completed(await invoke(record, arguments))
    assert seen.values["value"] == Strict(
        amount=Decimal(2), ratio=1.0, pair=(1, 2), color=Color.RED
    )
    assert type(seen.values["count"]) is float


async def test_mapping_keys_are_checked_by_the_schema() -> None:
    # JSON keys are strings: an int key is one written as an integer, a str key with a
    # pattern must match it; pydantic would coerce or refuse them after the schema.
    seen = Seen()

    @operation
    def keyed(
        counts: dict[int, int] | None = None,
        codes: dict[Annotated[str, Field(pattern="^[a-z]+$")], int] | None = None,
        colors: dict[Color, int] | None = None,
    ) -> str:
        """Keyed."""
        seen.values.update(counts=counts, codes=codes, colors=colors)
        return ""

    completed(await invoke(keyed, {"counts": {"-3": 1, "0": 2, "10": 3}, "codes": {"ab": 1}}))
    assert seen.values["counts"] == {-3: 1, 0: 2, 10: 3}
    assert seen.values["codes"] == {"ab": 1}
    completed(await invoke(keyed, {"colors": {"red": 1}}))
    assert seen.values["colors"] == {Color.RED: 1}
    for arguments in [
        {"counts": {"abc": 1}},
        {"counts": {"05": 1}},
        {"counts": {" 5": 1}},
        {"counts": {"1_000": 1}},
        {"counts": {"+1": 1}},
        {"codes": {"AB": 1}},
        {"colors": {"RED": 1}},
    ]:
        code, _ = failed(await invoke(keyed, arguments))
        assert code is FailureCode.INVALID_ARGUMENTS, arguments


def test_mapping_keys_without_a_string_form_are_refused() -> None:
    # "nan" would become a float NaN, "yes" True: no schema can say which strings fit.
    for key in (float, bool, Decimal, Annotated[int, Field(ge=0)], tuple[int, int], Size):

        def keyed(fine: int, mapping: Any) -> str:
            """Keyed."""
            return ""

        keyed.__annotations__["mapping"] = dict[key, int]  # type: ignore[valid-type]
        with pytest.raises(ConfigurationError, match=r"parameter 'mapping'.*keys"):
            operation(keyed)


async def test_structured_results_write_mapping_keys_as_strings() -> None:
    class Histogram(BaseModel):
        counts: dict[int, int]

    @operation
    def histogram(n: int) -> Histogram:
        """Histogram."""
        return Histogram(counts={n: 1, -n: 2})

    @operation
    def by_color(n: int) -> dict[Color, int]:
        """By color."""
        return {Color.RED: n}

    assert completed(await invoke(histogram, {"n": 3})).structured == {"counts": {"3": 1, "-3": 2}}
    assert completed(await invoke(by_color, {"n": 3})).structured == {"red": 3}


async def test_a_type_own_validation_refusing_a_valid_value_fails_the_call() -> None:
    @operation
    def halve(number: Even) -> str:
        """Halve an even number."""
        return str(number.value // 2)

    assert completed(await invoke(halve, {"number": {"value": 8}})).content == (Text("4"),)
    code, message = failed(await invoke(halve, {"number": {"value": 7}}))
    assert code is FailureCode.OPERATION_FAILED
    assert message == "invalid arguments: /number/value: Value error, must be even"
    assert "7" not in message


async def test_the_refusal_pointer_escapes_names_as_the_core_does() -> None:
    # RFC 6901: "/" within a name is "~1" and "~" is "~0", as in invalid_arguments.
    @operation
    def evens(numbers: dict[str, Even]) -> str:
        """Evens."""
        return ""

    _, message = failed(await invoke(evens, {"numbers": {"a/b~c": {"value": 7}}}))
    assert message == "invalid arguments: /numbers/a~1b~0c/value: Value error, must be even"


async def test_a_float_receives_the_nearest_double() -> None:
    seen = Seen()
    completed(await invoke(recording(seen), '{"ratio": 0.1}'))
    assert seen.values["ratio"] == 0.1
    assert type(seen.values["ratio"]) is float
    completed(await invoke(recording(seen), '{"ratio": 1.7976931348623157e308}'))
    assert seen.values["ratio"] == 1.7976931348623157e308


# -- sync and async --------------------------------------------------------------------


async def test_sync_functions_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    threads: dict[str, threading.Thread] = {}

    @operation
    def sync_op(x: int) -> str:
        """Sync."""
        threads["sync"] = threading.current_thread()
        return f"sync {x}"

    @operation
    async def async_op(x: int) -> str:
        """Async."""
        await anyio.sleep(0)
        threads["async"] = threading.current_thread()
        return f"async {x}"

    assert completed(await invoke(sync_op, {"x": 1})).content == (Text("sync 1"),)
    assert completed(await invoke(async_op, {"x": 2})).content == (Text("async 2"),)
    assert threads["sync"] is not threading.current_thread()
    assert threads["async"] is threading.current_thread()


# -- results ---------------------------------------------------------------------------


class Lookup:
    """A callable object: its ``__call__`` carries the annotations."""

    def __call__(self, order: int, inv: Invocation) -> str:
        return f"order {order}"


class AsyncLookup:
    async def __call__(self, order: int) -> Totals:
        return {"count": order, "total": Decimal("0.5")}


def prefixed(prefix: str, order: int) -> str:
    return f"{prefix}{order}"


async def test_callable_objects_and_partials_are_functions_too() -> None:
    sync_op = operation(name="lookup", summary="Look up.")(Lookup())
    async_op = operation(name="alookup", summary="Look up.")(AsyncLookup())
    partial_op = operation(name="partial", summary="Partial.")(functools.partial(prefixed, "#"))
    assert list(sync_op.input_schema["properties"]) == ["order"]
    assert list(partial_op.input_schema["properties"]) == ["order"]
    assert async_op.output_schema is not None
    assert completed(await invoke(sync_op, {"order": 1})).content == (Text("order 1"),)
    assert completed(await invoke(async_op, {"order": 2})).structured == {
        "count": 2,
        "total": Decimal("0.5"),
    }
    assert completed(await invoke(partial_op, {"order": 3})).content == (Text("#3"),)


async def test_str_becomes_text_and_none_an_empty_result() -> None:
    @operation
    def greet(name: str) -> str:
        """Greet."""
        return f"hello {name}"

    @operation
    def forget(name: str) -> None:
        """Forget."""

    greeting = completed(await invoke(greet, {"name": "ann"}))
    assert greeting.content == (Text("hello ann"),)
    assert not greeting.has_structured
    empty = completed(await invoke(forget, {"name": "ann"}))
    assert empty.content == ()
    assert not empty.has_structured
    assert (await spec_of(forget)).output_schema is None


@pytest.mark.parametrize("kind", ["model", "dataclass", "typeddict", "dict"])
async def test_structured_returns_carry_an_output_schema_and_a_text_copy(kind: str) -> None:
    if kind == "model":

        @operation(name="op")
        def op(order: int) -> Refund:
            """Model."""
            return Refund(order=order, amount=Decimal("0.10"), color=Color.BLUE)

        expected = {"order": 7, "amount": Decimal("0.1"), "color": "blue"}
        required = ["order", "amount", "color"]
    elif kind == "dataclass":

        @operation(name="op")
        def op(order: int) -> Receipt:
            """Dataclass."""
            return Receipt(order, Decimal("1E+400"), ("a", "b"))

        expected = {"order": 7, "amount": Decimal("1E+400"), "tags": ["a", "b"]}
        required = ["order", "amount"]
    elif kind == "typeddict":

        @operation(name="op")
        def op(order: int) -> Totals:
            """TypedDict."""
            return {"count": order, "total": Decimal("0.1")}

        expected = {"count": 7, "total": Decimal("0.1")}
        required = ["count", "total"]
    else:

        @operation(name="op")
        def op(order: int) -> dict[str, Decimal]:
            """Dict."""
            return {"total": Decimal("0.1") * order}

        expected = {"total": Decimal("0.7")}
        required = None

    result = completed(await invoke(op, {"order": 7}))
    assert result.structured == expected
    [copy] = result.content
    assert isinstance(copy, Text)
    assert result.structured_json is not None
    assert copy.text == result.structured_json.decode()  # canonical JSON, exact numbers
    assert json.loads(copy.text, parse_float=Decimal) == expected
    output = (await spec_of(op)).output_schema
    assert isinstance(output, dict)
    assert output["type"] == "object"
    assert output.get("required") == required
    if kind in ("model", "dataclass", "typeddict"):
        amount = "total" if kind == "typeddict" else "amount"
        assert output["properties"][amount] == {"type": "number"}  # exact, not a string


async def test_a_structured_value_not_matching_its_schema_is_an_invalid_result() -> None:
    @operation
    def wrong(order: int) -> Totals:
        """Wrong."""
        return typing.cast(Totals, {"count": "seven", "total": 1})

    code, _ = failed(await invoke(wrong, {"order": 7}))
    assert code is FailureCode.INVALID_RESULT


class Transfer(BaseModel):
    """Fields whose JSON names are aliases: a keyword, and camelCase by generator."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    from_: str = Field(alias="from")
    order_number: int


DEFAULT_TRANSFER = Transfer(from_="b", order_number=1)


async def test_a_model_with_aliases_returns_its_json_names() -> None:
    # The output schema names a model's fields by their aliases, as its JSON does; the
    # structured content must too, or every call would be an invalid result.
    @operation
    def move(order_number: int) -> Transfer:
        """Move."""
        return Transfer(from_="a", order_number=order_number)

    @operation
    def loose(order_number: int):  # type: ignore[no-untyped-def]  # judged by the value
        """Loose."""
        return Transfer(from_="a", order_number=order_number)

    assert move.output_schema is not None
    assert sorted(move.output_schema["properties"]) == ["from", "orderNumber"]
    for op in (move, loose):
        result = completed(await invoke(op, {"order_number": 7}))
        assert result.structured == {"from": "a", "orderNumber": 7}

    @operation
    def again(transfer: Transfer = DEFAULT_TRANSFER) -> str:
        """Again: the default is written as the arguments take it."""
        return f"{transfer.from_} {transfer.order_number}"

    default = again.input_schema["properties"]["transfer"]["default"]
    assert default == {"from": "b", "orderNumber": 1}
    assert completed(await invoke(again, {"transfer": default})).content == (Text("b 1"),)


async def test_outcomes_and_results_are_returned_as_they_are() -> None:
    @operation
    def decide(how: Literal["fail", "finish", "result"]) -> Outcome | Result:
        """Decide."""
        if how == "fail":
            return fail("not today", {"retry": True})
        if how == "finish":
            return finish(Result([Text("finished")], structured={"a": 1}))
        return Result([Text("a result")])

    code, message = failed(await invoke(decide, {"how": "fail"}))
    assert (code, message) == (FailureCode.OPERATION_FAILED, "not today")
    finished = completed(await invoke(decide, {"how": "finish"}))
    assert (finished.content, finished.structured) == ((Text("finished"),), {"a": 1})
    assert completed(await invoke(decide, {"how": "result"})).content == (Text("a result"),)
    assert (await spec_of(decide)).output_schema is None


async def test_an_outcome_in_a_union_with_a_structured_type_keeps_the_schema() -> None:
    @operation
    def maybe(order: int) -> Refund | Outcome:
        """Maybe."""
        if order < 0:
            return fail("negative")
        return Refund(order=order, amount=Decimal(1), color=Color.RED)

    assert (await spec_of(maybe)).output_schema is not None
    assert completed(await invoke(maybe, {"order": 1})).structured == {
        "order": 1,
        "amount": 1,
        "color": "red",
    }
    assert failed(await invoke(maybe, {"order": -1})) == (FailureCode.OPERATION_FAILED, "negative")


async def test_unannotated_returns_are_judged_by_the_value() -> None:
    @operation
    def loose(kind: str):  # type: ignore[no-untyped-def]
        """Loose."""
        return {"dict": {"k": Decimal("0.5")}, "model": Item(sku="a", price=Decimal(2))}.get(
            kind, 5
        )

    assert (await spec_of(loose)).output_schema is None
    assert completed(await invoke(loose, {"kind": "dict"})).structured == {"k": Decimal("0.5")}
    model = completed(await invoke(loose, {"kind": "model"}))
    assert model.structured == {"sku": "a", "price": 2, "quantity": 1}
    code, _ = failed(await invoke(loose, {"kind": "int"}))
    assert code is FailureCode.INTERNAL  # an int is no result


# -- the Invocation parameter ----------------------------------------------------------

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@operation(group="orders")
async def cancel(order: int, reason: str, inv: Invocation) -> Outcome | Refund:
    """Cancel an order, after a person confirms."""
    if inv.resume is None:
        return await_input(FormInput(f"Cancel order {order}?", CONFIRM, state={"order": order}))
    if inv.resume.action is not InputAction.ACCEPT or inv.resume.answers != {"ok": True}:
        return fail("not confirmed")
    assert inv.resume.state == {"order": order}
    await inv.report_progress(1, 1, f"cancelled: {reason}")
    return Refund(order=order, amount=Decimal("9.99"), color=Color.RED)


async def test_the_invocation_under_any_name_optional_or_annotated() -> None:
    # FastMCP's habit, ``ctx: Context | None = None``, and annotated forms.
    got: list[object] = []

    @operation
    def optional(order: int, context: Invocation | None = None) -> str:
        """Optional."""
        got.append(context)
        return ""

    @operation
    def old_style(order: int, context: typing.Optional[Invocation] = None) -> str:  # noqa: UP045
        """Old style."""
        got.append(context)
        return ""

    @operation
    def annotated(ctx: Annotated[Invocation, "the call"], /, order: int) -> str:
        """Annotated, positional-only."""
        got.append(ctx)
        return ""

    for op in (optional, old_style, annotated):
        assert list(op.input_schema["properties"]) == ["order"]
        completed(await invoke(op, {"order": 1}))
    assert len(got) == 3
    assert all(isinstance(value, Invocation) for value in got)


async def test_a_typed_function_asks_for_a_form_and_resumes() -> None:
    spec = await spec_of(cancel)
    assert isinstance(spec.input_schema, dict)
    assert set(spec.input_schema["properties"]) == {"order", "reason"}  # no Invocation
    reg = await registry(cancel)
    arguments = {"order": 7, "reason": "late"}
    pending = await reg.invoke(None, "orders.cancel", arguments, input_support={InputMode.FORM})
    assert isinstance(pending, Pending)
    assert isinstance(pending.prompt, FormPrompt)
    assert pending.prompt.message == "Cancel order 7?"
    updates: list[ProgressUpdate] = []
    outcome = await reg.invoke(
        None,
        "orders.cancel",
        arguments,
        input_support={InputMode.FORM},
        resume=(pending.continuation, InputResponse.accept({"ok": True})),
        progress=updates.append,
    )
    assert completed(outcome).structured == {"order": 7, "amount": Decimal("9.99"), "color": "red"}
    assert updates == [ProgressUpdate(1, 1, "cancelled: late")]
    pending = await reg.invoke(None, "orders.cancel", arguments, input_support={InputMode.FORM})
    assert isinstance(pending, Pending)
    declined = await reg.invoke(
        None,
        "orders.cancel",
        arguments,
        input_support={InputMode.FORM},
        resume=(pending.continuation, InputResponse.decline()),
    )
    assert failed(declined) == (FailureCode.OPERATION_FAILED, "not confirmed")


async def test_a_sync_typed_function_hands_off_to_a_url_and_reports_progress() -> None:
    @operation(name="pay")
    def pay(invocation: Invocation, /, amount: Decimal) -> str | Outcome:
        """Pay an amount."""
        if invocation.resume is None:
            return await_input(URLInput("Pay here", "https://pay.example.com/c"))
        invocation.report_progress_sync(1, 2, "charging")
        return f"paid {amount} ({invocation.resume.action.value})"

    reg = await registry(pay)
    pending = await reg.invoke(None, "pay", {"amount": 0.1}, input_support={InputMode.URL})
    assert isinstance(pending, Pending)
    assert isinstance(pending.prompt, URLPrompt)
    assert pending.prompt.url == "https://pay.example.com/c"
    updates: list[ProgressUpdate] = []
    outcome = await reg.invoke(
        None,
        "pay",
        {"amount": 0.1},
        input_support={InputMode.URL},
        resume=(pending.continuation, InputResponse.accept()),
        progress=updates.append,
    )
    assert completed(outcome).content == (Text("paid 0.1 (accept)"),)
    assert updates == [ProgressUpdate(1, 2, "charging")]


# -- construction failures -------------------------------------------------------------


def test_types_the_profile_cannot_express_fail_naming_the_parameter() -> None:
    def opaque(fine: int, thing: Opaque) -> str:
        """Opaque."""
        return ""

    with pytest.raises(ConfigurationError, match=r"'.*opaque'.*parameter 'thing'"):
        operation(opaque)

    def dated(fine: int, when: datetime) -> str:
        """Dated."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'when'.*format 'date-time'"):
        operation(dated)

    def lookaround(fine: int, code: Annotated[str, Field(pattern="^(?!x)")]) -> str:
        """Lookaround."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'code'.*look-around"):
        operation(lookaround)  # pydantic's own validator refuses it first

    def huge(fine: int, text: Annotated[str, Field(max_length=2**40)]) -> str:
        """Huge."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'text'.*maxLength"):
        operation(huge)  # the compiler profile: a count over MAX_COUNT

    def vast(fine: int, n: Annotated[Decimal, Field(le=Decimal("1e5000"))]) -> str:
        """Vast."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'n'.*maximum"):
        operation(vast)  # the numeric work profile

    def old_typed_dict(fine: int, row: typing.TypedDict("Row", {"a": int})) -> str:  # type: ignore[valid-type]
        """On 3.11 pydantic needs typing_extensions.TypedDict."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'row'.*typing_extensions"):
        operation(old_typed_dict)


def test_parameters_without_a_schema_are_refused() -> None:
    def unannotated(x, y: int) -> str:  # type: ignore[no-untyped-def]
        """Unannotated."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'x'.*no annotation"):
        operation(unannotated)

    def star(*values: int) -> str:
        """Star."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'values'.*\*args"):
        operation(star)

    def stars(**values: int) -> str:
        """Stars."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'values'.*\*\*kwargs"):
        operation(stars)

    def rows(count: int) -> typing.Iterator[str]:
        """Rows (a generator: what it yields would never be a result)."""
        yield from ("a", "b")

    with pytest.raises(ConfigurationError, match=r"'.*rows'.*generator"):
        operation(rows)

    async def stream(count: int) -> typing.AsyncIterator[str]:
        """Stream."""
        yield "a"

    with pytest.raises(ConfigurationError, match=r"'.*stream'.*generator"):
        operation(stream)

    def two(a: Invocation, b: Invocation) -> str:
        """Two."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'b'.*'a' already receives"):
        operation(two)


def test_an_annotation_that_does_not_resolve_is_named() -> None:
    def local(fine: int, thing: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Local (a name defined nowhere)."""
        return ""

    with pytest.raises(ConfigurationError, match=r"parameter 'thing'.*'Missing' does not resolve"):
        operation(local)


ORDERS = operation(group="orders")  # a decorator kept and applied elsewhere


async def test_types_local_to_a_factory_resolve_under_postponed_annotations() -> None:
    # This module has ``from __future__ import annotations``: every annotation below is a
    # string naming a class that exists only in this function's scope, as in a registry
    # factory; Python would resolve them there, and so does @operation.
    class Line(BaseModel):
        sku: str

    @dataclasses.dataclass
    class Total:
        lines: int

    @operation
    def count(lines: list[Line], inv: Invocation) -> Total:
        """Count lines."""
        return Total(lines=len(lines))

    @operation(name="orders.tally")
    def tally(first: Line) -> Line:
        """Echo a line."""
        return first

    @ORDERS
    def echo(line: Line) -> str:
        """Echo a sku."""
        return line.sku

    def closing() -> Operation:
        def inner(lines: int) -> Total:  # Total is a closure variable of inner
            """Inner."""
            return Total(lines=lines)

        return operation(inner)  # decorated where Total is not a local

    arguments = {"lines": [{"sku": "a"}, {"sku": "b"}]}
    assert completed(await invoke(count, arguments)).structured == {"lines": 2}
    assert count.output_schema is not None
    assert completed(await invoke(tally, {"first": {"sku": "c"}})).structured == {"sku": "c"}
    assert completed(await invoke(echo, {"line": {"sku": "d"}})).content == (Text("d"),)
    inner = closing()
    assert completed(await invoke(inner, {"lines": 3})).structured == {"lines": 3}


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        (Opaque, "Opaque"),
        (list[Opaque], "Opaque"),
        (Refund | None, "cannot be combined"),
        (str | Refund, "cannot be combined"),
        (Refund | Totals, "cannot be combined"),
        (Refund | int, "cannot be combined"),
    ],
)
def test_return_annotations_without_a_result_rule_are_refused(
    annotation: Any, problem: str
) -> None:
    def returns(x: int) -> Any:
        """Returns."""

    returns.__annotations__["return"] = annotation
    with pytest.raises(ConfigurationError, match=rf"return annotation.*{problem}"):
        operation(returns)


@pytest.mark.parametrize(
    ("annotation", "returned", "structured"),
    [
        (int, 7, {"result": 7}),
        (bool, False, {"result": False}),
        (Decimal, Decimal("0.10"), {"result": Decimal("0.10")}),
        (list[int], [1, 2], {"result": [1, 2]}),
        (tuple[str, int], ("a", 1), {"result": ["a", 1]}),
        (float | None, None, {"result": None}),
        (int | str, "seven", {"result": "seven"}),
        (Color, Color.RED, {"result": "red"}),
        (list[Refund], [Refund(order=1, amount=Decimal("2.5"), color=Color.RED)], None),
        (int | Outcome, 3, {"result": 3}),
    ],
)
async def test_results_of_other_types_are_wrapped_as_result(
    annotation: Any, returned: Any, structured: Any
) -> None:
    def returns() -> Any:
        """Returns."""
        return returned

    returns.__annotations__["return"] = annotation
    op = operation(returns)
    schema = op.output_schema
    assert isinstance(schema, dict)
    assert schema["required"] == ["result"]
    assert set(schema["properties"]) == {"result"}
    result = completed(await invoke(op, {}))  # the registry checked it against the schema
    assert isinstance(result.structured, dict)
    assert set(result.structured) == {"result"}
    if structured is not None:
        assert result.structured == structured
    assert result.content == (Text(result.structured_json.decode()),)


async def test_a_wrapped_result_keeps_its_definitions_at_the_root() -> None:
    @operation
    def refunds(count: int) -> list[Refund]:
        """Refunds."""
        return [Refund(order=n, amount=Decimal("1.5"), color=Color.RED) for n in range(count)]

    schema = refunds.output_schema
    assert isinstance(schema, dict)
    assert schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Refund"}
    assert "Refund" in schema["$defs"]
    result = completed(await invoke(refunds, {"count": 2}))
    assert result.structured == {
        "result": [
            {"order": 0, "amount": Decimal("1.5"), "color": "red"},
            {"order": 1, "amount": Decimal("1.5"), "color": "red"},
        ]
    }


async def test_a_wrapped_result_of_the_wrong_type_fails_the_output_check() -> None:
    @operation
    def count() -> int:
        """Count."""
        return "many"  # type: ignore[return-value]  # what the check is for

    code, _ = failed(await invoke(count, {}))
    assert code is FailureCode.INVALID_RESULT


def test_return_annotations_that_are_accepted() -> None:
    for annotation in (str, None, str | None, Outcome, Result | Outcome, Refund | Outcome, Any):

        def returns(x: int) -> Any:
            """Returns."""

        returns.__annotations__["return"] = annotation
        op = operation(returns)
        assert (op.output_schema is not None) == (annotation == Refund | Outcome), annotation


# -- over MCP, with the official client ------------------------------------------------


async def test_typed_operations_over_mcp_with_the_official_client() -> None:
    from opgate.mcp import GatewayServer

    @operation(group="orders")
    def lookup(order: int, verbose: bool = False) -> Receipt:
        """Look up an order."""
        return Receipt(order, Decimal("12.5"), ("verbose",) if verbose else ())

    server = GatewayServer(Registry([lookup, cancel], AllowAll()))

    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert params.message == "Cancel order 3?"
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(server.sdk_server, mode="legacy", elicitation_callback=answer) as client:
        found = await client.call_tool("search", {"query": "order", "group": "orders"})
        names = [item["name"] for item in found.structured_content["items"]]
        assert names == ["orders.cancel", "orders.lookup"]
        inspected = await client.call_tool("inspect", {"name": "orders.lookup"})
        spec = inspected.structured_content
        assert spec["input_schema"]["properties"]["verbose"] == {
            "default": False,
            "type": "boolean",
        }
        assert spec["output_schema"]["properties"]["amount"] == {"type": "number"}
        result = await client.call_tool(
            "invoke", {"name": "orders.lookup", "arguments": {"order": 3, "verbose": True}}
        )
        assert not result.is_error
        assert result.structured_content == {"order": 3, "amount": 12.5, "tags": ["verbose"]}
        [block] = result.content
        assert isinstance(block, types.TextContent)
        assert block.text == '{"amount":12.5,"order":3,"tags":["verbose"]}'
        refused = await client.call_tool(
            "invoke", {"name": "orders.lookup", "arguments": {"order": "3"}}
        )
        assert refused.is_error
        assert refused.structured_content["error"]["code"] == "invalid_arguments"
        cancelled = await client.call_tool(
            "invoke", {"name": "orders.cancel", "arguments": {"order": 3, "reason": "r"}}
        )
        assert not cancelled.is_error
        assert cancelled.structured_content == {"order": 3, "amount": 9.99, "color": "red"}


# -- the example in docs/contracts.md runs as written ------------------------------------


def docs_block(heading: str) -> str:
    """The first Python code block under ``heading`` in docs/contracts.md."""
    from conftest import ROOT

    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


async def test_the_documented_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types_module.ModuleType("contracts_example")  # a module, as a user's app is
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(docs_block("## Operations from typed functions"), module.__dict__)
    refund = module.refund
    assert (refund.name, refund.group, refund.summary) == (
        "orders.refund",
        "orders",
        "Refund an order.",
    )
    assert refund.description == "Money goes back to the card it came from."
    reg = await registry(refund)
    arguments = {"order": 7, "amount": 0.1}
    pending = await reg.invoke(None, "orders.refund", arguments, input_support={InputMode.FORM})
    assert isinstance(pending, Pending)
    assert pending.prompt.message == "Refund 0.1 on order 7?"
    outcome = await reg.invoke(
        None,
        "orders.refund",
        arguments,
        input_support={InputMode.FORM},
        resume=(pending.continuation, InputResponse.accept({"ok": True})),
    )
    assert completed(outcome).structured == {"order": 7, "amount": Decimal("0.1")}
    refused = await reg.invoke(None, "orders.refund", {"order": 7, "amount": 0})
    assert failed(refused)[0] is FailureCode.INVALID_ARGUMENTS  # Field(gt=0)
