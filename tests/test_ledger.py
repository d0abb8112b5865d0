"""The continuation state table and token rules (``opgate.ledger``)."""

from __future__ import annotations

import pytest

from opgate.ledger import (
    IN_FLIGHT,
    TOKEN_LENGTH,
    TRANSITIONS,
    Event,
    LedgerStateError,
    RecordState,
    is_token_shaped,
    token_hash,
    transition,
)


def test_every_state_is_listed_and_reachable_from_pending() -> None:
    assert set(TRANSITIONS) == set(RecordState)
    reached = {RecordState.PENDING}
    frontier = [RecordState.PENDING]
    while frontier:
        for target in TRANSITIONS[frontier.pop()].values():
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(RecordState)


def test_in_flight_states_only_leave_by_settling() -> None:
    for state in IN_FLIGHT:
        assert Event.ANSWER not in TRANSITIONS[state]
        assert Event.REPLAY not in TRANSITIONS[state]
        assert Event.RECOVER not in TRANSITIONS[state]


@pytest.mark.parametrize("state", list(RecordState))
@pytest.mark.parametrize("event", list(Event))
def test_transition_follows_the_table_and_refuses_the_rest(
    state: RecordState, event: Event
) -> None:
    expected = TRANSITIONS[state].get(event)
    if expected is None:
        with pytest.raises(LedgerStateError, match=f"{event.value}.*{state.value}"):
            transition(state, event)
    else:
        assert transition(state, event) is expected


def test_answered_prompts_never_return_to_pending() -> None:
    for state in (RecordState.ANSWERED, RecordState.COMPLETED, RecordState.NEEDS_RECOVERY):
        assert RecordState.PENDING not in TRANSITIONS[state].values()


def test_recovery_can_only_finish_or_break() -> None:
    assert set(TRANSITIONS[RecordState.RECOVERING].values()) == {
        RecordState.COMPLETED,
        RecordState.NEEDS_RECOVERY,
    }


def test_token_shape() -> None:
    import secrets

    token = secrets.token_urlsafe(32)
    assert len(token) == TOKEN_LENGTH
    assert is_token_shaped(token)
    assert not is_token_shaped(token[:-1])
    assert not is_token_shaped(token + "A")
    assert not is_token_shaped("+" * 43)
    assert not is_token_shaped(None)
    assert token_hash(token) != token.encode()
    assert len(token_hash(token)) == 32
