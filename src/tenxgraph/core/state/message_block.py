"""Typed content blocks: the parts a `Message` is made of.

Every block is a pydantic model with a `type` literal, so a list of plain dicts (from JSON, a
database row or a provider) parses into the right classes, and an unknown `type` is rejected with
an error that names the field.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tenxgraph.core.state.sealed import compact, fields_property

# NaN and infinity are refused: JSON has no such numbers, so they could not be stored
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)

MediaKind = Literal["url", "file_id", "data"]
_FIELD_FOR_KIND: dict[str, str] = {"url": "url", "file_id": "file_id", "data": "data_base64"}


class MediaRef(BaseModel):
    """Where the bytes of an image, audio clip, video or document live.

    `kind` says which field holds them: ``url`` (http(s) or ``data:`` URL), ``file_id`` (a
    provider-managed file) or ``data`` (inline base64; keep it for small payloads).
    """

    model_config = _STRICT

    kind: MediaKind = "url"
    url: str | None = None
    file_id: str | None = None
    data_base64: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    filename: str | None = None
    width: int | None = None
    height: int | None = None
    duration_ms: int | None = None
    page: int | None = None

    @model_validator(mode="after")
    def _kind_has_its_field(self) -> "MediaRef":
        field = _FIELD_FOR_KIND[self.kind]
        value = getattr(self, field)
        if value is None or (value == "" and self.kind != "data"):  # "" is valid empty data
            raise ValueError(
                f"MediaRef(kind={self.kind!r}) needs `{field}` to be set; "
                f"pass {field}=... or choose the kind that matches the data you have"
            )
        return self


class AnnotationRef(BaseModel):
    """A source an annotation points at (a citation's URL, file, page...)."""

    model_config = _STRICT

    url: str | None = None
    file_id: str | None = None
    page: int | None = None
    index: int | None = None
    title: str | None = None


class TextBlock(BaseModel):
    """Plain text, with optional citation references."""

    # a sealed block keeps its text in this slot and no dict (see `sealed.compact`)
    __slots__ = ("__weakref__", "_sealed_text")
    model_config = _STRICT
    __dict__ = fields_property

    type: Literal["text"] = "text"
    text: str
    annotations: list[AnnotationRef] = Field(default_factory=list)
    # a provider prompt-cache breakpoint after this block, e.g. ``{"type": "ephemeral"}``
    # (Anthropic; litellm passes it on). Left out of dumps when unset.
    cache_control: dict[str, str] | None = Field(default=None, exclude_if=lambda v: v is None)


compact(TextBlock, slots={"text": "_sealed_text"})


class ImageBlock(BaseModel):
    """An image; `bbox` is an optional region ``[x1, y1, x2, y2]``."""

    model_config = _STRICT

    type: Literal["image"] = "image"
    media: MediaRef
    alt_text: str | None = None
    bbox: list[float] | None = None


class AudioBlock(BaseModel):
    """An audio clip, with its transcript when known."""

    model_config = _STRICT

    type: Literal["audio"] = "audio"
    media: MediaRef
    transcript: str | None = None
    sample_rate: int | None = None
    channels: int | None = None


class VideoBlock(BaseModel):
    """A video, with an optional thumbnail image."""

    model_config = _STRICT

    type: Literal["video"] = "video"
    media: MediaRef
    thumbnail: MediaRef | None = None


class DocumentBlock(BaseModel):
    """A document such as a PDF; `text`/`excerpt` hold extracted text when available."""

    model_config = _STRICT

    type: Literal["document"] = "document"
    media: MediaRef
    text: str | None = None
    pages: list[int] | None = None
    excerpt: str | None = None


class DataBlock(BaseModel):
    """Binary data of any MIME type, inline or by reference."""

    model_config = _STRICT

    type: Literal["data"] = "data"
    mime_type: str
    data_base64: str | None = None
    media: MediaRef | None = None


class ToolCallBlock(BaseModel):
    """The model asks for a tool: `name` called with `args`; `id` pairs it with its result."""

    model_config = _STRICT

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_type: str | None = None


class RemoteToolCallBlock(BaseModel):
    """A tool call that a client outside the graph executes."""

    model_config = _STRICT

    type: Literal["remote_tool_call"] = "remote_tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_type: str = "remote"


class ToolResultBlock(BaseModel):
    """The outcome of the tool call whose id is `call_id`."""

    model_config = _STRICT

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    output: Any = None
    is_error: bool = False
    status: Literal["completed", "failed"] | None = None


class ReasoningBlock(BaseModel):
    """Reasoning the model exposed.

    `signature` is the opaque token some providers (Anthropic extended thinking) require to be
    sent back unchanged with the reasoning on the next turn.
    """

    model_config = _STRICT

    type: Literal["reasoning"] = "reasoning"
    summary: str
    details: list[str] | None = None
    signature: str | None = None


class AnnotationBlock(BaseModel):
    """A citation or note attached to content; `spans` are ``(start, end)`` offsets."""

    model_config = _STRICT

    type: Literal["annotation"] = "annotation"
    kind: Literal["citation", "note"] = "citation"
    refs: list[AnnotationRef] = Field(default_factory=list)
    spans: list[tuple[int, int]] | None = None


class ErrorBlock(BaseModel):
    """An error recorded in the conversation (a failed tool, a provider refusal...)."""

    model_config = _STRICT

    type: Literal["error"] = "error"
    message: str
    code: str | None = None
    data: dict[str, Any] | None = None


ContentBlock = Annotated[
    TextBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | DocumentBlock
    | DataBlock
    | ToolCallBlock
    | RemoteToolCallBlock
    | ToolResultBlock
    | ReasoningBlock
    | AnnotationBlock
    | ErrorBlock,
    Field(discriminator="type"),
]
"""Any content block; dicts are parsed into the class named by their ``type``."""

MEDIA_BLOCK_TYPES = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)

__all__ = [
    "MEDIA_BLOCK_TYPES",
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ImageBlock",
    "MediaKind",
    "MediaRef",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "VideoBlock",
]
