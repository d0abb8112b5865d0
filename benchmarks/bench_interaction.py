"""Interaction benchmark: one form prompt and its resume, and 10,000 pending continuations.

``python benchmarks/bench_interaction.py [--runs 5000] [--pending 10000]``

Targets (issue "Human input: ..."): the median overhead of one form prompt plus its
resume, beyond the handler's own work, <= 100 µs. The handler asks for a two-field
confirmation form (with private state) on the first call and finishes on the
resume; its own work (both calls made directly, ``FormInput`` and ``Result``
construction included) is measured in the same run and subtracted.

Capacity: 10,000 continuations held at once (distinct argument objects, one
principal), in a fresh subprocess: the ledger's accounted bytes
(``registry._ledger.used``) beside the process's RSS growth and the Python memory
really retained (tracemalloc snapshots before and after, minus the benchmark's own
list of tokens). The accounting is conservative when ledger bytes >= retained bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from common import (
    AllowAll,
    Table,
    argument_parser,
    print_heading,
    print_tables,
    rss_bytes,
    run_probe,
    time_async_interleaved,
)
from opgate import (
    Completed,
    FormInput,
    InputAction,
    InputMode,
    InputResponse,
    Invocation,
    Limits,
    Operation,
    Pending,
    Registry,
    Result,
    Text,
    await_input,
    fail,
    finish,
)
from opgate._invocation import new_invocation, new_resume
from opgate._json import JSONValue, canonical_bytes, from_python, parse
from opgate._limits import CHAIN_FIXED_BYTES, RECORD_FIXED_BYTES
from opgate._progress import Diagnostics, ProgressChannel

__all__ = ["main", "run"]

#: Overhead target of one prompt plus its resume, in microseconds.
TARGET_US = 100.0

NAME = "orders.refunds.create"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ord_[0-9a-f]{8}$"},
        "amount": {"type": "number", "minimum": 0, "multipleOf": 0.01},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "reason": {"type": "string", "maxLength": 200},
    },
    "required": ["order_id", "amount", "currency"],
    "additionalProperties": False,
}
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Refund now?"},
        "note": {"type": "string", "maxLength": 200, "title": "Note for the customer"},
    },
    "required": ["confirm"],
}
FORM_SUPPORT = frozenset({InputMode.FORM})
ANSWERS = '{"confirm": true, "note": "sorry for the delay"}'
ACCEPT = InputResponse.accept(ANSWERS)
#: Short prompt lifetime for the timing loops: completed records (kept for recovery until
#: they expire) are swept instead of filling the ledger over thousands of round trips.
EXPIRY = timedelta(milliseconds=100)


def arguments_json(number: int) -> str:
    """The argument object of call ``number`` (distinct order ids)."""
    return (
        f'{{"order_id": "ord_{number:08x}", "amount": 125.5, "currency": "EUR", '
        f'"reason": "damaged in transit"}}'
    )


def make_refund(form: dict[str, Any]) -> Callable[[Invocation], Awaitable[Any]]:
    """The handler: ask for confirmation with ``form`` first; finish once answered."""

    async def refund(invocation: Invocation) -> Any:
        resume = invocation.resume
        if resume is None:
            order = invocation.arguments["order_id"]
            return await_input(
                FormInput(f"Refund 125.50 EUR for {order}?", form, {"intent": f"refund-{order}"})
            )
        answers = resume.answers
        if resume.action is InputAction.ACCEPT and isinstance(answers, dict) and answers["confirm"]:
            state = resume.state
            assert isinstance(state, dict)
            return finish(Result([Text("refunded")], structured={"intent": state["intent"]}))
        return fail("the refund was not confirmed")

    return refund


def _registry(form: dict[str, Any] = FORM, limits: Limits | None = None) -> Registry:
    operation = Operation(
        NAME, "Refund an order after confirmation.", make_refund(form), input_schema=INPUT_SCHEMA
    )
    return Registry([operation], AllowAll(), limits=limits)


def _direct_invocations() -> tuple[Invocation, Invocation]:
    """What the handler receives on the prompt call and on the resume, built once."""
    arguments = parse(arguments_json(7), profile=True)
    assert isinstance(arguments, dict)
    answers = parse(ANSWERS)
    state: JSONValue = {"intent": "refund-ord_00000007"}
    first = new_invocation(
        NAME, arguments, FORM_SUPPORT, None, ProgressChannel(None, Diagnostics())
    )
    resumed = new_invocation(
        NAME,
        arguments,
        FORM_SUPPORT,
        new_resume(InputAction.ACCEPT, answers, state, False),
        ProgressChannel(None, Diagnostics()),
    )
    return first, resumed


async def _round_trip_table(runs: int) -> Table:
    registry = _registry()
    refund = make_refund(FORM)
    first, resumed = _direct_invocations()
    text = arguments_json(7)

    async def prompt_and_resume() -> object:
        pending = await registry.invoke(
            None, NAME, text, input_support=FORM_SUPPORT, input_expiry=EXPIRY
        )
        assert isinstance(pending, Pending), pending
        done = await registry.invoke(
            None,
            NAME,
            text,
            input_support=FORM_SUPPORT,
            resume=(pending.continuation, ACCEPT),
            input_expiry=EXPIRY,
        )
        assert isinstance(done, Completed), done
        return done

    async def handler_alone() -> object:
        await refund(first)
        return await refund(resumed)

    async def prompt_only() -> object:
        pending = await registry.invoke(
            None, NAME, text, input_support=FORM_SUPPORT, input_expiry=EXPIRY
        )
        assert isinstance(pending, Pending), pending
        return pending

    async def handler_prompt() -> object:
        return await refund(first)

    timings = await time_async_interleaved(
        {
            "pair": prompt_and_resume,
            "handler": handler_alone,
            "prompt": prompt_only,
            "handler prompt": handler_prompt,
        },
        runs=runs,
    )
    pair, handler = timings["pair"], timings["handler"]
    prompt, handler_first = timings["prompt"], timings["handler prompt"]
    overhead = (pair.median_ns - handler.median_ns) / 1_000
    table = Table(
        "Form prompt + resume overhead",
        ("measured", "through registry µs", "handler alone µs", "overhead µs", "target µs", "ok"),
    )
    table.add(
        **{
            "measured": "prompt + resume (two invokes)",
            "through registry µs": pair.median_us,
            "handler alone µs": handler.median_us,
            "overhead µs": overhead,
            "target µs": TARGET_US,
            "ok": overhead <= TARGET_US,
        }
    )
    table.add(
        **{
            "measured": "prompt only (for information)",
            "through registry µs": prompt.median_us,
            "handler alone µs": handler_first.median_us,
            "overhead µs": (prompt.median_ns - handler_first.median_ns) / 1_000,
        }
    )
    table.notes.append(
        "handler alone = the same two handler calls made directly (FormInput and Result "
        "construction included). Prompts expire after 100 ms (input_expiry) so finished "
        "records, kept for recovery until expiry, do not fill the ledger; their sweeping "
        "is included."
    )
    return table


# --- capacity (in a fresh subprocess) --------------------------------------------------------

#: A larger but ordinary form: 20 titled, described string fields (about 3 KB canonical).
LARGE_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Refund now?"},
        **{
            f"field_{i}": {
                "type": "string",
                "title": f"Field number {i}",
                "description": "Please describe the thing in a few words for the reviewer.",
                "maxLength": 200,
            }
            for i in range(19)
        },
    },
    "required": ["confirm"],
}
#: The forms the capacity run holds continuations for, and the ledger budget each needs.
#: One principal holds them all, so its share (a quarter of the ledger by default) is
#: raised to the whole ledger: the run measures the ledger's accounting, not the share.
FORMS: dict[str, tuple[dict[str, Any], Limits | None]] = {
    # default ledger: 10,000 fit in the default 32 MiB
    "2-field form": (FORM, Limits(principal_bytes=32 * 2**20)),
    "20-field form": (LARGE_FORM, Limits(ledger_bytes=128 * 2**20, principal_bytes=128 * 2**20)),
}


async def _hold(registry: Registry, count: int, offset: int) -> list[str]:
    tokens = []
    for number in range(offset, offset + count):
        pending = await registry.invoke(
            None, NAME, arguments_json(number), input_support=FORM_SUPPORT
        )
        if not isinstance(pending, Pending):
            raise RuntimeError(f"continuation {number - offset} was refused: {pending}")
        tokens.append(pending.continuation)
    return tokens


def _memory_probe(count: int, form_label: str) -> dict[str, float]:
    """Run in a child: RSS growth, ledger bytes, then tracemalloc retained bytes."""
    form, limits = FORMS[form_label]
    asyncio.run(_hold(_registry(form, limits), 50, 10**6))  # warm caches (form schema, ...)
    registry = _registry(form, limits)
    gc.collect()
    before_rss = rss_bytes()
    begin = time.perf_counter()
    tokens = asyncio.run(_hold(registry, count, 0))
    elapsed = time.perf_counter() - begin
    gc.collect()
    grown_rss = rss_bytes() - before_rss
    ledger_used = registry._ledger.used
    live = registry._ledger.live
    del tokens, registry
    gc.collect()

    registry = _registry(form, limits)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    tokens = asyncio.run(_hold(registry, count, 0))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    # The benchmark's own list of tokens is not the ledger's.
    own = sys.getsizeof(tokens) + sum(sys.getsizeof(token) for token in tokens)
    return {
        "count": count,
        "live": live,
        "schema_bytes": len(canonical_bytes(from_python(form))),
        "ledger_used": ledger_used,
        "rss": grown_rss,
        "retained": grown - own,
        "seconds": elapsed,
    }


def _capacity_table(count: int) -> Table:
    table = Table(
        f"{count:,} pending continuations held at once (fresh subprocess per form)",
        (
            "form",
            "form schema B",
            "ledger MiB",
            "retained MiB",
            "RSS MiB",
            "ledger B/each",
            "retained B/each",
            "RSS B/each",
            "retained ÷ ledger",
            "conservative",
        ),
    )
    for label in FORMS:
        probe = run_probe(__file__, "--memory-probe", str(count), "--form", label)
        held = probe["count"]
        table.add(
            **{
                "form": label,
                "form schema B": int(probe["schema_bytes"]),
                "ledger MiB": probe["ledger_used"] / 2**20,
                "retained MiB": probe["retained"] / 2**20,
                "RSS MiB": probe["rss"] / 2**20,
                "ledger B/each": probe["ledger_used"] / held,
                "retained B/each": probe["retained"] / held,
                "RSS B/each": probe["rss"] / held,
                "retained ÷ ledger": probe["retained"] / probe["ledger_used"],
                "conservative": probe["ledger_used"] >= probe["retained"],
            }
        )
        table.notes.append(
            f"{label}: {int(probe['live']):,} live records; creating them took "
            f"{probe['seconds'] * 1e6 / held:.0f} µs each."
        )
    table.notes.append(
        "ledger = registry._ledger.used; retained = tracemalloc growth minus the benchmark's "
        "own token list; RSS = process growth (measured without tracemalloc). Fixed charges: "
        f"CHAIN_FIXED_BYTES={CHAIN_FIXED_BYTES}, RECORD_FIXED_BYTES={RECORD_FIXED_BYTES}."
    )
    return table


def run(*, runs: int = 5_000, pending: int = 10_000) -> list[Table]:
    """Measure the prompt round trip and the capacity; return the tables."""
    tables = [asyncio.run(_round_trip_table(runs))]
    if pending:
        tables.append(_capacity_table(pending))
    return tables


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--pending", type=int, default=10_000, help="0 skips the capacity run")
    parser.add_argument("--memory-probe", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--form", default="2-field form", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        print(json.dumps(_memory_probe(args.memory_probe, args.form)))
        return []
    print_heading("Interaction benchmark")
    tables = run(runs=args.runs, pending=args.pending)
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
