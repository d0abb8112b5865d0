"""Hostile input never makes ``invoke``, ``search`` or a resume raise (property tests)."""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate import (
    Completed,
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
