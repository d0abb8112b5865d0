"""``opgate serve --openapi SPEC``: the registry of an OpenAPI document, the import
report printed before serving, and ``--check``, which prints all of it and serves nothing."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._escapes import visible
from ._options import DEFAULT_CONFIRM
from ._usage import UsageError

__all__ = [
    "REPORT_ISSUES_SHOWN",
    "REPORT_LINE_CHARACTERS",
    "ServePolicy",
    "check_openapi",
    "openapi_registry",
    "print_report",
]


class ServePolicy:
    """``opgate serve --openapi`` and ``--upstreams``: every principal may use every
    operation (over HTTP only authenticated ones: ``refuse_unauthenticated_catalogs``)."""

    def scope_key(self, ctx: Any) -> str:
        return str(getattr(ctx, "scope_key", "local"))

    def authorize(self, ctx: Any, request: Any) -> None:
        return None


def openapi_registry(arguments: argparse.Namespace) -> Any:
    """The registry of ``--openapi SPEC`` (the report goes to stderr)."""
    catalog, registry = _openapi_catalog(arguments)
    print_report(catalog.report, sys.stderr, every=False)
    return registry


def check_openapi(arguments: argparse.Namespace) -> int:
    """``--check``: import ``--openapi SPEC``, print the whole report, serve nothing.

    Returns 0 when some operation can be served, 1 when none can; a document that
    cannot be read at all is a ``UsageError``.
    """
    catalog, registry = _openapi_catalog(arguments)
    print_report(catalog.report, sys.stdout, every=True)
    if len(registry) == 0:
        print(f"opgate: no operation of {arguments.openapi} can be served", file=sys.stdout)
        return 1
    return 0


#: Issues of an import report ``opgate serve`` prints before serving (``--check``
#: prints every one): enough to see what is wrong without burying the start.
REPORT_ISSUES_SHOWN = 50

#: Longest report line printed: the path in it is the document's, of any length.
REPORT_LINE_CHARACTERS = 1000


def print_report(report: Any, stream: Any, *, every: bool) -> None:
    """``report``'s lines, each skip and warning with its reason, escaped for a terminal
    (an ``opgate.openapi`` or an ``opgate.upstream`` report: both write ``lines()``)."""
    summary, *issues = report.lines()
    shown = issues if every else issues[:REPORT_ISSUES_SHOWN]
    lines = [f"opgate: {summary}", *(f"  {issue}" for issue in shown)]
    if len(shown) < len(issues):
        lines.append(f"  … and {len(issues) - len(shown)} more: --check lists every one")
    print("\n".join(map(_printable, lines)), file=stream, flush=True)


def _printable(line: str) -> str:
    """``line`` cut to ``REPORT_LINE_CHARACTERS`` with every unprintable character escaped
    (a document's text must not drive the terminal)."""
    cut = line[:REPORT_LINE_CHARACTERS] + ("…" if len(line) > REPORT_LINE_CHARACTERS else "")
    return "".join(map(visible, cut))


def _openapi_catalog(arguments: argparse.Namespace) -> tuple[Any, Any]:
    """The catalog of ``--openapi SPEC`` and its registry."""
    from pathlib import Path

    from ..openapi import DocumentError, build_catalog

    if arguments.target:
        raise UsageError("give either MODULE:ATTR or --openapi SPEC, not both")
    if not arguments.base_url:
        raise UsageError("--openapi needs --base-url URL (where the API's calls go)")
    headers: dict[str, str] = {}
    for item in arguments.header:
        name, separator, variable = item.partition("=")
        if not separator or not name or not variable:
            raise UsageError(f"--header needs NAME=ENVVAR, got {item!r}")
        if variable not in os.environ:
            raise UsageError(f"--header {name}: environment variable {variable} is not set")
        headers[name] = os.environ[variable]
    confirm = (DEFAULT_CONFIRM if arguments.confirm is None else arguments.confirm).strip()
    methods = [] if confirm.lower() == "none" else [m for m in confirm.split(",") if m.strip()]
    if not methods and confirm.lower() != "none":
        # an unset variable in a script must not turn the human gate off unnoticed
        raise UsageError("--confirm needs methods (such as POST,DELETE) or 'none'; it was blank")
    try:
        catalog = build_catalog(
            Path(arguments.openapi),
            base_url=arguments.base_url,
            headers=headers,
            confirm=[m.strip() for m in methods],
            output_schemas=arguments.output_schemas,
        )
    except OSError as exc:
        raise UsageError(f"cannot read {arguments.openapi}: {exc.strerror}") from None
    except (DocumentError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    return catalog, catalog.registry(ServePolicy())
