"""Prompt checks (issue 9, items 10 and 13): prompts are counted as encoded, and only
genuine, fully checked ``FormInput``/``URLInput`` values can become prompts."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

from invoke_support import EMPTY_FORM, PROMPT_SUPPORT, ask, ask_registry, code
from opgate import (
    ConfigurationError,
    FailureCode,
    FormInput,
    InputResponse,
    Invocation,
    Pending,
    Result,
    Text,
    URLInput,
    await_input,
    finish,
)

from conftest import Ctx

pytestmark = pytest.mark.anyio

# --- item 10: prompts count as they will be encoded ----------------------------------------


# --- item 13: genuine prompt classes --------------------------------------------------------


@pytest.mark.parametrize("cls", [FormInput, URLInput])
def test_prompt_classes_cannot_be_subclassed(cls: type) -> None:
    with pytest.raises(TypeError, match="subclass"):
        type("Sneaky", (cls,), {"__slots__": ()})


@pytest.mark.parametrize("cls", [FormInput, URLInput])
async def test_an_unconstructed_prompt_is_an_invalid_result(cls: Any) -> None:
    async def handler(inv: Invocation) -> Any:
        return await_input(cls.__new__(cls))

    outcome = await ask(handler)
    assert code(outcome) is FailureCode.INVALID_RESULT
    assert "FormInput or URLInput" in outcome.failure.message


async def test_a_forged_url_prompt_never_reaches_the_person() -> None:
    forged = URLInput.__new__(URLInput)
    object.__setattr__(forged, "_message", "pay here")
    object.__setattr__(forged, "_url", "http://user:pw@127.0.0.1/")

    async def handler(inv: Invocation) -> Any:
        return await_input(forged)

    assert code(await ask(handler)) is FailureCode.INVALID_RESULT


def test_genuine_prompts_copy_and_pickle_as_themselves() -> None:
    form = FormInput("ok?", EMPTY_FORM, {"job": 1})
    url = URLInput("pay", "https://example.com/pay")
    for prompt in (form, url):
        assert copy.copy(prompt) is prompt
        assert copy.deepcopy(prompt) is prompt
    again = pickle.loads(pickle.dumps(form))
    assert (again.message, again.form(), again.state_bytes) == (
        form.message,
        form.form(),
        form.state_bytes,
    )
    assert pickle.loads(pickle.dumps(url)).url() == url.url()
    with pytest.raises(TypeError):
        pickle.dumps(FormInput.__new__(FormInput))


MULTISELECT = {
    "type": "object",
    "properties": {
        "colors": {
            "type": "array",
            "maxItems": 3,
            "items": {"type": "string", "enum": ["red", "green", "blue"]},
        },
        "sizes": {
            "type": "array",
            "maxItems": 2,
            "items": {"anyOf": [{"const": "s", "title": "S"}, {"const": "m", "title": "M"}]},
        },
    },
}


@pytest.mark.parametrize(
    ("answers", "field"),
    [({"colors": ["red", "red"]}, "colors"), ({"sizes": ["s", "s"]}, "sizes")],
)
def test_a_multiselect_answer_must_not_repeat_a_choice(answers: Any, field: str) -> None:
    form = FormInput("pick", MULTISELECT, "null")
    problem = form.validate_answers(answers)
    assert problem is not None
    assert field in problem
    assert "repeat" in problem
    assert form.validate_answers({"colors": ["red", "blue"], "sizes": ["m"]}) is None


async def test_a_repeated_choice_is_refused_before_the_handler_resumes() -> None:
    calls: list[Any] = []

    async def handler(inv: Invocation) -> Any:
        calls.append(inv.resume)
        if inv.resume is None:
            return await_input(FormInput("pick", MULTISELECT, "null"))
        return finish(Result([Text("ok")]))

    reg = ask_registry(handler)
    pending = await reg.invoke(Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT)
    assert isinstance(pending, Pending)
    outcome = await reg.invoke(
        Ctx(),
        "ask",
        "{}",
        input_support=PROMPT_SUPPORT,
        resume=(pending.continuation, InputResponse.accept({"colors": ["red", "red"]})),
    )
    assert code(outcome) is FailureCode.INVALID_REQUEST
    assert len(calls) == 1


def test_a_multiselect_default_must_not_repeat_a_choice() -> None:
    schema = json.loads(json.dumps(MULTISELECT))
    schema["properties"]["colors"]["default"] = ["red", "red"]
    with pytest.raises(ConfigurationError, match="colors"):
        FormInput("pick", schema, "null")


def test_a_multiselect_cannot_require_more_items_than_it_has_choices() -> None:
    schema = json.loads(json.dumps(MULTISELECT))
    schema["properties"]["colors"]["minItems"] = 3
    FormInput("pick", schema, "null")
    schema["properties"]["colors"]["minItems"] = 4
    schema["properties"]["colors"]["maxItems"] = 4
    with pytest.raises(ConfigurationError, match="minItems"):
        FormInput("pick", schema, "null")


def test_an_integer_field_must_admit_an_integer() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1.25, "maximum": 1.75}},
    }
    with pytest.raises(ConfigurationError, match="integer"):
        FormInput("n?", schema, "null")
    schema["properties"]["n"]["maximum"] = 2
    FormInput("n?", schema, "null")


@pytest.mark.parametrize(
    "url",
    [
        "https://-bad_host-/",
        "https://bad_host/",
        "https://-leading.example/",
        "https://trailing-.example/",
        "https://a..b/",
        "https://" + "a" * 64 + ".example/",
        "https://" + ".".join(["abcdefghij"] * 25) + ".com/",  # 278 characters
        "https://1.2.3/",
        "https://256.1.1.1/",
        "https://01.2.3.4/",
        "https://0x7f.0.0.1/",
        "https://[::1%25eth0]/",
        "https://[v1.future]/",
        "https://[not-ip]/",
        "https://ex%61mple.com/",
        "https://example.com:0/",
    ],
)
def test_a_url_host_must_be_a_host_name_or_ip_literal(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"host|port"):
        URLInput("go", url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/pay?x=1",
        "https://EXAMPLE.com/",
        "https://xn--bcher-kva.example/",
        "https://a-b.c-d.example:8443/x",
        "https://127.0.0.1/",
        "https://[::1]:8443/",
        "https://[2001:db8::1]/",
        "https://localhost/",
        "https://" + "a" * 63 + ".example/",
    ],
)
def test_valid_hosts_are_accepted(url: str) -> None:
    assert URLInput("go", url).url().url == url


# --- further finds: responses are genuine too, and the answer-check cache is bounded --------


def test_the_answer_check_cache_is_bounded_in_bytes() -> None:
    from opgate._forms import FormChecks

    checks = FormChecks(capacity=256, max_bytes=64 * 1024)
    for index in range(40):
        title = f"{index:04d}" + "t" * 4000
        schema = FormInput(
            "ok?",
            {"type": "object", "properties": {"a": {"type": "string", "title": title}}},
            "null",
        ).form()
        assert checks.validate(schema, {"a": "x"}) is None
        assert checks.cached_bytes <= 64 * 1024
    huge = FormInput(
        "ok?",
        {"type": "object", "properties": {"a": {"type": "string", "title": "h" * 70_000}}},
        "null",
    ).form()
    assert checks.validate(huge, {"a": 1}) is not None  # still checked, never cached
    assert checks.cached_bytes <= 64 * 1024
