"""``opgate.redact``: the host's credentials found in any encoding and redacted.

Against an upstream that echoes them (headers, error pages, the status line, JSON
numbers) in ``test_openapi_upstream.py``.
"""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal
from random import Random

from opgate.redact import MIN_PART, MIN_PASSWORD, MIN_SECRET, REDACTED, Redactor

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


def test_the_length_rules_of_what_counts_as_a_secret() -> None:
    redactor = Redactor({"X-Short": "abc", "X-Four": "abcd", "X-Words": "Token short long-enough"})
    assert redactor.text("abc abcd") == "abc [redacted]"  # MIN_SECRET characters and more
    assert redactor.text("long-enough short") == "[redacted] short"  # words of MIN_PART
    assert redactor.text("Token short long-enough") == "[redacted]"  # the whole value first
    assert not redactor.found("Token short")
    assert len("abcd") == MIN_SECRET
    assert len("long-enough") >= MIN_PART > len("short")


def test_a_basic_password_is_redacted_alone_when_long_enough() -> None:
    def basic(pair: str) -> str:
        return "Basic " + base64.b64encode(pair.encode()).decode()

    long = Redactor([basic("carol:s3cr3t")])
    assert len("s3cr3t") == MIN_PASSWORD
    assert long.text("password s3cr3t, user carol:s3cr3t") == (
        "password [redacted], user [redacted]"
    )
    short = Redactor([basic("dave:pw123")])
    assert short.text("password pw123") == "password pw123"  # shorter than MIN_PASSWORD
    assert short.text("dave:pw123") == "[redacted]"
    assert Redactor(["Basic !!not-base64!!"]).text("Basic !!not-base64!!") == REDACTED


def test_base64_of_a_secret_is_found_at_every_alignment_and_url_safe() -> None:
    secret = "??>>~~secret~~>>??"  # its base64 holds + and /, which URL-safe base64 replaces
    redactor = Redactor([secret])
    differs = 0
    for shift in range(3):
        standard = base64.b64encode(b"x" * shift + secret.encode()).decode()
        urlsafe = base64.urlsafe_b64encode(b"x" * shift + secret.encode()).decode()
        differs += standard != urlsafe
        assert REDACTED in redactor.text(standard), standard
        assert REDACTED in redactor.text(urlsafe), urlsafe
    assert differs == 3


def test_numbers_are_redacted_as_json_writes_them() -> None:
    redactor = Redactor({"X-Pin": "48291375"})
    value = {"n": 48291375, "f": 48291375.0, "d": Decimal("48291375"), "t": True, "o": 7}
    redacted = redactor.value(value, "48291375")
    assert redacted == {"n": REDACTED, "f": REDACTED, "d": REDACTED, "t": True, "o": 7}
    huge = 10**5000  # beyond Python's digit limit: never written, so never a match
    assert redactor.value([huge], "48291375") == [huge]


def test_a_redactor_without_credentials_changes_nothing() -> None:
    redactor = Redactor({})
    assert redactor.text("Bearer anything") == "Bearer anything"
    assert not redactor.found("anything")
    assert redactor.value({"a": "b"}, '{"a":"b"}') == {"a": "b"}
    assert redactor.tail == 0


def test_a_stream_split_anywhere_is_redacted_as_its_whole_text() -> None:
    """``split`` piece by piece, then ``text`` of what is held at the end, gives what
    ``text`` of the whole gives, wherever the pieces are cut: a secret, or a word of
    one that is a secret alone, is never redacted before its end has arrived."""
    value = "Token abcdefghijkl x9"
    redactor = Redactor({"Authorization": value, "X-Api-Key": "k3y-0123456789"})
    forms = [value, "abcdefghijkl", "k3y-0123456789", "Token%20abcdefghijkl%20x9", "x9"]
    random = Random(7)
    for _ in range(300):
        whole = "".join(random.choice([*forms, " ", "ab", "Token "]) for _ in range(30))
        streamed, held, at = [], "", 0
        while at < len(whole):
            size = random.randint(1, 40)
            out, held = redactor.split(held + whole[at : at + size])
            streamed.append(out)
            at += size
        streamed.append(redactor.text(held))
        assert "".join(streamed) == redactor.text(whole), whole
        assert len(held) <= redactor.tail


def _zero_padded(secret: str, zeros: int) -> str:
    """``secret`` with each character but letters and digits written as an HTML
    character reference with ``zeros`` leading zeros."""
    return "".join(c if c.isalnum() else f"&#{'0' * zeros}{ord(c)};" for c in secret)


def test_character_references_padded_beyond_the_tail_are_still_redacted_in_a_stream() -> None:
    """Leading zeros make a reference as long as the sender likes; a stream cut inside
    such a secret must not let its first characters out before its end arrives."""
    import html

    secret = "k3y-01234/56789"
    redactor = Redactor({"X-Api-Key": secret})
    random = Random(11)
    for zeros in (20, 500, 5000):
        whole = "before " + _zero_padded(secret, zeros) + " after"
        assert redactor.text(whole) == "before [redacted] after"
        for _ in range(30):
            streamed, held, at = [], "", 0
            while at < len(whole):
                size = random.randint(1, 3 * redactor.tail)
                out, held = redactor.split(held + whole[at : at + size])
                streamed.append(out)
                at += size
                assert len(held) <= redactor.tail
            streamed.append(redactor.text(held))
            shown = "".join(streamed)
            assert secret not in html.unescape(shown), zeros
            assert html.unescape(shown) == "before [redacted] after"


def test_a_text_cut_at_a_limit_keeps_no_part_of_a_padded_secret() -> None:
    import html

    secret = "k3y-01234/56789"
    redactor = Redactor({"X-Api-Key": secret})
    whole = "before " + _zero_padded(secret, 800)
    for limit in range(7, len(whole), 97):
        shown = html.unescape(redactor.truncated(whole[:limit]))
        assert "01234" not in shown, limit
    padding = "x" * redactor.tail
    assert redactor.truncated(whole + " after" + padding) == "before [redacted] after"
    assert redactor.truncated("plain" + padding) == "plain"


def test_a_text_cut_at_a_limit_shows_no_part_of_a_secret_its_own_cut_falls_inside() -> None:
    """The tail dropped from a cut text is counted from its end: a secret that arrived
    whole but straddles where the tail begins is redacted whole, not shown in part."""
    secret = "k3y-01234/56789"
    redactor = Redactor({"X-Api-Key": secret})
    for extra in range(len(secret) + 1):
        body = "before " + secret + "x" * (redactor.tail - len(secret) + extra)
        shown = redactor.truncated(body)
        assert shown in ("before ", "before [redacted]"), (extra, shown)
    padded = "before " + _zero_padded(secret, 600) + "x" * redactor.tail
    for limit in range(7, len(padded), 53):
        shown = redactor.truncated(padded[:limit])
        assert shown in ("", "before ", "before [redacted]"), (limit, shown)


def test_hex_character_references_are_found_without_leading_zeros() -> None:
    """``&#x3A9;`` as well as ``&#x03A9;``: an encoder (JavaScript's ``he``, for one)
    writes a hex reference's digits without padding them to four."""
    redactor = Redactor({"X-Api-Key": "pässwΩrd-Ā1234"})
    for omega in ("&#x3A9;", "&#x3a9;", "&#X03a9;", "&#937;"):
        for a in ("&#x100;", "&#x0100;", "&#256;"):
            assert redactor.text(f"<pässw{omega}rd-{a}1234>") == "<[redacted]>", (omega, a)


def _written(char: str, random: Random) -> str:
    """``char`` as one of the encoders the module docstring lists may write it."""
    if char.isascii() and char.isalnum():
        return char
    point, raw = ord(char), char.encode()
    zeros = "0" * random.choice([0, 0, 1, 9, 40, 900])
    forms = [
        char,
        "".join(random.choice(["%", "%25"]) + f"{byte:02X}" for byte in raw),
        json.dumps(char)[1:-1],
        f"&#{zeros}{point};",
        f"&#{random.choice('xX')}{zeros}{point:x};",
        {" ": "+", '"': "&quot;", "&": "&amp;", "<": "&lt;"}.get(char, char),
    ]
    return random.choice(forms)


def test_streams_and_cut_texts_of_any_encoding_are_redacted_as_the_whole() -> None:
    """Seeded: secrets written in any mix of encodings (zero-padded references too)
    among look-alike noise, streamed in pieces of any size, give what ``text`` of the
    whole gives once references' zeros are cut; a text cut anywhere gives a beginning
    of it."""
    secrets = ["k3y-01234/56789", 'pa ss"wΩrd😀x<&>', "Bearer tok.en_12345678"]
    redactor = Redactor({"A": secrets[0], "B": secrets[1], "C": secrets[2]})
    noise = ["&", "#", "&#", "&#x", "0" * 30, " ", "%25", "\\u", "-", ";", "&#0000000000"]
    noise.append("x" * redactor.tail)
    random = Random(5)
    for _ in range(150):
        parts = [random.choice([*secrets, *secrets, *noise]) for _ in range(random.randint(1, 10))]
        whole = "".join(
            "".join(_written(c, random) for c in part) if part in secrets else part
            for part in parts
        )
        expected = redactor.text(re.sub(r"(&#[xX]?)0{9,}", r"\g<1>00000000", whole))
        assert expected.count(REDACTED) == redactor.text(whole).count(REDACTED)
        assert expected.count(REDACTED) == sum(part in secrets for part in parts), whole
        streamed, held, at = [], "", 0
        while at < len(whole):
            size = random.choice([1, 2, random.randint(1, 3 * redactor.tail)])
            out, held = redactor.split(held + whole[at : at + size])
            streamed.append(out)
            at += size
            assert len(held) <= redactor.tail
        streamed.append(redactor.text(held))
        assert "".join(streamed) == expected, whole
        for limit in {random.randint(0, len(whole)) + redactor.tail for _ in range(10)}:
            assert expected.startswith(redactor.truncated(whole[:limit])), (whole, limit)
