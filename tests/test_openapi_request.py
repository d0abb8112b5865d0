"""``opgate.openapi._request``: OpenAPI serialization styles, exact numbers, path safety,
and the request budget."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from opgate.openapi._operations import BodyPlan, OperationPlan, ParamPlan
from opgate.openapi._request import ArgumentProblem, prepare, written_size


def plan(path: str, *params: ParamPlan, body: BodyPlan | None = None) -> OperationPlan:
    return OperationPlan("op", "GET", path, "", "s", "", params, body, {}, None)


def param(
    key: str, location: str, style: str, explode: bool, *, as_json: bool = False
) -> ParamPlan:
    return ParamPlan(key, key, location, style, explode, as_json, False)


@pytest.mark.parametrize(
    ("style", "explode", "value", "segment"),
    [
        ("simple", False, 5, "5"),
        ("simple", False, ["a", "b/c"], "a,b%2Fc"),
        ("simple", False, {"x": 1, "y": 2}, "x,1,y,2"),
        ("simple", True, {"x": 1, "y": 2}, "x=1,y=2"),
        ("label", False, "v", ".v"),
        ("label", True, ["a", "b"], ".a.b"),
        ("matrix", False, "v", ";id=v"),
        ("matrix", True, ["a", "b"], ";id=a;id=b"),
        ("matrix", False, ["a", "b"], ";id=a,b"),
        ("simple", False, Decimal("0.10"), "0.10"),
        ("simple", False, True, "true"),
    ],
)
def test_path_styles(style: str, explode: bool, value: Any, segment: str) -> None:
    prepared = prepare(plan("/x/{id}", param("id", "path", style, explode)), {"id": value})
    assert prepared.path == f"/x/{segment}"


@pytest.mark.parametrize(
    ("style", "explode", "value", "pairs"),
    [
        ("form", True, ["a", "b"], [("q", "a"), ("q", "b")]),
        ("form", False, ["a", "b"], [("q", "a,b")]),
        ("spaceDelimited", False, ["a", "b"], [("q", "a b")]),
        ("pipeDelimited", False, ["a", "b"], [("q", "a|b")]),
        ("form", True, {"k": 1, "n": None}, [("k", "1")]),
        ("form", False, {"k": 1}, [("q", "k,1")]),
        ("deepObject", True, {"k": 1, "m": "x"}, [("q[k]", "1"), ("q[m]", "x")]),
        ("form", True, Decimal("1E+2"), [("q", "100")]),
    ],
)
def test_query_styles(style: str, explode: bool, value: Any, pairs: list[tuple[str, str]]) -> None:
    prepared = prepare(plan("/x", param("q", "query", style, explode)), {"q": value})
    assert list(prepared.query) == pairs


def test_json_content_parameters_bodies_and_headers() -> None:
    body = BodyPlan("body", "application/json", False, True)
    prepared = prepare(
        plan(
            "/x",
            param("filter", "query", "form", True, as_json=True),
            param("X-Ids", "header", "simple", False),
            body=body,
        ),
        {"filter": {"a": [1, Decimal("0.1")]}, "X-Ids": [1, 2], "body": {"n": Decimal("1.50")}},
    )
    assert prepared.query == (("filter", '{"a":[1,0.1]}'),)
    assert prepared.headers == (("X-Ids", "1,2"),)
    assert prepared.content == b'{"n":1.50}'
    assert prepared.content_type == "application/json"
    form = prepare(
        plan("/x", body=BodyPlan("body", "application/x-www-form-urlencoded", True, True)),
        {"body": {"a": "x y", "b": [1, 2], "c": None}},
    )
    assert form.content == b"a=x+y&b=1&b=2"


def test_header_injection_is_refused() -> None:
    header = plan("/x", param("X-A", "header", "simple", False))
    with pytest.raises(ArgumentProblem, match="printable ASCII"):
        prepare(header, {"X-A": "a\r\nEvil: 1"})


@pytest.mark.parametrize("value", [" a", "a ", "\ta", "a\t", " "])
def test_a_header_value_http_would_trim_is_refused(value: str) -> None:
    """HTTP drops leading and trailing whitespace: the API would get another value
    than the one shown (and the HTTP client refused it with a misleading failure)."""
    header = plan("/x", param("X-A", "header", "simple", False))
    with pytest.raises(ArgumentProblem, match="start or end with whitespace"):
        prepare(header, {"X-A": value})
    assert prepare(header, {"X-A": "a \t b"}).headers == (("X-A", "a \t b"),)


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_dot_and_empty_segments_are_refused(value: str) -> None:
    with pytest.raises(ArgumentProblem, match="must not make a path segment"):
        prepare(plan("/x/{id}/y", param("id", "path", "simple", False)), {"id": value})
    assert prepare(plan("/x/{id}.json", param("id", "path", "simple", False)), {"id": ".."})


HUGE = Decimal("1e4000")  # 6 characters of JSON, 4001 digits written out


@pytest.mark.parametrize(
    ("location", "style", "explode"),
    [
        ("query", "form", True),
        ("query", "pipeDelimited", False),
        ("path", "simple", False),
        ("header", "simple", False),
        ("body", "", False),
    ],
)
def test_a_request_written_past_its_budget_is_refused_before_it_is_built(
    location: str, style: str, explode: bool
) -> None:
    """9,000 copies of 1e4000 would be 36 MB once written out; none is written past the budget."""
    import tracemalloc

    if location == "body":
        form = BodyPlan("body", "application/x-www-form-urlencoded", True, True)
        operation = plan("/x", body=form)
    else:
        path = "/x/{v}" if location == "path" else "/x"
        operation = plan(path, param("v", location, style, explode))

    def arguments(count: int) -> dict[str, Any]:
        values = [HUGE] * count
        return {"body": {"n": values}} if location == "body" else {"v": values}

    tracemalloc.start()
    try:
        with pytest.raises(ArgumentProblem, match=r"larger than 262144 bytes once written out"):
            prepare(operation, arguments(9000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 262144, peak
    assert written_size(prepare(operation, arguments(3))) > 3 * 4001


def test_the_budget_counts_every_part_of_the_request() -> None:
    """A JSON body writes 1e4000 short, but a long string still counts; the budget is exact."""
    operation = plan("/x", body=BodyPlan("body", "application/json", False, True))
    content = prepare(operation, {"body": [HUGE] * 9000}).content
    assert content is not None
    assert content.startswith(b"[1E+4000,")
    with pytest.raises(ArgumentProblem, match="larger than 1000 bytes"):
        prepare(operation, {"body": "x" * 997}, budget=1000)
    prepared = prepare(operation, {"body": "x" * 996}, budget=1000)  # 998 + the path "/x"
    assert written_size(prepared) == 1000
