"""Hostile input never makes ``invoke``, ``search`` or a resume raise (property tests)."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import mcp.types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError

from opgate import (
    Completed,
    ConfigurationError,
    Failed,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Pending,
    Registry,
    Result,
    SearchPage,
    Text,
    await_input,
    finish,
)
from opgate.mcp import GatewayServer

from conftest import Ctx, TeamPolicy

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "maximum": 10}, "s": {"type": "string"}},
}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


async def handler(inv: Invocation) -> Any:
    if inv.resume is None:
        return await_input(FormInput("ok?", FORM, {"job": 1}))
    return finish(Result([Text("done")]))


REGISTRY = Registry([Operation("op", "an operation", handler, input_schema=SCHEMA)], TeamPolicy())

json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
).map(lambda value: __import__("json").dumps(value))
hostile = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200),
    json_text,
    st.sampled_from(["NaN", '{"n": 1e999999999}', '{"n":1,"n":2}', "[" * 300, '"\\ud800"']),
)


def run(coro: Any) -> Any:
    async def main() -> Any:
        return await coro

    return anyio.run(main)


@settings(max_examples=150, deadline=None)
@given(arguments=hostile)
def test_invoke_never_raises(arguments: str | bytes) -> None:
    outcome = run(REGISTRY.invoke(Ctx(), "op", arguments, input_support={InputMode.FORM}))
    assert isinstance(outcome, Failed | Pending | Completed)


@settings(max_examples=150, deadline=None)
@given(answers=hostile, token=st.one_of(st.text(max_size=60), st.just(None)))
def test_resume_never_raises(answers: str | bytes, token: str | None) -> None:
    async def scenario() -> Any:
        pending = await REGISTRY.invoke(Ctx(), "op", "{}", input_support={InputMode.FORM})
        assert isinstance(pending, Pending)
        continuation = pending.continuation if token is None else token
        return await REGISTRY.invoke(
            Ctx(),
            "op",
            "{}",
            input_support={InputMode.FORM},
            resume=(continuation, InputResponse.accept(answers)),
        )

    outcome = run(scenario())
    assert isinstance(outcome, Failed | Completed)


@settings(max_examples=150, deadline=None)
@given(
    query=st.text(max_size=300),
    group=st.text(max_size=40),
    cursor=st.one_of(st.none(), st.text(max_size=80)),
    limit=st.one_of(st.none(), st.integers(-5, 30)),
)
def test_search_never_raises(query: str, group: str, cursor: str | None, limit: int | None) -> None:
    outcome = run(REGISTRY.search(Ctx(), query, group=group, cursor=cursor, limit=limit))
    assert isinstance(outcome, SearchPage | Failed)


# -- Adversarial shapes at every entry point ---------------------------------------
#
# Every property below runs twice: a short bounded run in the default suite
# (``FAST`` examples each) and a long run marked ``slow`` (``SLOW`` examples each,
# ``python3 dev.py test -m slow``). The property is always the same: never an
# unexpected exception, always a ``Failed`` with a code (an ``isError`` result with a
# code, or a JSON-RPC error, over MCP), never a hang (each example runs under
# ``anyio.fail_after``). Construction-time entry points (schemas and state given as
# text, ``Result``) may raise only ``ConfigurationError`` or ``TypeError``.

FAST = 40
SLOW = 1000
HANG = 20.0  # seconds one example may take before it counts as a hang


def _escaped_quotes(n: int) -> str:
    return '"' + '\\"' * n


def _shape(kind: str, n: int, closed: bool) -> str:
    """One adversarial JSON text of about ``n`` units."""
    if kind == "escaped_quotes":
        body = _escaped_quotes(n) + ('"' if closed else "") + "[]" * 130
    elif kind == "long_string":
        body = '{"s": "' + "a" * n + ('"}' if closed else "")
    elif kind == "control_escapes":
        body = '{"s": "' + "\\u0001" * n + ('"}' if closed else "")
    elif kind == "many_members":
        body = "{" + ",".join(f'"m{i}":0' for i in range(n)) + ("}" if closed else "")
    elif kind == "many_items":
        body = '{"s": [' + ",".join("0" for _ in range(n)) + ("]}" if closed else "")
    elif kind == "deep_legal":
        depth = min(n, 127)
        body = '{"s": ' + "[" * depth + "]" * (depth if closed else depth - 1) + "}"
    elif kind == "too_deep":
        depth = 129 + n % 2000
        body = '{"s": ' + "[" * depth + "]" * depth + "}"
    elif kind == "deep_objects":
        depth = 1 + n % 300
        body = '{"n": ' * depth + "0" + "}" * (depth if closed else depth // 2)
    elif kind == "near_miss_numbers":
        spellings = [
            "1e4095",
            "1e4096",
            "1e4097",
            "9" * 4097,
            "-0",
            "01",
            "1.",
            ".5",
            "1e",
            "1e+",
            "0x10",
            "Infinity",
            "-Infinity",
            "NaN",
            "1_000",
            "3.0",
            "3e0",
            "1E+999999999",
            "1e-999999999",
            "-",
            "+1",
            "1.0e-4096",
            "12345678901234567890123",
        ]
        number = spellings[n % len(spellings)]
        body = '{"n": ' + number + ("}" if closed else "")
    elif kind == "lone_surrogates":
        body = '{"s": "' + "\\ud800" * (1 + n % 50) + '\\udfff"' + ("}" if closed else "")
    elif kind == "raw_surrogates":
        body = '{"s": "' + "\ud800" * (1 + n % 50) + '"' + ("}" if closed else "")
    else:  # duplicate names
        body = "{" + ",".join('"n":1' for _ in range(2 + n % 200)) + ("}" if closed else "")
    return body


SHAPES = (
    "escaped_quotes",
    "long_string",
    "control_escapes",
    "many_members",
    "many_items",
    "deep_legal",
    "too_deep",
    "deep_objects",
    "near_miss_numbers",
    "lone_surrogates",
    "raw_surrogates",
    "duplicate_names",
)


@st.composite
def adversarial_text(draw: st.DrawFn, max_units: int = 12_000) -> str:
    """An adversarial JSON text, sometimes cut short or with a stray tail."""
    units = draw(st.one_of(st.integers(0, max_units), st.just(max_units)))
    text = _shape(draw(st.sampled_from(SHAPES)), units, draw(st.booleans()))
    cut = draw(st.one_of(st.none(), st.integers(0, len(text))))
    if cut is not None:
        text = text[:cut]
    return text + draw(st.sampled_from(["", "", " ", "x", "]", "}", ",", '"', "\\"]))


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


adversarial_argument = st.one_of(
    adversarial_text(),
    adversarial_text().map(_encode),
    st.binary(max_size=300),
    hostile,
)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"n": value}
    return value


class HostRaised(Exception):
    """What a host's own hostile object raises; only it may escape a constructor."""


class _Unfriendly(dict[str, Any]):
    """A mapping that raises when read."""

    def __iter__(self) -> Any:
        raise HostRaised("iteration raised")

    def items(self) -> Any:
        raise HostRaised("items raised")

    def __repr__(self) -> str:
        return "_Unfriendly()"


python_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**4000, max_value=10**4200),
    st.floats(),
    st.decimals(),
    st.text(max_size=40),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\\", '"' * 50]),
    st.binary(max_size=10),
    st.just(_Unfriendly()),
    st.just({1, 2}),
    st.just((1, 2)),
)
python_value = st.one_of(
    st.recursive(
        python_leaf,
        lambda inner: (
            st.lists(inner, max_size=5)
            | st.dictionaries(
                st.one_of(st.text(max_size=10), st.integers(), st.none()), inner, max_size=5
            )
        ),
        max_leaves=20,
    ),
    st.builds(_nested, st.integers(0, 3000), python_leaf),
)
adversarial_mapping = st.one_of(
    st.dictionaries(st.sampled_from(["n", "s", "\ud800", ""]), python_value, max_size=4),
    st.builds(lambda v: {"s": v}, python_value),
)


async def _bounded(coro: Any) -> Any:
    with anyio.fail_after(HANG):
        return await coro


def run_bounded(coro: Any) -> Any:
    return anyio.run(_bounded, coro)


def _is_outcome(outcome: object, *kinds: type) -> bool:
    if isinstance(outcome, Failed):
        return isinstance(outcome.failure.code.value, str) and bool(outcome.failure.code.value)
    return isinstance(outcome, kinds)


# The documented construction errors, and what a host's own hostile object raises itself.
CONSTRUCTION_ERRORS = (ConfigurationError, TypeError, HostRaised)


def fuzz(**strategies: Any) -> Any:
    """Make a (default, slow) pair of property tests from one property."""

    def make(check: Any) -> tuple[Any, Any]:
        quick = settings(max_examples=FAST, deadline=None, database=None)(
            given(**strategies)(check)
        )
        long = settings(max_examples=SLOW, deadline=None, database=None)(given(**strategies)(check))
        return quick, pytest.mark.slow(long)

    return make


def _arguments(arguments: Any) -> None:
    outcome = run_bounded(REGISTRY.invoke(Ctx(), "op", arguments, input_support={InputMode.FORM}))
    assert _is_outcome(outcome, Pending, Completed)


test_adversarial_arguments, test_adversarial_arguments_slow = fuzz(
    arguments=st.one_of(adversarial_argument, adversarial_mapping)
)(_arguments)


def _answers(answers: Any) -> None:
    """Form answers; a mapping that is not JSON is refused by ``InputResponse`` itself."""
    try:
        response = InputResponse.accept(answers)
    except CONSTRUCTION_ERRORS:
        return

    async def scenario() -> Any:
        pending = await REGISTRY.invoke(Ctx(), "op", "{}", input_support={InputMode.FORM})
        assert isinstance(pending, Pending)
        return await REGISTRY.invoke(
            Ctx(),
            "op",
            "{}",
            input_support={InputMode.FORM},
            resume=(pending.continuation, response),
        )

    assert _is_outcome(run_bounded(scenario()), Completed)


test_adversarial_form_answers, test_adversarial_form_answers_slow = fuzz(
    answers=st.one_of(adversarial_argument, adversarial_mapping)
)(_answers)


def _tampered(token: str, data: Any) -> str:
    how = data.draw(st.sampled_from(["flip", "cut", "extend", "case", "replace", "keep"]))
    if how == "flip" and token:
        index = data.draw(st.integers(0, len(token) - 1))
        char = data.draw(st.characters(codec="ascii"))
        return token[:index] + char + token[index + 1 :]
    if how == "cut":
        return token[: data.draw(st.integers(0, len(token)))]
    if how == "extend":
        return token + data.draw(st.text(max_size=200))
    if how == "case":
        return token.swapcase()
    if how == "replace":
        return data.draw(st.one_of(adversarial_text(max_units=200), st.text(max_size=300)))
    return token


def _continuations(data: Any) -> None:
    """A continuation token tampered with, or another principal's, with any answer."""

    async def scenario() -> Any:
        pending = await REGISTRY.invoke(Ctx(), "op", "{}", input_support={InputMode.FORM})
        assert isinstance(pending, Pending)
        token = _tampered(pending.continuation, data)
        principal = data.draw(st.sampled_from(["alice", "mallory"]))
        response = data.draw(
            st.sampled_from(
                [
                    InputResponse.accept('{"ok": true}'),
                    InputResponse.decline(),
                    InputResponse.cancel(),
                ]
            )
        )
        outcome = await REGISTRY.invoke(
            Ctx(principal=principal),
            "op",
            "{}",
            input_support={InputMode.FORM},
            resume=(token, response),
        )
        if principal == "mallory":
            assert isinstance(outcome, Failed)  # never another principal's chain
        return outcome

    assert _is_outcome(run_bounded(scenario()), Completed)


test_adversarial_continuations, test_adversarial_continuations_slow = fuzz(data=st.data())(
    _continuations
)


def _search(data: Any) -> None:
    text = st.one_of(st.text(max_size=300), adversarial_text(max_units=400))

    async def scenario() -> Any:
        first = await REGISTRY.search(Ctx(), "", limit=1)
        assert isinstance(first, SearchPage)
        cursor = first.next_cursor
        if cursor is not None and data.draw(st.booleans()):
            cursor = _tampered(cursor, data)
        elif not data.draw(st.booleans()):
            cursor = data.draw(st.one_of(st.none(), text))
        principal = data.draw(st.sampled_from(["alice", "mallory"]))
        return await REGISTRY.search(
            Ctx(principal=principal),
            data.draw(text),
            group=data.draw(text),
            cursor=cursor,
            limit=data.draw(st.one_of(st.none(), st.integers(-5, 30))),
        )

    assert _is_outcome(run_bounded(scenario()), SearchPage)


test_adversarial_search, test_adversarial_search_slow = fuzz(data=st.data())(_search)


def _schema_text(schema: Any) -> None:
    """A schema given as text: Operation/Registry and FormInput raise only the documented errors."""
    with contextlib.suppress(*CONSTRUCTION_ERRORS):
        Registry([Operation("s", "a schema", handler, input_schema=schema)], TeamPolicy())
    with contextlib.suppress(*CONSTRUCTION_ERRORS):
        Registry([Operation("s", "a schema", handler, output_schema=schema)], TeamPolicy())
    with contextlib.suppress(*CONSTRUCTION_ERRORS):
        FormInput("ok?", schema, {"job": 1})


schema_like = st.one_of(
    adversarial_argument,
    adversarial_mapping,
    st.sampled_from(
        [
            '{"type": "object", "properties": {"a": {"pattern": "(?<=a+)b"}}}',
            '{"type": "object", "properties": {"a": {"pattern": "(a+)+\\\\1b"}}}',
            '{"$schema": "http://json-schema.org/draft-07/schema#", "$defs": {"x": '
            '{"$schema": "https://json-schema.org/draft/2020-12/schema"}}}',
            '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}',
            '{"$ref": "#"}',
            '{"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}',
        ]
    ),
)
test_adversarial_schemas, test_adversarial_schemas_slow = fuzz(schema=schema_like)(_schema_text)


def _state(state: Any) -> None:
    with contextlib.suppress(*CONSTRUCTION_ERRORS):
        FormInput("ok?", FORM, state)


test_adversarial_state, test_adversarial_state_slow = fuzz(
    state=st.one_of(adversarial_argument, python_value)
)(_state)


OUTPUT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _results(structured: Any, meta: Any) -> None:
    """Result construction raises only the documented errors; invoke's checks give a code."""
    with contextlib.suppress(*CONSTRUCTION_ERRORS):
        Result([Text("r")], structured=structured, meta=meta)

    async def produce(inv: Invocation) -> Any:
        # Built inside the handler: whatever it raises is the handler's failure.
        return finish(Result([Text("r")], structured=structured, meta=meta))

    registry = Registry(
        [Operation("out", "output checks", produce, output_schema=OUTPUT_SCHEMA)], TeamPolicy()
    )
    outcome = run_bounded(registry.invoke(Ctx(), "out", "{}"))
    assert _is_outcome(outcome, Completed)


test_adversarial_results, test_adversarial_results_slow = fuzz(
    structured=st.one_of(python_value, adversarial_text(max_units=2000)),
    meta=st.one_of(st.none(), adversarial_mapping, python_value),
)(_results)


def _mcp_calls(mode: str, calls: list[tuple[str, Any]], answers: list[tuple[str, Any]]) -> None:
    """The gateway's three tools, through the official client, with hostile arguments
    and hostile elicitation answers (built unvalidated, as a hostile client may send)."""
    replies = iter(answers)

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        action, content = next(replies, ("accept", {"ok": True}))
        return types.ElicitResult.model_construct(action=action, content=content)

    protocol_codes: list[object] = []

    async def scenario() -> None:
        server = GatewayServer(MCP_REGISTRY)
        async with Client(server.sdk_server, mode=mode, elicitation_callback=answer) as client:
            for name, arguments in calls:
                try:
                    result = await client.call_tool(name, arguments)
                except MCPError as exc:
                    protocol_codes.append(exc.error.code)
                    continue
                if result.is_error:
                    assert result.structured_content is not None
                    assert result.structured_content["error"]["code"]

    run_bounded(scenario())
    assert all(isinstance(code, int) for code in protocol_codes)


MCP_REGISTRY = Registry(
    [Operation("op", "an operation", handler, input_schema=SCHEMA)], TeamPolicy()
)
wire_text = st.one_of(
    st.text(max_size=200).filter(lambda s: not any("\ud800" <= c <= "\udfff" for c in s)),
    adversarial_text(max_units=3000).filter(
        lambda s: not any("\ud800" <= c <= "\udfff" for c in s)
    ),
)
wire_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | wire_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(wire_text, inner, max_size=4),
    max_leaves=10,
)
mcp_call = st.one_of(
    st.tuples(
        st.just("search"),
        st.fixed_dictionaries(
            {},
            optional={
                "query": wire_json,
                "group": wire_json,
                "cursor": wire_json,
                "limit": wire_json,
            },
        ),
    ),
    st.tuples(st.just("inspect"), st.fixed_dictionaries({}, optional={"name": wire_json})),
    st.tuples(
        st.just("invoke"),
        st.fixed_dictionaries(
            {}, optional={"name": st.one_of(st.just("op"), wire_json), "arguments": wire_json}
        ),
    ),
    st.tuples(wire_text, st.dictionaries(wire_text, wire_json, max_size=3)),
)
test_adversarial_mcp_tools, test_adversarial_mcp_tools_slow = fuzz(
    mode=st.sampled_from(["legacy", "2026-07-28"]),
    calls=st.lists(mcp_call, min_size=1, max_size=6),
    answers=st.lists(
        st.tuples(
            st.sampled_from(["accept", "decline", "cancel", "ACCEPT", ""]),
            st.one_of(st.none(), wire_json, st.dictionaries(wire_text, wire_json, max_size=4)),
        ),
        max_size=6,
    ),
)(_mcp_calls)
