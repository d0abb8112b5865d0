"""Which forms a client of each MCP revision can show (spec 000: adapters check the
connected client's supported profile).

opgate's form profile is the 2025-11-25 ``requestedSchema`` shape (``_forms``), which
2026-07-28 keeps. MCP 2025-06-18, the first revision with elicitation, allows fewer
shapes: each property is a primitive — a string (``minLength``, ``maxLength``,
``format``), a number or integer (``minimum``, ``maximum``), a boolean (``default``)
or a string ``enum`` (``enumNames``), each with ``title`` and ``description`` — so
multiselect arrays, titled ``oneOf`` choices and defaults other than a boolean's are
beyond it. Revisions before 2025-06-18 have no elicitation at all.
"""

from __future__ import annotations

from ..json import JSONValue

__all__ = ["form_problem"]

_LABELS = frozenset({"type", "title", "description"})
_PRIMITIVES_2025_06_18: dict[str, frozenset[str]] = {
    "string": _LABELS | {"minLength", "maxLength", "format"},
    "enum": _LABELS | {"enum", "enumNames"},
    "number": _LABELS | {"minimum", "maximum"},
    "integer": _LABELS | {"minimum", "maximum"},
    "boolean": _LABELS | {"default"},
}


def form_problem(schema: JSONValue, version: str) -> str | None:
    """Why a client of ``version`` cannot show the form ``schema`` (a valid form of
    opgate's profile), or ``None`` when it can."""
    if version != "2025-06-18" or not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    for name, prop in (properties if isinstance(properties, dict) else {}).items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        if kind == "array":
            return f"property {name!r} is a multiselect"
        if "oneOf" in prop:
            return f"property {name!r} is a titled choice"
        shape = "enum" if kind == "string" and "enum" in prop else kind
        allowed = _PRIMITIVES_2025_06_18.get(shape) if isinstance(shape, str) else None
        extra = sorted(set(prop) - allowed) if allowed is not None else ["type"]
        if extra:
            return f"property {name!r} uses {', '.join(extra)}"
    return None
