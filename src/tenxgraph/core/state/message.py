"""`Message`, one turn of a conversation, and `TokenUsages`, what the turn cost."""

import base64
import hashlib
import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from tenxgraph.core.state._construct import (
    _new,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
    assemble,
    template,
)
from tenxgraph.core.state.message_block import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.core.state.sealed import (
    SEALED_HINT,
    SealedError,
    compact,
    fields_property,
    is_sealed,
)

if TYPE_CHECKING:
    from tenxgraph.core.state.media_input import MediaSink

Role = Literal["user", "assistant", "system", "tool"]
_ROLES = frozenset(("user", "assistant", "system", "tool"))
MediaBlockType = Literal["image", "audio", "video", "document"]


class _IdSource:
    """Unique message ids: 96 random bits per process, then a counter (32 hex characters).

    As unique as a UUID4 across processes and machines, and about 8x cheaper to make. The
    random part is drawn again in a forked child, so parent and child never collide.
    """

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self.prefix = os.urandom(12).hex()
        self.counter = itertools.count()

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.counter):08x}"

    def mark(self) -> tuple[str, int]:
        """A point in this source's sequence: every id made after it is `made_after` it."""
        return self.prefix, next(self.counter)

    def made_after(self, message_id: object, mark: tuple[str, int]) -> bool:
        """Whether `message_id` was made by this source after `mark` (in this process)."""
        prefix, number = mark
        return (
            type(message_id) is str
            and len(message_id) >= 32
            and message_id.startswith(prefix)
            and prefix == self.prefix
            and int(message_id[24:], 16) > number
        )


_new_id = _IdSource()
os.register_at_fork(after_in_child=_new_id.reseed)


def id_mark() -> tuple[str, int]:
    """Now, in the sequence of generated message ids (see `made_after`)."""
    return _new_id.mark()


def made_after(message_id: object, mark: tuple[str, int]) -> bool:
    """Whether `message_id` was generated in this process after `id_mark()` gave `mark`: such
    an id cannot be in anything stored before that moment."""
    return _new_id.made_after(message_id, mark)


def generate_id(default_id: str | int | None = None) -> str | int:
    """Return `default_id` if given, else a new unique id."""
    if default_id is not None:
        return default_id
    return _new_id()


class TokenUsages(BaseModel):
    """Token counts a provider reported for one model call."""

    model_config = ConfigDict(defer_build=True)

    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    reasoning_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    image_tokens: int | None = 0
    audio_tokens: int | None = 0


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    import json  # on first use: a plain text answer never needs it

    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


class Message(BaseModel):
    """One turn: who said it (`role`) and what (`content`, a list of typed blocks).

    `content` accepts blocks, dicts with a ``type`` key, or a plain string (one `TextBlock`).
    `delta=True` marks a partial streaming chunk; such messages are streamed, never stored.
    """

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, defer_build=True
    )  # no NaN in JSON
    # a sealed message keeps its id, role, content and timestamp in these slots and only the
    # other fields not at their default in a dict (see `sealed.compact`): a plain text message
    # has none. Reading `__dict__` gives every field.
    __slots__ = (
        "__weakref__",
        "_sealed_content",
        "_sealed_id",
        "_sealed_role",
        "_sealed_timestamp",
    )
    __dict__ = fields_property

    message_id: str | int = Field(default_factory=generate_id)
    role: Role
    content: list[ContentBlock]
    delta: bool = False
    tools_calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    timestamp: float | None = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)
    usages: TokenUsages | None = None
    raw: dict[str, Any] | None = None
    parsed_content: dict[str, Any] | SerializeAsAny[BaseModel] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _coerce_content(cls, value: Any) -> Any:
        if type(value) is list:
            return value
        if isinstance(value, str):
            return [TextBlock(text=value)]
        if isinstance(value, BaseModel | dict):
            return [value]
        if isinstance(value, Sequence) and not isinstance(value, list):
            return list(value)
        return value

    # -- factories -------------------------------------------------------------------------

    @classmethod
    def text_message(
        cls,
        content: str,
        role: Role = "user",
        message_id: str | int | None = None,
        *,
        delta: bool = False,
    ) -> "Message":
        """A message holding one `TextBlock`; `delta=True` makes it a partial streaming chunk
        (streamed, never stored)."""
        if (
            cls is Message
            and type(content) is str
            and type(role) is str
            and role in _ROLES
            and type(delta) is bool
            and (message_id is None or type(message_id) in (str, int))
        ):
            return _text_message(
                content, role, _new_id() if message_id is None else message_id, delta
            )
        return cls(
            message_id=generate_id(message_id),
            role=role,
            content=[TextBlock(text=content)],
            delta=delta,
        )

    @classmethod
    def tool_message(
        cls,
        content: Sequence[ContentBlock] | str,
        message_id: str | int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> "Message":
        """A ``role="tool"`` message, usually holding `ToolResultBlock`s; `meta` is its metadata."""
        return cls(
            message_id=generate_id(message_id), role="tool", content=content, metadata=meta or {}
        )

    @classmethod
    def image_message(
        cls,
        *,
        image_url: str | None = None,
        image_base64: str | None = None,
        mime_type: str = "image/png",
        text: str | None = None,
        role: Role = "user",
        message_id: str | int | None = None,
    ) -> "Message":
        """An image (by URL or inline base64), preceded by `text` when given."""
        if (image_url is None) == (image_base64 is None):
            raise ValueError("Provide either image_url or image_base64 (exactly one of them)")
        if image_url is not None:
            media = MediaRef(kind="url", url=image_url, mime_type=mime_type)
        else:
            media = MediaRef(kind="data", data_base64=image_base64, mime_type=mime_type)
        blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []
        blocks.append(ImageBlock(media=media))
        return cls(message_id=generate_id(message_id), role=role, content=blocks)

    @classmethod
    def multimodal_message(
        cls,
        content_blocks: Sequence[ContentBlock | dict[str, Any]],
        role: Role = "user",
        message_id: str | int | None = None,
    ) -> "Message":
        """A message made of the given blocks (or block dicts)."""
        return cls(message_id=generate_id(message_id), role=role, content=list(content_blocks))

    @classmethod
    def from_file(
        cls,
        file_path: str | Path,
        mime_type: str | None = None,
        text: str | None = None,
        role: Role = "user",
        message_id: str | int | None = None,
    ) -> "Message":
        """Embed a file as base64; its MIME type picks an image, audio, video or document block."""
        path = Path(file_path)
        from tenxgraph.core.state.media_input import read_media_file

        data, mime = read_media_file(path, mime_type, "Message.from_file")
        media = MediaRef(
            kind="data",
            data_base64=base64.b64encode(data).decode("ascii"),
            mime_type=mime,
            filename=path.name,
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []
        blocks.append(media_block(mime.split("/", 1)[0], media))
        return cls(message_id=generate_id(message_id), role=role, content=blocks)

    @classmethod
    async def with_image(
        cls,
        data: bytes,
        mime_type: str,
        store: "MediaSink",
        text: str | None = None,
        role: Role = "user",
        message_id: str | int | None = None,
    ) -> "Message":
        """An image whose bytes go to `store` (a media store: `app.media_store`, or any
        `tenxgraph.storage.media.MediaStore`); the message holds only its `MediaRef`."""
        from tenxgraph.core.state.media_input import check_sink

        media = await check_sink(store, "Message.with_image").aput(bytes(data), mime_type)
        blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []
        blocks.append(ImageBlock(media=media))
        return cls(message_id=generate_id(message_id), role=role, content=blocks)

    @classmethod
    async def with_file(
        cls,
        file_path: str | Path,
        store: "MediaSink",
        mime_type: str | None = None,
        text: str | None = None,
        role: Role = "user",
        message_id: str | int | None = None,
    ) -> "Message":
        """A file whose bytes go to `store`, as `from_file` picks its block by MIME type."""
        import asyncio

        from tenxgraph.core.state.media_input import check_sink, read_media_file

        sink = check_sink(store, "Message.with_file")
        data, mime = await asyncio.to_thread(
            read_media_file, file_path, mime_type, "Message.with_file"
        )
        media = await sink.aput(data, mime, filename=Path(file_path).name)
        blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []
        blocks.append(media_block(mime.split("/", 1)[0], media))
        return cls(message_id=generate_id(message_id), role=role, content=blocks)

    def __delattr__(self, name: str) -> None:
        if is_sealed(self):
            raise SealedError(f"Cannot delete {name!r} of this Message: {SEALED_HINT}")
        super().__delattr__(name)

    # -- reading ---------------------------------------------------------------------------

    def text(self) -> str:
        """Text of the `TextBlock`s and the outputs of `ToolResultBlock`s, joined; JSON for
        non-string outputs. Other blocks are ignored."""
        parts: list[str] = []
        for block in self.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolResultBlock) and block.output is not None:
                parts.append(_json_text(block.output))
        return "".join(parts)

    def tool_call_blocks(self) -> list[ToolCallBlock]:
        """The `ToolCallBlock`s of this message, in order."""
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    def has_tool_calls(self) -> bool:
        """True when this message asks for at least one tool call."""
        return bool(self.tools_calls) or any(isinstance(b, ToolCallBlock) for b in self.content)

    def attach_media(self, media: MediaRef, as_type: MediaBlockType) -> None:
        """Append `media` to the content as an image, audio, video or document block."""
        if as_type not in _MEDIA_BLOCKS:
            raise ValueError(f"as_type must be one of {sorted(_MEDIA_BLOCKS)}, not {as_type!r}")
        self.content.append(media_block(as_type, media))


compact(
    Message,
    slots={
        "message_id": "_sealed_id",
        "role": "_sealed_role",
        "content": "_sealed_content",
        "timestamp": "_sealed_timestamp",
    },
)

# _text_message sets every field that has a default factory itself; keep it that way.
assert {n for n, f in Message.model_fields.items() if f.default_factory} == {
    "message_id",
    "timestamp",
    "metadata",
}, "Message gained a field with a default factory: update _text_message"
assert {n for n, f in TextBlock.model_fields.items() if f.default_factory} == {"annotations"}
_TEXT_BLOCK = template(TextBlock, text="")
_time = time.time


def _text_block(text: str, fields_set: set[str] | None = None) -> TextBlock:
    """A `TextBlock` holding `text`, built without validation."""
    fields = _TEXT_BLOCK.copy()
    fields["text"] = text
    fields["annotations"] = []
    return assemble(TextBlock, fields, {"text"} if fields_set is None else fields_set)


_TEXT_MESSAGE = template(Message, message_id="", role="user", content=[])


def _text_message(content: str, role: str, message_id: str | int, delta: bool) -> Message:
    """`Message.text_message` without validation: every value here is already known valid.
    Streaming makes one of these per token, so `assemble` is written out here for the block
    and the message (a fifth of the cost, measured in instructions)."""
    block_fields = _TEXT_BLOCK.copy()
    block_fields["text"] = content
    block_fields["annotations"] = []
    block = _new(TextBlock)
    _set_dict(block, block_fields)
    _set_fields_set(block, {"text"})
    _set_extra(block, None)
    _set_private(block, None)
    fields = _TEXT_MESSAGE.copy()
    fields["message_id"] = message_id
    fields["role"] = role
    fields["content"] = [block]
    fields["timestamp"] = _time()
    fields["metadata"] = {}
    message = _new(Message)
    _set_dict(message, fields)
    if delta:
        fields["delta"] = True
        _set_fields_set(message, {"message_id", "role", "content", "delta"})
    else:
        _set_fields_set(message, {"message_id", "role", "content"})
    _set_extra(message, None)
    _set_private(message, None)
    return message


def copy_plain_text(message: Message) -> Message | None:
    """A copy of a plain text message (text blocks only, nothing else set but ids, role and
    timestamp), built without validation; None for any other message."""
    if type(message) is not Message:
        return None
    fields = message.__dict__
    if (
        fields["metadata"]
        or fields["tools_calls"] is not None
        or fields["usages"] is not None
        or fields["raw"] is not None
        or fields["parsed_content"] is not None
        or fields["reasoning"] is not None
    ):
        return None
    blocks = []
    for block in fields["content"]:
        if type(block) is not TextBlock or block.annotations or block.cache_control:
            return None
        blocks.append(_text_block(block.text, set(block.__pydantic_fields_set__)))
    copied = dict(fields)
    copied["content"] = blocks
    copied["metadata"] = {}
    return assemble(Message, copied, set(message.__pydantic_fields_set__))


_MEDIA_BLOCKS: dict[str, type[ImageBlock | AudioBlock | VideoBlock | DocumentBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "document": DocumentBlock,
}


def media_block(kind: str, media: MediaRef) -> ContentBlock:
    """The block for a media kind or MIME major type; anything unknown is a document."""
    return _MEDIA_BLOCKS.get(kind, DocumentBlock)(media=media)


__all__ = ["Message", "Role", "TokenUsages", "copy_plain_text", "generate_id", "media_block"]
