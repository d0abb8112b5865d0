"""``opgate.openapi._redact``: the host's credentials found in any encoding and redacted.

Against an upstream that echoes them (headers, error pages, the status line, JSON
numbers) in ``test_openapi_upstream.py``.
"""

from __future__ import annotations

import base64
import json

from opgate.openapi._redact import Redactor

from openapi_credentials import API_KEY, HEADERS, TOKEN, encodings


def test_redactor_finds_each_encoding() -> None:
    pair = "bob:pa$$wörd"
    basic = "Basic " + base64.b64encode(pair.encode()).decode()
    redactor = Redactor({**HEADERS, "X-Basic": basic, "X-Other": "Token zé/ro-1234"})
    for secret in (TOKEN, API_KEY, pair, "pa$$wörd", "zé/ro-1234"):
        for form in encodings(secret):
            assert redactor.found(f"x{form}y"), form
            assert form not in redactor.text(f"x{form}y")
    mixed = TOKEN.replace('"', "%22").replace("/", "\\/").replace("~", "\\u007E")
    assert redactor.text(mixed) == "[redacted]"
    assert redactor.text("z\\u00E9\\/ro-1234") == "[redacted]"
    assert redactor.text("nothing secret here") == "nothing secret here"
    unpadded = Redactor({"Authorization": "Basic YWxpY2U6c2VjcmV0MTI"})  # alice:secret12
    assert unpadded.text("user alice:secret12, password secret12") == (
        "user [redacted], password [redacted]"
    )
    value = {TOKEN: [API_KEY, 1, None]}
    assert redactor.value(value, json.dumps(value)) == {"[redacted]": ["[redacted]", 1, None]}
    assert redactor.value(value, "a probe without their runs") == value
