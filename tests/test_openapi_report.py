"""``opgate.openapi._report``: what an import did, with reasons bounded to one short line.

Reasons quote document text (names, paths, ids), which may be anything: each is
kept on one line of at most ``MAX_REASON_CHARS`` characters. The counts read as
English and ``lines()`` gives every reason. Which kinds an import records is in
``test_openapi_operations.py`` and ``test_openapi_catalog.py``.
"""

from __future__ import annotations

import pytest

from opgate.openapi import Issue, Report
from opgate.openapi._report import MAX_REASON_CHARS

from openapi_documents import catalog, doc, op


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


def test_a_reason_is_one_line_with_its_whitespace_collapsed() -> None:
    report = Report()
    report.warn("GET", "/a", "cookie parameter", "optional\ncookie \t 's'\r\n  dropped ")
    [warning] = report.warnings
    assert warning == Issue("GET", "/a", "cookie parameter", "optional cookie 's' dropped")


def test_a_long_reason_is_cut_with_an_ellipsis() -> None:
    report = Report()
    report.skip("POST", "/b", "path parameter", "x" * 1000)
    report.skip("POST", "/c", "path parameter", "y" * MAX_REASON_CHARS)
    long, exact = report.skipped
    assert len(long.reason) == MAX_REASON_CHARS
    assert long.reason == "x" * (MAX_REASON_CHARS - 1) + "…"
    assert exact.reason == "y" * MAX_REASON_CHARS  # at the limit: kept whole


def test_an_issue_says_where_unless_it_is_about_the_document() -> None:
    assert str(Issue("GET", "/pets/{id}", "path parameter", "not declared")) == (
        "GET /pets/{id}: not declared"
    )
    assert str(Issue("", "", "document", "no paths")) == "no paths"


def test_counts_by_kind_and_the_summary() -> None:
    report = Report(title="Pets", version="3.1.0", operations=["a", "b"])
    report.skip("GET", "/x", "external $ref", "r")
    report.skip("GET", "/y", "external $ref", "r")
    report.skip("GET", "/z", "cookie parameter", "r")
    report.warn("GET", "/a", "pattern dropped", "r")
    assert report.skipped_by_kind() == {"external $ref": 2, "cookie parameter": 1}
    assert report.warnings_by_kind() == {"pattern dropped": 1}
    assert report.summary() == "Pets (3.1.0): 2 operations imported, 3 skipped, 1 warning"


def test_an_import_quoting_hostile_text_keeps_its_reasons_bounded() -> None:
    name = "a\n" * 400
    built = catalog(doc({"/items/{" + name + "}": {"get": op()}}))
    [skipped] = built.report.skipped
    assert skipped.kind == "path parameter"
    assert "\n" not in skipped.reason
    assert len(skipped.reason) <= MAX_REASON_CHARS
