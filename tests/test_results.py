"""Result, content blocks and encoded-size accounting (spec 003, "Limits and result validation")."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import pickle
import socket
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgate._failures import ConfigurationError
from opgate._results import (
    BLOCK_OVERHEAD,
    MAX_LINK_SIZE,
    MAX_MIME_TYPE_CHARS,
    MEMBER_OVERHEAD,
    NO_STRUCTURED,
    Audio,
    ContentBlock,
    EmbeddedResource,
    Image,
    ResourceLink,
    Result,
    ResultSize,
    Text,
    base64_length,
    check_result_budget,
    is_constructed,
    result_size,
)

KIB = 1024

# --- helpers --------------------------------------------------------------------------


def body(text: str) -> int:
    """The UTF-8 size of a string's JSON body as a non-ASCII-escaping encoder writes it."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def wire_block(block: ContentBlock) -> dict[str, Any]:
    """The MCP 2025-11-25 wire shape of one block (what the adapter will send)."""
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image | Audio):
        kind = "image" if isinstance(block, Image) else "audio"
        data = base64.b64encode(block.data).decode()
        return {"type": kind, "data": data, "mimeType": block.mime_type}
    if isinstance(block, ResourceLink):
        link: dict[str, Any] = {"type": "resource_link", "uri": block.uri, "name": block.name}
        for key, value in (
            ("title", block.title),
            ("description", block.description),
            ("mimeType", block.mime_type),
            ("size", block.size),
        ):
            if value is not None:
                link[key] = value
        return link
    resource: dict[str, Any] = {"uri": block.uri}
    if block.mime_type is not None:
        resource["mimeType"] = block.mime_type
    if block.text is not None:
        resource["text"] = block.text
    else:
        assert block.blob is not None
        resource["blob"] = base64.b64encode(block.blob).decode()
    return {"type": "resource", "resource": resource}


def compact(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def budget_message(result: Result, total: int, inline: int) -> str | None:
    return check_result_budget(result, result_bytes=total, inline_bytes=inline)


# --- strategies -----------------------------------------------------------------------

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
datas = st.binary(max_size=40)
uris = st.sampled_from(["https://example.com/a", "file:///tmp/x.txt", "urn:isbn:0451450523"])
mimes = st.sampled_from(["text/plain", "application/json", "text/csv; charset=utf-8"])
json_scalars = st.none() | st.booleans() | st.integers() | texts
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)

blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(Text, texts),
    st.builds(Image, datas, st.sampled_from(["image/png", "image/jpeg"])),
    st.builds(Audio, datas, st.sampled_from(["audio/wav", "audio/ogg"])),
    st.builds(
        ResourceLink,
        uris,
        texts.filter(str.strip),
        title=st.none() | texts,
        description=st.none() | texts,
        mime_type=st.none() | mimes,
        size=st.none() | st.integers(0, MAX_LINK_SIZE),
    ),
    st.builds(EmbeddedResource, uris, text=texts, mime_type=st.none() | mimes),
    st.builds(EmbeddedResource, uris, blob=datas, mime_type=st.none() | mimes),
)
results = st.builds(
    Result,
    st.lists(blocks, max_size=6),
    st.none() | json_values.filter(lambda v: v is not None),
    st.none() | st.dictionaries(st.sampled_from(["a", "com.example/b", "c.d"]), json_values),
)


# --- Text -----------------------------------------------------------------------------


def test_text_keeps_any_valid_string() -> None:
    assert Text("").text == ""
    assert Text("héllo 🌍").text == "héllo 🌍"


def test_text_normalises_str_subclasses_to_plain_str() -> None:
    class Shouty(str):
        pass

    block = Text(Shouty("hi"))
    assert type(block.text) is str
    assert block == Text("hi")


def test_text_rejects_non_strings_with_type_error() -> None:
    with pytest.raises(TypeError, match=r"Text\.text must be a str, not bytes"):
        Text(b"hi")  # type: ignore[arg-type]


def test_text_rejects_lone_surrogates_naming_the_index() -> None:
    with pytest.raises(
        ConfigurationError, match=r"Text\.text contains a lone surrogate at index 2"
    ):
        Text("ab\ud800cd")


def test_blocks_are_frozen() -> None:
    block = Text("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        block.text = "y"  # type: ignore[misc]


@pytest.mark.parametrize("cls", [Text, Image, Audio, ResourceLink, EmbeddedResource, Result])
def test_blocks_and_result_cannot_be_subclassed(cls: type) -> None:
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("Sub", (cls,), {})


def test_block_copies_are_the_block_and_pickling_rebuilds_through_the_constructor() -> None:
    block = ResourceLink("https://example.com/r", "r", title="T", size=3)
    assert copy.copy(block) is block
    assert copy.deepcopy(block) is block
    clone = pickle.loads(pickle.dumps(block))
    assert clone == block
    assert clone is not block
    assert result_size(Result([clone])) == result_size(Result([block]))


def test_block_state_cannot_be_read_or_forged() -> None:
    block = Text("x")
    with pytest.raises(TypeError):
        block.__getstate__()
    forged = object.__new__(Text)
    with pytest.raises(TypeError):
        forged.__setstate__(["x"])


# --- Image and Audio ------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"\x89PNG", bytearray(b"\x89PNG"), memoryview(b"\x89PNG")])
def test_image_copies_bytes_like_data_into_bytes(raw: Any) -> None:
    image = Image(raw, "image/png")
    assert type(image.data) is bytes
    assert image.data == b"\x89PNG"


def test_image_data_is_detached_from_a_bytearray() -> None:
    raw = bytearray(b"abc")
    image = Image(raw, "image/png")
    raw[0] = ord("z")
    assert image.data == b"abc"


def test_image_rejects_base64_text_with_a_hint() -> None:
    with pytest.raises(TypeError, match="raw bytes, not base64 text"):
        Image("iVBORw0KGgo=", "image/png")  # type: ignore[arg-type]


@pytest.mark.parametrize("mime", ["image/png", "IMAGE/SVG+xml", "image/png; q=1"])
def test_image_accepts_image_mime_types(mime: str) -> None:
    assert Image(b"", mime).mime_type == mime


@pytest.mark.parametrize("mime", ["", "  ", "png", "image/", "/png", "image /png", "image/p\nng"])
def test_image_rejects_malformed_mime_types(mime: str) -> None:
    with pytest.raises(ConfigurationError, match=r"Image\.mime_type"):
        Image(b"", mime)


def test_media_must_match_their_top_level_type() -> None:
    with pytest.raises(ConfigurationError, match=r"must be an image/\* MIME type"):
        Image(b"", "audio/wav")
    with pytest.raises(ConfigurationError, match=r"must be an audio/\* MIME type"):
        Audio(b"", "image/png")
    assert Audio(b"RIFF", "audio/wav").data == b"RIFF"


def test_mime_types_are_bounded() -> None:
    longest = "image/" + "x" * (MAX_MIME_TYPE_CHARS - 6)
    assert Image(b"", longest).mime_type == longest
    with pytest.raises(ConfigurationError, match="at most 255"):
        Image(b"", longest + "x")


def test_mime_type_must_be_a_str() -> None:
    with pytest.raises(TypeError, match=r"Audio\.mime_type must be a str"):
        Audio(b"", None)  # type: ignore[arg-type]


def test_media_repr_does_not_dump_the_data() -> None:
    assert repr(Image(b"x" * 1000, "image/png")) == "Image(<1000 bytes>, mime_type='image/png')"


# --- ResourceLink ---------------------------------------------------------------------


def test_resource_link_keeps_every_field() -> None:
    link = ResourceLink(
        "https://example.com/r?q=1#f",
        "report",
        title="Report",
        description="the report",
        mime_type="text/csv",
        size=12,
    )
    assert (link.uri, link.name, link.title, link.description, link.mime_type, link.size) == (
        "https://example.com/r?q=1#f",
        "report",
        "Report",
        "the report",
        "text/csv",
        12,
    )


@pytest.mark.parametrize(
    "uri",
    ["", "relative/path", "https://exa mple.com", "https://example.com/é", "1http://x", "a<b:c"],
)
def test_resource_link_needs_an_absolute_ascii_uri(uri: str) -> None:
    with pytest.raises(ConfigurationError, match=r"ResourceLink\.uri .* is not an absolute URI"):
        ResourceLink(uri, "n")


def test_uri_messages_quote_only_a_short_prefix() -> None:
    hostile = "no scheme " + "A" * 500
    with pytest.raises(ConfigurationError) as caught:
        ResourceLink(hostile, "n")
    assert "A" * 40 not in str(caught.value)


@pytest.mark.parametrize("name", ["", "   "])
def test_resource_link_name_must_not_be_blank(name: str) -> None:
    with pytest.raises(ConfigurationError, match=r"ResourceLink\.name must not be blank"):
        ResourceLink("https://example.com", name)


def test_resource_link_optional_texts_must_be_strings() -> None:
    with pytest.raises(TypeError, match=r"ResourceLink\.title must be a str or None"):
        ResourceLink("https://example.com", "n", title=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"ResourceLink\.description contains a lone"):
        ResourceLink("https://example.com", "n", description="\udfff")


@pytest.mark.parametrize("size", [True, 1.0, "3", Decimal(3)])
def test_resource_link_size_must_be_an_int(size: object) -> None:
    with pytest.raises(TypeError, match=r"ResourceLink\.size must be an int"):
        ResourceLink("https://example.com", "n", size=size)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [-1, MAX_LINK_SIZE + 1])
def test_resource_link_size_is_bounded(size: int) -> None:
    with pytest.raises(ConfigurationError, match=r"ResourceLink\.size must be between"):
        ResourceLink("https://example.com", "n", size=size)


def test_resource_link_size_bounds_are_inclusive_and_normalised() -> None:
    class Count(int):
        pass

    assert ResourceLink("https://example.com", "n", size=0).size == 0
    assert ResourceLink("https://example.com", "n", size=MAX_LINK_SIZE).size == MAX_LINK_SIZE
    assert type(ResourceLink("https://example.com", "n", size=Count(5)).size) is int


# --- EmbeddedResource -----------------------------------------------------------------


def test_embedded_resource_holds_text_or_blob() -> None:
    text = EmbeddedResource("file:///a.txt", text="hi", mime_type="text/plain")
    blob = EmbeddedResource("file:///a.bin", blob=bytearray(b"\x00\x01"))
    assert (text.text, text.blob, text.mime_type) == ("hi", None, "text/plain")
    assert (blob.text, blob.blob) == (None, b"\x00\x01")
    assert type(blob.blob) is bytes
    assert EmbeddedResource("file:///e", text="").text == ""


@pytest.mark.parametrize("kwargs", [{}, {"text": "a", "blob": b"b"}])
def test_embedded_resource_needs_exactly_one_body(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="exactly one of text= or blob="):
        EmbeddedResource("file:///a", **kwargs)


def test_embedded_resource_checks_types_and_uri() -> None:
    with pytest.raises(TypeError, match=r"EmbeddedResource\.blob must be bytes"):
        EmbeddedResource("file:///a", blob="YQ==")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"EmbeddedResource\.text must be a str"):
        EmbeddedResource("file:///a", text=b"a")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"EmbeddedResource\.uri"):
        EmbeddedResource("a.txt", text="a")
    with pytest.raises(ConfigurationError, match=r"EmbeddedResource\.mime_type"):
        EmbeddedResource("file:///a", text="a", mime_type="text")


# --- Result ---------------------------------------------------------------------------


def test_result_defaults_to_empty() -> None:
    result = Result()
    assert (result.content, result.structured, result.meta) == ((), NO_STRUCTURED, None)
    assert (result.structured_json, result.meta_json) == (None, None)
    assert not result.has_structured
    assert result_size(result) == ResultSize(0, 0)


def test_result_content_is_a_detached_tuple() -> None:
    content: list[ContentBlock] = [Text("a")]
    result = Result(content)
    content.append(Text("b"))
    assert result.content == (Text("a"),)


@pytest.mark.parametrize("content", ["text", b"bytes", 3, {Text("a")}, (t for t in [Text("a")])])
def test_result_content_must_be_a_sequence(content: Any) -> None:
    with pytest.raises(TypeError, match="list or tuple of content blocks"):
        Result(content)


def test_result_content_single_block_gets_a_hint() -> None:
    with pytest.raises(TypeError, match="wrap the block in a list"):
        Result(Text("a"))  # type: ignore[arg-type]


def test_result_content_items_must_be_blocks() -> None:
    with pytest.raises(TypeError, match=r"content\[1\] must be Text, Image"):
        Result([Text("a"), "b"])  # type: ignore[list-item]


def test_result_rejects_unconstructed_blocks() -> None:
    forged = object.__new__(Text)
    with pytest.raises(TypeError, match=r"content\[0\] was not built by its constructor"):
        Result([forged])


def test_structured_is_detached_from_the_input() -> None:
    given_value: dict[str, Any] = {"items": [1, 2], "nested": {"k": "v"}}
    result = Result(structured=given_value)
    given_value["items"].append(3)
    given_value["nested"]["k"] = "changed"
    assert result.structured == {"items": [1, 2], "nested": {"k": "v"}}


def test_structured_is_a_fresh_copy_on_every_access() -> None:
    result = Result(structured={"items": [1, 2]})
    first = result.structured
    assert isinstance(first, dict)
    first["items"].append(3)
    first["new"] = True
    second = result.structured
    assert second == {"items": [1, 2]}
    assert second is not first


def test_structured_numbers_read_back_canonical_and_exact() -> None:
    result = Result(structured={"f": 0.1, "d": Decimal("1.50"), "one": 1.0, "big": 10**30})
    assert result.structured == {
        "f": Decimal("0.1"),
        "d": Decimal("1.5"),
        "one": 1,
        "big": 10**30,
    }
    assert result.structured_json == b'{"big":1e+30,"d":1.5,"f":0.1,"one":1}'


@pytest.mark.parametrize("value", ["text", 0, False, [], {}, [None]])
def test_structured_may_be_any_json_value(value: object) -> None:
    result = Result(structured=value)
    assert result.structured == value
    assert result.structured_json == compact(value)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (float("nan"), "the root"),
        ({"a": [1, {1, 2}]}, "/a/1"),
        ({"a": {3: "x"}}, "/a"),
        ({"s": "\ud800"}, "/s"),
    ],
)
def test_structured_must_be_json(value: object, where: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"Result\.structured: .*\(at {where}\)"):
        Result(structured=value)


def test_structured_accepts_the_deepest_nesting_json_allows() -> None:
    deep: Any = 1
    for _ in range(128):
        deep = [deep]
    assert Result(structured=deep).structured == deep
    with pytest.raises(ConfigurationError, match="nesting deeper"):
        Result(structured=[deep])


def test_meta_is_a_detached_json_object() -> None:
    meta: dict[str, Any] = {"com.example/trace": {"id": [1]}}
    result = Result(meta=meta)
    meta["com.example/trace"]["id"].append(2)
    got = result.meta
    assert got == {"com.example/trace": {"id": [1]}}
    assert got is not None
    got["x"] = 1
    assert result.meta == {"com.example/trace": {"id": [1]}}
    assert result.meta_json == b'{"com.example/trace":{"id":[1]}}'


def test_meta_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match=r"Result\.meta must be a mapping or None, not list"):
        Result(meta=[("a", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key", ["trace", "com.example/trace", "com.example/", "a-b.c_d", "com.example.mcp/x", "x1"]
)
def test_meta_accepts_mcp_key_names(key: str) -> None:
    assert Result(meta={key: 1}).meta == {key: 1}


@pytest.mark.parametrize(
    "key", ["", "-trace", "trace-", "a b", "1com.example/x", "com..example/x", "com/x/y", "é"]
)
def test_meta_rejects_malformed_keys(key: str) -> None:
    with pytest.raises(ConfigurationError, match="is not an MCP _meta key"):
        Result(meta={key: 1})


@pytest.mark.parametrize(
    "key", ["io.modelcontextprotocol/x", "dev.mcp/x", "org.modelcontextprotocol.api/", "com.MCP/x"]
)
def test_meta_rejects_reserved_mcp_prefixes(key: str) -> None:
    with pytest.raises(ConfigurationError, match="reserved for MCP"):
        Result(meta={key: 1})


def test_meta_values_must_be_json() -> None:
    with pytest.raises(ConfigurationError, match=r"Result\.meta: .*\(at /k\)"):
        Result(meta={"k": object()})
    with pytest.raises(ConfigurationError, match=r"Result\.meta: .*member names must be strings"):
        Result(meta={1: "x"})  # type: ignore[dict-item]


def test_result_is_immutable() -> None:
    result = Result([Text("a")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del result.content  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result._seal = None


def test_results_compare_by_canonical_value() -> None:
    one = Result([Text("a")], structured={"n": 1.0}, meta={"m": 1})
    same = Result([Text("a")], structured={"n": 1}, meta={"m": Decimal("1.0")})
    assert one == same
    assert hash(one) == hash(same)
    assert one != Result([Text("a")], structured={"n": 2}, meta={"m": 1})
    assert one != Result([Text("b")], structured={"n": 1}, meta={"m": 1})
    assert Result() != Result(structured=[])


def test_result_copies_are_itself_and_pickling_goes_through_the_constructor() -> None:
    result = Result([Text("a"), Image(b"xy", "image/png")], structured={"a": [1]}, meta={"k": 2})
    assert copy.copy(result) is result
    assert copy.deepcopy(result) is result
    clone = pickle.loads(pickle.dumps(result))
    assert clone == result
    assert clone is not result
    assert is_constructed(clone)


def test_is_constructed_only_for_results_from_the_constructor() -> None:
    assert is_constructed(Result())
    forged = object.__new__(Result)
    assert not is_constructed(forged)
    for other in (None, {}, "Result", Text("x"), Result, object()):
        assert not is_constructed(other)


def test_forged_results_cannot_be_sized_copied_or_compared_by_value() -> None:
    forged = object.__new__(Result)
    with pytest.raises(TypeError, match="built by its constructor"):
        result_size(forged)
    with pytest.raises(TypeError):
        pickle.dumps(forged)
    assert forged == forged
    assert forged != Result()
    assert repr(forged) == "Result(<not constructed>)"


def test_repr_shows_the_content() -> None:
    assert repr(Result([Text("a")], structured=1)) == (
        "Result(content=(Text(text='a'),), structured=1, meta=None)"
    )


# --- accounting -----------------------------------------------------------------------


def size_of(*content: ContentBlock) -> ResultSize:
    return result_size(Result(list(content)))


def test_block_overhead_covers_every_mcp_block_framing() -> None:
    empty_framings = [
        {"type": "text", "text": ""},
        {"type": "image", "data": "", "mimeType": ""},
        {"type": "audio", "data": "", "mimeType": ""},
        {"type": "resource", "resource": {"uri": "", "mimeType": "", "blob": ""}},
        {"type": "resource", "resource": {"uri": "", "mimeType": "", "text": ""}},
    ]
    for framing in empty_framings:
        assert len(compact(framing)) + 1 <= BLOCK_OVERHEAD  # + the comma between blocks
    link = compact(
        {
            "type": "resource_link",
            "uri": "",
            "name": "",
            "title": "",
            "description": "",
            "mimeType": "",
            "size": 0,
        }
    )
    assert len(link) - 1 + 1 <= BLOCK_OVERHEAD  # size digits are counted separately


def test_member_overhead_covers_the_structured_and_meta_keys() -> None:
    assert len(b',"structuredContent":') <= MEMBER_OVERHEAD
    assert len(b',"_meta":') <= MEMBER_OVERHEAD


def test_text_counts_its_utf8_bytes() -> None:
    assert size_of(Text("hello")) == ResultSize(BLOCK_OVERHEAD + 5, 0)
    assert size_of(Text("é🌍")) == ResultSize(BLOCK_OVERHEAD + 2 + 4, 0)


def test_text_counts_json_escapes_conservatively() -> None:
    # '"' and '\\' and '\n' become two bytes; other controls become \u00xx (six bytes)
    assert size_of(Text('"\\\n\x01')) == ResultSize(BLOCK_OVERHEAD + 2 + 2 + 2 + 6, 0)


@given(texts)
def test_string_size_is_the_escaped_json_body(text: str) -> None:
    assert size_of(Text(text)).total == BLOCK_OVERHEAD + body(text)
    assert body(text) >= len(text.encode("utf-8"))


def test_media_count_their_base64_length_toward_both_budgets() -> None:
    image = Image(b"12345", "image/png")  # 5 bytes -> 8 base64 characters
    assert base64_length(5) == len(base64.b64encode(b"12345")) == 8
    assert size_of(image) == ResultSize(BLOCK_OVERHEAD + 8 + len("image/png"), 8)
    audio = Audio(b"", "audio/wav")
    assert size_of(audio) == ResultSize(BLOCK_OVERHEAD + len("audio/wav"), 0)


@given(st.integers(0, 10_000))
def test_base64_length_matches_the_encoder(n: int) -> None:
    assert base64_length(n) == len(base64.b64encode(b"\0" * n))


def test_every_occurrence_of_inline_media_is_counted() -> None:
    image = Image(b"x" * 300, "image/png")
    once = size_of(image)
    twice = size_of(image, image)
    assert twice.inline == 2 * once.inline == 2 * 400
    assert twice.total == 2 * once.total


def test_embedded_blob_is_inline_media_and_embedded_text_is_not() -> None:
    uri = "file:///r"
    blob = EmbeddedResource(uri, blob=b"abc", mime_type="application/octet-stream")
    text = EmbeddedResource(uri, text="abc")
    assert size_of(blob) == ResultSize(BLOCK_OVERHEAD + len(uri) + 24 + 4, 4)
    assert size_of(text) == ResultSize(BLOCK_OVERHEAD + len(uri) + 3, 0)
    assert size_of(EmbeddedResource(uri, text="ü")).total == BLOCK_OVERHEAD + len(uri) + 2


def test_links_count_every_text_field_and_the_size_digits() -> None:
    bare = ResourceLink("https://e.com/r", "name")
    assert size_of(bare) == ResultSize(BLOCK_OVERHEAD + 15 + 4, 0)
    full = ResourceLink(
        "https://e.com/r", "name", title="T€", description="desc", mime_type="text/csv", size=12345
    )
    assert size_of(full) == ResultSize(BLOCK_OVERHEAD + 15 + 4 + 4 + 4 + 8 + 5, 0)


def test_structured_and_meta_count_their_canonical_bytes() -> None:
    structured = {"b": [1.0, "é"], "a": None}
    canonical = b'{"a":null,"b":[1,"\xc3\xa9"]}'
    assert Result(structured=structured).structured_json == canonical
    assert result_size(Result(structured=structured)) == ResultSize(
        MEMBER_OVERHEAD + len(canonical), 0
    )
    assert result_size(Result(meta={"k": "v"})) == ResultSize(MEMBER_OVERHEAD + 9, 0)
    assert result_size(Result(meta={})) == ResultSize(MEMBER_OVERHEAD + 2, 0)


@settings(max_examples=60)
@given(results)
def test_accounting_bounds_the_mcp_wire_encoding(result: Result) -> None:
    """The estimate is conservative: never below the compact MCP encoding it stands for."""
    content = [wire_block(block) for block in result.content]
    wire = len(compact(content)) - 2  # the adapter's envelope is its own
    if result.structured_json is not None:
        wire += len(b',"structuredContent":') + len(result.structured_json)
    if result.meta_json is not None:
        wire += len(b',"_meta":') + len(result.meta_json)
    size = result_size(result)
    assert size.total >= wire
    inline = sum(
        len(block.get("data", "")) + len(block.get("resource", {}).get("blob", ""))
        for block in content
    )
    assert size.inline == inline


@settings(max_examples=60)
@given(st.lists(blocks, max_size=6), blocks, st.integers(0, 6))
def test_size_is_additive_and_monotonic_in_content(
    content: list[ContentBlock], extra: ContentBlock, position: int
) -> None:
    before = size_of(*content)
    grown = [*content[:position], extra, *content[position:]]
    after = size_of(*grown)
    assert after.total - before.total == size_of(extra).total >= BLOCK_OVERHEAD
    assert after.inline - before.inline == size_of(extra).inline >= 0
    assert after.inline <= after.total


@given(texts, texts)
def test_longer_text_never_shrinks(text: str, more: str) -> None:
    assert size_of(Text(text + more)).total >= size_of(Text(text)).total


@settings(max_examples=60)
@given(results)
def test_budget_boundaries_are_exact(result: Result) -> None:
    size = result_size(result)
    assert budget_message(result, size.total, size.inline) is None
    if size.total:
        assert budget_message(result, size.total - 1, min(size.inline, size.total - 1)) is not None
    if size.inline:
        assert budget_message(result, size.total, size.inline - 1) is not None


# --- budget check ---------------------------------------------------------------------


def test_result_exactly_at_the_budget_fits_and_one_byte_over_fails() -> None:
    filler = 64 * KIB - BLOCK_OVERHEAD
    at_limit = Result([Text("a" * filler)])
    over = Result([Text("a" * (filler + 1))])
    assert result_size(at_limit).total == 64 * KIB
    assert budget_message(at_limit, 64 * KIB, 48 * KIB) is None
    assert budget_message(over, 64 * KIB, 48 * KIB) == (
        "the result is 65537 bytes encoded, over the 65536-byte result budget"
    )


def test_inline_media_exactly_at_the_inline_budget_fits() -> None:
    at_limit = Result([Image(b"\0" * (48 * KIB // 4 * 3), "image/png")])
    over = Result([Image(b"\0" * (48 * KIB // 4 * 3 + 1), "image/png")])
    assert result_size(at_limit).inline == 48 * KIB
    assert budget_message(at_limit, 64 * KIB, 48 * KIB) is None
    assert budget_message(over, 64 * KIB, 48 * KIB) == (
        "the result's inline media is 49156 bytes encoded, over the 49152-byte inline budget"
    )


def test_inline_budget_is_reported_before_the_total() -> None:
    result = Result([Audio(b"\0" * 3000, "audio/wav")])
    message = budget_message(result, 100, 100)
    assert message is not None
    assert "inline" in message


def test_inline_media_counts_toward_the_result_total_as_well() -> None:
    media = Result([Image(b"\0" * 30_000, "image/png"), Image(b"\0" * 30_000, "image/png")])
    assert result_size(media).inline == 80_000
    assert budget_message(media, 64 * KIB, 64 * KIB) is not None


def test_budget_arguments_are_checked() -> None:
    result = Result()
    with pytest.raises(TypeError, match="result_bytes must be an int"):
        check_result_budget(result, result_bytes=1.5, inline_bytes=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="inline_bytes must be an int"):
        check_result_budget(result, result_bytes=1, inline_bytes=True)
    with pytest.raises(ConfigurationError, match="result_bytes must not be negative"):
        check_result_budget(result, result_bytes=-1, inline_bytes=0)
    with pytest.raises(TypeError, match="built by its constructor"):
        check_result_budget(object.__new__(Result), result_bytes=1, inline_bytes=1)


def test_resource_links_are_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the network was used")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    link = ResourceLink("http://192.0.2.1:9/huge.bin", "huge", size=MAX_LINK_SIZE)
    embedded = EmbeddedResource("http://192.0.2.1:9/e.txt", text="e")
    result = Result([link, embedded])
    # The stated size is only its digits; nothing behind either URI is counted.
    assert result_size(result).total == (
        2 * BLOCK_OVERHEAD + 27 + 4 + len(str(MAX_LINK_SIZE)) + 24 + 1
    )
    assert budget_message(result, 16 * KIB, 0) is None


def test_structured_int_reads_back_as_int() -> None:
    result = Result([Text("x")], structured={"big": 10**21, "n": Decimal("4.0")})
    assert result.structured == {"big": 10**21, "n": 4}
    assert type(result.structured["big"]) is int
    assert type(result.structured["n"]) is int
