"""The bundled demo: until the registry lands, a smoke run of the strict JSON core."""

from __future__ import annotations

from .._json import JSONError, canonical_text, parse

__all__ = ["run"]


def run() -> int:
    """Print what the strict JSON core does with a few inputs; returns 0."""
    for text in ['{"b": 1.0, "a": [10e-1, -0.0]}', '{"a": 1, "a": 2}', "1e1000000000"]:
        try:
            print(f"{text!s:40} -> {canonical_text(parse(text, profile=True))}")
        except JSONError as exc:
            print(f"{text!s:40} -> rejected: {exc}")
    return 0
