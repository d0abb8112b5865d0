"""From paths and methods to operation plans: parameters, body, schemas, texts.

``plan_operations(document, report, ...)`` returns one ``OperationPlan`` per path and
method that can be represented, in document order, and records everything else in
the ``Report``. A plan holds what the HTTP handler needs (where each argument goes
and how it is serialized) and what the registry needs (name, texts, schemas).

The input schema is an object with ``additionalProperties: false``:

* each path, query and header parameter is a property named after the parameter;
  when two parameters share a name (``id`` in the path and in the query), or a
  parameter is named ``body`` while there is a body, each of them is
  ``<location>_<name>`` instead (``path_id``, ``query_id``);
* the request body is the property ``body`` (a JSON body, or the fields of a
  form-encoded one);
* path parameters are always required; others as the document says;
* the components reached are under ``$defs``.

Unsupported and skipped, per operation (the report says which and why):

* cookie parameters: a required one skips the operation, an optional one is dropped;
* header parameters ``Accept``, ``Content-Type`` and ``Authorization`` are ignored, as
  OpenAPI specifies, and so are headers the HTTP client owns (``Host``,
  ``Content-Length``, ``Cookie``, ``Connection``, ...) and names that are not HTTP
  tokens (``X-A B``: such a header could never be sent);
* request bodies other than JSON and ``application/x-www-form-urlencoded``
  (multipart, binary, XML, text): a required one skips the operation, an optional
  one is dropped;
* parameter styles other than ``simple``/``label``/``matrix`` (path),
  ``form``/``spaceDelimited``/``pipeDelimited``/``deepObject`` (query), ``simple``
  (header);
* a path that does not start with ``/`` or holds a fragment (``#``, never sent);
* ``callbacks`` and ``webhooks`` (nothing to call), ``servers`` on a path or an
  operation (calls always go to the host's base URL);
* a ``$ref`` to another file or URL, a recursive ``$ref`` outside
  ``components.schemas``, a schema nested deeper than 64 levels, or a schema
  dialect other than OpenAPI 3.1's or 2020-12: the operation is skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._document import Document, RefError
from ._naming import Namer
from ._report import Report
from ._schemas import Converted, Direction, SchemaConverter, Unsupported, dumps

__all__ = [
    "HEADER_NAME",
    "METHODS",
    "BodyPlan",
    "OperationPlan",
    "ParamPlan",
    "plan_operations",
]

#: The HTTP methods an OpenAPI path item can hold, in the order operations are named.
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: Longest summary kept (it is shown on every search page that lists the operation).
MAX_SUMMARY = 200
#: Longest description kept (the whole definition must fit ``Limits.definition_bytes``).
MAX_DESCRIPTION = 4000
#: Longest parameter description kept.
MAX_PARAMETER_DESCRIPTION = 500
#: Header parameters OpenAPI says to ignore, and headers the HTTP client owns.
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "cookie",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
        "proxy-connection",
    }
)
_STYLES = {
    "path": ("simple", frozenset({"simple", "label", "matrix"})),
    "query": ("form", frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"})),
    "header": ("simple", frozenset({"simple"})),
}
#: An HTTP field name (RFC 9110 token): what a header parameter's name must be.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TEMPLATE = re.compile(r"{([^{}]*)}")
_SURROGATES = re.compile("[\ud800-\udfff]")
_FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True, slots=True)
class ParamPlan:
    """Where one argument goes: ``location`` ``path``/``query``/``header`` under ``name``.

    ``key`` is its property in the argument object; ``style``/``explode`` its OpenAPI
    serialization; ``as_json`` is true for a parameter described by JSON ``content``.
    """

    key: str
    name: str
    location: str
    style: str
    explode: bool
    as_json: bool
    required: bool


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """The request body: sent as JSON or form-encoded, with ``media_type`` as Content-Type."""

    key: str
    media_type: str
    form: bool
    required: bool


@dataclass(frozen=True, slots=True)
class OperationPlan:
    """Everything about one operation, before a handler is attached."""

    name: str
    method: str
    path: str
    group: str
    summary: str
    description: str
    params: tuple[ParamPlan, ...]
    body: BodyPlan | None
    input_schema: dict[str, Any]
    output_schema: Any
    components: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def template_names(self) -> tuple[str, ...]:
        return tuple(_TEMPLATE.findall(self.path))


def text(value: object, limit: int) -> str:
    """A document string made safe for opgate: no lone surrogates, at most ``limit`` chars."""
    if not isinstance(value, str):
        return ""
    if not value.isascii():
        value = _SURROGATES.sub("\ufffd", value)
    value = value.strip()
    return value if len(value) <= limit else value[: limit - 1] + "…"


class _Skip(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def plan_operations(
    document: Document,
    report: Report,
    *,
    output_schemas: bool = False,
    definition_bytes: int = 65536,
) -> list[OperationPlan]:
    """Plan every operation of ``document``; problems go to ``report`` (never raised)."""
    converter = SchemaConverter(document, budget=definition_bytes)
    namer = Namer()
    plans: list[OperationPlan] = []
    data = document.data
    if data.get("webhooks"):
        report.warn("", "", "webhooks", "webhooks are not operations to call; ignored")
    paths = data.get("paths") or {}
    for path, raw_item in paths.items():
        path = str(path)
        try:
            item = document.resolve(raw_item)
        except RefError as exc:
            report.skip("*", path, exc.kind, f"path item: {exc}")
            continue
        if not isinstance(item, Mapping):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, Mapping):
                continue
            verb = method.upper()
            try:
                plan = _plan(document, converter, namer, report, item, path, method, operation)
                plan = _with_output(document, converter, report, plan, operation, output_schemas)
                _check_size(plan, definition_bytes, converter)
            except _Skip as exc:
                report.skip(verb, path, exc.kind, str(exc))
                continue
            except Unsupported as exc:
                report.skip(verb, path, exc.kind, str(exc))
                continue
            except RefError as exc:
                report.skip(verb, path, exc.kind, str(exc))
                continue
            except RecursionError:
                report.skip(verb, path, "schema too deep", "a schema is nested too deeply")
                continue
            except Exception as exc:  # a hostile document must never crash the import
                report.skip(verb, path, "unreadable", f"unexpected {type(exc).__name__}")
                continue
            plans.append(plan)
            report.operations.append(plan.name)
    return plans


def _plan(
    document: Document,
    converter: SchemaConverter,
    namer: Namer,
    report: Report,
    item: Mapping[str, Any],
    path: str,
    method: str,
    operation: Mapping[str, Any],
) -> OperationPlan:
    verb = method.upper()
    notes: dict[tuple[str, str], None] = {}

    def warn(kind: str, reason: str) -> None:
        notes[(kind, reason)] = None

    if operation.get("callbacks"):
        warn("callbacks", "callbacks are not supported; ignored")
    if item.get("servers") or operation.get("servers"):
        warn("servers", "its own servers are ignored: calls go to the host's base URL")
    if not path.startswith("/"):
        raise _Skip("invalid path", f"path {path[:80]!r} does not start with '/'")
    if "#" in path:
        # never sent: the confirmation would show text the API never gets
        raise _Skip("invalid path", f"path {path[:80]!r} holds a fragment ('#')")
    parameters = _parameters(document, item, operation, warn)
    refs: set[str] = set()
    warnings: list[tuple[str, str]] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    plans: list[ParamPlan] = []
    declared_path = {p["name"] for p in parameters if p["in"] == "path"}
    template = _TEMPLATE.findall(path)
    for name in template:
        if name not in declared_path:
            raise _Skip("path parameter", f"path parameter {{{name}}} is not declared")
    body_plan, body_schema = _body(document, converter, operation, warn)
    names = Counter(p["name"] for p in parameters)
    if body_plan is not None:
        names["body"] += 1
    for parameter in parameters:
        name, location = parameter["name"], parameter["in"]
        if location == "path" and name not in template:
            warn("path parameter", f"path parameter {name!r} is not in the path; dropped")
            continue
        key = name if names[name] == 1 else f"{location}_{name}"
        while key in properties or (key == "body" and body_plan is not None):
            key = f"{location}_{key}"
        schema, as_json = _parameter_schema(converter, parameter, warn)
        refs |= schema.refs
        warnings.extend(schema.warnings)
        value = schema.schema
        if isinstance(value, dict):
            description = text(parameter.get("description"), MAX_PARAMETER_DESCRIPTION)
            if description and "description" not in value:
                value = {**value, "description": description}
            if parameter.get("deprecated") is True:
                value = {**value, "deprecated": True}
        properties[key] = value
        style_default, _ = _STYLES[location]
        style = parameter.get("style", style_default)
        explode = parameter.get("explode", style == "form")
        is_required = location == "path" or parameter.get("required") is True
        if is_required:
            required.append(key)
        plans.append(
            ParamPlan(key, name, location, str(style), explode is True, as_json, is_required)
        )
    if body_plan is not None:
        assert body_schema is not None
        refs |= body_schema.refs
        warnings.extend(body_schema.warnings)
        properties["body"] = body_schema.schema
        if body_plan.required:
            required.append("body")
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    reached: tuple[str, ...] = ()
    if refs:
        try:
            defs, more, reached = converter.defs(refs, "request")
        except Unsupported as exc:
            if exc.kind == "definition too large":  # warned as when ``_check_size`` finds it
                for kind, reason in warnings:
                    warn(kind, reason)
                for kind, reason in notes:
                    report.warn(verb, path, kind, reason)
            raise
        input_schema["$defs"] = defs
        warnings.extend(more)
    for kind, reason in warnings:
        warn(kind, reason)
    for kind, reason in notes:
        report.warn(verb, path, kind, reason)
    summary = text(operation.get("summary"), MAX_SUMMARY)
    description = text(operation.get("description"), MAX_DESCRIPTION)
    if not summary:
        first = description.split("\n", 1)[0] if description else ""
        summary = text(first, MAX_SUMMARY) or f"{verb} {path}"
    head = f"{verb} {text(path, 1000)}" + (" (deprecated)" if operation.get("deprecated") else "")
    tags = operation.get("tags")
    group = text(tags[0], MAX_SUMMARY) if isinstance(tags, list) and tags else ""
    return OperationPlan(
        name=namer.name(method, path, operation.get("operationId")),
        method=verb,
        path=path,
        group=group,
        summary=summary,
        description=f"{head}\n\n{description}" if description else head,
        params=tuple(plans),
        body=body_plan,
        input_schema=input_schema,
        output_schema=None,
        components={"request": reached},
    )


def _parameters(
    document: Document, item: Mapping[str, Any], operation: Mapping[str, Any], warn: Any
) -> list[dict[str, Any]]:
    """Path-item parameters overridden by operation parameters, checked and resolved."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for source in (item.get("parameters"), operation.get("parameters")):
        if not isinstance(source, list):
            continue
        for raw in source:
            parameter = document.resolve(raw)
            if not isinstance(parameter, Mapping):
                warn("invalid parameter", "dropped a parameter that is not an object")
                continue
            name, location = parameter.get("name"), parameter.get("in")
            if not isinstance(name, str) or not name or not isinstance(location, str):
                warn("invalid parameter", "dropped a parameter without a name or location")
                continue
            merged[(name, location)] = dict(parameter)
    result: list[dict[str, Any]] = []
    for (name, location), parameter in merged.items():
        shown = text(name, 60)
        if location == "cookie":
            if parameter.get("required") is True:
                raise _Skip("cookie parameter", f"required cookie parameter {shown!r}")
            warn("cookie parameter", f"optional cookie parameter {shown!r} dropped")
            continue
        if location not in _STYLES:
            warn("invalid parameter", f"parameter {shown!r} in {location[:20]!r} dropped")
            continue
        if location == "header":
            if HEADER_NAME.fullmatch(name) is None:
                warn("header parameter", f"header {shown!r} is not an HTTP token; dropped")
                continue
            lowered = name.lower()
            if lowered in IGNORED_HEADERS:
                continue  # OpenAPI: these header parameters are ignored
            if lowered in FORBIDDEN_HEADERS or lowered.startswith("proxy-"):
                warn("header parameter", f"header {shown!r} is set by the HTTP client; dropped")
                continue
        _, allowed = _STYLES[location]
        style = parameter.get("style", _STYLES[location][0])
        if style not in allowed:
            if location == "path" or parameter.get("required") is True:
                raise _Skip("parameter style", f"parameter {shown!r}: style {str(style)[:20]!r}")
            warn("parameter style", f"parameter {shown!r}: style {str(style)[:20]!r}; dropped")
            continue
        result.append(parameter)
    return result


def _parameter_schema(
    converter: SchemaConverter, parameter: Mapping[str, Any], warn: Any
) -> tuple[Converted, bool]:
    if "schema" in parameter:
        return converter.convert(parameter["schema"], "request"), False
    content = parameter.get("content")
    if isinstance(content, Mapping) and content:
        media_type, media = next(iter(content.items()))
        schema = media.get("schema", {}) if isinstance(media, Mapping) else {}
        return converter.convert(schema, "request"), _is_json(str(media_type))
    warn("invalid parameter", f"parameter {text(parameter['name'], 60)!r} has no schema")
    return Converted({}), False


def _is_json(media_type: str) -> bool:
    base = media_type.split(";", 1)[0].strip().lower()
    return base.endswith(("/json", "+json"))


def _body(
    document: Document, converter: SchemaConverter, operation: Mapping[str, Any], warn: Any
) -> tuple[BodyPlan | None, Converted | None]:
    raw = operation.get("requestBody")
    if raw is None:
        return None, None
    body = document.resolve(raw)
    if not isinstance(body, Mapping):
        warn("invalid request body", "dropped a request body that is not an object")
        return None, None
    content = body.get("content")
    required = body.get("required") is True
    if not isinstance(content, Mapping) or not content:
        warn("invalid request body", "dropped a request body without content")
        return None, None
    types = [str(t) for t in content]
    chosen = _choose(types)
    if chosen is None:
        shown = ", ".join(t[:60] for t in types[:4])
        if required:
            raise _Skip("request body media type", f"request body is {shown}")
        warn("request body media type", f"optional request body ({shown}) dropped")
        return None, None
    media = content[chosen]
    schema = media.get("schema", {}) if isinstance(media, Mapping) else {}
    converted = converter.convert(schema, "request")
    form = chosen.split(";", 1)[0].strip().lower() == _FORM
    if form:
        send_as = _FORM
    elif "*" in chosen:
        send_as = "application/json"
    else:
        send_as = chosen.split(";", 1)[0].strip()
    return BodyPlan("body", send_as, form, required), converted


def _choose(types: list[str]) -> str | None:
    """JSON first (exact, then any ``*/json`` or ``+json``, then a wildcard), then a form."""
    bases = [t.split(";", 1)[0].strip().lower() for t in types]
    for wanted in (
        lambda b: b == "application/json",
        lambda b: b.endswith(("/json", "+json")),
        lambda b: b in ("*/*", "application/*"),
        lambda b: b == _FORM,
    ):
        for original, base in zip(types, bases, strict=True):
            if wanted(base):
                return original
    return None


def _with_output(
    document: Document,
    converter: SchemaConverter,
    report: Report,
    plan: OperationPlan,
    operation: Mapping[str, Any],
    wanted: bool,
) -> OperationPlan:
    if not wanted:
        return plan
    responses = operation.get("responses")
    if not isinstance(responses, Mapping):
        return plan
    codes = sorted(str(c) for c in responses if str(c).startswith("2"))
    for code in codes:
        response = _resolved(document, responses[code])
        content = response.get("content") if isinstance(response, Mapping) else None
        if not isinstance(content, Mapping):
            return plan
        for media_type, media in content.items():
            if _is_json(str(media_type)) and isinstance(media, Mapping) and "schema" in media:
                try:
                    converted = converter.convert(media["schema"], "response")
                    schema = converted.schema
                    reached: tuple[str, ...] = ()
                    if converted.refs:
                        defs, _, reached = converter.defs(converted.refs, "response")
                        schema = (
                            {**schema, "$defs": defs}
                            if isinstance(schema, dict)
                            else {"allOf": [schema], "$defs": defs}
                        )
                except Unsupported as exc:
                    report.warn(plan.method, plan.path, exc.kind, f"no output schema: {exc}")
                    return plan
                components = {**plan.components, "response": reached}
                return replace(plan, output_schema=schema, components=components)
        return plan
    return plan


def _resolved(document: Document, value: Any) -> Any:
    try:
        return document.resolve(value)
    except RefError:
        return None


def _check_size(plan: OperationPlan, limit: int, converter: SchemaConverter) -> None:
    """Skip an operation that cannot fit ``Limits.definition_bytes`` (estimated).

    Component sizes are measured once per document; the rest of the schema is small.
    """
    size = sum(
        len(t.encode("utf-8")) for t in (plan.name, plan.group, plan.summary, plan.description)
    )
    sides: tuple[tuple[Any, Direction], ...] = (
        (plan.input_schema, "request"),
        (plan.output_schema, "response"),
    )
    for schema, direction in sides:
        if not isinstance(schema, dict):
            continue
        own = {k: v for k, v in schema.items() if k != "$defs"}
        size += len(dumps(own))
        defs = schema.get("$defs") or {}
        size += sum(len(name) + 4 for name in defs)
        for original in plan.components.get(direction, ()):
            size += converter.size(original, direction)
    if size > limit:
        raise _Skip(
            "definition too large",
            f"its definition is about {size} bytes, over Limits.definition_bytes ({limit})",
        )
