"""Tests of ``opgate._invocation``: what a handler receives.

Only ``Registry.invoke`` makes an ``Invocation`` or a ``Resume``; every accessor that
returns JSON hands out a fresh detached copy; ``supports`` answers for this call's
prompt modes; reprs name the operation and the action, never arguments, answers or
state. (Progress reporting is ``test_progress*.py``.)
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from invoke_support import invoke, make
from opgate import Completed, InputAction, InputMode, Invocation, Resume
from opgate._invocation import new_invocation, new_resume

pytestmark = pytest.mark.anyio

#: These tests never report progress, so the invocation needs no channel.
NO_CHANNEL: Any = None


async def test_completed_with_validated_detached_arguments() -> None:
    reg, handler = make()
    outcome = await invoke(reg, '{"order": 7, "amount": 1.10, "note": "hi"}')
    assert isinstance(outcome, Completed)
    assert outcome.result.structured == {"refunded": 7}
    assert handler.arguments == [{"order": 7, "amount": Decimal("1.10"), "note": "hi"}]
    assert isinstance(handler.arguments[0]["amount"], Decimal)
    first = handler.calls[0].arguments
    first["order"] = 99
    assert handler.calls[0].arguments["order"] == 7


def test_only_the_registry_makes_an_invocation_or_a_resume() -> None:
    with pytest.raises(TypeError, match=r"Registry\.invoke only"):
        Invocation(object(), "a", {}, frozenset(), None, NO_CHANNEL)
    with pytest.raises(TypeError, match=r"Registry\.invoke only"):
        Resume(object(), InputAction.ACCEPT, None, None, False)


def test_every_read_is_a_fresh_copy() -> None:
    arguments: dict[str, Any] = {"order": 7, "items": [1, 2]}
    resume = new_resume(InputAction.ACCEPT, {"ok": True}, {"job": "j-1"}, False)
    invocation = new_invocation("orders.refund", arguments, frozenset(), resume, NO_CHANNEL)
    first = invocation.arguments
    first["items"].append(3)
    assert invocation.arguments == {"order": 7, "items": [1, 2]}
    assert invocation.arguments is not invocation.arguments
    answers, state = resume.answers, resume.state
    answers["ok"] = False  # type: ignore[index]
    state["job"] = "changed"  # type: ignore[index]
    assert (resume.answers, resume.state) == ({"ok": True}, {"job": "j-1"})


def test_supports_answers_for_the_modes_of_this_call() -> None:
    form_only = new_invocation("a", {}, {InputMode.FORM}, None, NO_CHANNEL)
    assert form_only.supports(InputMode.FORM)
    assert not form_only.supports(InputMode.URL)
    nothing = new_invocation("a", {}, frozenset(), None, NO_CHANNEL)
    assert not nothing.supports(InputMode.FORM)


def test_reprs_name_no_arguments_answers_or_state() -> None:
    resume = new_resume(InputAction.DECLINE, {"card": "4111"}, {"secret": "s3"}, True)
    invocation = new_invocation("orders.refund", {"card": "4111"}, frozenset(), resume, NO_CHANNEL)
    assert repr(resume) == "Resume(action='decline', recovery_only=True)"
    assert repr(invocation) == "Invocation(name='orders.refund', resumed=True)"
