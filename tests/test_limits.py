"""``Limits``: defaults, floors and combinations."""

from __future__ import annotations

from datetime import timedelta

import pytest

from opgate import ConfigurationError, Limits
from opgate._limits import CHAIN_FIXED_BYTES, PROMPT_OVERHEAD_BYTES, RECORD_FIXED_BYTES


def test_zero_means_default() -> None:
    limits = Limits()
    assert limits.result_bytes == 64 * 1024
    assert limits.inline_bytes == 48 * 1024
    assert limits.definition_bytes == 64 * 1024
    assert limits.argument_bytes == 64 * 1024
    assert limits.token_bytes == 1024
    assert limits.answer_bytes == 16 * 1024
    assert limits.state_bytes == 8 * 1024
    assert limits.form_schema_bytes == 16 * 1024
    assert limits.chain_bytes == 512 * 1024
    assert limits.ledger_bytes == 32 * 1024 * 1024
    assert limits.principal_bytes == 8 * 1024 * 1024
    assert limits.max_prompts == 10
    assert limits.input_lifetime == timedelta(minutes=10)
    assert Limits(result_bytes=0) == limits


@pytest.mark.parametrize(
    ("field", "floor"),
    [
        ("result_bytes", 16 * 1024),
        ("definition_bytes", 256),
        ("argument_bytes", 256),
        ("token_bytes", 64),
        ("answer_bytes", 256),
        ("state_bytes", 64),
        ("form_schema_bytes", 256),
        ("max_prompts", 1),
    ],
)
def test_floors(field: str, floor: int) -> None:
    extra = {"inline_bytes": 1024} if field == "result_bytes" else {}
    assert getattr(Limits(**{field: floor}, **extra), field) == floor
    if floor > 1:
        with pytest.raises(ConfigurationError, match=field):
            Limits(**{field: floor - 1}, **extra)


@pytest.mark.parametrize("field", ["result_bytes", "max_prompts", "ledger_bytes"])
def test_negative_rejected(field: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{field} must not be negative"):
        Limits(**{field: -1})


def test_wrong_types() -> None:
    with pytest.raises(TypeError):
        Limits(result_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Limits(max_prompts=True)
    with pytest.raises(TypeError):
        Limits(input_lifetime=600)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Limits(input_lifetime=timedelta(seconds=-1))


def test_inline_cannot_exceed_result() -> None:
    with pytest.raises(ConfigurationError, match="inline_bytes"):
        Limits(result_bytes=16 * 1024, inline_bytes=16 * 1024 + 1)
    assert Limits(result_bytes=16 * 1024, inline_bytes=16 * 1024).inline_bytes == 16 * 1024


def test_raising_one_field_never_raises_another() -> None:
    with pytest.raises(ConfigurationError, match="chain_bytes"):
        Limits(argument_bytes=1024 * 1024)
    with pytest.raises(ConfigurationError, match="ledger_bytes"):
        Limits(chain_bytes=64 * 1024 * 1024)


def test_raising_the_ledger_or_the_chain_never_raises_the_principal_share() -> None:
    """The seed: "Raising one field does not raise a related budget" (issue 20, item 8)."""
    default = Limits().principal_bytes
    assert Limits(ledger_bytes=128 * 1024 * 1024).principal_bytes == default
    assert Limits(chain_bytes=4 * 1024 * 1024).principal_bytes == default
    # a chain larger than the default share needs the share given, not raised with it
    with pytest.raises(ConfigurationError, match="principal_bytes"):
        Limits(chain_bytes=16 * 1024 * 1024)
    assert Limits(chain_bytes=16 * 1024 * 1024, principal_bytes=16 * 1024 * 1024)
    # a ledger smaller than the default share needs the share given, too
    with pytest.raises(ConfigurationError, match="set principal_bytes in that range"):
        Limits(ledger_bytes=2 * 1024 * 1024)
    limits = Limits(ledger_bytes=2 * 1024 * 1024, principal_bytes=512 * 1024)
    assert limits.principal_bytes == 512 * 1024


MIB = 1024 * 1024
LEDGERS = (MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 128 * MIB)
CHAINS = (0, MIB // 2, MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB)


def _share(ledger: int, chain: int) -> int | None:
    try:
        return Limits(ledger_bytes=ledger, chain_bytes=chain).principal_bytes
    except ConfigurationError:
        return None


def test_raising_the_ledger_or_the_chain_from_any_pair_never_raises_the_share() -> None:
    """From every valid (ledger_bytes, chain_bytes) pair, raising either one never raises
    the default ``principal_bytes`` (issue 20, item 8); a raise it cannot hold is an error."""
    valid = 0
    for ledger in LEDGERS:
        for chain in CHAINS:
            share = _share(ledger, chain)
            if share is None:
                continue
            valid += 1
            for raised in (r for r in LEDGERS if r > ledger):
                higher = _share(raised, chain)
                assert higher is None or higher <= share, (ledger, raised, chain, share, higher)
            for raised in (r for r in CHAINS if r > chain):
                higher = _share(ledger, raised)
                assert higher is None or higher <= share, (ledger, chain, raised, share, higher)
    assert valid >= 10


def test_a_default_share_that_does_not_fit_names_principal_bytes_and_a_value() -> None:
    for ledger, chain in ((4 * MIB, 0), (4 * MIB, 2 * MIB), (32 * MIB, 16 * MIB)):
        with pytest.raises(ConfigurationError, match="principal_bytes") as raised:
            Limits(ledger_bytes=ledger, chain_bytes=chain)
        suggested = int(str(raised.value).split("for example ")[1].split(" ")[0])
        given = Limits(ledger_bytes=ledger, chain_bytes=chain, principal_bytes=suggested)
        assert given.principal_bytes == suggested


def test_chain_must_hold_one_maximum_transition() -> None:
    small = {
        "argument_bytes": 256,
        "form_schema_bytes": 256,
        "state_bytes": 64,
        "answer_bytes": 256,
    }
    prompt = RECORD_FIXED_BYTES + 256 + 64
    needed = CHAIN_FIXED_BYTES + 256 + prompt + 256 + prompt
    assert Limits(**small, chain_bytes=needed).chain_floor() == needed
    with pytest.raises(ConfigurationError, match=str(needed)):
        Limits(**small, chain_bytes=needed - 1)


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FIELDS = (
    "result_bytes",
    "inline_bytes",
    "definition_bytes",
    "argument_bytes",
    "token_bytes",
    "answer_bytes",
    "state_bytes",
    "form_schema_bytes",
    "chain_bytes",
    "ledger_bytes",
    "max_prompts",
    "principal_bytes",
)


@given(st.dictionaries(st.sampled_from(FIELDS), st.integers(-10, 2**26)))
def test_limits_either_hold_every_rule_or_say_which_field_breaks_one(
    values: dict[str, int],
) -> None:
    try:
        limits = Limits(**values)
    except ConfigurationError as exc:
        problem = str(exc)
        limits = None
    if limits is None:
        assert any(field in problem for field in FIELDS)
        return
    derived = {"inline_bytes", "form_schema_bytes"}
    for field, value in values.items():
        if value or field not in derived:
            assert getattr(limits, field) == (value or getattr(Limits(), field))
    assert limits.inline_bytes <= limits.result_bytes
    assert limits.form_schema_bytes + PROMPT_OVERHEAD_BYTES <= limits.result_bytes
    assert limits.chain_bytes >= limits.chain_floor()
    assert limits.chain_bytes <= limits.principal_bytes <= limits.ledger_bytes
    assert limits.result_bytes >= 16 * 1024
