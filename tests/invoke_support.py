"""Helpers shared by the tests that drive ``Registry.invoke``.

``code`` reads the failure code of an outcome that must be ``Failed``; ``start`` and
``answer`` open and answer a form prompt of an ``orders.refund`` operation (the
registry is the caller's, so the same helpers serve the in-memory and the shared
ledgers).
"""

from __future__ import annotations

from typing import Any

from opgate import Failed, FailureCode, InputMode, InputResponse, Pending, Registry

from conftest import Ctx

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
