"""Keeping credentials out of what an upstream's answer hands the agent: a seam for adapters.

An API or MCP server that echoes its request (a debugging endpoint, an error page
quoting the headers, a WAF's block page) would otherwise give the agent the host's or
the gateway's ``Authorization`` or ``X-Api-Key``. ``Redactor(credentials)`` (a header
mapping, or the credential values themselves) knows the secrets of one upstream or
call; ``opgate.openapi`` and ``opgate.upstream`` both use it:

* every credential value of at least ``MIN_SECRET`` characters;
* each word of one (split at whitespace, ``,`` and ``;``) of at least ``MIN_PART``
  characters: the token of ``Bearer <token>`` alone;
* for ``Basic <base64>``: the decoded ``user:password`` and the password alone (at
  least ``MIN_PASSWORD`` characters).

It finds each of them written in any mix, character by character, of: the character
itself, its percent-encoding (either case of hex digit, ``%25`` double encoding
included, ``+`` for a space), its JSON escape (``\\"``, ``\\\\``, ``\\/``, ``\\uXXXX``
in either case, ``\\n`` and the like) and its HTML character reference (``&#34;``,
``&#x22;``, ``&quot;``); and, for secrets of at least ``MIN_PART`` characters, their
base64 (standard and URL-safe) at each of the three alignments a longer base64 text
may give them. Letters and digits are found as themselves, as every standard encoder
writes them; so a secret is looked for only where its longest run of letters and
digits occurs, with one substring search per secret (a body without any costs no
more). Each occurrence becomes ``[redacted]``.

``text(s)`` redacts a string; ``value(v, probe)`` a parsed JSON value (member names
and strings; a number whose JSON text holds a secret becomes the string
``[redacted]``), looking for the secrets whose runs occur in ``probe`` (the body it was
parsed from), so a result is redacted before it is serialised and its text copy is
made from the redacted value; ``found(s)`` says whether any secret occurs.
``tail`` bounds how long one encoded occurrence can be once the leading zeros of
character references, which a sender may make as many as it likes, are cut to a few:
``truncated(s)`` redacts a text cut at a byte limit without the tail in which a secret
might have been cut in two, and ``split(s)`` redacts a piece of a stream but for the
tail the next piece may complete. Both cut those zeros first (``&#00000000065;`` means
what ``&#0000000000000065;`` does).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

__all__ = ["MIN_PART", "MIN_PASSWORD", "MIN_SECRET", "REDACTED", "Redactor"]

REDACTED = "[redacted]"
#: Shortest header value redacted as a whole.
MIN_SECRET = 4
#: Shortest word of a header value redacted on its own (and base64-matched).
MIN_PART = 8
#: Shortest Basic-auth password redacted on its own.
MIN_PASSWORD = 6
#: Longest encoding of one character recognised (``%25XX`` for each of four bytes), once
#: a character reference's leading zeros are at most ``_ZEROS_KEPT``.
_PER_CHARACTER = 20
_ZEROS_KEPT = 8
_LONG_ZEROS = re.compile(rf"(&#[xX]?)0{{{_ZEROS_KEPT + 1},}}")
_WORDS = re.compile(r"[\s,;]+")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f"}
_SHORT_ESCAPES |= {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NAMED = {'"': ("quot",), "&": ("amp",), "'": ("apos", "#39"), "<": ("lt",), ">": ("gt",)}


def _hex_digit(digit: str) -> str:
    return f"[{digit.upper()}{digit.lower()}]" if digit.isalpha() else digit


def _hex(number: int, width: int) -> str:
    return "".join(_hex_digit(d) for d in f"{number:0{width}x}")


_ALNUM = re.compile("[A-Za-z0-9]+")


def _character(char: str) -> str:
    """A pattern for ``char`` in any of the encodings the module docstring lists."""
    if char.isascii() and char.isalnum():
        return char
    forms = [re.escape(char)]
    encoded = char.encode("utf-8", "surrogatepass")
    forms.append("".join(f"%(?:25)?{_hex(byte, 2)}" for byte in encoded))
    if char == " ":
        forms.append(r"\+")
    if char in _SHORT_ESCAPES:
        forms.append(re.escape(_SHORT_ESCAPES[char]))
    point = ord(char)
    if point > 0xFFFF:
        high, low = 0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)
        forms.append(rf"\\u{_hex(high, 4)}\\u{_hex(low, 4)}")
    else:
        forms.append(rf"\\u{_hex(point, 4)}")
    forms.append(rf"&#0*{point};")
    forms.append(rf"&#[xX]0*{_hex(point, 1)};")  # &#x3A9; as well as &#x03A9;
    forms.extend(f"&{name};" for name in _NAMED.get(char, ()))
    return "(?:" + "|".join(forms) + ")"


def _base64_cores(secret: str) -> Iterable[str]:
    """The part of ``secret``'s base64 that stays the same at each byte alignment."""
    raw = secret.encode("utf-8", "surrogatepass")
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
        start = -(-shift * 4 // 3)  # characters that depend on the bytes before
        end = ((shift + len(raw)) * 4) // 3  # the last character that is all the secret's
        core = encoded[start:end]
        if len(core) >= MIN_PART:
            yield core
            yield core.replace("+", "-").replace("/", "_")


def _secrets(values: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET:
            found.add(value)
        words = [w for w in _WORDS.split(value) if w]
        found.update(w for w in words if len(w) >= MIN_PART)
        if len(words) == 2 and words[0].lower() == "basic":
            try:
                padded = words[1] + "=" * (-len(words[1]) % 4)
                decoded = base64.b64decode(padded, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            if len(decoded) >= MIN_SECRET:
                found.add(decoded)
            password = decoded.partition(":")[2]
            if len(password) >= MIN_PASSWORD:
                found.add(password)
    return found


def _anchor(secret: str) -> str:
    """The longest run of letters and digits of ``secret`` ("" when it has none)."""
    return max(_ALNUM.findall(secret), key=len, default="")


class Redactor:
    """The credentials of one call, found in any encoding (see the module docstring)."""

    __slots__ = ("_forms", "tail")

    def __init__(self, credentials: Mapping[str, str] | Iterable[str]) -> None:
        values = credentials.values() if isinstance(credentials, Mapping) else credentials
        secrets = _secrets(values)
        forms = set(secrets)
        for secret in secrets:
            if len(secret) >= MIN_PART:
                forms.update(_base64_cores(secret))
        ordered = sorted(forms, key=lambda s: (-len(s), s))
        self._forms = tuple((_anchor(s), "".join(_character(c) for c in s)) for s in ordered)
        #: Characters one encoded secret may span at most.
        self.tail = _PER_CHARACTER * max((len(s) for s in ordered), default=0)

    def __bool__(self) -> bool:
        """Whether there is any secret to look for."""
        return bool(self._forms)

    def _pattern(self, probe: str) -> re.Pattern[str] | None:
        """One pattern for the secrets whose anchor occurs in ``probe`` (longest first)."""
        live = [pattern for anchor, pattern in self._forms if anchor in probe]
        return re.compile("|".join(live)) if live else None

    def text(self, text: str) -> str:
        """``text`` with every occurrence of a secret replaced by ``[redacted]``."""
        pattern = self._pattern(text)
        return text if pattern is None else pattern.sub(REDACTED, text)

    def truncated(self, text: str) -> str:
        """``text``, cut at a read limit, redacted and without its last ``tail``
        characters, in which a secret may have been cut in two (and so not be found);
        a secret that began before them is redacted whole."""
        # as a stream's last piece but one: a secret that begins before the tail and
        # ends inside it arrived whole, and is redacted whole rather than cut in two
        return self.split(text)[0] if self.tail else text

    def split(self, text: str) -> tuple[str, str]:
        """``text`` as a piece of a stream that goes on: the part no secret continuing
        in the next piece can begin in, redacted, and the rest (at most ``tail``
        characters) as it is but for character references' leading zeros, to be put
        before the next piece. A secret found in the rest waits with it, since it may
        be part of a longer one (a credential's word, of the whole credential)."""
        if self.tail:
            text = _short_zeros(text)
        cut = max(len(text) - self.tail, 0)
        pattern = self._pattern(text)
        if pattern is None:
            return text[:cut], text[cut:]
        parts: list[str] = []
        at = 0
        for match in pattern.finditer(text):
            if match.start() >= cut:
                break
            parts += (text[at : match.start()], REDACTED)
            at = match.end()
        cut = max(cut, at)
        parts.append(text[at:cut])
        return "".join(parts), text[cut:]

    def found(self, text: str) -> bool:
        """Whether ``text`` holds a secret in any of the encodings recognised."""
        pattern = self._pattern(text)
        return pattern is not None and pattern.search(text) is not None

    def value(self, value: Any, probe: str) -> Any:
        """``value`` (parsed from ``probe``) with its strings and member names redacted."""
        pattern = self._pattern(probe)
        return value if pattern is None else _redacted(value, pattern)


def _short_zeros(text: str) -> str:
    """``text`` with at most ``_ZEROS_KEPT`` leading zeros in each character reference
    (a reference cut short at the end too: the next piece's zeros join it again)."""
    if "&#" not in text:
        return text
    return _LONG_ZEROS.sub(lambda match: match[1] + "0" * _ZEROS_KEPT, text)


def _redacted(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(REDACTED, value)
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        # a credential of digits comes back as a number: written as JSON writes it
        try:
            written = repr(value) if isinstance(value, float) else str(value)
        except ValueError:  # an int beyond Python's digit limit is never written
            return value
        return REDACTED if pattern.search(written) else value
    if isinstance(value, dict):
        return {pattern.sub(REDACTED, k): _redacted(v, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, pattern) for v in value]
    return value
