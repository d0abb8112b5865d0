"""opgate's JSON profile, for adapters that carry JSON between a wire and the registry.

The same strict, exact JSON the registry applies to arguments, answers and results
(the implementation is ``opgate._json``; its docstring has the whole profile):

* ``parse(data, *, profile=False)``: JSON text (``str`` or UTF-8 ``bytes``) to an
  exact ``JSONValue`` — duplicate member names, ``NaN``, the infinities, lone
  surrogates, invalid UTF-8, trailing garbage and nesting deeper than 128 fail with
  ``JSONError``; numbers are exact (``int`` or ``decimal.Decimal``, never a
  ``float``). ``profile=True`` also applies spec 003's numeric work profile. Linear
  in its input.
* ``canonical_bytes(value)``: the canonical UTF-8 encoding of a ``JSONValue``
  (object names sorted by UTF-16 code units, no insignificant whitespace, RFC 8785
  string escapes, numbers written from their exact value); equal values give equal
  bytes.
* ``number_text(value)``: the canonical spelling of one exact number.
* ``JSONError`` (a ``ValueError``): what is wrong (``reason``) and where
  (``pointer``, an RFC 6901 pointer), quoting at most a short prefix of the input.
"""

from __future__ import annotations

from ._json import JSONError, JSONValue, canonical_bytes, number_text, parse

__all__ = ["JSONError", "JSONValue", "canonical_bytes", "number_text", "parse"]
