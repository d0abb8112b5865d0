"""The JSON Schema profile opgate compiles: its keyword tables and its count bound.

Every schema opgate checks (operation input and output schemas, form schemas) is a
JSON Schema document that ``Registry`` compiles under one profile (spec 003, "Schema
and numeric profile"): Draft 2020-12 by default, draft-07 when the document says so,
and on top of the dialect the profile's own rules, such as count constraints being
integers in ``0..MAX_COUNT``. This module names the parts of that profile that code
translating another schema language into it needs (``opgate.openapi`` turns OpenAPI
Schema Objects into 2020-12 documents the registry accepts):

* ``SUBSCHEMA_KEYWORDS``, ``SUBSCHEMA_ARRAY_KEYWORDS``, ``SUBSCHEMA_MAP_KEYWORDS``: the
  Draft 2020-12 keywords whose value is one subschema, a non-empty array of
  subschemas, or an object whose member values are subschemas. These are the
  *schema positions* of a 2020-12 document; every other keyword's value is data.
* ``COUNT_KEYWORDS`` and ``MAX_COUNT``: the keywords whose value counts characters,
  items, properties or matches, and the largest count the profile accepts.
* ``TYPE_NAMES``: the names ``type`` may use.

The tables are frozen sets and never change at run time.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COUNT_KEYWORDS",
    "MAX_COUNT",
    "SUBSCHEMA_ARRAY_KEYWORDS",
    "SUBSCHEMA_KEYWORDS",
    "SUBSCHEMA_MAP_KEYWORDS",
    "TYPE_NAMES",
]

#: Largest count constraint accepted: the spec's portable ceiling (a 32-bit signed int),
#: so no compiler ever narrows a larger count into a weaker constraint.
MAX_COUNT: Final = 2_147_483_647

#: Keywords whose value counts characters, items, properties or contains-matches: an
#: integer in ``0..MAX_COUNT`` (an integral decimal such as ``2.0`` counts as one).
COUNT_KEYWORDS: Final = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)

#: Draft 2020-12 keywords whose value is one subschema.
SUBSCHEMA_KEYWORDS: Final = frozenset(
    {
        "additionalProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "items",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)

#: Draft 2020-12 keywords whose value is a non-empty array of subschemas.
SUBSCHEMA_ARRAY_KEYWORDS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})

#: Draft 2020-12 keywords whose value is an object of subschemas (any member names).
SUBSCHEMA_MAP_KEYWORDS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "dependentSchemas"}
)

#: The JSON Schema type names (``type`` is one of them or an array of distinct ones).
TYPE_NAMES: Final = frozenset({"array", "boolean", "integer", "null", "number", "string", "object"})
