"""Walking the media of messages: which blocks hold a `MediaRef`, and copies of a message
with some of them replaced (the original, maybe shared, is never changed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tenxgraph.core.state import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    VideoBlock,
)

MEDIA_BLOCKS = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock, DataBlock)
_MEDIA_TYPES = frozenset(MEDIA_BLOCKS)

#: (block, its media, the block's kind: "image", "document"...) -> the new media, or None
Rewrite = Callable[[Any, MediaRef, str], Awaitable[MediaRef | None]]


def has_media(message: Message) -> bool:
    return any(type(block) in _MEDIA_TYPES for block in message.content)


def media_of(block: Any) -> list[tuple[str, MediaRef]]:
    """The (field, MediaRef) pairs of a block; a DataBlock's inline data counts as one."""
    found: list[tuple[str, MediaRef]] = []
    if isinstance(block, DataBlock):
        if block.media is not None:
            found.append(("media", block.media))
        elif block.data_base64 is not None:
            inline = MediaRef(kind="data", data_base64=block.data_base64, mime_type=block.mime_type)
            found.append(("data_base64", inline))
        return found
    found.append(("media", block.media))
    if isinstance(block, VideoBlock) and block.thumbnail is not None:
        found.append(("thumbnail", block.thumbnail))
    return found


async def rewrite_message(message: Message, rewrite: Rewrite) -> Message:
    """`message`, or a copy whose media blocks `rewrite` changed."""
    content: list[Any] | None = None
    for i, block in enumerate(message.content):
        if type(block) not in _MEDIA_TYPES:
            continue
        changes: dict[str, Any] = {}
        for field, media in media_of(block):
            new = await rewrite(block, media, block.type)
            if new is not None:
                if field == "data_base64":
                    changes.update(data_base64=None, media=new)
                else:
                    changes[field] = new
        if changes:
            if content is None:
                content = list(message.content)
            content[i] = block.model_copy(update=changes)
    if content is None:
        return message
    return message.model_copy(update={"content": content})


__all__ = ["MEDIA_BLOCKS", "has_media", "media_of", "rewrite_message"]
