"""The parameter text of an operation: what the relevance ranking and a host
``Scorer`` read of its input schema (top-level property names, titles and
descriptions). Standard library only, so the ``Scorer`` hook needs no extra."""

from __future__ import annotations

import json

__all__ = ["parameter_text"]


def parameter_text(schema: bytes | str) -> str:
    """The top-level property names of a JSON Schema object with their ``title`` and
    ``description`` (when those are strings), joined by spaces; ``""`` otherwise.

    ``schema`` is canonical JSON (``_json.canonical_bytes``: sorted keys, no
    whitespace), so the root's ``"properties"`` member follows every ``$defs`` entry
    and is the root member nearest the end: the text is searched backwards for the
    key, and a candidate is the root's when the rest of the document, after its
    value, closes the root object exactly. Only that value is parsed, not the
    definitions before it (a 20k-operation catalog's input schemas hold ~24 MB).
    """
    data = schema.encode("utf-8") if isinstance(schema, str) else schema
    position = len(data)
    while True:
        position = data.rfind(_PROPERTIES_KEY, 0, position)
        if position < 0:
            return ""
        # only the tail is decoded: the definitions before it are never read
        try:
            text = data[position + len(_PROPERTIES_KEY) :].decode("utf-8")
            properties, end = _DECODER.raw_decode(text)
            rest = text[end:]
            if rest != "}":
                if not rest.startswith(","):
                    continue
                json.loads("{" + rest[1:])  # raises unless it closes the root exactly
        except ValueError:
            continue
        break
    if not isinstance(properties, dict):
        return ""
    parts: list[str] = []
    for name, value in properties.items():
        parts.append(name)
        if isinstance(value, dict):
            for key in ("title", "description"):
                described = value.get(key)
                if isinstance(described, str):
                    parts.append(described)
    return " ".join(parts)


_PROPERTIES_KEY = b'"properties":'
_DECODER = json.JSONDecoder()
