"""Shared pieces of the benchmark suite: the synthetic catalog, timing, tables, memory.

Every benchmark module imports this one (``benchmarks/`` is put on ``sys.path`` by
running a script from it, or by ``tests/test_benchmarks.py``). Nothing here opens a
file other than ``/proc``, nor a socket but ``free_port``'s probe.

* ``synthetic_catalog(size)``: a deterministic catalog of realistic operations
  (``billing.invoices.create_17``: ten groups of five resources, fifteen verbs), each
  with a one-sentence summary, a paragraph of description drawn from a shared
  vocabulary (plus rare words, so substring queries hit realistic numbers of
  operations), a small input schema from a handful of shapes with per-resource
  variations, and for reads and writes an output schema.
* ``query_mix(count, seed=...)``: seeded search queries of one to three words from
  the catalog's vocabulary (``query_vocabulary()``), for benchmarks that run many
  different queries rather than a few fixed shapes.
* ``AllowAll`` and ``OnePercent``: the two policies every registry benchmark uses.
* ``time_sync`` / ``time_async``: the median of many runs timed with
  ``time.perf_counter_ns``, after a warm-up.
* ``Table`` and ``format_table``: results as Markdown tables (kept as-is in dated
  files under ``benchmarks/results/``); ``print_heading`` and ``print_tables`` print a
  run, ``argument_parser(__doc__)`` starts its command line.
* ``own_time_by_group(stats, groups)``: a ``cProfile`` run's own time by package.
* ``rss_bytes()``: the process's resident set size from ``/proc/self/status``.
* ``free_port()``, ``bench_environment(source)`` and ``reap(process)``: a served child's
  port, environment and end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import opgate
from opgate import Failure, FailureCode, Operation

__all__ = [
    "GROUPS",
    "OTHER_GROUP",
    "RARE_WORDS",
    "SOURCE_ENV",
    "AllowAll",
    "Cell",
    "OnePercent",
    "SyntheticOperation",
    "Table",
    "Timing",
    "admitted",
    "argument_parser",
    "bench_environment",
    "format_table",
    "free_port",
    "machine_info",
    "own_time_by_group",
    "print_heading",
    "print_tables",
    "query_mix",
    "query_vocabulary",
    "reap",
    "rss_bytes",
    "summarize",
    "synthetic_catalog",
    "time_async",
    "time_async_interleaved",
    "time_sync",
    "to_operations",
]

#: Groups and the resources in each: 10 groups x 5 resources.
GROUPS: dict[str, tuple[str, ...]] = {
    "billing": ("invoices", "credit_notes", "subscriptions", "tax_rates", "coupons"),
    "orders": ("orders", "returns", "carts", "fulfilments", "quotes"),
    "customers": ("customers", "contacts", "addresses", "segments", "notes"),
    "inventory": ("items", "warehouses", "stock_levels", "transfers", "suppliers"),
    "shipping": ("shipments", "carriers", "labels", "rates", "pickups"),
    "support": ("tickets", "macros", "queues", "satisfaction", "escalations"),
    "reports": ("dashboards", "exports", "schedules", "metrics", "audits"),
    "users": ("users", "roles", "sessions", "api_keys", "invitations"),
    "payments": ("payments", "refunds", "disputes", "payouts", "methods"),
    "catalog": ("products", "variants", "prices", "categories", "images"),
}

#: Verbs, each with the schema shape its operations take.
VERBS: dict[str, str] = {
    "create": "create",
    "get": "by_id",
    "list": "list",
    "update": "update",
    "delete": "by_id",
    "archive": "action",
    "restore": "action",
    "export": "list",
    "import": "create",
    "search": "list",
    "approve": "action",
    "cancel": "action",
    "merge": "action",
    "duplicate": "by_id",
    "sync": "action",
}

#: Everyday documentation words; each description draws 35 to 70 of them.
_WORDS_TEXT = (
    "the a an of to and for with from by on in at this that each when after before "
    "returns record records account accounts value values current previous new existing "
    "status state field fields optional required identifier timestamp currency amount "
    "total page cursor filter filters sorted ascending descending limit offset request "
    "response caller permission permissions scope owner team workspace project region "
    "default configured enabled disabled pending completed failed active inactive "
    "archived draft published visible hidden primary secondary external internal webhook "
    "event events history audit log trail version revision snapshot copy template batch "
    "queue retry retries timeout deadline schedule daily weekly monthly yearly report "
    "summary detail details metadata attachment attachments comment comments label labels "
    "tag tags note notes reason code message error errors warning validation validated "
    "idempotent safely atomically eventually consistent cached refreshed recalculated "
    "notifies emails sends triggers updates creates removes deletes marks links unlinks"
)
WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())

#: Words that each appear in about 0.2% of descriptions: the "rare term" queries.
RARE_WORDS: tuple[str, ...] = ("chargeback", "quarantine", "reconciliation", "escheatment")
RARE_RATE = 0.002

_QUALIFIERS = ("", "a single", "one or more", "the matching", "an existing", "every pending")
_PURPOSES = (
    "for the current workspace",
    "on behalf of the caller",
    "and record an audit event",
    "without notifying the owner",
    "and notify subscribed webhooks",
    "in the primary region",
    "for a given account",
    "using the configured defaults",
)
_CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF", "SEK")


def _singular(resource: str) -> str:
    word = resource.replace("_", " ")
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


@dataclass(frozen=True, slots=True)
class SyntheticOperation:
    """One generated operation, independent of any library's definition type."""

    name: str
    group: str
    resource: str
    verb: str
    summary: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


def _input_schema(shape: str, resource: str, variant: int) -> dict[str, Any]:
    """A small, realistic input schema; ``variant`` picks one of a few variations."""
    id_field = f"{_singular(resource).replace(' ', '_')}_id"
    identifier = {"type": "string", "pattern": "^[a-z]{2,4}_[0-9a-f]{8,32}$"}
    if shape == "by_id":
        properties: dict[str, Any] = {id_field: identifier}
        if variant % 2:
            properties["expand"] = {
                "type": "array",
                "items": {"type": "string", "enum": ["owner", "history", "metadata"]},
                "maxItems": 3,
                "uniqueItems": True,
            }
        return {
            "type": "object",
            "properties": properties,
            "required": [id_field],
            "additionalProperties": False,
        }
    if shape == "list":
        return {
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": (20, 50, 100)[variant % 3]},
                "cursor": {"type": "string", "maxLength": 512},
                "status": {"type": "string", "enum": ["active", "archived", "draft"]},
                "created_after": {"type": "string", "format": "date-time"},
            },
            "additionalProperties": False,
        }
    if shape in ("create", "update"):
        properties = {
            "name": {"type": "string", "minLength": 1, "maxLength": (80, 120, 200)[variant % 3]},
            "amount": {"type": "number", "minimum": 0, "multipleOf": 0.01},
            "currency": {"type": "string", "enum": list(_CURRENCIES)},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 10},
            "metadata": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 500},
                "maxProperties": 20,
            },
        }
        required = ["name", "currency"] if shape == "create" else [id_field]
        if shape == "update":
            properties[id_field] = identifier
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
    return {  # action
        "type": "object",
        "properties": {
            id_field: identifier,
            "reason": {"type": "string", "maxLength": 500},
            "notify": {"type": "boolean", "default": variant % 2 == 0},
        },
        "required": [id_field],
        "additionalProperties": False,
    }


def _output_schema(shape: str, resource: str) -> dict[str, Any] | None:
    if shape == "list":
        return {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"]},
            },
            "required": ["items"],
        }
    if shape in ("create", "update", "by_id"):
        id_field = f"{_singular(resource).replace(' ', '_')}_id"
        return {
            "type": "object",
            "properties": {
                id_field: {"type": "string"},
                "status": {"type": "string"},
                "updated_at": {"type": "string", "format": "date-time"},
            },
            "required": [id_field, "status"],
        }
    return None


def synthetic_catalog(size: int, *, seed: int = 7) -> list[SyntheticOperation]:
    """A deterministic synthetic catalog of ``size`` operations (names unique)."""
    rng = random.Random(seed)
    combos = [(g, r, v) for g, resources in GROUPS.items() for r in resources for v in VERBS]
    catalog: list[SyntheticOperation] = []
    for number in range(size):
        group, resource, verb = combos[number % len(combos)]
        noun = _singular(resource)
        shape = VERBS[verb]
        qualifier = rng.choice(_QUALIFIERS)
        subject = f"{qualifier} {noun}" if qualifier else f"a {noun}"
        summary = f"{verb.capitalize()} {subject} {rng.choice(_PURPOSES)}."
        words = rng.choices(WORDS, k=rng.randint(35, 70))
        for rare in RARE_WORDS:
            if rng.random() < RARE_RATE:
                words.insert(rng.randrange(len(words)), rare)
        description = (
            f"{verb.capitalize()}s {resource.replace('_', ' ')} in {group}. "
            + " ".join(words[:20]).capitalize()
            + ". "
            + " ".join(words[20:]).capitalize()
            + f". Related: {group}.{resource}.list_{rng.randrange(max(size, 1))}."
        )
        catalog.append(
            SyntheticOperation(
                name=f"{group}.{resource}.{verb}_{number}",
                group=group,
                resource=resource,
                verb=verb,
                summary=summary,
                description=description,
                input_schema=_input_schema(shape, resource, rng.randrange(4)),
                output_schema=_output_schema(shape, resource),
            )
        )
    return catalog


async def _bench_handler(invocation: Any) -> Any:  # never called by the registry benchmarks
    raise NotImplementedError


def to_operations(
    catalog: Sequence[SyntheticOperation], handler: Callable[..., Any] = _bench_handler
) -> list[Operation]:
    """The catalog as ``opgate.Operation`` definitions, all sharing ``handler``."""
    return [
        Operation(
            op.name,
            op.summary,
            handler,
            description=op.description,
            group=op.group,
            input_schema=op.input_schema,
            output_schema=op.output_schema,
        )
        for op in catalog
    ]


# --- query mix ------------------------------------------------------------------------

#: Function words of the vocabulary that no one searches for.
_STOP_WORDS = frozenset(
    {"the", "a", "an", "of", "to", "and", "for", "with", "from", "by", "on", "in", "at"}
    | {"this", "that", "each", "when", "after", "before"}
)


def query_vocabulary() -> tuple[str, ...]:
    """The words a query is drawn from: the catalog's own, sorted, without function words.

    Description words, verbs, groups, resource words (``credit_notes`` gives ``credit``
    and ``notes``) and the rare words.
    """
    words = {word for word in WORDS if word not in _STOP_WORDS}
    words.update(VERBS)
    words.update(GROUPS)
    for resources in GROUPS.values():
        for resource in resources:
            words.update(resource.split("_"))
    words.update(RARE_WORDS)
    return tuple(sorted(words))


def query_mix(count: int, *, seed: int = 11) -> list[str]:
    """``count`` seeded queries, each one to three distinct words of ``query_vocabulary()``."""
    rng = random.Random(seed)
    vocabulary = query_vocabulary()
    return [" ".join(rng.sample(vocabulary, rng.randint(1, 3))) for _ in range(count)]


# --- policies ---------------------------------------------------------------------------


class AllowAll:
    """Every principal may discover and run everything."""

    def scope_key(self, ctx: Any) -> str:
        return "bench"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


_DENIED = Failure(FailureCode.UNAVAILABLE)


def admitted(name: str) -> bool:
    """The 1% rule: CRC-32 of the name is divisible by 100."""
    return zlib.crc32(name.encode()) % 100 == 0


class OnePercent:
    """Admits about 1% of operations (``admitted``); denies by returning ``unavailable``."""

    def scope_key(self, ctx: Any) -> str:
        return "one-percent"

    def authorize(self, ctx: Any, request: Any) -> Failure | None:
        return None if admitted(request.name) else _DENIED


# --- timing -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timing:
    """Per-call times of one measurement, in nanoseconds (p99 and max: NaN if not taken)."""

    median_ns: float
    p90_ns: float
    runs: int
    p99_ns: float = float("nan")
    max_ns: float = float("nan")

    @property
    def median_us(self) -> float:
        return self.median_ns / 1_000

    @property
    def median_ms(self) -> float:
        return self.median_ns / 1_000_000


def _percentile(ordered: Sequence[int], percent: int) -> float:
    """The sample at ``percent``% of sorted samples (with few samples, p99 is the max)."""
    return float(ordered[min(len(ordered) - 1, (len(ordered) * percent) // 100)])


def summarize(samples: Sequence[int]) -> Timing:
    """Median, p90, p99 and max of per-call times in nanoseconds."""
    ordered = sorted(samples)
    return Timing(
        float(statistics.median(ordered)),
        _percentile(ordered, 90),
        len(ordered),
        _percentile(ordered, 99),
        float(ordered[-1]),
    )


def time_sync(fn: Callable[[], object], *, runs: int, warmup: int | None = None) -> Timing:
    """Median of ``runs`` timed calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(runs // 10 + 1 if warmup is None else warmup):
        fn()
    gc.collect()
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        begin = clock()
        fn()
        samples.append(clock() - begin)
    return summarize(samples)


async def time_async(
    fn: Callable[[], Awaitable[object]], *, runs: int, warmup: int | None = None
) -> Timing:
    """Median of ``runs`` timed awaits of ``fn()`` after ``warmup`` untimed ones."""
    for _ in range(runs // 10 + 1 if warmup is None else warmup):
        await fn()
    gc.collect()
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        begin = clock()
        await fn()
        samples.append(clock() - begin)
    return summarize(samples)


async def time_async_interleaved(
    fns: dict[str, Callable[[], Awaitable[object]]], *, runs: int, rounds: int = 5
) -> dict[str, Timing]:
    """Like ``time_async`` for several functions, alternating between them in ``rounds``.

    Interleaving keeps slow drifts of a shared machine (other processes, frequency
    changes) from landing on one function only, so differences of medians are fair.
    """
    clock = time.perf_counter_ns
    samples: dict[str, list[int]] = {label: [] for label in fns}
    for fn in fns.values():
        for _ in range(runs // 10 + 1):
            await fn()
    per_round = max(1, runs // rounds)
    for _ in range(rounds):
        for label, fn in fns.items():
            gc.collect()
            bucket = samples[label]
            for _ in range(per_round):
                begin = clock()
                await fn()
                bucket.append(clock() - begin)
    return {label: summarize(bucket) for label, bucket in samples.items()}


# --- tables -----------------------------------------------------------------------------

Cell = str | int | float | None


@dataclass(slots=True)
class Table:
    """One benchmark's results: a title, column names, rows keyed by column, notes."""

    title: str
    columns: tuple[str, ...]
    rows: list[dict[str, Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, **cells: object) -> None:
        """Append a row; every key must be a column (missing columns print as blank).

        Cells are ``str``, ``int``, ``float``, ``bool`` or ``None`` (``TypeError`` otherwise).
        """
        unknown = set(cells) - set(self.columns)
        if unknown:
            raise KeyError(f"unknown columns {sorted(unknown)} in table {self.title!r}")
        row: dict[str, Cell] = {}
        for name, value in cells.items():
            if value is not None and not isinstance(value, str | int | float):
                raise TypeError(f"cell {name!r} is a {type(value).__name__}")
            row[name] = value
        self.rows.append(row)


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:,.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return value


def format_table(table: Table) -> str:
    """The table as Markdown: a heading, a pipe table and its notes."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "| " + " | ".join("---" for _ in table.columns) + " |"
    lines = [f"### {table.title}", "", header, rule]
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in table.columns) + " |")
    if table.notes:
        lines.append("")
        lines.extend(f"- {note}" for note in table.notes)
    return "\n".join(lines)


def print_tables(tables: Sequence[Table]) -> None:
    """Print every table, separated by blank lines, and flush."""
    for table in tables:
        print(format_table(table), end="\n\n", flush=True)


def print_heading(title: str, *paragraphs: str) -> None:
    """Print a run's heading, ``# title``, then ``machine_info()`` and ``paragraphs``."""
    print("\n\n".join([f"# {title}", machine_info(), *paragraphs]) + "\n", flush=True)


def argument_parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first line of its docstring ``doc``."""
    return argparse.ArgumentParser(description=(doc or "").splitlines()[0])


# --- profiles ---------------------------------------------------------------------------

#: The group of own time that no group's fragment names.
OTHER_GROUP = "other (stdlib, builtins)"

#: Groups of a profile's own time: (label, fragments of the file path, or of a built-in
#: function's name), first match wins.
Groups = Sequence[tuple[str, tuple[str, ...]]]


def _group(groups: Groups, path: str, function: str) -> str:
    text = f"{path} {function}" if path == "~" else path
    for label, fragments in groups:
        if any(fragment in text for fragment in fragments):
            return label
    return OTHER_GROUP


def own_time_by_group(
    stats: dict[Any, Any], groups: Groups, *, idle: str | None = None
) -> dict[str, float]:
    """Own seconds per group of ``groups`` in ``pstats`` ``stats``: a built-in or
    standard-library function's own time goes to its callers' groups; with ``idle``, the
    functions whose name holds it (the event loop's wait) are left out."""
    own: dict[str, float] = {}
    for (path, _line, function), (_cc, _nc, tottime, _ct, callers) in stats.items():
        if idle is not None and idle in function:
            continue
        label = _group(groups, path, function)
        if label == OTHER_GROUP and callers:
            for (caller_path, _, caller_function), caller_stats in callers.items():
                caller = _group(groups, caller_path, caller_function)
                own[caller] = own.get(caller, 0.0) + caller_stats[2]
            continue
        own[label] = own.get(label, 0.0) + tottime
    return own


# --- machine ----------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident set size of this process (``VmRSS`` in ``/proc/self/status``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")


def machine_info() -> str:
    """CPU model, logical CPUs and Python version, for the heading of a run."""
    model = ""
    cpus = 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("processor"):
                    cpus += 1
    except OSError:
        pass
    python = f"{platform.python_implementation()} {sys.version.split()[0]}"
    return (
        f"{model or platform.processor() or 'unknown CPU'}, {cpus or '?'} logical CPUs, "
        f"{python}, {platform.system()} {platform.release()}; "
        f"host speed: json.loads of a fixed 64 KiB array took {host_speed_ms():.2f} ms CPU "
        "(lower is faster; 1.7 ms when this machine is fast)"
    )


def host_speed_ms() -> float:
    """CPU milliseconds ``json.loads`` takes on a fixed 64 KiB array (median of 15).

    A virtual machine's speed can change by 2x within minutes while its load average
    stays low (other guests share the host's caches and memory): printed with each
    run, this says which runs can be compared. A pure-Python loop does not show it;
    this allocation-heavy C decode does (1.7 ms on this project's machine when fast,
    3.4 ms when slow).
    """
    text = "[" + "1," * 32_767 + "1]"
    times = []
    for _ in range(15):
        start = time.process_time()
        json.loads(text)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def run_probe(script: str, *arguments: str) -> dict[str, float]:
    """Run ``script`` (a benchmark's ``__file__``) in a fresh Python process with
    ``arguments`` and return the JSON object its last line of output prints: how the
    benchmarks measure construction and memory without the parent's heap.

    The child starts with an empty memory of proven patterns (``$OPGATE_CACHE_DIR``, a
    directory of its own, removed after): a construction figure is a full build's,
    whatever earlier runs left, and no probe writes into the user's cache."""
    path = Path(script).resolve()
    with tempfile.TemporaryDirectory(prefix="opgate-probe-memory-") as memory:
        output = subprocess.run(
            [sys.executable, str(path), *arguments],
            check=True,
            capture_output=True,
            text=True,
            cwd=path.parent,
            env={**os.environ, "OPGATE_CACHE_DIR": memory},
        ).stdout
    result: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return result


# --- served children --------------------------------------------------------------------

#: The environment variable naming the catalog a served child builds (``startup_apps.py``
#: spells it again: the FastMCP child imports nothing of opgate's).
SOURCE_ENV = "OPGATE_BENCH_SOURCE"


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the system's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bench_environment(source: str) -> dict[str, str]:
    """This environment with ``$OPGATE_BENCH_SOURCE`` set to ``source`` and this folder
    and opgate's sources first on ``PYTHONPATH``, for a served child."""
    here = Path(__file__).resolve().parent
    sources = Path(opgate.__file__).resolve().parents[1]
    env = dict(os.environ)
    env[SOURCE_ENV] = source
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(here), str(sources), env.get("PYTHONPATH", "")])
    )
    return env


def reap(process: subprocess.Popen[Any]) -> None:
    """Wait up to 10 seconds for ``process`` (sent SIGTERM) to exit, then kill it."""
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
