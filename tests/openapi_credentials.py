"""The host credentials of the openapi upstream tests, and every way software that
echoes a credential could write it (``encodings``), for ``test_openapi_upstream.py``
and ``test_redact.py``.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

__all__ = ["API_KEY", "HEADERS", "TOKEN", "encodings"]

TOKEN = 'tok"en\\with/odd+chars=~-0123456789'


TOKEN = 'tok"en\\with/odd+chars=~-0123456789'
API_KEY = "key-ABCDEFGH-12345678"


TOKEN = 'tok"en\\with/odd+chars=~-0123456789'
API_KEY = "key-ABCDEFGH-12345678"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": API_KEY}


def encodings(secret: str) -> list[str]:
    """How ``secret`` could be written by software that echoes it."""
    raw = secret.encode()
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        _lower_hex(quote(secret, safe="")),
        quote_plus(secret, safe=""),
        *(_base64_core(raw, shift) for shift in range(3)),
        secret.replace('"', "&quot;").replace("\\", "&#92;"),
    ]


def _lower_hex(text: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _base64_core(raw: bytes, shift: int) -> str:
    """What any base64 text holding ``raw`` after ``shift`` other bytes must contain."""
    encoded = base64.b64encode(b"\0" * shift + raw).decode()
    return encoded[-(-shift * 4 // 3) : (shift + len(raw)) * 4 // 3]
