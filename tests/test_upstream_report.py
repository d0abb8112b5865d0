"""The import report of an upstreams catalog (``opgate.upstream._report``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from opgate.redact import Redactor
from opgate.upstream import Issue, Report, UpstreamStatus
from opgate.upstream._report import MAX_REASON_CHARS, bounded, redacted_line, visible


def test_bounded_drops_terminal_escape_sequences_whole() -> None:
    assert bounded("\x1b[1;31mred\x1b[0m text") == "red text"  # no "[31m" left behind
    assert bounded("up\x1b[2A\x1b[Kdone") == "up done"
    assert bounded("\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ here") == "click here"
    assert bounded("\x1b]0;title\x07shown") == "shown"
    assert bounded("\x9b2Jcleared \x9d0;t\x9cok") == "cleared ok"
    assert bounded("keep \x1b7saved\x1b8") == "keep saved"
    assert bounded("\x1b(Bplain") == "plain"
    assert bounded("cut \x1b]8;;never ends") == "cut"
    assert bounded("cut \x1b]8;;up to \x1b[1mhere") == "cut here"
    assert bounded("a [31m b") == "a [31m b"  # text that only looks like one stays


def test_bounded_drops_every_control_strings_payload() -> None:
    # DCS, SOS, PM and APC carry a payload a terminal does not show (sixels, tmux
    # pass-through, Kitty graphics): it is not text the operator was meant to read.
    for opener in ("\x1bP", "\x1bX", "\x1b^", "\x1b_", "\x90", "\x98", "\x9e", "\x9f"):
        assert bounded(f"a{opener}q#0;2;0;0;0\x1b\\b") == "a b", repr(opener)
        assert bounded(f"a{opener}payload\x9cb") == "a b", repr(opener)


def test_a_sequence_cannot_join_text_into_a_redacted_credential() -> None:
    # Reasons are redacted before they are bounded; dropping the sequence whole would
    # rejoin "sec" and "ret" after the redactor had looked for "secret".
    assert bounded("token sec\x1b[mret") == "token sec ret"


def test_bounded_puts_text_on_one_short_line() -> None:
    assert bounded("a\n\tb\x00c  d") == "a b c d"
    long = bounded("x" * 1000)
    assert len(long) == MAX_REASON_CHARS
    assert long.endswith("…")
    assert bounded("abcdef", 4) == "abc…"


def test_summary_and_lines() -> None:
    report = Report(
        upstreams=(
            UpstreamStatus(
                "time", "stdio", True, protocol_version="2025-11-25", server="t 1", tools=2
            ),
            UpstreamStatus("web", "http", False, "could not reach the upstream (ConnectError)"),
        ),
        disabled=("old",),
        operations=("time.a", "time.b"),
        skipped=(Issue("time", "c", "filtered", "left out by the deny list"),),
        warnings=(Issue("time", "", "listing cut", "cut"),),
    )
    assert report.failed == (report.upstreams[1],)
    assert report.summary() == (
        "1 of 2 upstreams connected, 2 operations imported, 1 tool skipped, 1 warning"
    )
    assert report.skipped_by_kind() == {"filtered": 1}
    assert report.lines() == [
        report.summary(),
        "upstream time (stdio, t 1, 2025-11-25): 2 tools listed",
        "upstream web (http): not connected: could not reach the upstream (ConnectError)",
        "disabled old",
        "skipped time/c: left out by the deny list",
        "warning time: cut",
    ]


def test_counts_read_in_english() -> None:
    assert str(UpstreamStatus("a", "stdio", True, tools=1)).endswith(": 1 tool listed")
    one = Report(upstreams=(UpstreamStatus("a", "stdio", True),), operations=("a.x",))
    assert (
        one.summary()
        == "1 of 1 upstream connected, 1 operation imported, 0 tools skipped, 0 warnings"
    )


def test_a_status_says_retries_and_restarts() -> None:
    since = datetime(2026, 12, 2, 19, 30, 5, tzinfo=UTC)
    down = UpstreamStatus(
        "web", "http", False, "could not reach the upstream (ConnectError)", attempts=3
    )
    assert str(down) == "web (http): not connected: could not reach the upstream (ConnectError)"
    retrying = replace(down, retrying=True)
    assert str(retrying) == (
        "web (http): not connected: could not reach the upstream (ConnectError); "
        "retrying (3 failed starts)"
    )
    assert str(replace(retrying, attempts=1)).endswith("; retrying")
    up = UpstreamStatus(
        "kit", "stdio", True, protocol_version="2026-07-28", tools=9, since=since, restarts=2
    )
    assert str(up) == (
        "kit (stdio, 2026-07-28): 9 tools listed, restarted 2 times, "
        "up since 2026-12-02 19:30:05 UTC"
    )


def test_a_refused_rebuild_is_a_line_of_its_own() -> None:
    report = Report(rebuilds=2, refused="change 3 (kit) was refused: ConfigurationError: x")
    assert (
        report.lines()[-1] == "rebuild refused: change 3 (kit) was refused: ConfigurationError: x"
    )
    assert "rebuild refused" not in "\n".join(Report(rebuilds=2).lines())


def test_visible_escapes_controls_format_and_separators_and_nothing_else() -> None:
    assert visible("Café — naïve 日本 😀 a\tb\nc") == "Café — naïve 日本 😀 a\tb\nc"
    assert visible("a\tb\nc", lines=False) == "a\\tb\\nc"
    assert visible("\x1b\x7f\x85\u061c\u200e\u2066\ufeff\U000e0041\u2029\r") == (
        "\\u001b\\u007f\\u0085\\u061c\\u200e\\u2066\\ufeff\\U000e0041\\u2029\\u000d"
    )
    assert visible("\ud800") == "\\ud800"


@pytest.mark.parametrize(
    "text",
    ["Bearer\x1b[0mabc1234", "Bearer\x1b]8;;\x07abc1234", "Bearer\tabc1234", "Bearer  abc1234"],
    ids=["CSI", "OSC", "tab", "two spaces"],
)
def test_a_redacted_line_cannot_join_a_credential_of_words(text: str) -> None:
    # Only the whole value is a secret (its token is under MIN_PART): the space
    # bounded() puts for the sequence or run would write it out whole.
    redactor = Redactor({"Authorization": "Bearer abc1234"})
    assert bounded(redactor.text(f"echo: {text}")) == "echo: Bearer abc1234"
    assert redacted_line(f"echo: {text}", redactor) == "echo: [redacted]"
