"""Invoke benchmark: what ``await registry.invoke(...)`` adds over calling the handler.

``python benchmarks/bench_invoke.py [--runs 20000] [--no-compare]``

One operation with a five-field argument object (a patterned id, a decimal amount
with ``multipleOf``, an enum, a date, a bounded memo), an input schema and an output
schema; the handler reads its arguments and finishes with a text block and a
structured result. Overhead = median of the full call minus median of calling the
same handler directly (target: <= 40 µs for an async handler). Measured in one run,
interleaved, beside:

* the official MCP SDK's in-process call path (mcp 2.x ``MCPServer.call_tool``, the
  renamed ``FastMCP``): pydantic validation of the arguments from the function's
  signature, and of the structured output from its return annotation;
* fastmcp 4's ``FastMCP.call_tool`` (installed with the ``bench`` extra), same tool;
* mcp-lens-py's ``CapabilityRegistry.execute_capability`` (no validation at all).

opgate is measured with the arguments as JSON text (what arrives on the wire) and
as a Python mapping (what the SDKs receive after their JSON parse). A sync handler
(run in a worker thread) is measured for information.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from common import (
    AllowAll,
    Table,
    Timing,
    argument_parser,
    print_heading,
    print_tables,
    time_async_interleaved,
)
from opgate import Completed, Invocation, Operation, Registry, Result, Text, finish
from opgate._invocation import new_invocation
from opgate._json import parse
from opgate._progress import Diagnostics, ProgressChannel

__all__ = ["ARGUMENTS", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "main", "run"]

#: The overhead target for an async handler, in microseconds.
TARGET_US = 40.0

NAME = "billing.invoices.create"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "pattern": "^cus_[0-9a-f]{8}$"},
        "amount": {"type": "number", "minimum": 0, "multipleOf": 0.01},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "due_date": {"type": "string", "format": "date"},
        "memo": {"type": "string", "maxLength": 200},
    },
    "required": ["customer_id", "amount", "currency"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string"},
        "status": {"type": "string", "enum": ["draft", "open"]},
        "total": {"type": "number"},
    },
    "required": ["invoice_id", "status", "total"],
}
ARGUMENTS: dict[str, Any] = {
    "customer_id": "cus_0a1b2c3d",
    "amount": 125.5,
    "currency": "EUR",
    "due_date": "2026-08-01",
    "memo": "Consulting, July",
}
ARGUMENTS_JSON = json.dumps(ARGUMENTS)


async def create_invoice(invocation: Invocation) -> Any:
    """The opgate handler (async)."""
    arguments = invocation.arguments
    return finish(
        Result(
            [Text("created invoice inv_00000001")],
            structured={
                "invoice_id": "inv_00000001",
                "status": "draft",
                "total": arguments["amount"],
            },
        )
    )


def create_invoice_sync(invocation: Invocation) -> Any:
    """The opgate handler (sync: the registry runs it in a worker thread)."""
    arguments = invocation.arguments
    return finish(
        Result(
            [Text("created invoice inv_00000001")],
            structured={
                "invoice_id": "inv_00000001",
                "status": "draft",
                "total": arguments["amount"],
            },
        )
    )


def _registry(handler: Callable[..., Any]) -> Registry:
    operation = Operation(
        NAME,
        "Create a draft invoice for a customer.",
        handler,
        group="billing",
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
    )
    return Registry([operation], AllowAll())


def _invocation() -> Invocation:
    """What the registry hands the handler, built once for the direct calls."""
    arguments = parse(ARGUMENTS_JSON, profile=True)
    assert isinstance(arguments, dict)
    return new_invocation(NAME, arguments, frozenset(), None, ProgressChannel(None, Diagnostics()))


# --- comparisons ----------------------------------------------------------------------------

Pair = tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[object]]]


class InvoiceOut(BaseModel):
    """The SDK tools' structured output (validated from the return annotation)."""

    invoice_id: str
    status: Literal["draft", "open"]
    total: float


async def sdk_create_invoice(
    customer_id: Annotated[str, Field(pattern="^cus_[0-9a-f]{8}$")],
    amount: Annotated[float, Field(ge=0, multiple_of=0.01)],
    currency: Literal["EUR", "USD", "GBP"],
    due_date: datetime.date | None = None,
    memo: Annotated[str, Field(max_length=200)] = "",
) -> InvoiceOut:
    """The same operation as an SDK tool: arguments and output validated by pydantic."""
    return InvoiceOut(invoice_id="inv_00000001", status="draft", total=amount)


def _mcp_sdk() -> Pair | str:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.types import CallToolResult
    except ImportError:
        return "mcp.server.mcpserver not available"
    function = sdk_create_invoice
    server = MCPServer("bench")
    server.tool(name="create_invoice")(function)

    async def through() -> object:
        result = await server.call_tool("create_invoice", dict(ARGUMENTS))
        if not isinstance(result, CallToolResult) or result.is_error:
            raise RuntimeError(f"MCPServer.call_tool failed: {result}")
        return result

    async def direct() -> object:
        return await function(**ARGUMENTS)

    return through, direct


def _fastmcp() -> Pair | str:
    try:
        from fastmcp import FastMCP
    except ImportError:
        return "not installed"
    function = sdk_create_invoice
    server = FastMCP("bench")
    server.tool(name="create_invoice")(function)

    async def through() -> object:
        return await server.call_tool("create_invoice", dict(ARGUMENTS))

    async def direct() -> object:
        return await function(**ARGUMENTS)

    return through, direct


def _mcp_lens() -> Pair | str:
    try:
        from mcp_lens.registry import (  # type: ignore[import-untyped, unused-ignore]
            Capability,
            CapabilityRegistry,
        )
    except ImportError:
        return "not installed"

    async def executor(**arguments: Any) -> dict[str, Any]:
        return {"invoice_id": "inv_00000001", "status": "draft", "total": arguments["amount"]}

    registry = CapabilityRegistry()
    registry.register(Capability(NAME, "Create a draft invoice.", INPUT_SCHEMA, executor))

    async def through() -> object:
        return await registry.execute_capability(NAME, dict(ARGUMENTS))

    async def direct() -> object:
        return await executor(**ARGUMENTS)

    return through, direct


# --- the benchmark ---------------------------------------------------------------------------


async def _measure(runs: int, compare: bool) -> Table:
    table = Table(
        "Invoke overhead (5-field arguments, input and output schema)",
        ("path", "call µs", "handler µs", "overhead µs", "vs opgate", "target µs", "ok"),
    )
    table.notes.append(
        "overhead = median(call through the library) - median(direct handler call); "
        "vs opgate = that overhead divided by opgate's (JSON text) overhead."
    )
    async_registry = _registry(create_invoice)
    sync_registry = _registry(create_invoice_sync)
    invocation = _invocation()
    mapping = dict(ARGUMENTS)

    async def opgate_json() -> object:
        outcome = await async_registry.invoke(None, NAME, ARGUMENTS_JSON)
        assert isinstance(outcome, Completed), outcome
        return outcome

    async def opgate_mapping() -> object:
        return await async_registry.invoke(None, NAME, mapping)

    async def opgate_sync() -> object:
        outcome = await sync_registry.invoke(None, NAME, ARGUMENTS_JSON)
        assert isinstance(outcome, Completed), outcome
        return outcome

    async def handler_direct() -> object:
        return await create_invoice(invocation)

    async def sync_direct() -> object:
        return create_invoice_sync(invocation)

    paths: dict[str, Pair | str] = {
        "opgate, JSON text": (opgate_json, handler_direct),
        "opgate, mapping": (opgate_mapping, handler_direct),
    }
    if compare:
        paths["MCP SDK MCPServer.call_tool"] = _mcp_sdk()
        paths["fastmcp 4 FastMCP.call_tool"] = _fastmcp()
        paths["mcp-lens execute (unvalidated)"] = _mcp_lens()
    paths["opgate, sync handler (thread)"] = (opgate_sync, sync_direct)

    functions: dict[str, Callable[[], Awaitable[object]]] = {}
    for label, pair in paths.items():
        if isinstance(pair, tuple):
            functions[label] = pair[0]
            functions[f"{label} / direct"] = pair[1]
    timings = await time_async_interleaved(functions, runs=runs)
    baseline: float | None = None
    for label, pair in paths.items():
        if not isinstance(pair, tuple):
            table.add(path=label, **{"call µs": pair})
            continue
        call: Timing = timings[label]
        direct: Timing = timings[f"{label} / direct"]
        overhead = (call.median_ns - direct.median_ns) / 1_000
        if baseline is None:
            baseline = overhead
        is_target = label.startswith("opgate") and "sync" not in label
        table.add(
            **{
                "path": label,
                "call µs": call.median_us,
                "handler µs": direct.median_us,
                "overhead µs": overhead,
                "vs opgate": overhead / baseline if baseline > 0 else None,
                "target µs": TARGET_US if is_target else None,
                "ok": overhead <= TARGET_US if is_target else None,
            }
        )
    return table


def run(*, runs: int = 20_000, compare: bool = True) -> list[Table]:
    """Measure the invoke overheads; return the table."""
    return [asyncio.run(_measure(runs, compare))]


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--no-compare", action="store_true", help="skip the comparison packages")
    args = parser.parse_args(argv)
    print_heading("Invoke benchmark")
    tables = run(runs=args.runs, compare=not args.no_compare)
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
