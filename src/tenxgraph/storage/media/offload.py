"""Offload: what a save writes of a message's media. Inline data bigger than the threshold
goes to the graph's media store and the saved message names it (`tenxgraph://media/...`),
so checkpoints stay small and the same bytes are stored once. The thread is recorded as an
owner of every stored blob its saved messages name, for `MediaStore.arelease_thread`.

The message in the running state is not changed (the run goes on with its inline data);
only what is stored is. A ``data:`` URL counts as inline data.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import MediaRef, Message
from tenxgraph.storage.media._blocks import has_media, media_of, rewrite_message
from tenxgraph.storage.media.base import MediaStore, stored_sha256

#: inline media bigger than this (decoded bytes) is moved to the media store on save
DEFAULT_OFFLOAD_THRESHOLD = 256 * 1024


def inline_bytes(media: MediaRef) -> tuple[str, str | None] | None:
    """(base64 text, MIME type) of inline media: kind "data", or a base64 ``data:`` URL."""
    if media.kind == "data" and media.data_base64:
        return media.data_base64, media.mime_type
    url = media.url
    if media.kind == "url" and url is not None and url.startswith("data:"):
        head, sep, text = url.partition(",")
        if sep and head.endswith(";base64"):
            mime = head[5 : -len(";base64")] or media.mime_type
            return text, mime or None
    return None


@dataclass(frozen=True, slots=True)
class MediaOffload:
    """A graph's media store and the size above which inline media goes there (0: never)."""

    store: MediaStore
    threshold: int = DEFAULT_OFFLOAD_THRESHOLD

    def __post_init__(self) -> None:
        if not isinstance(self.threshold, int) or self.threshold < 0:
            raise ValueError(
                f"the media offload threshold is a number of bytes >= 0 (0: keep media "
                f"inline), not {self.threshold!r}"
            )

    async def prepare(self, thread_id: str, messages: Sequence[Message]) -> Sequence[Message]:
        """`messages` as `thread_id` stores them: big inline media offloaded, and the thread
        recorded as owner of the blobs they name. The same sequence when nothing changed."""
        if not any(has_media(m) for m in messages):
            return messages
        owned: set[str] = set()
        put: dict[str, tuple[bytes, str]] = {}  # what this save stored itself, by sha256
        threshold = self.threshold

        async def offload(block: Any, media: MediaRef, kind: str) -> MediaRef | None:
            sha = stored_sha256(media)
            if sha is not None:
                owned.add(sha)
                return None
            found = inline_bytes(media) if threshold else None
            if found is None or len(found[0]) * 3 // 4 <= threshold:
                return None
            text, mime = found
            try:
                data = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                return None  # not base64: stored as it is
            ref = await self.store.aput(data, mime or "application/octet-stream")
            owned.add(str(ref.sha256))
            put[str(ref.sha256)] = (data, ref.mime_type or "application/octet-stream")
            return media.model_copy(
                update={"kind": "url", "url": ref.url, "data_base64": None, "sha256": ref.sha256,
                        "size_bytes": ref.size_bytes, "mime_type": ref.mime_type},
            )  # fmt: skip

        prepared = [await rewrite_message(m, offload) if has_media(m) else m for m in messages]
        if owned:
            await self._own(thread_id, owned, put)
        changed = any(a is not b for a, b in zip(prepared, messages, strict=True))
        return prepared if changed else messages

    async def _own(
        self, thread_id: str, owned: set[str], put: dict[str, tuple[bytes, str]]
    ) -> None:
        """Record `thread_id` as the owner of the blobs its messages name, before they are
        saved. A blob deleted between this save's put and its owning (another thread's
        release or a sweep took it: the put found it already there) is put again; one the
        messages name but the store does not hold refuses the save."""
        missing = await self.store.aadd_owners(thread_id, owned)
        for _ in range(3):
            again = missing.intersection(put)
            if not again:
                break
            for sha in sorted(again):
                await self.store.aput(*put[sha])
            missing = missing.difference(again) | await self.store.aadd_owners(thread_id, again)
        if missing:
            sha = min(missing)
            raise SerializationError(
                f"Thread {thread_id!r}: cannot store a message naming media {sha}: the media "
                "store does not hold it (never stored there, or deleted since). Put the bytes "
                "in again (Message.with_image / with_file, or store.aput) and name the new "
                "reference. Nothing was written.",
                context={"thread_id": thread_id, "sha256": sha},
            )


__all__ = ["DEFAULT_OFFLOAD_THRESHOLD", "MediaOffload", "inline_bytes", "media_of"]
