"""An Agent's uploads to its provider's Files API (`MultimodalConfig` with `FILE_ID`).

The media pre-pass leaves the images and documents sent by file id as they are (stored, or
inline); this step, run for each model a call is asked of (`ModelRequest.per_route`), turns
each into the file id of that provider:

- if the provider's chat takes that block by file id (`tenxgraph.core.llm.files`), the id
  remembered for (provider, api base, sha256) is used, else the bytes are uploaded once with
  the call's own key and base URL and the id remembered (in the graph's media store: a table
  of the SQL stores, else memory; without a media store, in the Agent's memory). An id whose
  expiry has passed (Gemini's 48 hours) is uploaded again;
- otherwise (OpenAI images, a provider without a Files API here, a client that cannot tell
  its provider) the media is sent inline, as with `BASE64`.

When a call fails because the provider no longer knows an id this step gave it (a 404 about
a file, or a 400/403 naming it), the ids of that call are forgotten and the call is made once more,
uploading again (`renew`, run by `tenxgraph.core.llm.calling`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import mimetypes
import time
from typing import Any, Protocol

from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.llm import files
from tenxgraph.core.llm.request import ModelRequest
from tenxgraph.core.state import MediaRef, Message
from tenxgraph.storage.media._blocks import has_media, rewrite_message
from tenxgraph.storage.media.base import MediaStore, ProviderFile, stored_sha256
from tenxgraph.storage.media.config import MultimodalConfig
from tenxgraph.storage.media.offload import inline_bytes
from tenxgraph.storage.media.resolve import for_upload, inlined

#: an id expiring sooner than this (seconds) is uploaded again rather than used
EXPIRY_MARGIN = 600.0
_DEFAULT_MIME = {"image": "image/png", "document": "application/pdf"}


class FileIds(Protocol):
    """Where uploaded ids are remembered: a `MediaStore` or a `ProviderFileMemory`."""

    async def aprovider_file(
        self, provider: str, api_base: str, sha256: str
    ) -> ProviderFile | None: ...

    async def aremember_provider_file(
        self, provider: str, api_base: str, sha256: str, file: ProviderFile
    ) -> None: ...

    async def aforget_provider_file(self, provider: str, api_base: str, sha256: str) -> None: ...


class ProviderFiles:
    """The `RouteStep` of one request: see the module docstring."""

    def __init__(self, store: MediaStore | None, config: MultimodalConfig, ids: FileIds) -> None:
        self.store = store
        self.config = config
        self.ids = ids
        self._made: dict[str, str] = {}  # file id -> sha256, for the ids this step gave

    async def prepare(self, request: ModelRequest, provider: str | None) -> ModelRequest:
        messages: list[Message] = []
        for message in request.messages:
            if not has_media(message):
                messages.append(message)
                continue

            async def one(block: Any, media: MediaRef, kind: str, m: Message = message) -> Any:
                if not for_upload(m, media, kind, self.config):
                    return None
                return await self._sent(media, kind, provider, request)

            messages.append(await rewrite_message(message, one))
        return dataclasses.replace(request, messages=messages)

    async def _sent(
        self, media: MediaRef, kind: str, provider: str | None, request: ModelRequest
    ) -> MediaRef | None:
        """`media` as `provider` gets it: by file id, or inline (None: it already is)."""
        mime = media.mime_type or _inline_mime(media) or _DEFAULT_MIME[kind]
        sha = stored_sha256(media)
        if provider is None or not files.takes_file_id(provider, kind, mime):
            if sha is None:
                return None  # inline already
            return inlined(media, await self._bytes(media), media.mime_type)
        data: bytes | None = None
        if sha is None:
            data = await self._bytes(media)
            sha = hashlib.sha256(data).hexdigest()
        base = files.api_base_of(request.settings)
        known = await self.ids.aprovider_file(provider, base, sha)
        if known is None or _expired(known):
            data = data if data is not None else await self._bytes(media)
            name = media.filename or f"{kind}-{sha[:12]}{mimetypes.guess_extension(mime) or ''}"
            known = await files.upload_file(
                provider, request.model, data, mime, name, request.settings
            )
            await self.ids.aremember_provider_file(provider, base, sha, known)
        self._made[known.file_id] = sha
        return MediaRef(
            kind="file_id",
            file_id=known.file_id,
            mime_type=mime,
            size_bytes=media.size_bytes if data is None else len(data),
            sha256=sha,
            filename=media.filename,
        )

    async def _bytes(self, media: MediaRef) -> bytes:
        sha = stored_sha256(media)
        if sha is not None:
            if self.store is None:  # the pre-pass refused this already
                raise ValueError(f"no media store holds {media.url}")
            return await self.store.aget(sha)
        found = inline_bytes(media)
        assert found is not None  # `for_upload` let only stored or inline media through
        return base64.b64decode(found[0])

    async def renew(self, sent: ModelRequest, provider: str | None, error: ModelError) -> bool:
        if provider is None:
            return False
        ours = {f for f in _file_ids(sent) if f in self._made}
        if not ours or not _names_lost_file(error, ours):
            return False
        base = files.api_base_of(sent.settings)
        for file_id in ours:
            await self.ids.aforget_provider_file(provider, base, self._made.pop(file_id))
        return True


def _expired(known: ProviderFile) -> bool:
    return known.expires_at is not None and known.expires_at - EXPIRY_MARGIN <= time.time()


def _inline_mime(media: MediaRef) -> str | None:
    found = inline_bytes(media)
    return None if found is None else found[1]


def _file_ids(request: ModelRequest) -> set[str]:
    found: set[str] = set()
    for message in request.messages:
        for block in message.content:
            media = getattr(block, "media", None)
            if isinstance(media, MediaRef) and media.kind == "file_id" and media.file_id:
                found.add(media.file_id)
    return found


def _names_lost_file(error: ModelError, file_ids: set[str]) -> bool:
    """Whether a failed call says a file it named is gone: a 400/403/404 whose text names one
    of `file_ids` (Gemini answers 403 for a file it deleted), or a 404 about a file."""
    status = error.status_code
    if status not in (400, 403, 404):
        return False
    text = f"{error.message} {error.context.get('detail') or ''}"
    if any(f in text or f.rsplit("/", 1)[-1] in text for f in file_ids):
        return True
    return status == 404 and "file" in text.lower()  # not a 404 for the model's name


__all__ = ["EXPIRY_MARGIN", "FileIds", "ProviderFiles"]
