"""The schema compiler profile: JSON Schema documents in, compiled validators out.

opgate compiles every schema (operation input and output schemas, form schemas)
here, with jsonschema-rs underneath, and enforces the spec's profile
(spec 003, "Schema and numeric profile") before the compiler sees anything:

* Every schema goes through the strict parser in ``_json`` (``parse`` for JSON
  text, ``from_python`` for Python values), with the numeric work profile. Duplicate
  member names, NaN and infinities never reach the compiler; JSON text is never
  handed to jsonschema-rs (which would keep the last duplicate key).
* Dialects: Draft 2020-12 (the default, when ``$schema`` is absent) and explicit
  draft-07. Any other ``$schema`` fails, wherever it appears in a schema position,
  including embedded ``$id`` resources. One document has one dialect: a nested
  ``$schema`` naming the other dialect fails construction, because jsonschema-rs
  applies the root's rules (format assertion included) to every resource.
* Regular expressions (``pattern``, ``patternProperties``): compiled by the
  linear-time engine (``jsonschema_rs.RegexOptions``) unless the compiler was given
  a ``backtrack_limit``; a pattern needing lookaround or backreferences then fails
  construction, naming its pointer and the pattern.
* References: internal ``$ref``/``$dynamicRef`` targets and bundled ``$id``
  resources. Retrieval is always off (``offline=True``). Every reference in an
  active schema position is resolved at construction, including references in
  unused ``$defs``/``definitions`` and under a lone ``if``, which jsonschema-rs
  would otherwise only resolve if reached; a failure names the pointer of the
  ``$ref`` keyword. (Inert places — unknown keywords, and draft-07 ``$ref``
  siblings other than ``definitions`` — are resolved by the compiler only where a
  reference reaches them; such a failure cannot name the ``$ref`` pointer.)
* Roles: ``INPUT`` and ``FORM`` documents must be objects whose declared top-level
  ``type`` (if any) is ``"object"`` or ``["object"]``; ``OUTPUT`` documents may
  be any object or boolean schema.
* Formats: draft-07 asserts the formats jsonschema-rs knows, 2020-12 leaves them
  annotations; the ``FORM`` role asserts them in both. Unknown formats are ignored.
  Content keywords (``contentEncoding``, ``contentMediaType``, ``contentSchema``)
  are never asserted. ``default`` is an annotation and never inserted.
* Count constraints (``minLength`` … ``maxContains``) must be integers in
  ``0..MAX_COUNT``; an integral decimal such as ``2.0`` counts as an integer.

What "schema position" means: values of the dialect's subschema keywords
(``properties`` members, ``items``, ``allOf`` entries, ``$defs`` members, …).
Values of ``const``, ``enum``, ``examples``, ``default`` and the other data
keywords are never inspected. Objects under unknown keywords are data to the
validator but may become schemas through a JSON-pointer ``$ref``, so they are
checked for ``$schema`` and count constraints too (their references are resolved
by the compiler only if something refers to them).

Construction (``compile`` with a ``SchemaCache``) checks a schema fully but does not
keep its validator: a *plain* document (see ``_Walker``) is checked by the walk, the
regex check, the meta-schema and its ``#/$defs/Name`` references, which for that class
are every check the compiler makes; any other document, and any failure, takes the
full compile and its exact error. Validators are compiled on first use.

What is cached, and for how long: a ``SchemaCache`` lives for one registry build
(identical schemas, patterns known to compile) and is dropped with it; each
``SchemaCompiler`` (one per registry) keeps the validators of its schemas in a
bounded LRU for as long as its schemas live. Nothing is cached per process.

Instances are validated with ``CompiledSchema.first_violation`` (one validation
pass, stopping at the first error): the first violation comes back as a
``SchemaViolation`` (``_violations``, which also words it). Instances must already have
passed the numeric work profile (``_json.parse(..., profile=True)`` or
``_json.from_python(..., profile=True)``): every opgate entry point does that, and
this module does not check it again on the hot path.

jsonschema-rs errors are translated into ``ConfigurationError`` in this module
only (``SchemaCompiler._compile`` and ``_check_references``), quoting at most a
short prefix of anything they carry.
"""

from __future__ import annotations

import contextlib
import enum
import marshal
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, NoReturn

import jsonschema_rs
from jsonschema_rs import ValidationErrorKind as Kind

from . import _json
from ._failures import ConfigurationError, short_prefix
from ._json import JSONValue
from ._pattern_proof import all_compile, regex_options
from ._violations import POINTER_CHARS, SchemaViolation, describe, violation
from .schema import (
    COUNT_KEYWORDS,
    MAX_COUNT,
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
    TYPE_NAMES,
)

__all__ = [
    "COUNT_KEYWORDS",
    "DIALECT_2020_12",
    "DIALECT_DRAFT_07",
    "MAX_BACKTRACK_LIMIT",
    "MAX_CACHED_ERROR_DOCUMENTS",
    "MAX_CACHED_VALIDATORS",
    "MAX_COUNT",
    "CompiledSchema",
    "SchemaCache",
    "SchemaCompiler",
    "SchemaRole",
    "compile_schema",
]

#: Largest backtrack limit an opted-in backtracking regex engine accepts (fancy-regex's
#: own default): one pattern check then costs up to about a second on 64 KiB of text.
MAX_BACKTRACK_LIMIT: Final = 1_000_000

#: Compiled validators one ``SchemaCompiler`` keeps (least recently used dropped first).
#: A validator of a large schema holds far more memory than its canonical bytes, and a
#: catalog of 20,000 operations rarely has more than a few hundred in use at once; a
#: dropped one is recompiled on its schema's next use (about a millisecond for a
#: large AWS input schema).
MAX_CACHED_VALIDATORS: Final = 512

#: Parsed schema documents kept for describing violations (least recently used dropped
#: first): a failed check of a large schema would otherwise parse it on every failure.
MAX_CACHED_ERROR_DOCUMENTS: Final = 16

DIALECT_2020_12: Final = "2020-12"
DIALECT_DRAFT_07: Final = "draft-07"

# Accepted meta-schema URIs (a trailing "#" is stripped before the lookup).
_DIALECT_URIS: Final = {
    "https://json-schema.org/draft/2020-12/schema": DIALECT_2020_12,
    "http://json-schema.org/draft/2020-12/schema": DIALECT_2020_12,
    "http://json-schema.org/draft-07/schema": DIALECT_DRAFT_07,
    "https://json-schema.org/draft-07/schema": DIALECT_DRAFT_07,
}

_DRAFT_NUMBER: Final = {
    DIALECT_2020_12: jsonschema_rs.Draft202012,
    DIALECT_DRAFT_07: jsonschema_rs.Draft7,
}

# jsonschema-rs's own default base URI; the reference check registers the document there.
_ROOT_URI: Final = "json-schema:///"

# Keywords holding one subschema / an array of subschemas / a map of subschemas, per dialect.
_SINGLE: Final = {
    DIALECT_2020_12: SUBSCHEMA_KEYWORDS,
    DIALECT_DRAFT_07: frozenset(
        {
            "additionalProperties",
            "propertyNames",
            "contains",
            "not",
            "if",
            "then",
            "else",
            "additionalItems",
        }
    ),
}
_ARRAY: Final = {
    DIALECT_2020_12: SUBSCHEMA_ARRAY_KEYWORDS,
    DIALECT_DRAFT_07: frozenset({"allOf", "anyOf", "oneOf"}),
}
_MAP: Final = {
    DIALECT_2020_12: SUBSCHEMA_MAP_KEYWORDS,
    DIALECT_DRAFT_07: frozenset({"properties", "patternProperties", "definitions"}),
}
# Keywords whose values are instance data or plain strings: never walked.
_DATA: Final = frozenset(
    {
        "const",
        "enum",
        "examples",
        "default",
        "required",
        "type",
        "$vocabulary",
        "dependentRequired",
        "$comment",
        "title",
        "description",
    }
)


class SchemaRole(enum.Enum):
    """What a schema is for; decides the document rules and format assertion."""

    INPUT = "input"
    OUTPUT = "output"
    FORM = "form"


class _ContentAnnotation:
    """Stands in for jsonschema-rs's draft-07 content assertions: content is annotation only."""

    __slots__ = ()

    def __init__(self, parent_schema: Any, value: Any, schema_path: Any) -> None:
        pass

    def validate(self, instance: Any) -> None:
        return None


_CONTENT_KEYWORDS: Final[dict[str, type[Any]]] = {
    "contentEncoding": _ContentAnnotation,
    "contentMediaType": _ContentAnnotation,
}


class CompiledSchema:
    """A schema that passed the profile and compiled, safe to share between threads.

    ``dialect`` is ``"2020-12"`` or ``"draft-07"``; ``canonical`` the canonical bytes
    of the document. Only those bytes are kept: ``document()`` parses them into a
    fresh detached copy (numbers exact, in their canonical spelling, so a given
    ``1.0`` reads back as ``1``), and the compiled validator lives in its
    ``SchemaCompiler``'s bounded cache, recompiled from the bytes on first use after
    it was dropped. Every schema was fully checked once before its ``CompiledSchema``
    existed, so compiling it cannot fail, unless the build skipped the proof of a
    pattern wrongly remembered as compiling (``_proven_patterns``): then every compile
    fails, and ``prepare`` lets a caller find that out before it acts.
    """

    __slots__ = ("_compiled", "_compiler", "_role", "canonical", "dialect")

    dialect: str
    canonical: bytes

    def __init__(
        self, canonical: bytes, dialect: str, role: SchemaRole, compiler: SchemaCompiler
    ) -> None:
        self._compiler = compiler
        self._role = role
        self.canonical = canonical
        self.dialect = dialect
        self._compiled = False  # True once its validator compiled (then it always does)

    def prepare(self) -> None:
        """Compile the validator now if it never was; raises ``ConfigurationError`` if it
        cannot compile (a pattern wrongly remembered as proven). Cheap once it did."""
        if not self._compiled:
            self._compiler.validator(self._role, self.canonical)
            self._compiled = True

    def document(self) -> JSONValue:
        """A fresh, detached copy of the schema document."""
        return _json.parse(self.canonical, profile=True)

    def is_valid(self, instance: JSONValue) -> bool:
        """Whether ``instance`` (already within the numeric work profile) matches."""
        return self._compiler.validator(self._role, self.canonical).is_valid(instance)

    def first_violation(self, instance: JSONValue) -> SchemaViolation | None:
        """``None`` when ``instance`` matches, else its first violation.

        One validation pass that stops at the first error (``validate``); error
        details are built only on failure.
        """
        validator = self._compiler.validator(self._role, self.canonical)
        try:
            validator.validate(instance)
        except jsonschema_rs.ValidationError as error:
            return violation(error, self._compiler.error_document(self._role, self.canonical))
        return None

    def __repr__(self) -> str:
        return f"<CompiledSchema {self.dialect} {len(self.canonical)} bytes>"


class SchemaCache:
    """What the compiles of one ``Registry`` build share; one per build, then dropped.

    Whoever builds a registry makes one and passes it to every
    ``SchemaCompiler.compile`` of the build (all with one compiler). It remembers, for
    that build only: the ``CompiledSchema`` of every schema accepted so far, by its
    content as given (JSON text, or exact Python values compared value for value)
    and by its canonical bytes, so identical schemas share one; and the patterns
    that compiled with the compiler's regex engine (``proven``: those known to compile
    before the build began). A refused schema leaves no compiled schema behind.
    Nothing in it reaches another registry, and a built registry does not keep it (its
    ``CompiledSchema`` values keep only their compiler, for compiling validators on
    first use). Unbounded and not thread-safe: a build runs on one thread and ends.
    """

    __slots__ = ("compiler", "deferred", "patterns", "schemas", "sources")

    def __init__(self, proven: Iterable[str] = (), *, defer: bool = False) -> None:
        self.compiler: SchemaCompiler | None = None  # the one it serves, from its first use
        self.sources: dict[tuple[SchemaRole, bytes], CompiledSchema] = {}
        self.schemas: dict[tuple[SchemaRole, bytes], CompiledSchema] = {}
        self.patterns: set[str] = set(proven)
        #: With ``defer``, the new patterns, taken as compiling until the build proves
        #: them all at once (``_catalog``): a build that finds one does not compile is
        #: run again without ``defer``, so that it fails where it would have.
        self.deferred: list[str] | None = [] if defer else None


class SchemaCompiler:
    """Compiles schemas under the profile; one per ``Registry``, shared by its schemas.

    It keeps the validators of the schemas it compiled in a bounded LRU, safe to
    use from several threads: at most ``MAX_CACHED_VALIDATORS`` (a validator dropped
    from it is compiled again from the canonical bytes on its schema's next use),
    and the parsed documents of the ``MAX_CACHED_ERROR_DOCUMENTS`` schemas whose
    checks failed most recently, to describe violations.

    ``resources`` is for the conformance tests only: ``(uri, document)`` pairs made
    available to references as if bundled into every schema. Nothing is ever
    retrieved from the network or the file system, with or without it.

    ``backtrack_limit``: ``None`` (the default) compiles every pattern with the
    linear-time regex engine, and a pattern that needs lookaround or backreferences
    fails construction. An ``int`` in ``1..MAX_BACKTRACK_LIMIT`` opts in to the
    backtracking engine (fancy-regex), each match attempt bounded by that many
    backtracking steps; a pattern check that hits the bound is a ``pattern``
    violation. Raises ``TypeError`` for a non-int, ``ConfigurationError`` out of range.
    """

    def __init__(
        self,
        *,
        resources: Iterable[tuple[str, object]] = (),
        backtrack_limit: int | None = None,
    ) -> None:
        self._pattern_options = _pattern_options(backtrack_limit)
        self._resources: tuple[tuple[str, JSONValue], ...] = tuple(
            (uri, _json.from_python(document)) for uri, document in resources
        )
        self._resource_registries: dict[str, jsonschema_rs.Registry] = {}
        self._validators: OrderedDict[tuple[SchemaRole, bytes], jsonschema_rs.Validator] = (
            OrderedDict()
        )
        self._documents: OrderedDict[tuple[SchemaRole, bytes], JSONValue] = OrderedDict()
        self._lock = threading.Lock()

    def compile(
        self,
        schema: object,
        *,
        role: SchemaRole,
        where: str,
        cache: SchemaCache | None = None,
    ) -> CompiledSchema:
        """Parse, check and compile ``schema`` (JSON text or Python JSON values).

        Raises ``ConfigurationError`` whose message starts with ``where`` and names the
        JSON pointer and the rule that failed.

        With a ``cache`` (one per ``Registry`` construction) a batch is cheap: a schema
        given again (the same JSON text, or Python values with identical content) or
        one with the same canonical bytes returns the ``CompiledSchema`` already
        made, and the schema is checked without keeping a compiled validator (it is
        compiled on first use, see ``_check``). Without one (form schemas at request
        time), the validator is compiled now and kept.
        """
        if not isinstance(role, SchemaRole):
            raise TypeError("role must be a SchemaRole")
        if cache is None:
            document = _load(schema, where)
            canonical = _json.parsed_canonical_bytes(document)
            validator, dialect = self._compile(document, role, where, set())
            with self._lock:
                self._keep((role, canonical), validator)
            return CompiledSchema(canonical, dialect, role, self)
        if cache.compiler is None:
            cache.compiler = self
        elif cache.compiler is not self:
            raise ValueError("a SchemaCache serves the one SchemaCompiler it was first used with")
        source = _source_key(schema)
        if source is not None:
            found = cache.sources.get((role, source))
            if found is not None:
                return found
        plain = (
            None
            if source is None
            else self._plain_canonical(schema, role, cache.patterns, cache.deferred)
        )
        if plain is None:
            document = _load(schema, where)
            canonical = _json.parsed_canonical_bytes(document)
        else:
            canonical = plain
        key = (role, canonical)
        compiled = cache.schemas.get(key)
        if compiled is None:
            if plain is None:
                dialect = self._check(document, role, where, cache.patterns, cache.deferred)
            else:
                dialect = DIALECT_2020_12
            # Identical schemas (equal canonical bytes) share one immutable CompiledSchema,
            # so one bytes object serves every operation that declares them.
            compiled = cache.schemas[key] = CompiledSchema(canonical, dialect, role, self)
        if source is not None:
            cache.sources[(role, source)] = compiled
        return compiled

    def validator(self, role: SchemaRole, canonical: bytes) -> jsonschema_rs.Validator:
        """The compiled validator of a schema this compiler compiled (cached, LRU)."""
        key = (role, canonical)
        with self._lock:
            validator = self._validators.get(key)
            if validator is not None:
                self._validators.move_to_end(key)
                return validator
        # Checked once already: compiling the same bytes again cannot fail, so the checks
        # that only name failures (patterns, references) are not run again.
        document = _json.parse(canonical, profile=True)
        dialect = _root_dialect(document, "schema")
        walker = _Walker(document, dialect, "schema", exact=False)
        walker.walk()
        validator = self._build(document, walker, dialect, role, "schema", references=False)
        with self._lock:
            self._keep(key, validator)
        return validator

    def error_document(self, role: SchemaRole, canonical: bytes) -> JSONValue:
        """The parsed document a violation is described from (read only; small LRU).

        Parsing a large schema takes milliseconds, so the few most recently failed
        ones stay parsed: repeated failures against one schema parse it once.
        """
        key = (role, canonical)
        with self._lock:
            document = self._documents.get(key)
            if document is not None:
                self._documents.move_to_end(key)
                return document
        document = _json.parse(canonical, profile=True)
        with self._lock:
            self._documents[key] = document
            while len(self._documents) > MAX_CACHED_ERROR_DOCUMENTS:
                self._documents.popitem(last=False)
        return document

    def _keep(self, key: tuple[SchemaRole, bytes], validator: jsonschema_rs.Validator) -> None:
        # Called with the lock held.
        self._validators[key] = validator
        self._validators.move_to_end(key)
        while len(self._validators) > MAX_CACHED_VALIDATORS:
            self._validators.popitem(last=False)

    def _plain_canonical(
        self, schema: object, role: SchemaRole, known: set[str], deferred: list[str] | None
    ) -> bytes | None:
        """The canonical bytes of a plain schema given as exact Python data that passes
        every check, without copying it; ``None`` sends it down the general path.

        The exact walk (``_Walker``) makes sure ``_load`` would return an equal copy (so
        the caller's value stands in for it) and that the document is plain; then the
        checks are those ``_check`` makes of a plain document: role, patterns,
        meta-schema. Any refusal returns ``None``: the general path raises the error.
        ``known`` holds the patterns already seen to compile; new ones go to
        ``deferred`` instead of the engine when it is a list (``SchemaCache``).
        """
        if type(schema) is not dict or self._resources:
            return None
        walker = _exact_walk(schema)
        if walker is None:
            return None
        try:
            _check_role(schema, role, "schema")
        except ConfigurationError:
            return None
        fresh = [pattern for pattern in dict.fromkeys(walker.patterns) if pattern not in known]
        if fresh and not self._prove(fresh, known, deferred):
            return None
        if not walker.proved and not _meta_valid(schema):
            return None
        return _json.parsed_canonical_bytes(schema)

    def _walk(
        self,
        document: JSONValue,
        role: SchemaRole,
        where: str,
        known: set[str],
        deferred: list[str] | None = None,
    ) -> tuple[str, _Walker]:
        """The profile rules and regex check: what both the full compile and ``_check`` run."""
        _check_role(document, role, where)
        dialect = _root_dialect(document, where)
        walker = _Walker(document, dialect, where, exact=False)
        walker.plain = walker.plain and (
            dialect == DIALECT_2020_12
            and not self._resources
            and isinstance(document, dict)
            and document.get("$schema", _PLAIN_DIALECT) in _PLAIN_DIALECT_URIS
        )
        walker.walk()
        # Unused $defs too (jsonschema-rs skips them). The patterns not seen yet are
        # compiled together first (one validator: one call's overhead); only if that
        # fails is each compiled alone, in document order, to name the first that fails.
        fresh = [p for p in dict.fromkeys(walker.patterns) if p not in known]
        if (len(fresh) > 1 or deferred is not None) and self._prove(fresh, known, deferred):
            return dialect, walker
        for (node, key), pattern in zip(walker.sites, walker.patterns, strict=True):
            if not self._compiles(pattern, known):
                pointer = walker.pointer(node, key)
                raise ConfigurationError(_regex_message(pattern, pointer, where))
        return dialect, walker

    def _check(
        self,
        document: JSONValue,
        role: SchemaRole,
        where: str,
        known: set[str],
        deferred: list[str] | None = None,
    ) -> str:
        """Check ``document`` fully, as ``_compile`` does, without keeping a validator.

        A *plain* document (see ``_Walker``) that passes the walk, whose patterns all
        compiled (``_walk``) and which the dialect's meta-schema accepts
        (``jsonschema_rs.meta.is_valid``) is not compiled here: for such a document
        those are every check the compiler makes (its other errors come from
        references, which a plain document's ``#/$defs/Name`` references cannot
        fail, and from schemas reached only through references into unchecked
        places, which a plain document has none of). Anything else — and a plain
        document the meta-schema rejects — gets the full compile, so a failure
        raises exactly the error ``_compile`` raises. Returns the dialect.
        """
        dialect, walker = self._walk(document, role, where, known, deferred)
        if walker.plain and _meta_valid(document):
            return dialect
        self._build(document, walker, dialect, role, where)
        return dialect

    def _compile(
        self, document: JSONValue, role: SchemaRole, where: str, known: set[str]
    ) -> tuple[jsonschema_rs.Validator, str]:
        dialect, walker = self._walk(document, role, where, known)
        return self._build(document, walker, dialect, role, where), dialect

    def _build(
        self,
        document: JSONValue,
        walker: _Walker,
        dialect: str,
        role: SchemaRole,
        where: str,
        *,
        references: bool = True,
    ) -> jsonschema_rs.Validator:
        if references and walker.references:
            _check_references(walker, self._resources)
        validator_class = (
            jsonschema_rs.Draft7Validator
            if dialect == DIALECT_DRAFT_07
            else jsonschema_rs.Draft202012Validator
        )
        asserts_formats = role is SchemaRole.FORM or dialect == DIALECT_DRAFT_07
        try:
            return validator_class(
                document,  # type: ignore[arg-type]  # bool or dict, checked above
                validate_formats=asserts_formats,
                ignore_unknown_formats=True,
                keywords=_CONTENT_KEYWORDS if walker.has_content else None,
                registry=self._resource_registry(dialect),
                offline=True,
                pattern_options=self._pattern_options,
            )
        except Exception as exc:  # the one place jsonschema-rs errors are translated
            raise ConfigurationError(_compiler_message(exc, dialect, where)) from exc

    def _resource_registry(self, dialect: str) -> jsonschema_rs.Registry | None:
        """The conformance tests' bundled resources, registered for ``dialect`` once."""
        if not self._resources:
            return None
        with self._lock:
            registry = self._resource_registries.get(dialect)
        if registry is None:
            registry = jsonschema_rs.Registry(
                self._resources, draft=_DRAFT_NUMBER[dialect], retriever=_no_retrieval
            )
            with self._lock:
                self._resource_registries[dialect] = registry
        return registry

    def _prove(self, fresh: list[str], known: set[str], deferred: list[str] | None) -> bool:
        """Whether the new patterns ``fresh`` compile, or are taken to until ``deferred``
        (a list) is proven."""
        if deferred is None:
            return self._all_compile(fresh, known)
        deferred += fresh
        known.update(fresh)
        return True

    def _all_compile(self, patterns: list[str], known: set[str]) -> bool:
        """Whether every pattern compiles (one validator holding them all; per-regex limits).

        Adds them to ``known`` if they do.
        """
        if not all_compile(patterns, self._pattern_options):
            return False
        known.update(patterns)
        return True

    def _compiles(self, pattern: str, known: set[str]) -> bool:
        """Whether this compiler's regex engine compiles ``pattern`` (added to ``known``)."""
        if pattern in known:
            return True
        try:
            jsonschema_rs.Draft202012Validator(
                {"pattern": pattern}, pattern_options=self._pattern_options
            )
        except Exception:
            return False
        known.add(pattern)
        return True


def _pattern_options(
    backtrack_limit: int | None,
) -> jsonschema_rs.RegexOptions | jsonschema_rs.FancyRegexOptions:
    if backtrack_limit is None:
        return regex_options(None)
    if not isinstance(backtrack_limit, int) or isinstance(backtrack_limit, bool):
        raise TypeError("regex_backtrack_limit must be an int or None")
    if not 1 <= backtrack_limit <= MAX_BACKTRACK_LIMIT:
        raise ConfigurationError(
            f"regex_backtrack_limit must be in 1..{MAX_BACKTRACK_LIMIT:,} "
            "(or None for the linear-time engine only)"
        )
    return regex_options(backtrack_limit)


def _meta_valid(document: JSONValue) -> bool:
    """Whether the meta-schema of the document's dialect accepts it (``False`` on doubt)."""
    try:
        return bool(jsonschema_rs.meta.is_valid(document))  # type: ignore[arg-type]
    except Exception:
        return False


def _source_key(schema: object) -> bytes | None:
    """An exact content key for ``schema`` as given, or ``None`` when it has none.

    ``marshal`` serializes only the exact built-in types (``dict``, ``list``,
    ``str``, ``int``, ``float``, …; subclasses, mappings and other objects raise),
    value for value, so equal keys mean equal schemas — it runs in C, several times
    faster than the parse and canonical text it lets a repeated schema skip.
    """
    try:
        return marshal.dumps(schema)  # type: ignore[arg-type]  # raises for the rest
    except (ValueError, RecursionError):
        return None


def _regex_message(pattern: str, pointer: str, where: str) -> str:
    """Why the linear-time engine refused ``pattern``: it needs backtracking, or is invalid."""
    try:
        jsonschema_rs.Draft202012Validator(
            {"pattern": pattern}, pattern_options=jsonschema_rs.FancyRegexOptions()
        )
    except Exception:
        return _located(where, pointer, f"pattern {short_prefix(pattern)} is not a valid regex")
    return _located(
        where,
        pointer,
        f"pattern {short_prefix(pattern)} needs lookaround or backreferences, which the "
        "linear-time regex engine does not support; rewrite it, or build the Registry "
        "with regex_backtrack_limit=N to opt in to the backtracking engine",
    )


def compile_schema(schema: object, *, role: SchemaRole, where: str = "schema") -> CompiledSchema:
    """Check ``schema`` fully now, with a ``SchemaCompiler`` and ``SchemaCache`` of its own.

    For schemas outside any registry (form schemas, a decorated function's schemas):
    it raises what ``SchemaCompiler.compile`` raises, the result shares nothing with
    other schemas, and its validator is compiled on first use and kept.
    """
    return SchemaCompiler().compile(schema, role=role, where=where, cache=SchemaCache())


# --- loading and document rules ------------------------------------------------------


def _located(where: str, pointer: str, reason: str) -> str:
    return f"{where} at {pointer}: {reason}" if pointer else f"{where}: {reason}"


def _load(schema: object, where: str) -> JSONValue:
    try:
        if isinstance(schema, str | bytes | bytearray):
            document = _json.parse(schema, profile=True)
        else:
            document = _json.from_python(schema, profile=True)
    except _json.JSONError as exc:
        shown = exc.pointer or ""
        if len(shown) > POINTER_CHARS:  # member names in a pointer are input: bound them
            shown = shown[:POINTER_CHARS] + "…"
        raise ConfigurationError(_located(where, shown, exc.reason)) from None
    if not isinstance(document, dict | bool):
        raise ConfigurationError(f"{where}: a schema must be a JSON object or boolean")
    return document


def _check_role(document: JSONValue, role: SchemaRole, where: str) -> None:
    if role is SchemaRole.OUTPUT:
        return
    named = "a form schema" if role is SchemaRole.FORM else "an input schema"
    if not isinstance(document, dict):
        raise ConfigurationError(f"{where}: {named} must be a JSON object, not true or false")
    if "type" in document and document["type"] not in ("object", ["object"]):
        raise ConfigurationError(
            _located(where, "/type", f'{named}\'s top-level type must be "object"')
        )


def _dialect_of(value: JSONValue) -> str | None:
    if not isinstance(value, str):
        return None
    return _DIALECT_URIS.get(value.removesuffix("#"))


def _unsupported_dialect(value: JSONValue) -> str:
    shown = short_prefix(value, 80) if isinstance(value, str) else "a non-string value"
    return (
        f"unsupported $schema {shown}: only Draft 2020-12 "
        "(https://json-schema.org/draft/2020-12/schema) and draft-07 "
        "(http://json-schema.org/draft-07/schema#) are accepted"
    )


def _root_dialect(document: JSONValue, where: str) -> str:
    if not isinstance(document, dict) or "$schema" not in document:
        return DIALECT_2020_12
    dialect = _dialect_of(document["$schema"])
    if dialect is None:
        raise ConfigurationError(
            _located(where, "/$schema", _unsupported_dialect(document["$schema"]))
        )
    return dialect


def _count(value: JSONValue) -> int | None:
    """The count a count-constraint value stands for, or ``None`` if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        if not (0 <= value <= MAX_COUNT) or value != value.to_integral_value():
            return None
        return int(value)
    if isinstance(value, int) and 0 <= value <= MAX_COUNT:
        return value
    return None


@dataclass(frozen=True, slots=True)
class _Reference:
    """A ``$ref``/``$dynamicRef`` in an active schema position."""

    node: dict[str, JSONValue]  # the schema object holding it
    keyword: str
    reference: str
    scope: tuple[str, ...]  # the $id values from the root down to the referring schema


# What a plain document may hold (see ``_Walker``): the 2020-12 keywords other than
# $id, $anchor, $dynamicAnchor, $dynamicRef and $vocabulary.
_PLAIN_KEYWORDS: Final = frozenset(
    {
        "$schema",
        "$ref",
        "$defs",
        "$comment",
        "type",
        "enum",
        "const",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "required",
        "dependentRequired",
        "dependentSchemas",
        "items",
        "prefixItems",
        "contains",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "uniqueItems",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        *COUNT_KEYWORDS,
    }
)
_PLAIN_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
_PLAIN_DIALECT_URIS: Final = frozenset({_PLAIN_DIALECT, _PLAIN_DIALECT + "#"})
_PLAIN_DEFS_REF: Final = "#/$defs/"
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]+")
_PLAIN_DEFS_REF_LENGTH: Final = len(_PLAIN_DEFS_REF)
_MAX_DEPTH: Final = _json.MAX_DEPTH
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class _NotPlain(Exception):
    """An exact walk met something outside the plain class (or not certainly JSON)."""


# The 2020-12 meta-schema's rule for each keyword of a plain document that is not
# a schema, an array or map of schemas, or a count (those are walked and checked
# as such): what an exact walk may take as proof that the meta-schema accepts it.
_META_STRING_KEYS: Final = frozenset(
    {
        "$comment",
        "$ref",
        "$schema",
        "contentEncoding",
        "contentMediaType",
        "description",
        "title",
        "format",
        "pattern",
        "const",
        "default",
    }
)
_META_TYPES: Final = TYPE_NAMES
_META_ANY_VALUE_KEYS: Final = frozenset({"const", "default"})
_META_ANY_ARRAY_KEYS: Final = frozenset({"enum", "examples", "const", "default"})
_META_BOOLEAN_KEYS: Final = frozenset({"deprecated", "readOnly", "writeOnly", "uniqueItems"})
_META_NUMBER_KEYS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
#: The keywords of a plain document whose value may be a string (all but schemas,
#: arrays and maps of schemas, and counts).
_PLAIN_STRING_KEYS: Final = (
    _PLAIN_KEYWORDS
    - _SINGLE[DIALECT_2020_12]
    - _ARRAY[DIALECT_2020_12]
    - _MAP[DIALECT_2020_12]
    - frozenset(COUNT_KEYWORDS)
)
_COUNT_RULE: Final = f"count constraint must be an integer in 0..{MAX_COUNT}"


class _Walker:
    """One pass over a schema document: the profile's rules, and what the checks after
    it need (patterns, references, content keywords, whether it is plain).

    The walk follows the dialect's schema positions (``_SINGLE``, ``_ARRAY``,
    ``_MAP``) and applies the same rules everywhere: a nested ``$schema`` must name
    the document's dialect, and count constraints must be integers in
    ``0..MAX_COUNT``. ``active`` is false where the validator would not treat a
    schema as one unless a reference points there (unknown keywords, draft-07
    ``$ref`` siblings): such places get the rules, but their ``$id``/``$ref`` are
    left to the compiler. A document is *plain* when it is 2020-12, uses only known
    keywords (no ``$id``, anchors or dynamic references), has no nested ``$schema``
    and every ``$ref`` reads ``#/$defs/Name`` naming a member of the root ``$defs``:
    for it ``_check`` may decide without a full compile.

    Two modes, chosen by ``exact``:

    * general: ``document`` is a parsed copy (``_load``) in either dialect; a broken
      rule raises ``ConfigurationError`` naming the pointer, and ``plain`` records
      whether the document is plain.
    * exact: ``document`` is the caller's own Python value (not copied), which the
      walk accepts only if it is plain and ``_load`` would return an equal copy of it
      (exact ``dict``/``list``/``str``/``int``/``bool``/``None``, ``str`` member
      names, no lone surrogate, integers within the profile, nesting within
      ``MAX_DEPTH``): anything else, a broken rule included, raises ``_NotPlain``, and
      the general walk of a parsed copy decides and names the error. ``proved``
      stays true while every value also meets the 2020-12 meta-schema's rule for its
      keyword (``_META_*``), for the value shapes real schemas use; ``False`` means
      only "not proved" (``_meta_valid`` decides). Formats are annotations there, so
      a ``$ref``, ``pattern`` or ``format`` string is proved as any string.

    The walk copies nothing: a parsed document already holds counts as ``int``
    (``_json`` hands out integral numbers as ``int``), so it is what the compiler
    sees. It keeps no pointers either: a failure locates its schema object in the
    document (each object of a parsed copy is distinct).
    """

    __slots__ = (
        "defs",
        "dialect",
        "document",
        "draft_07",
        "exact",
        "has_content",
        "patterns",
        "plain",
        "proved",
        "references",
        "sites",
        "tables",
        "where",
    )

    def __init__(self, document: JSONValue, dialect: str, where: str, *, exact: bool) -> None:
        self.document = document
        self.dialect = dialect
        self.draft_07 = dialect == DIALECT_DRAFT_07
        self.where = where
        self.exact = exact
        # The dialect's keywords holding one subschema, an array of them, a map of them.
        self.tables = (_SINGLE[dialect], _ARRAY[dialect], _MAP[dialect])
        self.patterns: list[str] = []  # every pattern, in document order
        self.sites: list[tuple[object, str]] = []  # (object, key) of each; general only
        self.references: list[_Reference] = []  # general only
        self.has_content = False
        self.plain = True
        self.proved = exact
        defs = document.get("$defs", {}) if isinstance(document, dict) else {}
        if not isinstance(defs, dict):
            # Such a document fails the meta-schema, so it gets the full compile either way.
            self.plain = False
            defs = {}
        self.defs: dict[str, JSONValue] = defs

    def walk(self) -> None:
        if isinstance(self.document, dict):
            self.schema(self.document, 0, (), True)

    def schema(
        self, node: dict[str, Any], depth: int, scope: tuple[str, ...], active: bool
    ) -> None:
        """Check one schema object and walk what it holds (``depth``: its JSON nesting)."""
        exact = self.exact
        if exact:
            if depth >= _MAX_DEPTH or not _PLAIN_KEYWORDS.issuperset(node):
                raise _NotPlain
            if depth and "$schema" in node:
                raise _NotPlain
            child_active = True
        else:
            scope, child_active = self._enter(node, scope, active)
        single, array, maps = self.tables
        for key, value in node.items():
            kind = type(value)
            if kind is str:
                if key == "pattern":
                    self.patterns.append(value)
                    if not exact:
                        self.sites.append((node, key))
                elif key == "$ref" and not (
                    # #/$defs/Name: a simple name (nothing to unescape) of a root $defs member
                    value.startswith(_PLAIN_DEFS_REF)
                    and value[_PLAIN_DEFS_REF_LENGTH:] in self.defs
                    and _PLAIN_NAME.fullmatch(value, _PLAIN_DEFS_REF_LENGTH)
                ):
                    if exact:
                        raise _NotPlain
                    self.plain = False
                if exact:
                    if key not in _PLAIN_STRING_KEYS:
                        raise _NotPlain  # a string where a schema, array, map or count belongs
                    if not value.isascii() and _SURROGATE.search(value):
                        raise _NotPlain
                    if key not in _META_STRING_KEYS and (key != "type" or value not in _META_TYPES):
                        self.proved = False
                    continue
                if key in COUNT_KEYWORDS:
                    self._refuse(node, key, _COUNT_RULE)
                continue
            if key in COUNT_KEYWORDS:
                exact_count = kind is int and 0 <= value <= MAX_COUNT
                if not exact_count and (exact or _count(value) is None):
                    self._refuse(node, key, _COUNT_RULE)
            elif key in single:
                if kind is dict:
                    self.schema(value, depth + 1, scope, child_active)
                elif kind is list:
                    if exact:
                        raise _NotPlain
                    self.data(value, depth + 1, scope)
                elif exact and kind is not bool:
                    raise _NotPlain
            elif key in array:
                if kind is list:
                    if exact:
                        if depth + 1 >= _MAX_DEPTH:
                            raise _NotPlain
                        if not value:  # the meta-schema's schemaArray has minItems 1
                            self.proved = False
                    self.each(value, depth + 1, scope, child_active)
                elif exact:
                    raise _NotPlain
                elif kind is dict:
                    self.data(value, depth + 1, scope)
            elif key in maps:
                if kind is dict:
                    if key == "patternProperties":
                        self.patterns.extend(value)
                        if not exact:
                            for name in value:  # a loop: a generator would make value a cell
                                self.sites.append((value, name))
                    # draft-07 definitions stay reachable by pointer even beside a $ref.
                    member_active = active if key == "definitions" else child_active
                    self.members(value, depth + 1, scope, member_active)
                elif exact:
                    raise _NotPlain
                elif kind is list:
                    self.data(value, depth + 1, scope)
            elif exact:  # a data keyword's value (strings are checked above)
                if key == "pattern" or key == "$ref":
                    raise _NotPlain  # not a string
                if kind is list and all(
                    type(item) is str and (item.isascii() or not _SURROGATE.search(item))
                    for item in value
                ):
                    if depth + 1 >= _MAX_DEPTH:
                        raise _NotPlain
                    if not (
                        key in _META_ANY_ARRAY_KEYS
                        or (key == "required" and len(set(value)) == len(value))
                        or (
                            key == "type"
                            and value
                            and _META_TYPES.issuperset(value)
                            and len(set(value)) == len(value)
                        )
                    ):
                        self.proved = False
                elif not _json.is_plain(value, depth + 1):
                    raise _NotPlain
                elif not (
                    key in _META_ANY_VALUE_KEYS
                    or (kind is list and key in _META_ANY_ARRAY_KEYS)
                    or (kind is bool and key in _META_BOOLEAN_KEYS)
                    or (kind is int and key in _META_NUMBER_KEYS)
                    or (kind is int and key == "multipleOf" and value > 0)
                ):
                    self.proved = False
            elif (kind is dict or kind is list) and key not in _DATA and key != "$schema":
                self._other(key, value, depth, scope, child_active)

    def _other(
        self, key: str, value: Any, depth: int, scope: tuple[str, ...], active: bool
    ) -> None:
        """A general walk's object or array under a keyword the dialect's tables do not
        name: draft-07's ``items`` and ``dependencies``, or data."""
        if self.draft_07 and key == "items":
            if isinstance(value, dict):
                self.schema(value, depth + 1, scope, active)
            else:
                self.each(value, depth + 1, scope, active)
        elif self.draft_07 and key == "dependencies" and isinstance(value, dict):
            self.members(value, depth + 1, scope, active)
        else:
            self.data(value, depth + 1, scope)

    def each(self, items: list[Any], depth: int, scope: tuple[str, ...], active: bool) -> None:
        """The entries of an array of subschemas."""
        for item in items:
            kind = type(item)
            if kind is dict:
                self.schema(item, depth + 1, scope, active)
            elif self.exact:
                if kind is not bool:
                    raise _NotPlain
            elif kind is list:
                self.data(item, depth + 1, scope)

    def members(
        self, members: dict[Any, Any], depth: int, scope: tuple[str, ...], active: bool
    ) -> None:
        """The member values of a map of subschemas (true/false/arrays hold nothing)."""
        exact = self.exact
        if exact and depth >= _MAX_DEPTH:
            raise _NotPlain
        for name, member in members.items():
            if exact and (
                type(name) is not str or (not name.isascii() and _SURROGATE.search(name))
            ):
                raise _NotPlain
            if type(member) is dict:
                self.schema(member, depth + 1, scope, active)
            elif exact and type(member) is not bool:
                raise _NotPlain

    def data(self, value: dict[str, Any] | list[Any], depth: int, scope: tuple[str, ...]) -> None:
        """A value that is no schema unless a JSON-pointer reference makes it one."""
        self.plain = False
        if isinstance(value, dict):
            self.schema(value, depth, scope, False)
        else:
            self.each(value, depth, scope, False)

    def _enter(
        self, node: dict[str, Any], scope: tuple[str, ...], active: bool
    ) -> tuple[tuple[str, ...], bool]:
        """A general walk's rules for one object: its dialect, identifier and references.

        Returns the scope of what it holds and whether that is active.
        """
        if "$schema" in node:
            declared = _dialect_of(node["$schema"])
            if declared is None:
                self._refuse(node, "$schema", _unsupported_dialect(node["$schema"]))
            if declared != self.dialect:
                self._refuse(
                    node,
                    "$schema",
                    f"the document mixes dialects: this schema declares {declared} inside "
                    f"a {self.dialect} document; jsonschema-rs applies one dialect to the "
                    "whole document, so write every resource in one dialect",
                )
        # In draft-07 a $ref makes every sibling keyword (including $id) inert.
        ref_only = self.draft_07 and "$ref" in node
        if active:
            identifier = node.get("$id")
            if isinstance(identifier, str) and not ref_only:
                scope = (*scope, identifier)
            for keyword in ("$ref",) if self.draft_07 else ("$ref", "$dynamicRef"):
                reference = node.get(keyword)
                if isinstance(reference, str):
                    self.references.append(_Reference(node, keyword, reference, scope))
        else:
            self.plain = False
        if "contentEncoding" in node or "contentMediaType" in node:
            self.has_content = True
        if self.plain and not _PLAIN_KEYWORDS.issuperset(node):
            self.plain = False
        return scope, active and not ref_only

    def _refuse(self, node: object, key: str, reason: str) -> NoReturn:
        if self.exact:
            raise _NotPlain
        raise ConfigurationError(_located(self.where, self.pointer(node, key), reason))

    def pointer(self, node: object, key: str) -> str:
        """The pointer of ``key`` in ``node``, an object or array of the document."""
        return _json.pointer([*_path_to(self.document, node), key])


def _path_to(document: JSONValue, target: object) -> list[str | int]:
    """Where ``target`` (an object or array, by identity) sits in ``document``."""
    stack: list[tuple[JSONValue, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if value is target:
            return list(path)
        if isinstance(value, dict):
            stack.extend((item, (*path, key)) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
    raise AssertionError("the object is not in the document")  # pragma: no cover


def _exact_walk(schema: dict[Any, Any]) -> _Walker | None:
    """The exact walk of a 2020-12 document given as Python data, if it is certainly plain."""
    declared = schema.get("$schema", _PLAIN_DIALECT)
    if type(schema.get("$defs", {})) is not dict or type(declared) is not str:
        return None
    if declared not in _PLAIN_DIALECT_URIS:
        return None
    walker = _Walker(schema, DIALECT_2020_12, "schema", exact=True)
    try:
        walker.walk()
    except _NotPlain:
        return None
    return walker


# --- references ----------------------------------------------------------------------


def _no_retrieval(uri: str) -> JSONValue:
    raise ConfigurationError("remote and file retrieval are disabled")


def _without_fragment(uri: str) -> str:
    return uri.partition("#")[0]


def _check_references(walker: _Walker, resources: Sequence[tuple[str, JSONValue]]) -> None:
    """Resolve every reference the general walk found, naming the first that fails.

    The registry is built with a retriever that records what it is asked for and
    hands back an empty placeholder: a reference landing in a placeholder needs
    retrieval, which is disabled.
    """
    document, dialect, where = walker.document, walker.dialect, walker.where
    external: set[str] = set()

    def placeholder(uri: str) -> JSONValue:
        external.add(_without_fragment(uri))
        return {}

    try:
        registry = jsonschema_rs.Registry(
            [*resources, (_ROOT_URI, document)],
            draft=_DRAFT_NUMBER[dialect],
            retriever=placeholder,
        )
    except Exception as exc:
        raise ConfigurationError(
            f"{where}: the schema's identifiers ($id) or references are not valid URIs"
        ) from exc
    resolvers: dict[tuple[str, ...], jsonschema_rs.Resolver] = {(): registry.resolver(_ROOT_URI)}
    for item in walker.references:
        resolver = _scope_resolver(resolvers, item.scope)
        pointer = walker.pointer(item.node, item.keyword)
        try:
            target = resolver.lookup(item.reference)
        except Exception as exc:
            raise ConfigurationError(
                _located(where, pointer, f"unresolvable reference {short_prefix(item.reference)}")
            ) from exc
        if _without_fragment(target.resolver.base_uri) in external:
            raise ConfigurationError(
                _located(
                    where,
                    pointer,
                    f"reference {short_prefix(item.reference)} names a resource that is not "
                    "bundled in the schema; remote and file retrieval are disabled",
                )
            )


def _scope_resolver(
    resolvers: dict[tuple[str, ...], jsonschema_rs.Resolver], scope: tuple[str, ...]
) -> jsonschema_rs.Resolver:
    """The resolver whose base URI is that of the innermost ``$id`` in ``scope``."""
    depth = len(scope)
    while scope[:depth] not in resolvers:
        depth -= 1
    resolver = resolvers[scope[:depth]]
    for index in range(depth, len(scope)):
        # An identifier the registry does not index keeps the outer base; the compiler
        # still checks every reference it reaches.
        with contextlib.suppress(Exception):
            resolver = resolver.lookup(scope[index]).resolver
        resolvers[scope[: index + 1]] = resolver
    return resolver


# --- translating jsonschema-rs errors --------------------------------------------------


def _compiler_message(exc: Exception, dialect: str, where: str) -> str:
    if isinstance(exc, jsonschema_rs.ValidationError):
        if isinstance(exc.kind, Kind.Referencing):
            detail = short_prefix(str(exc.kind.error))
            return f"{where}: an $id or $ref is not valid or not resolvable ({detail})"
        pointer = _json.pointer(exc.instance_path)
        kind = exc.kind
        if isinstance(kind, Kind.Format) and kind.format == "regex":
            pattern = exc.instance
            return _regex_message(pattern if isinstance(pattern, str) else "", pointer, where)
        _keyword, reason, _extra = describe(kind, exc, None)
        return _located(where, pointer, f"does not conform to the {dialect} meta-schema: {reason}")
    return f"{where}: the schema compiler rejected the schema ({type(exc).__name__})"
