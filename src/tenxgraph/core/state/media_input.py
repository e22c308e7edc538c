"""What `Message.with_image` / `Message.with_file` need: a media store, named by its shape
(`MediaSink`; the data model imports no storage), and a file read with its MIME type."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Protocol, runtime_checkable

from tenxgraph.core.state.message_block import MediaRef


@runtime_checkable
class MediaSink(Protocol):
    """Anything that keeps bytes and names them with a `MediaRef`, such as every
    `tenxgraph.storage.media.MediaStore`."""

    async def aput(
        self, data: bytes, mime_type: str, *, filename: str | None = None
    ) -> MediaRef: ...


def read_media_file(file_path: str | Path, mime_type: str | None, who: str) -> tuple[bytes, str]:
    """The bytes of a regular file and its MIME type (`mime_type`, else guessed from the
    name); `FileNotFoundError` / `IsADirectoryError` naming `who` otherwise."""
    path = Path(file_path)
    if not path.exists():
        raise FileNotFoundError(
            f"{who}: no file at {str(path)!r} (resolved to {str(path.resolve())!r})"
        )
    if not path.is_file():
        raise IsADirectoryError(f"{who}: {str(path)!r} is not a regular file")
    mime = mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return path.read_bytes(), mime


def check_sink(store: object, who: str) -> MediaSink:
    if not isinstance(store, MediaSink):
        raise TypeError(
            f"{who} takes a media store (e.g. tenxgraph.storage.media.InMemoryMediaStore(), "
            f"or app.media_store), not {type(store).__name__}"
        )
    return store


__all__ = ["MediaSink", "check_sink", "read_media_file"]
