"""``opgate.mcp._exact`` on its own: raw members, answers, placeholders."""

from __future__ import annotations

import json

import pydantic_core
import pytest

from opgate._json import number_text, parse
from opgate.mcp._exact import (
    Answers,
    UnreadableMessage,
    member_bytes,
    placeholder,
    restore,
)

ARGS = ("params", "arguments", "arguments")


@pytest.mark.parametrize(
    ("message", "path", "expected"),
    [
        (b'{"params":{"arguments":{"arguments":{"a":1,"a":2}}}}', ARGS, b'{"a":1,"a":2}'),
        # the last occurrence at every level, as the SDK's decoders choose
        (b'{"params":{"arguments":{"arguments":1}},"params":{"x":0}}', ARGS, None),
        (b'{"params":{"x":0},"params":{"arguments":{"arguments":[1e400]}}}', ARGS, b"[1e400]"),
        (b'{"params":{"arguments":{"arguments":{"a":1},"arguments":{"b":2}}}}', ARGS, b'{"b":2}'),
        # names compare after their escapes, values keep their spelling and whitespace
        (
            b'{ "par\\u0061ms" : { "arguments" : {"arguments" : { "n" : 0.30 } } } }',
            ARGS,
            b'{ "n" : 0.30 }',
        ),
        (b'{"params":{"arguments":"text"}}', ARGS, None),
        (b'{"params":{}}', ARGS, None),
        (b'{"id":"opgate-1","result":{}}', ("id",), b'"opgate-1"'),
        (b'\xef\xbb\xbf {"id":7}', ("id",), b"7"),  # after a byte order mark, as json.loads
        # invalid UTF-8 comes back byte for byte, for the strict parser to name
        (b'{"params":{"arguments":"\xff\xfe"}}', ("params", "arguments"), b'"\xff\xfe"'),
    ],
)
def test_member_bytes_is_the_text_as_sent(
    message: bytes, path: tuple[str, ...], expected: bytes | None
) -> None:
    assert member_bytes(message, path) == expected


@pytest.mark.parametrize(
    "message", [b'{"params":', b'{"params" 1}', b'{"a":1 "b":2}', b"[" * 5000 + b"]" * 5000]
)
def test_member_bytes_refuses_what_it_cannot_read(message: bytes) -> None:
    with pytest.raises(UnreadableMessage):
        member_bytes(message if message.startswith(b"{") else b'{"a":' + message + b"}", ("b",))


def test_placeholders_are_written_as_their_numbers() -> None:
    values = {"huge": number_text(10**400), "tiny": "1e-400", "plain": "#opgate-#1"}
    encoded = pydantic_core.to_json(
        {"huge": placeholder(values["huge"]), "tiny": placeholder("1e-400"), "s": values["plain"]}
    )
    restored = restore(encoded)
    assert parse(restored) == parse('{"huge":1e+400,"tiny":1e-400,"s":"#opgate-#1"}')
    assert restore(b'{"a":"x"}') == b'{"a":"x"}'


def test_answers_go_to_the_awaited_id_of_the_same_session_first_come() -> None:
    answers = Answers()
    with answers.expect("s1") as expected:
        ident = json.dumps(expected.id).encode()
        answers.offer(b'{"jsonrpc":"2.0","id":' + ident + b',"result":{"content":{"n":1}}}', "s2")
        assert not expected.arrived  # another session's response
        answers.offer(b'{"id":' + ident + b',"result":{"content":{"n":0.10}}}', "s1")
        assert expected.arrived
        assert not expected.repeated
        assert expected.content == b'{"n":0.10}'
        answers.offer(b'{"id":' + ident + b',"result":{"content":{"n":2}}}', "s1")
        assert expected.repeated  # which one the SDK took is not known
        assert expected.content == b'{"n":0.10}'
    answers.offer(b'{"id":' + ident + b',"result":{}}', "s1")  # no longer awaited: ignored


@pytest.mark.parametrize(
    "first",
    [
        b'{"id":%s,"method":"x","result":{"content":{"n":1}}}',  # a request the SDK refuses
        b'{"jsonrpc":"1.0","id":%s,"result":{"content":{"n":1}}}',  # not JSON-RPC 2.0
        b'{"id":%s,"error":{"code":1,"message":"no"}}',  # an error response
    ],
)
def test_any_message_under_an_awaited_id_counts(first: bytes) -> None:
    answers = Answers()
    with answers.expect(None) as expected:
        ident = json.dumps(expected.id).encode()
        answers.offer(first % ident, None)
        answers.offer(b'{"id":' + ident + b',"result":{"content":{"n":2}}}', None)
        assert expected.repeated


def test_an_awaited_id_written_with_escapes_is_recognised() -> None:
    answers = Answers()
    with answers.expect(None) as expected:
        ident = ('"' + "".join(f"\\u{ord(c):04x}" for c in expected.id) + '"').encode()
        answers.offer(b'{"id":' + ident + b',"result":{"content":{"n":1}}}', None)
        assert expected.arrived
        assert expected.content == b'{"n":1}'
        answers.offer(b'{"id":' + json.dumps(expected.id).encode() + b',"result":{}}', None)
        assert expected.repeated
