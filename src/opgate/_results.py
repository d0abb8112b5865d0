"""``Result``, its content blocks, and the encoded-size accounting of spec 003.

The blocks mirror MCP's ``CallToolResult`` content (2025-11-25): ``Text``,
``Image``, ``Audio``, ``ResourceLink`` and ``EmbeddedResource`` (text or blob).
Each is an immutable value whose constructor validates and normalises its input:
``TypeError`` for a wrong type, ``ConfigurationError`` (a ``ValueError``) for a bad
value, with the field named. Strings must be valid Unicode without lone
surrogates; binary data is given as raw bytes (``bytes``, ``bytearray`` or
``memoryview``, copied into ``bytes``); the adapter base64-encodes it. A
``ResourceLink`` is a reference the library never fetches.

A ``Result`` holds a tuple of blocks, optional structured content (any JSON value,
JSON ``null`` included; the ``NO_STRUCTURED`` marker means absent) and optional
metadata (a JSON object). Structured content
and metadata are converted with ``_json.from_python`` (no numeric work profile:
the registry applies it when an output schema validates the result), kept
privately as canonical bytes plus a private value parsed back from them, and handed
out as a fresh detached copy on every access, so numbers read back in their
canonical form (``1.0`` reads back as ``1``). ``Result`` cannot be subclassed;
``is_constructed`` tells a ``Result`` made by its constructor from anything else
(``object.__new__(Result)``, a forged copy). Copying returns the same immutable
object; pickling rebuilds it through the constructor.

Encoded size (``result_size``)
------------------------------
A conservative estimate of the encoded result that needs no JSON encoding of
the content as a whole:

* every string (text, URIs, names, titles, descriptions, MIME types, embedded
  text) counts the UTF-8 length of its JSON string body, escaped as canonical
  JSON escapes it (``\\"``, ``\\\\``, short escapes, ``\\u00xx`` for other
  controls, everything else literal). For a string without quotes, backslashes
  or control characters this is exactly its UTF-8 byte count, which is how the
  spec counts text and embedded text; escapes only add;
* ``Image``/``Audio`` data and ``EmbeddedResource`` blobs (inline media) count
  their base64 length, ``(n + 2) // 3 * 4``, for every occurrence, toward both
  the inline total and the result total;
* a ``ResourceLink`` size counts its decimal digits;
* structured content and metadata count their canonical JSON bytes plus
  ``MEMBER_OVERHEAD`` each when present;
* every block adds ``BLOCK_OVERHEAD`` for its JSON framing.

Resource references are never fetched. The adapter still accounts for its own
wire envelope, compatibility copies and reserve (spec 003).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias, final

from ._failures import ConfigurationError, short_prefix
from ._json import JSONError, JSONValue, detach, from_python, parse, parsed_canonical_bytes
from ._sealed import Seal, Sealed, is_genuine
from ._text import json_string_size

__all__ = [
    "BLOCK_OVERHEAD",
    "MAX_LINK_SIZE",
    "MAX_MIME_TYPE_CHARS",
    "MEMBER_OVERHEAD",
    "NO_STRUCTURED",
    "Audio",
    "ContentBlock",
    "EmbeddedResource",
    "Image",
    "NoStructured",
    "ResourceLink",
    "Result",
    "ResultSize",
    "Text",
    "base64_length",
    "check_result_budget",
    "is_constructed",
    "result_size",
]

#: Framing charged per block: at least the longest MCP block skeleton with empty strings
#: (a resource_link with every optional key: 93 bytes) plus the comma between blocks.
BLOCK_OVERHEAD: Final = 128

#: Framing charged for structured content and metadata: ``,"structuredContent":`` is 21 bytes.
MEMBER_OVERHEAD: Final = 32

#: Longest MIME type accepted: RFC 6838 caps type and subtype at 127 characters each.
MAX_MIME_TYPE_CHARS: Final = 255

#: Largest resource size a link may state: 2**53 - 1, the largest integer every JSON
#: reader (including IEEE-double ones) reads exactly.
MAX_LINK_SIZE: Final = 2**53 - 1

# Stamped only by the constructors below; a block or Result without it was not constructed.
_SEAL: Final = Seal()

_SURROGATE = re.compile("[\ud800-\udfff]")
# RFC 6838 type/subtype names, optionally followed by parameters in printable ASCII.
_MIME_TYPE = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:[ \t]*;[ -~]*)?"
)
# An RFC 3986 URI: a scheme, then ASCII characters a URI may contain (no spaces, no
# controls, none of ``"<>\^`{|}``); other characters must be percent-encoded.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[!#-;=?-\[\]_a-z~]*")
# MCP ``_meta`` key names: an optional ``label(.label)*/`` prefix and a name.
_META_KEY = re.compile(
    r"(?:(?P<prefix>[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)/)?"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?"
)
# A prefix whose second label is one of these is reserved for MCP (2025-11-25).
_RESERVED_LABELS = frozenset({"modelcontextprotocol", "mcp"})


def base64_length(size: int) -> int:
    """The length of the padded base64 encoding of ``size`` bytes."""
    return (size + 2) // 3 * 4


# --- validation helpers ---------------------------------------------------------------


def _string(value: object, where: str, *, optional: bool = False) -> tuple[str | None, int]:
    """Validate a string and return it as a plain ``str`` with its encoded JSON body size."""
    if value is None and optional:
        return None, 0
    if not isinstance(value, str):
        expected = "a str or None" if optional else "a str"
        raise TypeError(f"{where} must be {expected}, not {type(value).__name__}")
    text = str.__str__(value)
    try:
        return text, json_string_size(text)
    except UnicodeEncodeError:
        found = _SURROGATE.search(text)
        index = found.start() if found else 0
        raise ConfigurationError(
            f"{where} contains a lone surrogate at index {index}; strings must be valid Unicode"
        ) from None


def _nonblank(value: object, where: str) -> tuple[str, int]:
    text, size = _string(value, where)
    assert text is not None
    if not text.strip():
        raise ConfigurationError(f"{where} must not be blank")
    return text, size


def _data(value: object, where: str) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        hint = " (pass the raw bytes, not base64 text)" if isinstance(value, str) else ""
        raise TypeError(f"{where} must be bytes, not {type(value).__name__}{hint}")
    return bytes(value)


def _mime_type(value: object, where: str, *, top: str | None = None) -> tuple[str, int]:
    text, size = _string(value, where)
    assert text is not None
    if len(text) > MAX_MIME_TYPE_CHARS:
        raise ConfigurationError(
            f"{where} is {len(text)} characters; at most {MAX_MIME_TYPE_CHARS} are allowed"
        )
    match = _MIME_TYPE.fullmatch(text)
    if match is None:
        raise ConfigurationError(
            f"{where} {short_prefix(text)} is not a MIME type such as 'image/png'"
        )
    if top is not None and match.group(1).lower() != top:
        raise ConfigurationError(f"{where} {short_prefix(text)} must be an {top}/* MIME type")
    return text, size


def _uri(value: object, where: str) -> tuple[str, int]:
    text, size = _string(value, where)
    assert text is not None
    if _URI.fullmatch(text) is None:
        raise ConfigurationError(
            f"{where} {short_prefix(text)} is not an absolute URI "
            "(a scheme such as 'https:' or 'file:', no spaces; percent-encode other characters)"
        )
    return text, size


def _seal(block: _Block, size: int, inline: int) -> None:
    object.__setattr__(block, "_size", size)
    object.__setattr__(block, "_inline", inline)
    _SEAL.stamp(block)


def _construct(cls: type[Any], kwargs: dict[str, Any]) -> Any:
    """Unpickle a block through its constructor (some of its fields are keyword-only)."""
    return cls(**kwargs)


class _Block(Sealed):
    """Behaviour shared by the content blocks: sealed, immutable, copied as themselves."""

    __slots__ = ()

    _refusal = "{name}: content blocks cannot be subclassed"

    def _rebuild(self) -> tuple[Any, ...]:
        names = [f.name for f in dataclasses.fields(self) if f.init]  # type: ignore[arg-type]
        return (_construct, (type(self), {name: getattr(self, name) for name in names}))


# --- content blocks -------------------------------------------------------------------


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True)
class Text(_Block):
    """A text block: ``Text(text)``, any valid Unicode string (empty allowed)."""

    text: str
    _size: int = field(init=False, repr=False, compare=False)
    _inline: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text, size = _string(self.text, "Text.text")
        object.__setattr__(self, "text", text)
        _seal(self, BLOCK_OVERHEAD + size, 0)


@dataclass(frozen=True, slots=True)
class _Media(_Block):
    """The shape of ``Image`` and ``Audio``: raw bytes and a MIME type of one top-level type.

    Inline media: the data counts toward both budgets, base64-encoded. The subclasses
    differ only in ``_top``, the MIME top-level type they accept; messages and ``repr``
    name the subclass.
    """

    _top: ClassVar[str]

    data: bytes
    mime_type: str
    _size: int = field(init=False, repr=False, compare=False)
    _inline: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = type(self).__name__
        data = _data(self.data, f"{kind}.data")
        mime_type, mime_size = _mime_type(self.mime_type, f"{kind}.mime_type", top=self._top)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "mime_type", mime_type)
        inline = base64_length(len(data))
        _seal(self, BLOCK_OVERHEAD + mime_size + inline, inline)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{len(self.data)} bytes>, mime_type={self.mime_type!r})"


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True, repr=False)
class Image(_Media):
    """An inline image: ``Image(data, mime_type)``; raw bytes and an ``image/*`` MIME type."""

    _top = "image"


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True, repr=False)
class Audio(_Media):
    """Inline audio: ``Audio(data, mime_type)``; raw bytes and an ``audio/*`` MIME type."""

    _top = "audio"


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True)
class ResourceLink(_Block):
    """A link to a resource the client may read; the library never fetches it.

    ``ResourceLink(uri, name, *, title=None, description=None, mime_type=None, size=None)``:
    ``uri`` is an absolute URI, ``name`` is nonblank, ``size`` (bytes) is an ``int``
    from 0 to ``MAX_LINK_SIZE``.
    """

    uri: str
    name: str
    title: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    mime_type: str | None = field(default=None, kw_only=True)
    size: int | None = field(default=None, kw_only=True)
    _size: int = field(init=False, repr=False, compare=False)
    _inline: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        uri, total = _uri(self.uri, "ResourceLink.uri")
        name, name_size = _nonblank(self.name, "ResourceLink.name")
        title, title_size = _string(self.title, "ResourceLink.title", optional=True)
        description, description_size = _string(
            self.description, "ResourceLink.description", optional=True
        )
        mime_type, mime_size = (None, 0)
        if self.mime_type is not None:
            mime_type, mime_size = _mime_type(self.mime_type, "ResourceLink.mime_type")
        size = self.size
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int):
                raise TypeError(
                    f"ResourceLink.size must be an int or None, not {type(size).__name__}"
                )
            size = int(size)
            if not 0 <= size <= MAX_LINK_SIZE:
                raise ConfigurationError(
                    f"ResourceLink.size must be between 0 and {MAX_LINK_SIZE} bytes"
                )
            total += len(str(size))
        for name_, value in (
            ("uri", uri),
            ("name", name),
            ("title", title),
            ("description", description),
            ("mime_type", mime_type),
            ("size", size),
        ):
            object.__setattr__(self, name_, value)
        total += name_size + title_size + description_size + mime_size
        _seal(self, BLOCK_OVERHEAD + total, 0)


@final
@_SEAL.mints
@dataclass(frozen=True, slots=True)
class EmbeddedResource(_Block):
    """A resource's contents carried inline: exactly one of ``text`` or ``blob``.

    ``EmbeddedResource(uri, *, text=None, blob=None, mime_type=None)``. A blob is
    inline media (counted as base64 toward both budgets); text counts toward the
    result total only.
    """

    uri: str
    text: str | None = field(default=None, kw_only=True)
    blob: bytes | None = field(default=None, kw_only=True)
    mime_type: str | None = field(default=None, kw_only=True)
    _size: int = field(init=False, repr=False, compare=False)
    _inline: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        uri, total = _uri(self.uri, "EmbeddedResource.uri")
        if (self.text is None) == (self.blob is None):
            raise ConfigurationError("EmbeddedResource needs exactly one of text= or blob=")
        text, text_size = _string(self.text, "EmbeddedResource.text", optional=True)
        blob = None if self.blob is None else _data(self.blob, "EmbeddedResource.blob")
        mime_type, mime_size = (None, 0)
        if self.mime_type is not None:
            mime_type, mime_size = _mime_type(self.mime_type, "EmbeddedResource.mime_type")
        inline = 0 if blob is None else base64_length(len(blob))
        object.__setattr__(self, "uri", uri)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "blob", blob)
        object.__setattr__(self, "mime_type", mime_type)
        _seal(self, BLOCK_OVERHEAD + total + text_size + mime_size + inline, inline)

    def __repr__(self) -> str:
        body = f"text={self.text!r}" if self.blob is None else f"blob=<{len(self.blob)} bytes>"
        return f"EmbeddedResource({self.uri!r}, {body}, mime_type={self.mime_type!r})"


ContentBlock: TypeAlias = Text | Image | Audio | ResourceLink | EmbeddedResource
_BLOCK_TYPES: Final = (Text, Image, Audio, ResourceLink, EmbeddedResource)


# --- Result ---------------------------------------------------------------------------


class NoStructured(enum.Enum):
    """The type of ``NO_STRUCTURED``, the marker for "no structured content".

    ``Result(structured=None)`` is structured content whose value is JSON ``null``;
    ``Result()`` (or ``Result(structured=NO_STRUCTURED)``) has none. Compare with
    ``is``; the marker is a singleton that survives copying and pickling.
    """

    NO_STRUCTURED = "NO_STRUCTURED"

    def __repr__(self) -> str:
        return "NO_STRUCTURED"


#: "No structured content": the default of ``Result(structured=...)``, and what
#: ``Result.structured`` returns when there is none (``None`` is JSON ``null``).
NO_STRUCTURED: Final = NoStructured.NO_STRUCTURED


@dataclass(frozen=True, slots=True)
class ResultSize:
    """A result's encoded size in bytes: ``total`` includes ``inline`` (inline media)."""

    total: int
    inline: int


def _content(content: object) -> tuple[ContentBlock, ...]:
    if isinstance(content, _Block):
        raise TypeError("Result content must be a sequence of blocks; wrap the block in a list")
    if isinstance(content, str | bytes | bytearray | memoryview) or not isinstance(
        content, Sequence
    ):
        raise TypeError(
            f"Result content must be a list or tuple of content blocks, "
            f"not {type(content).__name__}"
        )
    blocks = tuple(content)
    for index, block in enumerate(blocks):
        if type(block) not in _BLOCK_TYPES:
            raise TypeError(
                f"Result content[{index}] must be Text, Image, Audio, ResourceLink or "
                f"EmbeddedResource, not {type(block).__name__}"
            )
        if not is_genuine(block):
            raise TypeError(f"Result content[{index}] was not built by its constructor")
    return blocks


def _json_member(value: object, where: str) -> tuple[JSONValue, bytes]:
    try:
        encoded = parsed_canonical_bytes(from_python(value))  # the C encoder, mostly
        return parse(encoded), encoded  # read back in canonical form
    except JSONError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def _check_meta_keys(meta: Mapping[Any, object]) -> None:
    for key in meta:
        if not isinstance(key, str):
            continue  # from_python reports it with its pointer
        match = _META_KEY.fullmatch(key)
        if not key or match is None:
            raise ConfigurationError(
                f"Result.meta key {short_prefix(key)} is not an MCP _meta key "
                "(optional 'label.label/' prefix, then letters, digits, '-', '_' or '.')"
            )
        prefix = match.group("prefix")
        if prefix is not None:
            labels = prefix.lower().split(".")
            if len(labels) > 1 and labels[1] in _RESERVED_LABELS:
                raise ConfigurationError(
                    f"Result.meta key {short_prefix(key)} uses a prefix reserved for MCP"
                )


@final
@_SEAL.mints
class Result(Sealed):
    """What an operation returns on success: content blocks, structured content, metadata.

    ``Result(content=(), structured=None, meta=None)``:

    * ``content``: a list or tuple of ``Text``, ``Image``, ``Audio``, ``ResourceLink``
      and ``EmbeddedResource`` blocks, stored as a tuple;
    * ``structured``: any JSON value (``int``, ``Decimal``, ``float`` by its shortest
      repr, ``str``, ``bool``, lists, ``str``-keyed mappings, and ``None`` for JSON
      ``null``), or ``NO_STRUCTURED`` (the default) for no structured content;
    * ``meta``: a mapping of MCP ``_meta`` keys (not under a reserved MCP prefix) to
      JSON values, or ``None``.

    ``structured`` and ``meta`` return fresh detached copies in canonical numeric
    form (``structured`` returns ``NO_STRUCTURED`` when there is none);
    ``structured_json`` and ``meta_json`` their canonical bytes, or ``None`` when
    absent (``b"null"`` for JSON ``null``); ``has_structured`` says whether there is
    structured content. Results are immutable, cannot be subclassed, and compare by
    value.
    """

    __slots__ = (
        "_content",
        "_meta",
        "_meta_json",
        "_size",
        "_structured",
        "_structured_json",
    )

    _content: tuple[ContentBlock, ...]
    _structured: JSONValue | NoStructured
    _structured_json: bytes | None
    _meta: JSONValue
    _meta_json: bytes | None
    _size: ResultSize

    _refusal = "Result cannot be subclassed"

    def __init__(
        self,
        content: Sequence[ContentBlock] = (),
        structured: object = NO_STRUCTURED,
        meta: Mapping[str, object] | None = None,
    ) -> None:
        blocks = _content(content)
        total = sum(block._size for block in blocks)
        inline = sum(block._inline for block in blocks)
        structured_value: JSONValue | NoStructured = NO_STRUCTURED
        structured_json = None
        if structured is not NO_STRUCTURED:
            structured_value, structured_json = _json_member(structured, "Result.structured")
            total += MEMBER_OVERHEAD + len(structured_json)
        meta_value: JSONValue = None
        meta_json = None
        if meta is not None:
            if not isinstance(meta, Mapping):
                raise TypeError(f"Result.meta must be a mapping or None, not {type(meta).__name__}")
            _check_meta_keys(meta)
            meta_value, meta_json = _json_member(meta, "Result.meta")
            total += MEMBER_OVERHEAD + len(meta_json)
        setter = object.__setattr__
        setter(self, "_content", blocks)
        setter(self, "_structured", structured_value)
        setter(self, "_structured_json", structured_json)
        setter(self, "_meta", meta_value)
        setter(self, "_meta_json", meta_json)
        setter(self, "_size", ResultSize(total, inline))
        _SEAL.stamp(self)

    @property
    def content(self) -> tuple[ContentBlock, ...]:
        """The content blocks (an immutable tuple of immutable blocks)."""
        return self._content

    @property
    def structured(self) -> JSONValue | Literal[NoStructured.NO_STRUCTURED]:
        """The structured content (a fresh detached copy; ``None`` is JSON ``null``), or
        ``NO_STRUCTURED`` when there is none."""
        value = self._structured
        if value is NO_STRUCTURED:
            return NO_STRUCTURED
        assert not isinstance(value, NoStructured)
        return detach(value)

    @property
    def has_structured(self) -> bool:
        """Whether the result carries structured content (JSON ``null`` counts)."""
        return self._structured_json is not None

    @property
    def structured_json(self) -> bytes | None:
        """The canonical JSON bytes of the structured content (``b"null"`` for JSON
        ``null``), or ``None`` when there is none."""
        return self._structured_json

    @property
    def meta(self) -> dict[str, JSONValue] | None:
        """The metadata object (a fresh detached copy), or ``None`` when absent."""
        value = detach(self._meta)
        assert value is None or isinstance(value, dict)
        return value

    @property
    def meta_json(self) -> bytes | None:
        """The canonical JSON bytes of the metadata, or ``None`` when absent."""
        return self._meta_json

    def _key(self) -> tuple[object, ...]:
        return (self._content, self._structured_json, self._meta_json)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        if not (is_constructed(self) and is_constructed(other)):
            return self is other
        return self._key() == other._key()

    def __hash__(self) -> int:
        if not is_constructed(self):
            return object.__hash__(self)
        return hash(self._key())

    def __repr__(self) -> str:
        if not is_constructed(self):
            return "Result(<not constructed>)"
        return (
            f"Result(content={self._content!r}, structured={self._structured!r}, "
            f"meta={self._meta!r})"
        )

    def _rebuild(self) -> tuple[Any, ...]:
        return (Result, (self._content, self.structured, self.meta))


def is_constructed(result: object) -> bool:
    """Whether ``result`` is a ``Result`` made by its constructor (never a forgery)."""
    return type(result) is Result and is_genuine(result)


def result_size(result: Result) -> ResultSize:
    """The encoded size of ``result`` by the accounting rule in the module docstring.

    Computed once by the constructor; this call is constant time. ``TypeError`` if
    ``result`` is not a constructed ``Result``.
    """
    if not is_constructed(result):
        raise TypeError("result_size needs a Result built by its constructor")
    return result._size


def check_result_budget(result: Result, *, result_bytes: int, inline_bytes: int) -> str | None:
    """``None`` if ``result`` fits both budgets, else a message saying which it exceeds.

    Sizes exactly equal to a budget fit. Inline media is checked first (it is also
    part of the total). ``TypeError`` if ``result`` was not constructed or a budget is
    not an ``int``; ``ConfigurationError`` for a negative budget.
    """
    for name, budget in (("result_bytes", result_bytes), ("inline_bytes", inline_bytes)):
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise TypeError(f"{name} must be an int, not {type(budget).__name__}")
        if budget < 0:
            raise ConfigurationError(f"{name} must not be negative")
    size = result_size(result)
    if size.inline > inline_bytes:
        return (
            f"the result's inline media is {size.inline} bytes encoded, "
            f"over the {inline_bytes}-byte inline budget"
        )
    if size.total > result_bytes:
        return (
            f"the result is {size.total} bytes encoded, over the {result_bytes}-byte result budget"
        )
    return None
