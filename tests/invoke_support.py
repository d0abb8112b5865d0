"""Helpers shared by the tests that drive ``Registry.invoke``.

* ``code`` reads the failure code of an outcome that must be ``Failed``.
* ``start`` and ``answer`` open and answer a form prompt of an ``orders.refund``
  operation on the caller's registry (so they serve the in-memory and the shared
  ledgers alike); ``registry`` is the plainest such registry.
* ``make`` builds the registry of the invoke rule tests: ``orders.refund`` with the
  ``INPUT`` and ``OUTPUT`` schemas and a ``Recorder`` handler, and ``admin.purge``,
  which ``TeamPolicy`` hides; ``invoke`` calls it.
* ``ask_registry`` and ``ask`` serve the prompt tests: one operation, ``ask``, whose
  handler asks a person.
"""

from __future__ import annotations

from typing import Any

from opgate import (
    Failed,
    FailureCode,
    InputMode,
    InputResponse,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    finish,
)

from conftest import AllowAll, Ctx, TeamPolicy

#: The arguments every prompt helper sends to ``orders.refund``.
ARGS = '{"order": 7}'
#: A host that can show forms only.
FORM_SUPPORT = {InputMode.FORM}


def code(outcome: Any) -> FailureCode:
    """The failure code of ``outcome``, which must be ``Failed``."""
    assert isinstance(outcome, Failed), outcome
    return outcome.failure.code


async def start(reg: Registry, ctx: Ctx | None = None, **kwargs: Any) -> Pending:
    """Call ``orders.refund`` with form support; the outcome must be a prompt."""
    outcome = await reg.invoke(
        ctx or Ctx(), "orders.refund", ARGS, input_support=FORM_SUPPORT, **kwargs
    )
    assert isinstance(outcome, Pending), outcome
    return outcome


async def answer(
    reg: Registry,
    pending: Pending | str,
    response: InputResponse | None = None,
    ctx: Ctx | None = None,
    arguments: str = ARGS,
    **kwargs: Any,
) -> Any:
    """Answer a prompt (or a bare continuation token), by default with ``{"ok": true}``."""
    token = pending if isinstance(pending, str) else pending.continuation
    return await reg.invoke(
        ctx or Ctx(),
        "orders.refund",
        arguments,
        input_support=kwargs.pop("input_support", FORM_SUPPORT),
        resume=(token, response or InputResponse.accept({"ok": True})),
        **kwargs,
    )


def registry(handler: Any, policy: Any = None) -> Registry:
    """A registry of one operation, ``orders.refund``, on ``handler`` (``AllowAll`` by default)."""
    return Registry([Operation("orders.refund", "Refund an order", handler)], policy or AllowAll())


#: The input schema of ``make``'s ``orders.refund``.
INPUT = {
    "type": "object",
    "properties": {
        "order": {"type": "integer", "minimum": 1},
        "note": {"type": "string", "maxLength": 20},
        "amount": {"type": "number", "multipleOf": 0.01},
    },
    "required": ["order"],
    "additionalProperties": False,
}

#: Its output schema.
OUTPUT = {
    "type": "object",
    "properties": {"refunded": {"type": "integer"}, "reason": {"type": "string"}},
    "required": ["refunded"],
}


class Recorder:
    """A handler that records what it saw and returns what it is told to."""

    def __init__(self, reply: Any = None) -> None:
        self.calls: list[Invocation] = []
        self.arguments: list[dict[str, Any]] = []
        self.reply = reply

    async def __call__(self, invocation: Invocation) -> Any:
        self.calls.append(invocation)
        self.arguments.append(invocation.arguments)
        if callable(self.reply):
            return self.reply(invocation)
        if self.reply is None:
            return finish(Result([Text("ok")], structured={"refunded": 7}))
        return self.reply


def make(
    handler: Any = None,
    *,
    policy: Any = None,
    output_schema: Any = OUTPUT,
    input_schema: Any = INPUT,
    limits: Limits | None = None,
) -> tuple[Registry, Any]:
    """A registry of ``orders.refund`` and ``admin.purge``, both on ``handler``; and the handler."""
    handler = handler or Recorder()
    reg = Registry(
        [
            Operation(
                "orders.refund",
                "Refund an order",
                handler,
                input_schema=input_schema,
                output_schema=output_schema,
            ),
            Operation("admin.purge", "Purge", handler),
        ],
        policy or TeamPolicy(),
        limits=limits,
    )
    return reg, handler


async def invoke(reg: Registry, arguments: Any = '{"order": 7}', **kwargs: Any) -> Any:
    """``reg.invoke`` as ``Ctx()``, of ``orders.refund`` unless ``name=`` says otherwise."""
    return await reg.invoke(Ctx(), kwargs.pop("name", "orders.refund"), arguments, **kwargs)


#: A host that can show forms and URL prompts.
PROMPT_SUPPORT = {InputMode.FORM, InputMode.URL}


#: A form with no fields.
EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}


def ask_registry(handler: Any, **limits: Any) -> Registry:
    """A registry of one operation, ``ask``, on ``handler``, with these ``Limits`` fields."""
    return Registry(
        [Operation("ask", "Ask a person", handler)],
        TeamPolicy(),
        limits=Limits(**limits) if limits else None,
    )


async def ask(handler: Any, **limits: Any) -> Any:
    """Call ``ask`` once with ``{}`` and ``PROMPT_SUPPORT``, on a registry of its own."""
    return await ask_registry(handler, **limits).invoke(
        Ctx(), "ask", "{}", input_support=PROMPT_SUPPORT
    )
