"""`MultimodalConfig`: how an Agent sends images and documents to its model.

Stored references (``tenxgraph://media/<sha256>``) never leave the process as such: the
Agent reads their bytes from the graph's media store and sends them inline (base64). What
the config decides is the rest: an http(s) URL is passed on as a URL (`ImageHandling.URL`,
the default) or fetched and inlined (`BASE64`, through the safe fetcher); provider file ids
are passed on. Media bigger than the maximum size, or of a MIME type not allowed, raise
`ValueError` naming the message, before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

DEFAULT_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
DEFAULT_DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain", "text/markdown", "text/csv"})


class ImageHandling(StrEnum):
    """How an image reaches the model: inline base64, a URL the provider fetches, or a
    provider file id (kept when the reference is one)."""

    BASE64 = "base64"
    URL = "url"
    FILE_ID = "file_id"


class DocumentHandling(StrEnum):
    """How a document reaches the model (as `ImageHandling`)."""

    BASE64 = "base64"
    URL = "url"
    FILE_ID = "file_id"


@dataclass(frozen=True, slots=True)
class MultimodalConfig:
    """What an `Agent(multimodal_config=...)` sends of the media in its messages.

    `max_image_size_mb` / `max_document_size_mb` bound one item's bytes; the `supported_*`
    MIME types are the ones allowed (an item whose type is unknown is allowed)."""

    image_handling: ImageHandling = ImageHandling.URL
    document_handling: DocumentHandling = DocumentHandling.URL
    max_image_size_mb: float = 20.0
    max_document_size_mb: float = 50.0
    supported_image_types: frozenset[str] = field(default=DEFAULT_IMAGE_TYPES)
    supported_document_types: frozenset[str] = field(default=DEFAULT_DOCUMENT_TYPES)

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_handling", ImageHandling(self.image_handling))
        object.__setattr__(self, "document_handling", DocumentHandling(self.document_handling))
        for name in ("max_image_size_mb", "max_document_size_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"MultimodalConfig.{name} must be > 0")
        object.__setattr__(self, "supported_image_types", frozenset(self.supported_image_types))
        object.__setattr__(
            self, "supported_document_types", frozenset(self.supported_document_types)
        )


__all__ = ["DocumentHandling", "ImageHandling", "MultimodalConfig"]
