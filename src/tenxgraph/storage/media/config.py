"""`MultimodalConfig`: how an Agent sends images and documents to its model.

Stored references (``tenxgraph://media/<sha256>``) never leave the process as such. Per
handling (`ImageHandling` for images, `DocumentHandling` for documents):

- `URL` (the default): stored media is read from the graph's media store and sent inline
  (base64); an http(s) URL is passed on for the provider to fetch.
- `BASE64`: the same, and an http(s) URL is fetched here (through the safe fetcher) and sent
  inline.
- `FILE_ID`: stored and inline media is uploaded once to the Files API of the provider the
  call goes to (with the Agent's key and base URL) and sent as that provider's file id; the
  id is remembered per (provider, api base, sha256) in the media store (a table of the SQL
  stores, else memory), uploaded again when it has expired or the provider says it no longer
  knows it (once per call). Where the provider's chat takes no file id for that block
  (OpenAI images, providers other than OpenAI, Anthropic and Gemini, a model client that
  names no provider), the media is sent inline; a failed upload is a `MediaUploadError`
  before the model is asked. URLs are passed on as with `URL`.

Provider file ids given in a `MediaRef(kind="file_id")` are always passed on. Media in a
tool's answer is sent inline whatever the handling. Media bigger than the maximum size, or of
a MIME type not allowed, raise `ValueError` naming the message, before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

DEFAULT_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
DEFAULT_DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain", "text/markdown", "text/csv"})


class ImageHandling(StrEnum):
    """How an image reaches the model: inline base64, a URL the provider fetches, or a
    provider file id (stored and inline images uploaded to the provider's Files API; see the
    module docstring)."""

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

    `image_handling` / `document_handling`: `URL` (default), `BASE64` or `FILE_ID` (upload
    to the provider's Files API once, send its file id), as the module docstring details.
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
