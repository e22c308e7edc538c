"""Media blocks -> the OpenAI-format content parts litellm translates for each provider.

Each provider takes a different set of media, in different forms. A block goes out in the form
its provider documents (through the part litellm turns into it), or the request fails here,
before anything is sent, with an `UnsupportedContentError` that names the block, its form and
the provider and says what to give instead. Nothing is dropped silently.

The forms, by provider (the README's "Media: what reaches each provider" has the table):

- OpenAI chat (and OpenAI-compatible servers, and providers we have no rules for): images by
  URL or inline (``image_url``); audio inline as wav or mp3 (``input_audio``); documents inline
  or by file id (``file``), by URL only as their extracted text. Refused: images by file id,
  audio by URL or file id, other audio formats, video.
- Anthropic: images by URL, inline or Files API id; documents inline, by URL or by Files API id
  (``file`` parts, which litellm turns into ``image`` / ``document`` blocks). Refused: audio,
  video.
- Gemini: everything; images as ``image_url``, the rest as ``file`` parts with their MIME
  type. litellm sends inline data as ``inline_data``, fetches a URL and sends it inline, and
  sends a Files API URI as ``file_data``. Refused: media by file id in a tool result.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from tenxgraph.core.exceptions import UnsupportedContentError
from tenxgraph.core.state.message_block import (
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    VideoBlock,
)

Family = Literal["openai", "anthropic", "gemini"]
MediaBlock = ImageBlock | AudioBlock | VideoBlock | DocumentBlock

_GEMINI = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
_NAMES = {"openai": "OpenAI chat", "anthropic": "Anthropic", "gemini": "Gemini"}
GEMINI_FILES_URI = "https://generativelanguage.googleapis.com/v1beta/files/"

# audio MIME subtypes whose OpenAI `input_audio` format name differs from the subtype
_AUDIO_FORMATS = {"mpeg": "mp3", "mp3": "mp3", "x-wav": "wav", "wave": "wav", "wav": "wav"}
# what Anthropic's `image` block takes by file id; litellm picks the block type from it
_ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_DEFAULT_MIME = {
    "image": "image/png",
    "audio": "audio/wav",
    "video": "video/mp4",
    "document": "application/pdf",
}
# content blocks a tool may return (as block dicts) that go to the model as content
_OUTPUT_TYPES = frozenset({"text", "image", "audio", "video", "document", "data"})
_BLOCK: TypeAdapter[Any] = TypeAdapter(ContentBlock)


def family(provider: str | None, model: str | None = None) -> Family:
    """The wire rules a provider follows: Anthropic's (also Claude on Vertex AI), Gemini's, or
    OpenAI's (OpenAI itself, Azure, OpenAI-compatible servers, and any provider we have no
    rules for)."""
    if provider == "anthropic":
        return "anthropic"
    if provider in _GEMINI:
        return "anthropic" if model and "claude" in model.lower() else "gemini"
    return "openai"


class Where:
    """Who the parts are for: the provider, the model and the place (for the error)."""

    __slots__ = ("family", "model", "place", "provider")

    def __init__(
        self, provider: str | None, model: str | None = None, place: str = "message"
    ) -> None:
        self.provider = provider
        self.family = family(provider, model)
        self.model = model
        self.place = place

    def refuse(self, block_type: str, kind: str, what: str, todo: str) -> UnsupportedContentError:
        name = _NAMES[self.family]
        provider = self.provider or "openai"
        on = f" (model {self.model!r})" if self.model else ""
        return UnsupportedContentError(
            f"{name}{on} cannot take {what} ({_article(block_type)} {block_type} block with "
            f"kind={kind!r}, in a {self.place}): {todo}. Nothing was sent.",
            context={
                "provider": provider,
                "model": self.model,
                "status_code": None,
                "block_type": block_type,
                "media_kind": kind,
                "where": self.place,
            },
        )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def data_url(media: MediaRef, default_mime: str = "application/octet-stream") -> str:
    return f"data:{media.mime_type or default_mime};base64,{media.data_base64 or ''}"


def media_parts(block: MediaBlock | DataBlock, where: Where) -> list[dict[str, Any]]:
    """The content parts for one media block (one part, or a text part for a document whose
    text is all the provider can take), or UnsupportedContentError."""
    if isinstance(block, DataBlock):
        return _data_block(block, where)
    if isinstance(block, ImageBlock):
        return [_image(block.media, where)]
    if isinstance(block, AudioBlock):
        return [_audio(block.media, where)]
    if isinstance(block, VideoBlock):
        return [_video(block.media, where)]
    return [_document(block, where)]


def _image(media: MediaRef, where: Where) -> dict[str, Any]:
    if media.kind == "url":
        return {"type": "image_url", "image_url": {"url": media.url}}
    if media.kind == "data":
        return {"type": "image_url", "image_url": {"url": data_url(media, "image/png")}}
    if where.family == "anthropic":  # Files API; litellm adds its beta header
        mime = media.mime_type if media.mime_type in _ANTHROPIC_IMAGE_TYPES else "image/png"
        return {"type": "file", "file": {"file_id": media.file_id, "format": mime}}
    if where.family == "gemini":
        return _gemini_file(media, "image", where)
    raise where.refuse(
        "image",
        "file_id",
        "an image by file id",
        "it takes images by URL or as inline data: give the image's URL or its bytes "
        "(MediaRef(kind='data', ...)), or a MediaRef the media store can resolve",
    )


def _audio(media: MediaRef, where: Where) -> dict[str, Any]:
    if where.family == "gemini":
        return _gemini_file(media, "audio", where)
    if where.family == "anthropic":
        raise where.refuse(
            "audio",
            media.kind,
            "audio",
            "Claude models take no audio input: send its transcript as text "
            "(AudioBlock.transcript, or a TextBlock), or use a model that hears audio "
            "(OpenAI gpt-4o-audio, Gemini)",
        )
    if media.kind != "data":
        raise where.refuse(
            "audio",
            media.kind,
            "audio by " + ("URL" if media.kind == "url" else "file id"),
            "it takes audio only as inline data (wav or mp3): give the bytes "
            "(MediaRef(kind='data', ...)), or a MediaRef the media store can resolve",
        )
    subtype = (media.mime_type or "audio/wav").rsplit("/", 1)[-1].lower()
    fmt = _AUDIO_FORMATS.get(subtype)
    if fmt is None:
        raise where.refuse(
            "audio",
            "data",
            f"audio of type {media.mime_type!r}",
            "it takes wav or mp3 only: convert the clip to one of them",
        )
    return {"type": "input_audio", "input_audio": {"data": media.data_base64 or "", "format": fmt}}


def _video(media: MediaRef, where: Where) -> dict[str, Any]:
    if where.family == "gemini":
        return _gemini_file(media, "video", where)
    raise where.refuse(
        "video",
        media.kind,
        "video",
        "it takes no video input: send frames as images (ImageBlock), or use a Gemini model",
    )


def _document(block: DocumentBlock, where: Where) -> dict[str, Any]:
    media = block.media
    if where.family == "gemini":
        return _gemini_file(media, "document", where)
    if media.kind == "data":
        file: dict[str, Any] = {"file_data": data_url(media, "application/pdf")}
        if where.family == "openai":  # OpenAI wants a name with inline file data
            file["filename"] = media.filename or "document.pdf"
        return {"type": "file", "file": file}
    if media.kind == "file_id":
        file = {"file_id": media.file_id}
        if where.family == "anthropic":  # Files API document (not a container upload)
            file["format"] = media.mime_type or "application/pdf"
        return {"type": "file", "file": file}
    if where.family == "anthropic":  # litellm: a URL without a format is a URL document
        return {"type": "file", "file": {"file_id": media.url}}
    if block.text:  # a fetched document we already have the text of
        return {"type": "text", "text": block.text}
    raise where.refuse(
        "document",
        "url",
        "a document by URL",
        "it takes documents as inline data or an uploaded file id: give the bytes "
        "(MediaRef(kind='data', ...)) or a MediaRef the media store can resolve, upload the "
        "file and pass its file_id, or put the extracted text in DocumentBlock.text",
    )


def _gemini_file(media: MediaRef, block_type: str, where: Where) -> dict[str, Any]:
    """A ``file`` part: litellm sends inline data as ``inline_data``, fetches a URL and sends it
    inline, and sends a Files API URI as ``file_data``."""
    mime = media.mime_type or _guessed_mime(media) or _DEFAULT_MIME[block_type]
    if media.kind == "data":
        return {"type": "file", "file": {"file_data": data_url(media, mime), "format": mime}}
    if media.kind == "url":
        return {"type": "file", "file": {"file_id": media.url, "format": mime}}
    if where.place == "tool result":
        raise where.refuse(
            block_type,
            "file_id",
            f"{_article(block_type)} {block_type} by file id in a tool result",
            "litellm sends only inline media in a Gemini function response: give the bytes "
            "(MediaRef(kind='data', ...)) or a URL",
        )
    file_id = media.file_id or ""
    if not file_id.startswith(("https://", "gs://")):  # "files/abc" or "abc"
        file_id = GEMINI_FILES_URI + file_id.removeprefix("files/")
    return {"type": "file", "file": {"file_id": file_id, "format": mime}}


def _guessed_mime(media: MediaRef) -> str | None:
    """The MIME type a URL's or file name's extension names (``.mp3``: ``audio/mpeg``)."""
    name = media.filename or (media.url or "").split("?", 1)[0]
    return mimetypes.guess_type(name)[0] if name else None


def _data_block(block: DataBlock, where: Where) -> list[dict[str, Any]]:
    """A DataBlock as the media block its MIME type says it is, or as text."""
    mime = block.mime_type.lower()
    media = block.media
    if media is None:
        media = MediaRef(kind="data", data_base64=block.data_base64 or "", mime_type=mime)
    elif media.mime_type is None:
        media = media.model_copy(update={"mime_type": mime})
    major = mime.split("/", 1)[0]
    if major == "image":
        return [_image(media, where)]
    if major == "audio":
        return [_audio(media, where)]
    if major == "video":
        return [_video(media, where)]
    if mime == "application/pdf":
        return [_document(DocumentBlock(media=media), where)]
    text = _as_text(media, mime)
    if text is not None:
        return [{"type": "text", "text": text}]
    raise where.refuse(
        "data",
        media.kind,
        f"data of type {block.mime_type!r}",
        "models read text, images, audio, video and PDF documents: convert the data to one "
        "of them (for structured data, its JSON as a TextBlock)",
    )


def _as_text(media: MediaRef, mime: str) -> str | None:
    """Inline data of a text type (text/*, JSON, XML...) as its text; else None."""
    textual = mime.startswith("text/") or mime.endswith(("json", "xml", "yaml", "csv"))
    if not textual or media.kind != "data":
        return None
    try:
        return base64.b64decode(media.data_base64 or "", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


# -- what a tool returned --------------------------------------------------------------------


def output_blocks(output: Any) -> list[Any] | None:
    """The content blocks in a tool's output, when it holds media: an image (or other media
    block) it returned, a list of block dicts (a Message's content, an MCP result), or an
    MCP ``{"structured_content": ..., "content": [blocks]}``. None for any other output (it
    goes to the model as its JSON text)."""
    head: list[Any] = []
    items: Any = output
    if isinstance(output, dict):
        if set(output) == {"structured_content", "content"} and isinstance(output["content"], list):
            structured = json.dumps(output["structured_content"], default=str, ensure_ascii=False)
            head = [TextBlock(text=structured)]
            items = output["content"]
        else:
            items = [output]
    if not isinstance(items, list) or not items:
        return None
    if not all(isinstance(i, dict) and i.get("type") in _OUTPUT_TYPES for i in items):
        return None
    if all(i.get("type") == "text" for i in items):
        return None
    try:
        blocks = [_BLOCK.validate_python(i) for i in items]
    except ValidationError:
        return None
    return head + blocks


__all__ = [
    "GEMINI_FILES_URI",
    "Where",
    "data_url",
    "family",
    "media_parts",
    "output_blocks",
]
