"""``opgate demo``: start the demo server over stdio and drive it with the official MCP client.

The driver launches ``python -m opgate demo --serve --database PATH`` as a
subprocess, connects ``mcp.Client`` to it in the 2025-11-25 era (``mode="legacy"``,
where prompts arrive as ``elicitation/create`` requests inside the ``tools/call``),
declares form and URL elicitation, and walks through the gateway as an agent would,
printing each step: ``tools/list``; ``search`` with paging; ``inspect``; ``invoke``
with a success, a not-found failure and a denied ``admin.*`` call; a refund confirmed
in a form; a payment handed off to an HTTPS page; a ticket escalation asking two
questions; and an export with a progress bar.

With ``interactive=True`` (stdin and stdout are terminals) the person answers each
form and URL prompt; otherwise a script answers (accepting, but declining one refund
and the escalation's second question to show those paths). The exit status is 0 when
every step behaved as expected.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import anyio.to_thread
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

from ._terminal import Action, Answers, Terminal, fill_form, ordered_fields

__all__ = ["Driver", "ScriptedAnswer", "server_parameters"]

#: Seconds to wait for any one server response before giving up (the export takes ~1 s).
READ_TIMEOUT = 60.0

#: Width of the progress bar, in characters.
BAR_WIDTH = 24

T = TypeVar("T")

#: What the script answers: an action and, for accepted forms, the answers.
ScriptedAnswer = tuple[str, Answers | None]


def server_parameters(database: Path) -> StdioServerParameters:
    """How to start the demo server: this Python, ``-m opgate demo --serve``, the database."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "opgate", "demo", "--serve", "--database", str(database)],
        env={"PYTHONUNBUFFERED": "1", **_python_path()},
    )


def _python_path() -> dict[str, str]:
    """Keep ``opgate`` importable in the child even when it is not installed (a source tree)."""
    here = str(Path(__file__).resolve().parents[2])
    current = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": here + (os.pathsep + current if current else "")}


def _action(text: str) -> Action:
    """A scripted action as the SDK's literal type."""
    if text == "accept":
        return "accept"
    return "decline" if text == "decline" else "cancel"


def _compact(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Driver:
    """One run of the demo against one server (see the module docstring)."""

    def __init__(
        self,
        database: Path,
        *,
        interactive: bool,
        out: TextIO | None = None,
        terminal: Terminal | None = None,
    ) -> None:
        self.database = database
        self.interactive = interactive
        self.out = out if out is not None else sys.stdout
        if terminal is None and interactive:
            terminal = Terminal(stdout=self.out)
        self.terminal = terminal
        self.script: deque[ScriptedAnswer] = deque()
        self.problems: list[str] = []
        self._step = 0
        self._bar_open = False

    # --- output ------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        if self._bar_open:
            self.out.write("\n")
            self._bar_open = False
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, title: str) -> None:
        self._step += 1
        self.say()
        self.say(f"[{self._step}] {title}")

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.problems.append(what)
            self.say(f"    !! unexpected: {what}")

    # --- the client's callbacks --------------------------------------------------

    async def on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """Answer a form or URL prompt: ask the person, or take the next scripted answer."""
        if isinstance(params, types.ElicitRequestURLParams):
            self.say(f"    <- the server asks to open a link: {params.message}")
            self.say(f"       {params.url}")
            if self.interactive:
                text = await self._ask("    Open it and pay there? [y/N] ")
                yes = text.strip().casefold() in ("y", "yes")
                return types.ElicitResult(action="accept" if yes else "decline")
            action = _action(self._scripted()[0])
            self.say(f"    -> (script) {action}: the person consents to open the page")
            return types.ElicitResult(action=action)
        schema = params.requested_schema
        self.say(f"    <- the server asks a form: {params.message}")
        if self.interactive:
            action, answers = await self._at_terminal(
                lambda terminal: fill_form("", schema, terminal.ask, self.say)
            )
        else:
            for name, prop in ordered_fields(schema):
                title = prop.get("title", name)
                self.say(f"       {name}: {title} ({prop.get('type', 'choice')})")
            scripted_action, answers = self._scripted()
            action = _action(scripted_action)
            shown = f" {_compact(answers)}" if answers else ""
            self.say(f"    -> (script) {action}{shown}")
        return types.ElicitResult(action=action, content=answers)

    def _scripted(self) -> ScriptedAnswer:
        if self.script:
            return self.script.popleft()
        self.problems.append("a prompt arrived that the script did not expect")
        return ("cancel", None)

    async def _ask(self, prompt: str) -> str:
        try:
            return await self._at_terminal(lambda terminal: terminal.ask(prompt))
        except EOFError:
            return ""

    async def _at_terminal(self, ask: Callable[[Terminal], T]) -> T:
        """Run ``ask`` with the terminal in a worker thread; cancelling it ends the wait at once.

        The thread is abandoned on cancellation (Ctrl-C cancels the main task) and the
        terminal closed, so the blocked read ends with ``EOFError`` and the thread with it.
        """
        terminal = self.terminal
        assert terminal is not None, "an interactive driver has a terminal"
        try:
            return await anyio.to_thread.run_sync(ask, terminal, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            terminal.close()
            raise

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Draw the progress bar (one line per update when not on a terminal)."""
        fraction = min(progress / total, 1.0) if total else 0.0
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        count = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        line = f"    [{bar}] {count} {message or ''}"
        if self.interactive:
            self.out.write("\r" + line.ljust(72))
            self.out.flush()
            self._bar_open = True
        else:
            self.say(line)

    # --- the walk ----------------------------------------------------------------

    async def run(self, client: Client) -> None:
        """Walk through every step against a connected ``client``."""
        await self.list_tools(client)
        await self.browse(client)
        await self.find_and_inspect(client)
        await self.plain_calls(client)
        await self.refund(client)
        await self.payment(client)
        await self.escalation(client)
        await self.export(client)

    async def call(
        self, client: Client, tool: str, arguments: dict[str, Any], **options: Any
    ) -> types.CallToolResult:
        """Call one gateway tool, printing the request and a summary of the result."""
        shown = arguments
        if tool == "invoke":
            self.say(f"    invoke {arguments['name']} {_compact(arguments['arguments'])}")
        else:
            if isinstance(shown.get("cursor"), str):
                shown = {**shown, "cursor": shown["cursor"][:12] + "..."}
            self.say(f"    {tool} {_compact(shown)}")
        result = await client.call_tool(tool, arguments, **options)
        if result.is_error:
            error = (result.structured_content or {}).get("error", {})
            self.say(f"    x  {error.get('code', '?')}: {error.get('message', '')}")
        return result

    def show(self, result: types.CallToolResult, *, keys: tuple[str, ...] = ()) -> None:
        data = result.structured_content or {}
        if keys:
            data = {key: data[key] for key in keys if key in data}
        self.say(f"    => {_compact(data, 300)}")

    async def list_tools(self, client: Client) -> None:
        self.step("tools/list: the agent sees three tools, however big the catalog is")
        tools = (await client.list_tools()).tools
        for tool in tools:
            first = (tool.description or "").strip().splitlines()[0] if tool.description else ""
            self.say(f"    {tool.name:8} {first[:90]}")
        self.expect({t.name for t in tools} >= {"search", "inspect", "invoke"}, "three tools")

    async def browse(self, client: Client) -> None:
        self.step("search: browse the catalog by name, five at a time, following the cursor")
        result = await self.call(client, "search", {"limit": 5})
        page = result.structured_content or {}
        self._show_page(page)
        cursor = page.get("next_cursor")
        self.expect(isinstance(cursor, str), "a first page with a cursor")
        if isinstance(cursor, str):
            self.say("    ...next page with the cursor:")
            result = await self.call(client, "search", {"limit": 5, "cursor": cursor})
            self._show_page(result.structured_content or {})
            self.expect(not result.is_error, "a second page")

    def _show_page(self, page: dict[str, Any]) -> None:
        for item in page.get("items", []):
            self.say(f"      {item['name']:24} {item['summary']}")
        more = "yes" if page.get("next_cursor") else "no"
        self.say(f"      (more: {more})")

    async def find_and_inspect(self, client: Client) -> None:
        self.step("search by words, then inspect the operation found")
        result = await self.call(client, "search", {"query": "refund"})
        page = result.structured_content or {}
        self._show_page(page)
        names = [item["name"] for item in page.get("items", [])]
        self.expect("refunds.request" in names, "search 'refund' finds refunds.request")
        result = await self.call(client, "inspect", {"name": "refunds.request"})
        spec = result.structured_content or {}
        self.say(f"    => {spec.get('name')}: {spec.get('summary')}")
        self.say(f"       input_schema  {_compact(spec.get('input_schema'), 200)}")
        output = spec.get("output_schema") or {}
        self.say(f"       output_schema properties {sorted(output.get('properties', {}))}")
        self.expect(not result.is_error, "inspect refunds.request")

    async def plain_calls(self, client: Client) -> None:
        self.step("invoke: a lookup, a not-found failure, and an admin operation")
        result = await self.call(
            client, "invoke", {"name": "customers.get", "arguments": {"customer": 1}}
        )
        self.show(result)
        self.expect(not result.is_error, "customers.get succeeds")
        result = await self.call(
            client, "invoke", {"name": "orders.get", "arguments": {"order": 999_999}}
        )
        self.expect(result.is_error, "orders.get 999999 fails")
        self.say("    (admin.* needs the desk.admin scope; the local principal has none)")
        result = await self.call(client, "invoke", {"name": "admin.audit_log", "arguments": {}})
        self.expect(result.is_error, "admin.audit_log is unavailable")

    async def _first(self, client: Client, name: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool("invoke", {"name": name, "arguments": arguments})
        items = (result.structured_content or {}).get("items") or []
        return items[0] if items else None

    async def refund(self, client: Client) -> None:
        self.step("a refund confirmed through a form (elicitation/create, form mode)")
        order = await self._first(client, "orders.list", {"status": "delivered", "limit": 1})
        if order is None:
            self.say("    (no delivered order left to refund: every one was refunded already)")
            return
        self.say(f"    order {order['id']} of {order['customer']}: {order['total']} EUR")
        arguments = {"name": "refunds.request", "arguments": {"order": order["id"]}}
        if not self.interactive:
            self.say("    first the person declines:")
            self.script.append(("decline", None))
            declined = await self.call(client, "invoke", arguments)
            self.expect(declined.is_error, "a declined refund is not made")
            self.say("    then the person confirms:")
            answers = {"confirm": True, "reason": "damaged", "note": "Sorry about that!"}
            self.script.append(("accept", answers))
        result = await self.call(client, "invoke", arguments)
        if not result.is_error:
            self.show(result, keys=("id", "order_id", "amount", "reason", "order_status"))
        self.expect(self.interactive or not result.is_error, "the confirmed refund is made")

    async def payment(self, client: Client) -> None:
        self.step("a payment handed off to an HTTPS page (elicitation/create, url mode)")
        invoice = await self._first(client, "invoices.list", {"status": "open", "limit": 1})
        if invoice is None:
            self.say("    (every invoice has a payment already: place a new order first)")
            order = {"customer": 1, "lines": [{"product": 2, "quantity": 1}]}
            placed = await self.call(
                client, "invoke", {"name": "orders.create", "arguments": order}
            )
            self.expect(not placed.is_error, "orders.create issues an open invoice")
            invoice = await self._first(client, "invoices.list", {"status": "open", "limit": 1})
            if invoice is None:
                return
        self.say(f"    invoice {invoice['id']} of {invoice['customer']}: {invoice['amount']} EUR")
        self.script.append(("accept", None))
        result = await self.call(
            client, "invoke", {"name": "payments.checkout", "arguments": {"invoice": invoice["id"]}}
        )
        if not result.is_error:
            self.show(result, keys=("id", "invoice_id", "status", "amount", "checkout_url"))
            self.say("    (pending until the provider confirms; payments.status shows it)")
        self.expect(self.interactive or not result.is_error, "the payment is recorded as pending")

    async def escalation(self, client: Client) -> None:
        self.step("a ticket escalation that asks two questions in one call")
        opened = await self.call(
            client,
            "invoke",
            {
                "name": "tickets.open",
                "arguments": {
                    "customer": 1,
                    "subject": "Dock keeps disconnecting",
                    "body": "The dock drops my monitors every few minutes.",
                    "priority": "high",
                },
            },
        )
        ticket = (opened.structured_content or {}).get("id")
        self.expect(isinstance(ticket, int), "tickets.open makes a ticket")
        if not isinstance(ticket, int):
            return
        self.say(f"    => ticket {ticket} opened")
        if not self.interactive:
            self.say("    the person picks a team, then declines to tell the customer:")
        self.script.append(("accept", {"team": "engineering", "priority": "urgent"}))
        self.script.append(("decline", None))
        result = await self.call(
            client, "invoke", {"name": "tickets.escalate", "arguments": {"ticket": ticket}}
        )
        if not result.is_error:
            data = result.structured_content or {}
            self.say(f"    => {data.get('outcome')}")
            self.show(result, keys=("id", "status", "team", "priority", "customer_notified"))
        self.expect(self.interactive or not result.is_error, "the ticket is escalated")
        self.expect(
            self.interactive or (result.structured_content or {}).get("customer_notified") is False,
            "the customer is not told",
        )

    async def export(self, client: Client) -> None:
        self.step("an export that streams progress (notifications/progress)")
        updates: list[float] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            updates.append(done)
            await self.on_progress(done, total, message)

        result = await self.call(
            client,
            "invoke",
            {"name": "reports.export_orders", "arguments": {}},
            progress_callback=progress,
        )
        self.expect(len(updates) >= 2, "progress updates arrive")
        self.show(result)
        for block in result.content:
            if isinstance(block, types.EmbeddedResource) and isinstance(
                block.resource, types.TextResourceContents
            ):
                lines = block.resource.text.splitlines()
                self.say(f"    {block.resource.uri} ({block.resource.mime_type}), first lines:")
                for line in lines[:3]:
                    self.say(f"      {line}")
        self.expect(not result.is_error, "the export succeeds")


async def drive(database: Path, *, interactive: bool, out: TextIO | None = None) -> int:
    """Run the whole demo against a fresh server subprocess; returns the exit status."""
    driver = Driver(database, interactive=interactive, out=out)
    parameters = server_parameters(database)
    driver.say("opgate demo: a support desk on SQLite behind three MCP tools")
    driver.say(f"    database  {database}")
    driver.say(f"    server    {Path(parameters.command).name} {' '.join(parameters.args)}")
    driver.say(f"    answers   {'you, at this terminal' if interactive else 'a script (no TTY)'}")
    async with Client(
        parameters,
        mode="legacy",
        elicitation_callback=driver.on_elicit,
        read_timeout_seconds=READ_TIMEOUT,
    ) as client:
        driver.say(f"    protocol  {client.protocol_version} (prompts arrive inside the call)")
        await driver.run(client)
    driver.say()
    if driver.problems:
        driver.say(f"demo finished with {len(driver.problems)} unexpected result(s)")
        return 1
    driver.say("demo finished: every step behaved as expected")
    return 0
