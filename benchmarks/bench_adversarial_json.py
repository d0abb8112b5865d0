"""Adversarial JSON benchmark: hostile 64 KiB inputs through every JSON entry point.

``python benchmarks/bench_adversarial_json.py [--runs 50]``

Target (issue 9, item 1): every JSON entry point is linear in its input, and each
adversarial input of 64 KiB (escaped quotes, long strings, many small members,
deep-but-legal nesting, near-miss numbers) costs at most 20 ms. Each shape is
measured through ``parse`` with the numeric work profile (the path of arguments,
answers and schemas given as text), through ``parse`` without it (private state and
structured results read back), and end to end through ``Registry.invoke`` (budget
check, strict parse, schema validation and the failure message), whose argument
budget is exactly 64 KiB; a shape that is a JSON object is also passed to ``invoke``
as a mapping, as an MCP client's ``tools/call`` arguments arrive (decoded by the
stdlib: floats, the last of repeated names; ``from_python`` and canonical bytes).
The table gives median, p90, p99 and maximum per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from common import AllowAll, Table, argument_parser, print_heading, print_tables
from opgate import Operation, Registry, Result, Text, finish
from opgate._json import MAX_DEPTH, JSONError, parse

__all__ = ["SHAPES", "SIZE", "TARGET_MS", "main", "run"]

#: Size of every adversarial input: the default argument budget.
SIZE = 64 * 1024
#: Upper bound for each input at the worst percentile (issue 9).
TARGET_MS = 20.0


def _fill(head: str, unit: str, tail: str, size: int = SIZE) -> str:
    """``head + unit * n + tail`` with ``n`` as large as fits in ``size`` characters."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def _deep_legal(size: int = SIZE) -> str:
    # Inside ``{"a":[...]}`` (two levels), so each block reaches exactly MAX_DEPTH.
    block = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    return _fill('{"a":[', block + ",", block + "]}", size)


def _deep_legal_objects(size: int = SIZE) -> str:
    block = '{"k":' * (MAX_DEPTH - 2) + "1" + "}" * (MAX_DEPTH - 2)
    return _fill('{"a":[', block + ",", block + "]}", size)


def _too_deep_near_start(size: int = SIZE) -> str:
    block = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # one level too deep, first
    return _fill('{"a":[', block + ",", '{"k":1}]}', size)


def _wide_levels(levels: int, width: int) -> str:
    # Each level: ``width`` small objects, then the next level; one repeated name inside.
    inner = '{"k":1,"k":2}'
    for _ in range(levels):
        inner = "[" + '{"a":[]},' * width + inner + "]"
    return '{"a":' + inner + "}"


def _deep_chains(every: bool, size: int = SIZE) -> str:
    # Chains of arrays as deep as allowed inside ``{"a":[...]}``, each ending in an object;
    # every one repeats a name, or only the last.
    depth = MAX_DEPTH - 3
    last = "[" * depth + '{"":0,"":1}' + "]" * depth
    chain = last if every else "[" * depth + '{"":0}' + "]" * depth
    return _fill('{"a":[', chain + ",", last + "]}", size)


def _distinct(number: Callable[[int], str], size: int = SIZE) -> str:
    # Distinct number tokens (no cache helps), as many as fit in ``{"a":[...]}``.
    items: list[str] = []
    used = len('{"a":[]}')
    while used + len(number(len(items))) + 1 <= size:
        items.append(number(len(items)))
        used += len(items[-1]) + 1
    return '{"a":[' + ",".join(items) + "]}"


def _too_deep_at_end(size: int = SIZE) -> str:
    return _fill('{"a":[', '{"k":1},', "{}]," + '"b":' + "[" * (MAX_DEPTH + 1) + "}", size)


#: name -> text of at most 64 KiB as UTF-8 (the non-ASCII shapes are sized by bytes).
SHAPES: dict[str, Callable[[], str]] = {
    "escaped quotes, unterminated, brackets": lambda: _fill(
        '"', '\\"', "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2)
    ),
    "escaped quotes outside strings": lambda: _fill("[", '\\"', "[" * (MAX_DEPTH + 2)),
    "escaped quotes in a closed string": lambda: _fill('{"s":"', '\\"', '"}'),
    "long string of brackets": lambda: _fill('{"s":"', "[{", '"}'),
    "long string, escapes": lambda: _fill('{"s":"', "\\u00e9\\n\\\\", '"}'),
    "many small members": lambda: _fill('{"a":[', "1,", "1]}"),
    "many distinct members": lambda: (
        "{"
        + ",".join(f'"k{i}":{i}' for i in range(SIZE // 10))[: SIZE - 20].rpartition(",")[0]
        + "}"
    ),
    "many small objects": lambda: _fill('{"a":[', '{"k":[1]},', "{}]}"),
    "deep-but-legal nesting": _deep_legal,
    "deep-but-legal objects": _deep_legal_objects,
    "too deep near the start": _too_deep_near_start,
    "too deep at the end": _too_deep_at_end,
    "duplicate member at the end": lambda: (
        "{"
        + ",".join(f'"k{i}":{i}' for i in range(SIZE // 10))[: SIZE - 40].rpartition(",")[0]
        + ',"k0":0}'
    ),
    "small objects, the last repeating a name": lambda: _fill(
        '{"a":[', '{"k":[1]},', '{"x":1,"x":2}]}'
    ),
    "a repeated name, then a syntax error": lambda: _fill(
        '{"a":[', '{"k":[1]},', '{"k":1,"k":2},x]}'
    ),
    "wide levels around a repeated name": lambda: _wide_levels(120, 60),
    "near-miss numbers": lambda: _fill('{"a":[', "1e4095,-0.0e-99999,1.5e-4090,", "1e4097]}"),
    "long integer": lambda: _fill('{"a":', "9", "}"),
    "long fraction": lambda: _fill('{"a":0.', "0", "1}"),
    "lone surrogate at the end": lambda: _fill('{"a":["', "\\ud83d\\ude00", '","\\ud800"]}'),
    # Found attacking the locators (tests/test_json_linear.py):
    "a constant after many values": lambda: _fill('{"a":[', "1,", "NaN]}"),
    "a too-long integer after many values": lambda: _fill('{"a":[', "1,", "9" * 4097 + "]}"),
    "a refused number, then a number character": lambda: _fill('{"a":[', "1,", "1e4097-]}"),
    "repeated names in deep chains": lambda: _deep_chains(True),
    "a repeated name in the last deep chain": lambda: _deep_chains(False),
    "a surrogate pair among many containers": lambda: _fill(
        '{"a":["\\ud83d\\ude00",', "[[]],", "1]}"
    ),
    "a lone surrogate after many containers": lambda: _fill('{"a":[', "{},", '"\\udc00"]}'),
    "many empty objects": lambda: _fill('{"a":[', "{},", "{}]}"),
    "a BOM before many small objects": lambda: (
        "\ufeff" + _fill('{"a":[', '{"k":[1]},', "{}]}", SIZE - 3)
    ),
    "many short non-ASCII strings": lambda: _fill('{"a":[', '"é",', '"é"]}', SIZE * 4 // 5),
    "distinct fractions": lambda: _distinct(lambda i: f"0.{i + 1}"),
    "distinct integral numbers of ~4,000 digits": lambda: _distinct(
        lambda i: f"{i + 1}e{4000 + i % 90}"
    ),
}


def _as_mapping(text: str) -> dict[str, Any] | None:
    """``text`` as an MCP client's ``tools/call`` arguments arrive: decoded by the stdlib
    (floats, last of repeated names), or ``None`` if it is not a JSON object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 10}},
        "additionalProperties": {"type": ["integer", "array", "object"]},
    }


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def _timings(fn: Callable[[], object], runs: int, freeze: bool) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of ``runs`` calls after one warm-up.

    With ``freeze`` the heap built so far (interpreter, modules, registry, input) is
    moved out of the collector's reach (``gc.freeze``) before timing, as a server
    would after start-up: a full collection walks every object in the process, so
    its pause measures the process, not the input. The inputs' own garbage is still
    collected as usual.
    """
    fn()  # warm-up
    gc.collect()
    if freeze:
        gc.freeze()
    wall: list[float] = []
    cpu: list[float] = []
    try:
        for _ in range(runs):
            begin, begin_cpu = time.perf_counter_ns(), time.process_time_ns()
            fn()
            cpu.append((time.process_time_ns() - begin_cpu) / 1e6)
            wall.append((time.perf_counter_ns() - begin) / 1e6)
    finally:
        if freeze:
            gc.unfreeze()
    return wall, cpu


def _parse(text: str, profile: bool) -> Callable[[], object]:
    # As the entry points for text from outside call it (arguments, answers): with the
    # exponent budget. The module's own re-parses of bytes it wrote do without.
    def call() -> object:
        with contextlib.suppress(JSONError):
            return parse(text, profile=profile)
        return None

    return call


def run(*, runs: int = 50, freeze: bool = True, only: str = "") -> list[Table]:
    """Time every shape (or those whose name contains ``only``) through every entry point."""
    registry = Registry([_operation()], AllowAll())  # default limits: 64 KiB of arguments
    loop = asyncio.new_event_loop()
    table = Table(
        "Adversarial JSON, 64 KiB inputs (ms per call)",
        (
            "input",
            "entry",
            "bytes",
            "median ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "cpu median ms",
            "cpu max ms",
            "ok",
        ),
    )
    try:
        for name, make in SHAPES.items():
            if only not in name:
                continue
            text = make()
            assert len(text.encode()) <= SIZE, name
            entries: dict[str, Callable[[], object]] = {
                "parse, profiled": _parse(text, True),
                "parse": _parse(text, False),
                "invoke": lambda text=text: loop.run_until_complete(
                    registry.invoke(None, "adversarial.echo", text)
                ),
            }
            mapping = _as_mapping(text)
            if mapping is not None:
                entries["invoke, mapping"] = lambda mapping=mapping: loop.run_until_complete(
                    registry.invoke(None, "adversarial.echo", mapping)
                )
            for entry, fn in entries.items():
                wall, cpu = _timings(fn, runs, freeze)
                ordered, cpu_ordered = sorted(wall), sorted(cpu)
                worst = ordered[-1]
                table.rows.append(
                    {
                        "input": name,
                        "entry": entry,
                        "bytes": len(text.encode()),
                        "median ms": round(statistics.median(ordered), 3),
                        "p90 ms": round(_percentile(ordered, 0.9), 3),
                        "p99 ms": round(_percentile(ordered, 0.99), 3),
                        "max ms": round(worst, 3),
                        "cpu median ms": round(statistics.median(cpu_ordered), 3),
                        "cpu max ms": round(cpu_ordered[-1], 3),
                        "ok": worst <= TARGET_MS,
                    }
                )
    finally:
        loop.close()
    table.notes.append(
        f"Target: every call ≤ {TARGET_MS:g} ms (the max column); {runs} timed runs per row "
        "after one warm-up; wall time (the target) and process CPU time (steadier on a "
        "shared machine); "
        + (
            "heap frozen after set-up (gc.freeze), so a full collection's pause, which "
            "depends on the whole process, is not charged to one input."
            if freeze
            else "live heap (--live-heap): a full collection's pause lands on whichever call "
            "triggers it."
        )
    )
    return [table]


def _operation() -> Operation:
    def echo(invocation: Any) -> Any:
        return finish(Result([Text("ok")]))

    return Operation(
        "adversarial.echo", "Accept anything an agent sends", echo, input_schema=_schema()
    )


def main(argv: Sequence[str] | None = None) -> list[Table]:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument(
        "--live-heap",
        action="store_true",
        help="do not freeze the set-up heap: full collections then walk it during the timings",
    )
    parser.add_argument("--only", default="", help="only the inputs whose name contains this text")
    args = parser.parse_args(argv)
    print_heading("Adversarial JSON benchmark")
    tables = run(runs=args.runs, freeze=not args.live_heap, only=args.only)
    print_tables(tables)
    return tables


if __name__ == "__main__":
    main()
