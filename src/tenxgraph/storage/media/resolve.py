"""The Agent's pre-pass over a request's messages: stored references become inline base64
(a provider cannot read this process's media store); http(s) URLs are kept or fetched and
inlined as the `MultimodalConfig` says; sizes and MIME types are checked. What the wire
conversion then sees is only inline data, URLs and provider file ids.

With `uploads`, the images and documents the config sends by file id (`FILE_ID`) that are
stored or inline are left as they are, for the step that knows the provider each call goes
to (`tenxgraph.core.graph.provider_files`) to upload them or inline them then. Media in a
tool message is never left so: a provider's tool result takes no uploaded file here."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from tenxgraph.core.state import MediaRef, Message
from tenxgraph.storage.media._blocks import has_media, rewrite_message
from tenxgraph.storage.media.base import MediaStore, stored_sha256
from tenxgraph.storage.media.config import DocumentHandling, ImageHandling, MultimodalConfig
from tenxgraph.storage.media.offload import inline_bytes

_MB = 1024 * 1024


async def resolve_media(
    messages: Sequence[Message],
    store: MediaStore | None,
    config: MultimodalConfig | None,
    fetch_urls: bool = False,
    uploads: bool = False,
) -> list[Message]:
    """`messages` ready for the wire: see the module docstring. Without a config, stored
    references are inlined and everything else is left as it is; with `fetch_urls` (a
    provider that would download URLs itself: Gemini), every http(s) URL is fetched here,
    through the safe fetcher, and sent inline. `ValueError` (naming the message) for a stored
    reference without a store, or media the config refuses. `uploads`: see the module."""
    out: list[Message] = []
    for message in messages:
        if not has_media(message):
            out.append(message)
            continue

        async def resolve(block: Any, media: MediaRef, kind: str, m: Message = message) -> Any:
            if uploads and config is not None and for_upload(m, media, kind, config):
                if stored_sha256(media) is not None and store is None:
                    raise _no_store(m, media)
                _check(f"message {m.message_id!r}", media, kind, config)
                return None
            return await _resolve_one(m, media, kind, store, config, fetch_urls)

        out.append(await rewrite_message(message, resolve))
    return out


async def _resolve_one(
    message: Message,
    media: MediaRef,
    kind: str,
    store: MediaStore | None,
    config: MultimodalConfig | None,
    fetch_urls: bool = False,
) -> MediaRef | None:
    where = f"message {message.message_id!r}"
    sha = stored_sha256(media)
    new: MediaRef | None = None
    if sha is not None:
        if store is None:
            raise _no_store(message, media)
        data = await store.aget(sha)
        new = inlined(media, data, media.mime_type)
    elif (
        media.kind == "url"
        and _is_http(media.url)
        and (fetch_urls or (config is not None and _handling(config, kind) == "base64"))
    ):
        fetched = await _fetch(str(media.url), config, kind)
        new = inlined(media, fetched.data, media.mime_type or fetched.mime_type)
    if config is not None:
        _check(where, new or media, kind, config)
    return new


async def _fetch(url: str, config: MultimodalConfig | None, kind: str) -> Any:
    """`url`'s bytes through the safe fetcher (imported on first use), within the config's
    size and MIME type limits for `kind` (image or document; others: the fetcher's own)."""
    from tenxgraph.storage.media import fetch

    if config is None or kind not in ("image", "document"):
        return await fetch.fetch_media(url)
    image = kind == "image"
    limit = config.max_image_size_mb if image else config.max_document_size_mb
    types = config.supported_image_types if image else config.supported_document_types
    policy = fetch.FetchPolicy(max_bytes=int(limit * _MB), allowed_mime_types=types)
    return await fetch.fetch_media(url, policy=policy)


def for_upload(message: Message, media: MediaRef, kind: str, config: MultimodalConfig) -> bool:
    """Whether `media` (of a block of `kind`) is one the config sends by provider file id
    and has bytes to upload: stored or inline, in a message that is not a tool's answer."""
    return (
        message.role != "tool"
        and kind in ("image", "document")
        and _handling(config, kind) == "file_id"
        and (stored_sha256(media) is not None or inline_bytes(media) is not None)
    )


def _no_store(message: Message, media: MediaRef) -> ValueError:
    return ValueError(
        f"message {message.message_id!r} names stored media {media.url} but this graph has no "
        "media store: compile(media_store=...) with the store that holds it"
    )


def inlined(media: MediaRef, data: bytes, mime_type: str | None) -> MediaRef:
    """`media` as inline base64 of `data`."""
    return media.model_copy(
        update={"kind": "data", "url": None, "mime_type": mime_type, "size_bytes": len(data),
                "data_base64": base64.b64encode(data).decode("ascii")},
    )  # fmt: skip


def _is_http(url: str | None) -> bool:
    return url is not None and url.lower().startswith(("http://", "https://"))


def _handling(config: MultimodalConfig, kind: str) -> str:
    if kind == "image":
        return ImageHandling(config.image_handling).value
    if kind == "document":
        return DocumentHandling(config.document_handling).value
    return "url"  # audio, video, data: passed on as they are


def _check(where: str, media: MediaRef, kind: str, config: MultimodalConfig) -> None:
    """The config's limits on one item: its size (when known) and MIME type."""
    if kind == "image":
        limit, allowed = config.max_image_size_mb, config.supported_image_types
    elif kind == "document":
        limit, allowed = config.max_document_size_mb, config.supported_document_types
    else:
        return
    size = media.size_bytes
    found = inline_bytes(media)
    if found is not None:
        size = len(found[0]) * 3 // 4
    if size is not None and size > limit * _MB:
        raise ValueError(
            f"{where}: a {kind} of {size / _MB:.1f} MB is over MultimodalConfig's "
            f"max_{kind}_size_mb={limit}"
        )
    mime = media.mime_type or (found[1] if found else None)
    if mime is not None and allowed and mime not in allowed:
        raise ValueError(
            f"{where}: {kind} type {mime!r} is not in MultimodalConfig's "
            f"supported_{kind}_types {sorted(allowed)}"
        )


__all__ = ["for_upload", "inlined", "resolve_media"]
