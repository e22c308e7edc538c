"""Content blocks: type literals, fields, parsing from dicts, MediaRef rules, extra fields."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from tenxgraph.core.state import (
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.core.state.message_block import RemoteToolCallBlock

URL_MEDIA: dict[str, Any] = {"kind": "url", "url": "https://example.com/a.png"}

# class, its `type` literal, minimal valid kwargs, the full set of fields
BLOCKS: list[tuple[type[BaseModel], str, dict[str, Any], set[str]]] = [
    (TextBlock, "text", {"text": "hi"}, {"type", "text", "annotations", "cache_control"}),
    (ImageBlock, "image", {"media": URL_MEDIA}, {"type", "media", "alt_text", "bbox"}),
    (
        AudioBlock,
        "audio",
        {"media": URL_MEDIA},
        {"type", "media", "transcript", "sample_rate", "channels"},
    ),
    (VideoBlock, "video", {"media": URL_MEDIA}, {"type", "media", "thumbnail"}),
    (
        DocumentBlock,
        "document",
        {"media": URL_MEDIA},
        {"type", "media", "text", "pages", "excerpt"},
    ),
    (
        DataBlock,
        "data",
        {"mime_type": "application/x-y"},
        {"type", "mime_type", "data_base64", "media"},
    ),
    (
        ToolCallBlock,
        "tool_call",
        {"id": "c1", "name": "f"},
        {"type", "id", "name", "args", "tool_type"},
    ),
    (
        RemoteToolCallBlock,
        "remote_tool_call",
        {"id": "c1", "name": "f"},
        {"type", "id", "name", "args", "tool_type"},
    ),
    (
        ToolResultBlock,
        "tool_result",
        {"call_id": "c1"},
        {"type", "call_id", "output", "is_error", "status"},
    ),
    (
        ReasoningBlock,
        "reasoning",
        {"summary": "because"},
        {"type", "summary", "details", "signature"},
    ),
    (AnnotationBlock, "annotation", {}, {"type", "kind", "refs", "spans"}),
    (ErrorBlock, "error", {"message": "boom"}, {"type", "message", "code", "data"}),
]
BLOCK_IDS = [cls.__name__ for cls, *_ in BLOCKS]


@pytest.mark.parametrize(("cls", "literal", "kwargs", "fields"), BLOCKS, ids=BLOCK_IDS)
def test_block_has_its_type_literal_and_fields(
    cls: type[BaseModel], literal: str, kwargs: dict[str, Any], fields: set[str]
) -> None:
    block = cls(**kwargs)
    assert block.type == literal  # type: ignore[attr-defined]
    assert set(cls.model_fields) == fields
    with pytest.raises(ValidationError):
        cls(**kwargs, type="something_else")


@pytest.mark.parametrize(("cls", "literal", "kwargs", "fields"), BLOCKS, ids=BLOCK_IDS)
def test_dict_in_message_content_parses_into_the_class_named_by_type(
    cls: type[BaseModel], literal: str, kwargs: dict[str, Any], fields: set[str]
) -> None:
    message = Message(role="assistant", content=[{"type": literal, **kwargs}])
    assert len(message.content) == 1
    assert type(message.content[0]) is cls
    assert message.content[0] == cls(**kwargs)


@pytest.mark.parametrize(("cls", "literal", "kwargs", "fields"), BLOCKS, ids=BLOCK_IDS)
def test_content_block_union_parses_dicts_by_type(
    cls: type[BaseModel], literal: str, kwargs: dict[str, Any], fields: set[str]
) -> None:
    assert type(TypeAdapter(ContentBlock).validate_python({"type": literal, **kwargs})) is cls


@pytest.mark.parametrize(("cls", "literal", "kwargs", "fields"), BLOCKS, ids=BLOCK_IDS)
def test_block_rejects_unknown_fields(
    cls: type[BaseModel], literal: str, kwargs: dict[str, Any], fields: set[str]
) -> None:
    with pytest.raises(ValidationError) as info:
        cls(**kwargs, not_a_field=1)
    assert info.value.errors()[0]["type"] == "extra_forbidden"
    assert info.value.errors()[0]["loc"] == ("not_a_field",)


def test_block_dict_with_unknown_field_is_rejected_inside_a_message() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content=[{"type": "text", "text": "hi", "colour": "red"}])
    (error,) = info.value.errors()
    assert error["type"] == "extra_forbidden"
    assert error["loc"][0] == "content"
    assert error["loc"][-1] == "colour"


def test_unknown_block_type_is_a_validation_error_located_at_content() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content=[{"type": "hologram", "text": "hi"}])
    (error,) = info.value.errors()
    assert error["loc"][0] == "content"
    assert error["loc"] == ("content", 0)
    assert "hologram" in str(info.value)


def test_block_dict_without_type_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content=[{"text": "hi"}])
    assert info.value.errors()[0]["loc"][0] == "content"


def test_mixed_block_dicts_keep_their_order_and_classes() -> None:
    message = Message(
        role="assistant",
        content=[
            {"type": "reasoning", "summary": "s", "signature": "sig-123"},
            {"type": "text", "text": "answer"},
            {"type": "tool_call", "id": "c1", "name": "search", "args": {"q": "x"}},
        ],
    )
    assert [type(b) for b in message.content] == [ReasoningBlock, TextBlock, ToolCallBlock]
    reasoning = message.content[0]
    assert isinstance(reasoning, ReasoningBlock)
    assert reasoning.signature == "sig-123"
    call = message.content[2]
    assert isinstance(call, ToolCallBlock)
    assert call.args == {"q": "x"}


# -- field defaults and details --------------------------------------------------------------


def test_block_defaults() -> None:
    assert TextBlock(text="t").annotations == []
    assert ToolCallBlock(id="c", name="n").args == {}
    assert ToolCallBlock(id="c", name="n").tool_type is None
    assert RemoteToolCallBlock(id="c", name="n").tool_type == "remote"
    result = ToolResultBlock(call_id="c")
    assert (result.output, result.is_error, result.status) == (None, False, None)
    reasoning = ReasoningBlock(summary="s")
    assert (reasoning.details, reasoning.signature) == (None, None)
    annotation = AnnotationBlock()
    assert (annotation.kind, annotation.refs, annotation.spans) == ("citation", [], None)
    error = ErrorBlock(message="m")
    assert (error.code, error.data) == (None, None)


def test_default_factories_give_each_block_its_own_list() -> None:
    first, second = TextBlock(text="a"), TextBlock(text="b")
    first.annotations.append(AnnotationRef(url="https://x"))
    assert second.annotations == []


def test_reasoning_signature_is_kept() -> None:
    block = ReasoningBlock(summary="thinking", details=["a", "b"], signature="opaque==")
    assert block.signature == "opaque=="
    assert ReasoningBlock.model_validate_json(block.model_dump_json()) == block


def test_tool_result_status_is_limited_to_completed_or_failed() -> None:
    assert ToolResultBlock(call_id="c", status="failed").status == "failed"
    with pytest.raises(ValidationError):
        ToolResultBlock(call_id="c", status="pending")  # type: ignore[arg-type]


def test_annotation_block_kind_refs_and_spans() -> None:
    block = AnnotationBlock(kind="note", refs=[{"url": "https://s", "page": 2}], spans=[[0, 4]])
    assert block.kind == "note"
    assert block.refs == [AnnotationRef(url="https://s", page=2)]
    assert block.spans == [(0, 4)]
    with pytest.raises(ValidationError):
        AnnotationBlock(kind="footnote")  # type: ignore[arg-type]


def test_annotation_ref_fields_and_extra_rejected() -> None:
    assert set(AnnotationRef.model_fields) == {"url", "file_id", "page", "index", "title"}
    with pytest.raises(ValidationError):
        AnnotationRef(url="u", author="x")  # type: ignore[call-arg]


def test_media_blocks_parse_media_and_thumbnail_dicts_into_media_refs() -> None:
    video = VideoBlock.model_validate(
        {"media": {"kind": "file_id", "file_id": "f1"}, "thumbnail": URL_MEDIA}
    )
    assert video.media == MediaRef(kind="file_id", file_id="f1")
    assert video.thumbnail == MediaRef(**URL_MEDIA)


# -- MediaRef --------------------------------------------------------------------------------


def test_media_ref_fields() -> None:
    assert set(MediaRef.model_fields) == {
        "kind",
        "url",
        "file_id",
        "data_base64",
        "mime_type",
        "size_bytes",
        "sha256",
        "filename",
        "width",
        "height",
        "duration_ms",
        "page",
    }
    assert MediaRef(url="https://x").kind == "url"


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("url", "url", "https://x/y.png"),
        ("file_id", "file_id", "file-1"),
        ("data", "data_base64", "aGk="),
    ],
)
def test_media_ref_kind_with_its_field_is_valid(kind: str, field: str, value: str) -> None:
    ref = MediaRef(kind=kind, **{field: value})  # type: ignore[arg-type]
    assert getattr(ref, field) == value


@pytest.mark.parametrize(
    ("kind", "field", "other"),
    [
        ("url", "url", {"file_id": "f", "data_base64": "aGk="}),
        ("file_id", "file_id", {"url": "https://x", "data_base64": "aGk="}),
        ("data", "data_base64", {"url": "https://x", "file_id": "f"}),
    ],
)
def test_media_ref_kind_without_its_field_names_the_field(
    kind: str, field: str, other: dict[str, str]
) -> None:
    with pytest.raises(ValidationError) as info:
        MediaRef(kind=kind, **other)  # type: ignore[arg-type]
    assert f"`{field}`" in str(info.value)


def test_media_ref_without_anything_is_rejected_because_default_kind_needs_url() -> None:
    with pytest.raises(ValidationError) as info:
        MediaRef()
    assert "`url`" in str(info.value)


def test_media_ref_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValidationError):
        MediaRef(kind="s3", url="s3://bucket/key")  # type: ignore[arg-type]


def test_media_ref_check_applies_to_dicts_inside_messages() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content=[{"type": "image", "media": {"kind": "data"}}])
    assert "data_base64" in str(info.value)
    assert info.value.errors()[0]["loc"][0] == "content"


def test_media_ref_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        MediaRef(url="https://x", bucket="b")  # type: ignore[call-arg]
