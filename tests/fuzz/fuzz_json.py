"""Coverage-guided fuzzing (atheris) of the strict JSON parser and argument validation.

Not part of pytest. Install the ``fuzz`` extra and run for a bounded time::

    .venv/bin/python -m pip install -e '.[fuzz]'
    .venv/bin/python tests/fuzz/fuzz_json.py -max_total_time=60 -timeout=5 -rss_limit_mb=2048

Every input is read as UTF-8 bytes, as (surrogate-passing) text and through the
profile, by ``opgate._json.parse`` — which may raise ``JSONError`` and nothing
else — then a value that parsed is written back (``canonical_bytes``) and must read
back equal. The same input goes to ``Registry.invoke`` as an operation's arguments
(text and bytes), whose outcome must be a ``Failed`` with a code or a ``Completed``.
An exception anywhere else, or a single input taking more than ``-timeout`` seconds
(a hang or super-linear work), is a finding: libFuzzer writes the input to
``crash-*``/``timeout-*`` and stops. Seeds are the adversarial shapes of issue 9.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import atheris

with atheris.instrument_imports(include=["opgate"]):
    from opgate import Completed, Failed, Operation, Registry, Result, Text, finish
    from opgate._json import JSONError, canonical_bytes, parse

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "maximum": 10},
        "s": {"type": "string", "maxLength": 100},
        "l": {"type": "array", "items": {"type": "number"}},
    },
    "additionalProperties": False,
}


class OpenPolicy:
    def scope_key(self, ctx: Any) -> str:
        return "fuzz"

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


def handler(inv: Any) -> Any:
    return finish(Result([Text("ok")]))


REGISTRY = Registry([Operation("op", "fuzz target", handler, input_schema=SCHEMA)], OpenPolicy())


def check_parse(data: bytes | str, *, profile: bool) -> None:
    try:
        value = parse(data, profile=profile)
    except JSONError:
        return
    again = parse(canonical_bytes(value), profile=profile)
    if again != value:
        raise AssertionError(f"round trip changed the value: {value!r} -> {again!r}")


async def check_invoke(arguments: bytes | str) -> None:
    with anyio.fail_after(10):
        outcome = await REGISTRY.invoke(None, "op", arguments)
    if isinstance(outcome, Failed):
        if not outcome.failure.code.value:
            raise AssertionError("a failure without a code")
    elif not isinstance(outcome, Completed):
        raise AssertionError(f"unexpected outcome {outcome!r}")


async def check_invoke_both(data: bytes, text: str) -> None:
    await check_invoke(data)
    await check_invoke(text)


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    check_parse(data, profile=False)
    check_parse(text, profile=False)
    check_parse(data, profile=True)
    anyio.run(check_invoke_both, data, text)


SEEDS = [
    b'"' + b'\\"' * 2000 + b"[]" * 130,
    b'{"s": "' + b"a" * 4000 + b'"}',
    b'{"s": "' + b"\\u0001" * 500 + b'"}',
    b"{" + b",".join(b'"m%d":0' % i for i in range(500)) + b"}",
    b'{"l": [' + b"[" * 127 + b"]" * 127 + b"]}",
    b"[" * 300 + b"]" * 300,
    b'{"n": 1e4097}',
    b'{"n": 3.0}',
    b'{"n": 1, "n": 2}',
    b'{"s": "\\ud800"}',
]


def main() -> None:
    # Check the seeds first, so a broken build fails fast; then, unless a corpus
    # directory was given, start from a temporary one holding them.
    for seed in SEEDS:
        test_one_input(seed)
    argv = list(sys.argv)
    if not any(not arg.startswith("-") for arg in argv[1:]):
        corpus = Path(tempfile.mkdtemp(prefix="opgate-fuzz-json-"))
        for index, seed in enumerate(SEEDS):
            (corpus / f"seed-{index}").write_bytes(seed)
        argv.append(str(corpus))
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
