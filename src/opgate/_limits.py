"""``Limits``: every budget of a registry, validated in one place.

A field left at zero takes its default. Negative values, values under a field's
floor and inconsistent combinations raise ``ConfigurationError`` naming the field
and the rule. Raising one field never silently raises another: a combination that
only works if a related budget grows is an error, not an adjustment. Two
defaults are *derived* from ``result_bytes`` (``inline_bytes`` and
``form_schema_bytes``) so that a smaller result budget still gets defaults that fit
it; a derived default never exceeds its own default, and a value given explicitly is
never changed. ``principal_bytes`` has a constant default: a ledger or chain it does
not fit needs ``principal_bytes`` given.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import timedelta

from ._failures import ConfigurationError

__all__ = [
    "CHAIN_FIXED_BYTES",
    "DEFAULT_LIMITS",
    "MAX_INPUT_LIFETIME",
    "PAGE_BYTES",
    "PAGE_RESERVE_BYTES",
    "PROMPT_OVERHEAD_BYTES",
    "QUERY_BYTES",
    "RECORD_FIXED_BYTES",
    "SEARCH_DEFAULT_LIMIT",
    "SEARCH_MAX_LIMIT",
    "Limits",
]

KIB = 1024
MIB = 1024 * KIB

#: Search page size when the caller gives none (spec 003).
SEARCH_DEFAULT_LIMIT = 5
#: Largest search page a caller may ask for (spec 003).
SEARCH_MAX_LIMIT = 20
#: JSON budget of one search page (spec 003): a ``SearchPage``'s items and cursor, as
#: JSON, never exceed it (an adapter may check its own encoding against it).
PAGE_BYTES = 16 * KIB
#: Part of a page kept for the envelope and the cursor, so items alone never fill it.
PAGE_RESERVE_BYTES = 1 * KIB
#: Longest query and group accepted, in UTF-8 bytes (spec 003).
QUERY_BYTES = 256

#: Conservative charge for one continuation chain's bookkeeping (record table entry,
#: token hash, binding hashes, timestamps, Python object headers).
CHAIN_FIXED_BYTES = 1 * KIB
#: Conservative charge for one prompt record: its token hash, message, deadlines and links.
RECORD_FIXED_BYTES = 1 * KIB

#: Public bytes a prompt reply adds beyond its message and schema or URL: the token,
#: the expiry timestamp and the failure envelope the adapter may have to send instead.
PROMPT_OVERHEAD_BYTES = 512

#: Longest ``input_lifetime`` accepted: a continuation is an interactive hand-off, and
#: deadlines must stay representable as aware datetimes.
MAX_INPUT_LIFETIME = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets of one registry; zero means "the default" for every field.

    Byte budgets:

    * ``result_bytes`` (64 KiB, ≥ 16 KiB): encoded result size (text, structured JSON,
      links, metadata, inline media); prompts must fit it too.
    * ``inline_bytes`` (48 KiB, or ¾ of a smaller ``result_bytes``; ≤ ``result_bytes``):
      inline media, every occurrence counted.
    * ``definition_bytes`` (64 KiB, ≥ 256): one operation's name, texts, examples,
      source and canonical schemas.
    * ``argument_bytes`` (64 KiB, ≥ 256): raw argument JSON of one call.
    * ``token_bytes`` (1 KiB, ≥ 64): longest cursor or continuation token accepted.
    * ``answer_bytes`` (16 KiB, ≥ 256): raw and canonical answer JSON.
    * ``state_bytes`` (8 KiB, ≥ 64): canonical private state of one prompt.
    * ``form_schema_bytes`` (16 KiB, or ``result_bytes`` - 512 if smaller; ≥ 256 and
      ≤ ``result_bytes`` - ``PROMPT_OVERHEAD_BYTES``): a prompt's public part, as JSON
      encodes it: its message plus its canonical form schema, or its message plus its URL.
    * ``chain_bytes`` (512 KiB, ≥ ``chain_floor()``): retained bytes of one continuation
      chain; must hold everything one maximum transition retains and reserves (see
      ``chain_floor``). The default carries ten maximum prompts and answers.
    * ``ledger_bytes`` (32 MiB, ≥ ``principal_bytes``): all retained continuation data.
    * ``principal_bytes`` (8 MiB whatever the other fields; from ``chain_bytes`` to
      ``ledger_bytes``): the share of the ledger one principal (one scope key) may
      hold, so one principal's flood leaves room for the others. No other field
      moves it: a ``ledger_bytes`` below 8 MiB or a ``chain_bytes`` above it needs
      ``principal_bytes`` given. Equal to ``ledger_bytes`` turns the share off. This
      goes beyond the spec.

    Interaction: ``max_prompts`` (10, ≥ 1) prompts per chain; ``input_lifetime``
    (10 minutes, > 0, ≤ 30 days) how long a continuation lives at most.
    """

    result_bytes: int = 0
    inline_bytes: int = 0
    definition_bytes: int = 0
    argument_bytes: int = 0
    token_bytes: int = 0
    answer_bytes: int = 0
    state_bytes: int = 0
    form_schema_bytes: int = 0
    chain_bytes: int = 0
    ledger_bytes: int = 0
    max_prompts: int = 0
    principal_bytes: int = 0
    input_lifetime: timedelta = field(default=timedelta(0))

    def __post_init__(self) -> None:
        principal_given = self.principal_bytes != 0
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "input_lifetime":
                if not isinstance(value, timedelta):
                    raise TypeError("Limits.input_lifetime must be a datetime.timedelta")
                if value < timedelta(0):
                    raise ConfigurationError("Limits.input_lifetime must not be negative")
                if value > MAX_INPUT_LIFETIME:
                    raise ConfigurationError(
                        f"Limits.input_lifetime must be at most {MAX_INPUT_LIFETIME.days} days"
                    )
                if value == timedelta(0):
                    object.__setattr__(self, spec.name, _DEFAULT_LIFETIME)
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"Limits.{spec.name} must be an int")
            if value < 0:
                raise ConfigurationError(
                    f"Limits.{spec.name} must not be negative (0 means the default)"
                )
            if value == 0:
                if spec.name not in _DERIVED:
                    object.__setattr__(self, spec.name, _DEFAULTS[spec.name])
            elif value < _FLOORS[spec.name]:
                raise ConfigurationError(
                    f"Limits.{spec.name} must be at least {_FLOORS[spec.name]} bytes"
                    if spec.name.endswith("_bytes")
                    else f"Limits.{spec.name} must be at least {_FLOORS[spec.name]}"
                )
        self._derive_defaults()
        self._check_combinations(principal_given)

    def _derive_defaults(self) -> None:
        """Fill the derived defaults left at zero from the fields they depend on."""
        if self.inline_bytes == 0:
            inline = min(_DEFAULTS["inline_bytes"], self.result_bytes * 3 // 4)
            object.__setattr__(self, "inline_bytes", inline)
        if self.form_schema_bytes == 0:
            public = min(_DEFAULTS["form_schema_bytes"], self.result_bytes - PROMPT_OVERHEAD_BYTES)
            object.__setattr__(self, "form_schema_bytes", public)

    def _check_combinations(self, principal_given: bool) -> None:
        if self.inline_bytes > self.result_bytes:
            raise ConfigurationError(
                f"Limits.inline_bytes ({self.inline_bytes}) must not exceed "
                f"Limits.result_bytes ({self.result_bytes})"
            )
        if self.form_schema_bytes + PROMPT_OVERHEAD_BYTES > self.result_bytes:
            raise ConfigurationError(
                f"Limits.form_schema_bytes ({self.form_schema_bytes}) plus the "
                f"{PROMPT_OVERHEAD_BYTES}-byte prompt reply overhead must fit "
                f"Limits.result_bytes ({self.result_bytes}); a larger prompt could never be sent"
            )
        needed = self.chain_floor()
        if self.chain_bytes < needed:
            raise ConfigurationError(
                f"Limits.chain_bytes ({self.chain_bytes}) must hold one maximum transition: "
                f"argument_bytes + 2 * (form_schema_bytes + state_bytes + "
                f"{RECORD_FIXED_BYTES}) + answer_bytes + {CHAIN_FIXED_BYTES} = {needed}; "
                f"raise chain_bytes or lower the others"
            )
        if self.ledger_bytes < self.chain_bytes:
            raise ConfigurationError(
                f"Limits.ledger_bytes ({self.ledger_bytes}) must be at least "
                f"Limits.chain_bytes ({self.chain_bytes})"
            )
        if not self.chain_bytes <= self.principal_bytes <= self.ledger_bytes:
            if not principal_given:
                suggested = min(self.ledger_bytes, max(self.chain_bytes, self.ledger_bytes // 4))
                raise ConfigurationError(
                    f"Limits.principal_bytes defaults to {self.principal_bytes} bytes, outside "
                    f"Limits.chain_bytes ({self.chain_bytes}) to Limits.ledger_bytes "
                    f"({self.ledger_bytes}); set principal_bytes in that range, for example "
                    f"{suggested} (a quarter of the ledger, at least one chain), or "
                    f"ledger_bytes to turn the per-principal share off"
                )
            raise ConfigurationError(
                f"Limits.principal_bytes ({self.principal_bytes}) must be from "
                f"Limits.chain_bytes ({self.chain_bytes}) to Limits.ledger_bytes "
                f"({self.ledger_bytes}): one principal must be able to hold a whole chain, "
                f"and no more than the ledger"
            )

    def max_prompt_charge(self) -> int:
        """The ledger charge of the largest prompt a handler may issue."""
        return RECORD_FIXED_BYTES + self.form_schema_bytes + self.state_bytes

    def answer_headroom(self) -> int:
        """Bytes of a principal's share that new calls leave free for its answers.

        What answering one prompt reserves at most (a maximum answer and the next
        maximum prompt): a principal whose pending prompts fill its share can still
        answer them, one maximum answer at a time.
        """
        return self.answer_bytes + self.max_prompt_charge()

    def chain_floor(self) -> int:
        """Bytes one maximum transition retains and reserves in its chain.

        The chain's fixed charge and arguments, a maximum prompt record, a maximum
        answer, and the next maximum prompt that answering reserves before the
        handler runs: the smallest ``chain_bytes`` with which a chain can always take
        its first step.
        """
        return (
            CHAIN_FIXED_BYTES
            + self.argument_bytes
            + self.max_prompt_charge()
            + self.answer_bytes
            + self.max_prompt_charge()
        )

    def chain_bytes_for(self, prompts: int) -> int:
        """``chain_bytes`` needed to carry ``prompts`` maximum prompts and answers.

        Counts the chain, its arguments, ``prompts`` records with their answers, and
        the next maximum prompt the last answer reserves.
        """
        return (
            CHAIN_FIXED_BYTES
            + self.argument_bytes
            + prompts * (self.max_prompt_charge() + self.answer_bytes)
            + self.max_prompt_charge()
        )


_DEFAULT_LIFETIME = timedelta(minutes=10)

_DEFAULTS: dict[str, int] = {
    "result_bytes": 64 * KIB,
    "inline_bytes": 48 * KIB,
    "definition_bytes": 64 * KIB,
    "argument_bytes": 64 * KIB,
    "token_bytes": 1 * KIB,
    "answer_bytes": 16 * KIB,
    "state_bytes": 8 * KIB,
    "form_schema_bytes": 16 * KIB,
    # ten maximum prompts and answers with the default budgets need 500 KiB
    "chain_bytes": 512 * KIB,
    "ledger_bytes": 32 * MIB,
    "max_prompts": 10,
    # a quarter of the default ledger; no other field moves it
    "principal_bytes": 8 * MIB,
}

#: Fields whose zero takes a default derived from other fields (see ``_derive_defaults``).
_DERIVED = frozenset({"inline_bytes", "form_schema_bytes"})

_FLOORS: dict[str, int] = {
    "result_bytes": 16 * KIB,
    "inline_bytes": 1,
    "definition_bytes": 256,
    "argument_bytes": 256,
    "token_bytes": 64,
    "answer_bytes": 256,
    "state_bytes": 64,
    "form_schema_bytes": 256,
    "chain_bytes": 1,
    "ledger_bytes": 1,
    "max_prompts": 1,
    "principal_bytes": 1,
}

DEFAULT_LIMITS = Limits()
