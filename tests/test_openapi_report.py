"""``opgate.openapi.Report``: its counts read as English and its lines give every reason."""

from __future__ import annotations

import pytest

from opgate.openapi import Report


def report(operations: int, skipped: int, warnings: int) -> Report:
    made = Report(title="Shop", version="3.1.0", operations=[f"op{i}" for i in range(operations)])
    for i in range(skipped):
        made.skip("POST", f"/s{i}", "request body media type", "request body is text/plain")
    for i in range(warnings):
        made.warn("GET", f"/w{i}", "cookie parameter", "optional cookie parameter 'c' dropped")
    return made


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((0, 0, 0), "Shop (3.1.0): 0 operations imported, 0 skipped, 0 warnings"),
        ((1, 1, 1), "Shop (3.1.0): 1 operation imported, 1 skipped, 1 warning"),
        ((2, 2, 2), "Shop (3.1.0): 2 operations imported, 2 skipped, 2 warnings"),
    ],
)
def test_the_summary_counts_in_english(counts: tuple[int, int, int], expected: str) -> None:
    assert report(*counts).summary() == expected


def test_the_lines_give_every_skip_and_warning_with_its_reason() -> None:
    made = report(1, 2, 1)
    made.warn("", "", "webhooks", "webhooks are not operations: ignored")
    assert made.lines() == [
        "Shop (3.1.0): 1 operation imported, 2 skipped, 2 warnings",
        "skipped POST /s0: request body is text/plain",
        "skipped POST /s1: request body is text/plain",
        "warning GET /w0: optional cookie parameter 'c' dropped",
        "warning webhooks are not operations: ignored",
    ]


def test_an_untitled_document_is_named_as_such() -> None:
    assert Report(version="3.0.3").lines() == [
        "OpenAPI document (3.0.3): 0 operations imported, 0 skipped, 0 warnings"
    ]
