"""``Limits``: every budget of a registry, validated in one place.

A field left at zero takes its default. Negative values, values under a field's
floor and inconsistent combinations raise ``ConfigurationError`` naming the field
and the rule. Raising one field never silently raises another: a combination that
only works if a related budget grows is an error, not an adjustment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import timedelta

from ._failures import ConfigurationError

__all__ = [
    "CHAIN_FIXED_BYTES",
    "DEFAULT_LIMITS",
    "PAGE_BYTES",
    "PAGE_RESERVE_BYTES",
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
#: JSON budget of one search page (spec 003).
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


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets of one registry; zero means "the default" for every field.

    Byte budgets:

    * ``result_bytes`` (64 KiB, ≥ 16 KiB): encoded result size (text, structured JSON,
      links, metadata, inline media); prompts must fit it too.
    * ``inline_bytes`` (48 KiB, ≤ ``result_bytes``): inline media, every occurrence counted.
    * ``definition_bytes`` (64 KiB, ≥ 256): one operation's name, texts, examples,
      source and canonical schemas.
    * ``argument_bytes`` (64 KiB, ≥ 256): raw argument JSON of one call.
    * ``token_bytes`` (1 KiB, ≥ 64): longest cursor or continuation token accepted.
    * ``answer_bytes`` (16 KiB, ≥ 256): raw and canonical answer JSON.
    * ``state_bytes`` (8 KiB, ≥ 64): canonical private state of one prompt.
    * ``form_schema_bytes`` (16 KiB, ≥ 256): a prompt's public part: its message plus
      its canonical form schema, or its message plus its URL.
    * ``chain_bytes`` (256 KiB): retained bytes of one continuation chain; must hold
      arguments + form schema + state + answers + the fixed charges.
    * ``ledger_bytes`` (32 MiB, ≥ ``chain_bytes``): all retained continuation data.

    Interaction: ``max_prompts`` (10, ≥ 1) prompts per chain; ``input_lifetime``
    (10 minutes, > 0) how long a continuation lives at most.
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
    input_lifetime: timedelta = field(default=timedelta(0))

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "input_lifetime":
                if not isinstance(value, timedelta):
                    raise TypeError("Limits.input_lifetime must be a datetime.timedelta")
                if value < timedelta(0):
                    raise ConfigurationError("Limits.input_lifetime must not be negative")
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
                object.__setattr__(self, spec.name, _DEFAULTS[spec.name])
            elif value < _FLOORS[spec.name]:
                raise ConfigurationError(
                    f"Limits.{spec.name} must be at least {_FLOORS[spec.name]} bytes"
                    if spec.name.endswith("_bytes")
                    else f"Limits.{spec.name} must be at least {_FLOORS[spec.name]}"
                )
        self._check_combinations()

    def _check_combinations(self) -> None:
        if self.inline_bytes > self.result_bytes:
            raise ConfigurationError(
                f"Limits.inline_bytes ({self.inline_bytes}) must not exceed "
                f"Limits.result_bytes ({self.result_bytes})"
            )
        needed = self.chain_floor()
        if self.chain_bytes < needed:
            raise ConfigurationError(
                f"Limits.chain_bytes ({self.chain_bytes}) must hold one maximum transition: "
                f"argument_bytes + form_schema_bytes + state_bytes + answer_bytes + "
                f"{CHAIN_FIXED_BYTES + RECORD_FIXED_BYTES} fixed = {needed}; raise chain_bytes "
                f"or lower the others"
            )
        if self.ledger_bytes < self.chain_bytes:
            raise ConfigurationError(
                f"Limits.ledger_bytes ({self.ledger_bytes}) must be at least "
                f"Limits.chain_bytes ({self.chain_bytes})"
            )

    def chain_floor(self) -> int:
        """Bytes one chain needs for its arguments and one maximum prompt and answer."""
        return (
            self.argument_bytes
            + self.form_schema_bytes
            + self.state_bytes
            + self.answer_bytes
            + CHAIN_FIXED_BYTES
            + RECORD_FIXED_BYTES
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
    "chain_bytes": 256 * KIB,
    "ledger_bytes": 32 * MIB,
    "max_prompts": 10,
}

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
}

DEFAULT_LIMITS = Limits()
