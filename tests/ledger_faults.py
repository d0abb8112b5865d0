"""The fault-injection harness for the shared ledger (tests/test_redis_ledger_faults.py).

One operation, ``ledger.transfer``: its first call asks for a confirmation; the
answered call appends ``{"chain", "pid", "recovery", "phase", "at"}`` lines to an
*effects* file when it starts and when it ends (``O_APPEND``: whole lines, from any
process), and holds in between. A real run (``recovery_only=False``) is the effect
the ledger must make happen exactly once per confirmed answer; a recovery run must
only ever follow a real one.

``python tests/ledger_faults.py URL PREFIX EFFECTS CHAIN`` is a replica in its own
process: it reads a continuation token on stdin and answers it, holding its handler
for ``$OPGATE_FAULT_HOLD`` seconds (the test SIGKILLs it mid-handler).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from opgate import (
    Discover,
    Execute,
    FormInput,
    InputMode,
    InputResponse,
    Invocation,
    Operation,
    Registry,
    Result,
    Text,
    await_input,
    finish,
)
from opgate.redis import RedisLedger

SECRET = b"the fault tests' shared secret, 32+ bytes long"
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SUPPORT = {InputMode.FORM}
YES = InputResponse.accept({"ok": True})
NAME = "ledger.transfer"


class Effects:
    """The effects file: one JSON line per handler start and end."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, chain: int, recovery: bool, phase: str) -> None:
        line = {"chain": chain, "pid": os.getpid(), "recovery": recovery, "phase": phase}
        line["at"] = time.time()
        data = (json.dumps(line) + "\n").encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, data)
        finally:
            os.close(descriptor)

    def runs(self, chain: int) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        return [line for line in lines if line["chain"] == chain]


class Open:
    """Everything allowed; one principal."""

    def scope_key(self, ctx: Any) -> str:
        return "alice"

    def authorize(self, ctx: Any, request: Discover | Execute) -> None:
        return None


def operations(effects: Effects, hold: Callable[[], float]) -> list[Operation]:
    async def transfer(inv: Invocation) -> Any:
        chain = inv.arguments["chain"]
        assert isinstance(chain, int)
        resume = inv.resume
        if resume is None:
            return await_input(FormInput("Transfer?", FORM, {"chain": chain}))
        effects.write(chain, resume.recovery_only, "start")
        await anyio.sleep(hold())
        effects.write(chain, resume.recovery_only, "end")
        return finish(Result([Text("recovered" if resume.recovery_only else "sent")]))

    return [Operation(NAME, "Transfer money once", transfer)]


def replica(
    url: str,
    prefix: str,
    effects: Effects,
    *,
    hold: Callable[[], float] = lambda: 0.0,
    lease: timedelta = timedelta(seconds=2),
    timeout: timedelta = timedelta(seconds=1),
    clock: Callable[[], float] | None = None,
) -> Registry:
    ledger = RedisLedger(url, prefix=prefix, lease=lease, timeout=timeout)
    return Registry(operations(effects, hold), Open(), clock=clock, secret=SECRET, ledger=ledger)


async def prompt(reg: Registry, chain: int) -> Any:
    return await reg.invoke(None, NAME, {"chain": chain}, input_support=SUPPORT)


async def answer(reg: Registry, chain: int, token: str) -> Any:
    return await reg.invoke(
        None, NAME, {"chain": chain}, input_support=SUPPORT, resume=(token, YES)
    )


def main() -> None:
    url, prefix, path, chain = sys.argv[1:5]
    hold = float(os.environ.get("OPGATE_FAULT_HOLD", "60"))
    token = sys.stdin.readline().strip()

    async def run() -> None:
        reg = replica(url, prefix, Effects(Path(path)), hold=lambda: hold)
        print(await answer(reg, int(chain), token), flush=True)

    anyio.run(run)


if __name__ == "__main__":
    main()
