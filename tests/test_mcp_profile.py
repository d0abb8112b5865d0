"""``opgate.mcp._profile``: which forms a client of each MCP revision can show.

A 2025-06-18 client is sent only forms of primitive properties; end to end, over the
raw wire, in ``test_mcp_exact_wire.py``
(``test_a_2025_06_18_client_is_sent_only_forms_it_can_show``).
"""

from __future__ import annotations

from typing import Any

import pytest

from opgate.mcp._profile import form_problem


@pytest.mark.parametrize(
    ("prop", "problem"),
    [
        ({"type": "boolean", "title": "Ok", "default": False}, None),
        ({"type": "string", "enum": ["a"], "enumNames": ["A"]}, None),
        ({"type": "number", "minimum": 0, "maximum": 1, "description": "d"}, None),
        ({"type": "string", "format": "email", "maxLength": 9}, None),
        ({"type": "array", "maxItems": 1, "items": {"enum": ["a"]}}, "'p' is a multiselect"),
        ({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}, "'p' is a titled choice"),
        ({"type": "string", "default": "x"}, "'p' uses default"),
        ({"type": "integer", "default": 1}, "'p' uses default"),
    ],
)
def test_the_2025_06_18_form_profile(prop: dict[str, object], problem: str | None) -> None:
    schema = {"type": "object", "properties": {"p": prop}}
    found = form_problem(schema, "2025-06-18")  # type: ignore[arg-type]
    assert found == (None if problem is None else f"property {problem}")
    assert form_problem(schema, "2025-11-25") is None  # type: ignore[arg-type]
    assert form_problem(schema, "2026-07-28") is None  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-11-25", "2026-07-28"])
def test_only_2025_06_18_has_a_narrower_profile(version: str) -> None:
    rich = {"type": "object", "properties": {"p": {"type": "array", "items": {"enum": ["a"]}}}}
    assert form_problem(rich, version) is None  # type: ignore[arg-type]
    assert form_problem(rich, "2025-06-18") == "property 'p' is a multiselect"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema",
    [[], "form", {"type": "object"}, {"properties": []}, {"properties": {"p": "not a schema"}}],
)
def test_what_has_no_property_to_check_has_no_problem(schema: Any) -> None:
    assert form_problem(schema, "2025-06-18") is None


def test_the_first_property_beyond_the_profile_is_named() -> None:
    schema = {
        "type": "object",
        "properties": {
            "fine": {"type": "string", "title": "Fine"},
            "first": {"type": "string", "pattern": "^a", "default": "a"},
            "second": {"type": "array"},
        },
    }
    assert form_problem(schema, "2025-06-18") == "property 'first' uses default, pattern"  # type: ignore[arg-type]


def test_a_property_of_an_unknown_kind_is_named_by_its_type() -> None:
    for prop in ({"type": "null"}, {"title": "No type"}, {"type": ["string", "null"]}):
        schema = {"type": "object", "properties": {"p": prop}}
        assert form_problem(schema, "2025-06-18") == "property 'p' uses type"  # type: ignore[arg-type]
