"""Benchmark the search index (``opgate._search._index``) at catalog scale.

Stand-alone: ``python benchmarks/bench_search_index.py [--sizes 10000 100000]``.
Builds a realistic synthetic catalog (dotted names such as
``billing.invoices.create_17``, ten groups, a one-sentence summary and a
paragraph of description, an example and cross references per operation), then
prints, per size: build time, the index's memory (RSS growth, retained and peak
traced allocations), and for a few query shapes the number of matches and the
median time to take

* the first page (five items and one more, as the registry does, no policy);
* the next page, continuing from a keyset position;
* 500 results: the work behind a five-item page when the policy admits 1%.

The index's part only: the registry adds policy calls and page encoding.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial

from opgate._search._index import IndexEntry, SearchIndex

PAGE = 5  # the registry's default page size
DEEP = 500  # results behind a five-item page when the policy admits 1%

GROUPS = {
    "billing": ["invoices", "credit_notes", "subscriptions", "tax_rates", "coupons"],
    "orders": ["orders", "returns", "carts", "fulfilments", "quotes"],
    "customers": ["customers", "contacts", "addresses", "segments", "notes"],
    "inventory": ["items", "warehouses", "stock_levels", "transfers", "suppliers"],
    "shipping": ["shipments", "carriers", "labels", "rates", "pickups"],
    "support": ["tickets", "macros", "queues", "satisfaction", "escalations"],
    "reports": ["dashboards", "exports", "schedules", "metrics", "audits"],
    "users": ["users", "roles", "sessions", "api_keys", "invitations"],
    "payments": ["payments", "refunds", "disputes", "payouts", "methods"],
    "catalog": ["products", "variants", "prices", "categories", "images"],
}
VERBS = [
    "create",
    "get",
    "list",
    "update",
    "delete",
    "archive",
    "restore",
    "export",
    "import",
    "search",
    "approve",
    "cancel",
    "merge",
    "duplicate",
    "sync",
]
WORDS = [
    "the",
    "a",
    "an",
    "of",
    "to",
    "and",
    "for",
    "with",
    "from",
    "by",
    "on",
    "in",
    "at",
    "this",
    "that",
    "each",
    "when",
    "after",
    "before",
    "returns",
    "record",
    "records",
    "account",
    "accounts",
    "value",
    "values",
    "current",
    "previous",
    "new",
    "existing",
    "status",
    "state",
    "field",
    "fields",
    "optional",
    "required",
    "identifier",
    "timestamp",
    "currency",
    "amount",
    "total",
    "page",
    "cursor",
    "filter",
    "filters",
    "sorted",
    "ascending",
    "descending",
    "limit",
    "offset",
    "request",
    "response",
    "caller",
    "permission",
    "permissions",
    "scope",
    "owner",
    "team",
    "workspace",
    "project",
    "region",
    "default",
    "configured",
    "enabled",
    "disabled",
    "pending",
    "completed",
    "failed",
    "active",
    "inactive",
    "archived",
    "draft",
    "published",
    "visible",
    "hidden",
    "primary",
    "secondary",
    "external",
    "internal",
    "webhook",
    "event",
    "events",
    "history",
    "audit",
    "log",
    "trail",
    "version",
    "revision",
    "snapshot",
    "copy",
    "template",
    "batch",
    "queue",
    "retry",
    "retries",
    "timeout",
    "deadline",
    "schedule",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "report",
    "summary",
    "detail",
    "details",
    "metadata",
    "attachment",
    "attachments",
    "comment",
    "comments",
    "label",
    "labels",
    "tag",
    "tags",
    "note",
    "notes",
    "reason",
    "code",
    "message",
    "error",
    "errors",
    "warning",
    "validation",
    "validated",
    "idempotent",
    "safely",
    "atomically",
    "eventually",
    "consistent",
    "cached",
    "refreshed",
    "recalculated",
    "notifies",
    "emails",
    "sends",
    "triggers",
    "updates",
    "creates",
    "removes",
    "deletes",
    "marks",
    "links",
    "unlinks",
    "billing",
    "invoice",
    "payment",
    "refund",
    "order",
    "customer",
    "shipment",
    "ticket",
    "product",
    "price",
    "stock",
]


#: Words in about one description in five hundred.
RARE_WORDS = ("chargeback", "escheatment")
RARE_RATE = 0.004


def catalog(size: int, seed: int = 7) -> list[IndexEntry]:
    """A deterministic synthetic catalog of ``size`` operations."""
    rng = random.Random(seed)
    shapes = [(g, r, v) for g, rs in GROUPS.items() for r in rs for v in VERBS]
    entries = []
    for number in range(size):
        group, res, verb = shapes[number % len(shapes)]
        noun = res.replace("_", " ")
        name = f"{group}.{res}.{verb}_{number}"
        summary = f"{verb.capitalize()} {noun} in {group} (variant {number})."
        words = rng.choices(WORDS, k=rng.randint(40, 80))
        if rng.random() < RARE_RATE:
            words.insert(rng.randrange(len(words)), rng.choice(RARE_WORDS))
        description = (
            f"{verb.capitalize()}s {noun} for the {group} application. "
            + " ".join(words).capitalize()
            + f". See also {group}.{res}.list_{rng.randrange(size)}."
        )
        examples = (f'{{"{res}_id": "{rng.randrange(10**6):06d}", "dry_run": true}}',)
        group_spelling = group.capitalize() if number % 3 == 0 else group
        entries.append(IndexEntry(name, group_spelling, summary, (description, *examples)))
    rng.shuffle(entries)
    return entries


QUERIES: list[tuple[str, str, str]] = [
    ("empty browse", "", ""),
    ("whole name", "reports.schedules.delete_1234", ""),
    ("common term (name)", "invoices", ""),
    ("common term (docs)", "retries", ""),
    ("rare word", "chargeback", ""),
    ("rare name fragment", "delete_1234", ""),
    ("two terms", "refunds approve", ""),
    ("two terms, docs", "webhook idempotent", ""),
    ("prefix, 2 chars", "ap", ""),
    ("no match", "zzyzx", ""),
    ("no match, 2 terms", "invoices carriers", ""),
    ("group filter", "create", "Billing"),
    ("group browse", "", "shipping"),
]


def median_us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1e6


def take(
    index: SearchIndex, query: str, group: str, count: int, after: tuple[int, str] | None = None
) -> list[tuple[int, int]]:
    """The first ``count`` results (after a keyset position)."""
    return list(itertools.islice(index.ranked(query, group, after), count))


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def run(size: int, repeat: int) -> None:
    entries = catalog(size)
    gc.collect()
    before = rss_mib()
    begin = time.perf_counter()
    index = SearchIndex(entries)
    build = time.perf_counter() - begin
    gc.collect()
    after = rss_mib()
    del index
    gc.collect()
    tracemalloc.start()
    index = SearchIndex(entries)
    retained, peak = (b / 2**20 for b in tracemalloc.get_traced_memory())
    tracemalloc.stop()
    print(f"\n## {size:,} entries")
    print(
        f"build {build:.2f} s; memory: RSS growth {after - before:.1f} MiB, "
        f"retained {retained:.1f} MiB, build peak {peak:.1f} MiB (tracemalloc)"
    )
    print(
        f"{'query':<20} {'group':<8} {'matches':>8} {'page 1 µs':>10} {'page 2 µs':>10} "
        f"{'500 results µs':>15}"
    )
    for label, query, group in QUERIES:
        matches = sum(1 for _ in index.ranked(query, group))
        page = take(index, query, group, PAGE + 1)
        first = median_us(partial(take, index, query, group, PAGE + 1), repeat)
        second = float("nan")
        if len(page) > PAGE:
            tier, k = page[PAGE - 1]
            position = (tier, entries[k].name)
            second = median_us(partial(take, index, query, group, PAGE + 1, position), repeat)
        deep = median_us(partial(take, index, query, group, DEEP), max(5, repeat // 10))
        print(f"{label:<20} {group:<8} {matches:>8} {first:>10.1f} {second:>10.1f} {deep:>15.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}; medians of {args.repeat} runs; page = {PAGE}")
    for size in args.sizes:
        run(size, args.repeat)


if __name__ == "__main__":
    main()
