"""Media: images, audio and documents kept out of checkpoints, and fetched safely.

`MediaStore` (content-addressed by sha256) and its stores `InMemoryMediaStore`,
`LocalMediaStore`, `SqliteMediaStore` and `PostgresMediaStore`; `MultimodalConfig` (how an
Agent sends media to its model). A saved message's inline media above the offload threshold
is moved to the graph's media store (`offload`); see `base` for references and deletion.

`fetch.fetch_media` fetches a URL for tenxgraph (refusing private addresses, other schemes,
oversized or slow answers). Every name is loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

if TYPE_CHECKING:
    from tenxgraph.storage.media.base import (
        MEDIA_URL_PREFIX,
        MediaStore,
        StoredMedia,
        media_url,
        stored_sha256,
    )
    from tenxgraph.storage.media.config import DocumentHandling, ImageHandling, MultimodalConfig
    from tenxgraph.storage.media.local import LocalMediaStore
    from tenxgraph.storage.media.memory import InMemoryMediaStore
    from tenxgraph.storage.media.offload import DEFAULT_OFFLOAD_THRESHOLD
    from tenxgraph.storage.media.postgres import PostgresMediaStore
    from tenxgraph.storage.media.sqlite import SqliteMediaStore

_BASE = "tenxgraph.storage.media.base"
_CONFIG = "tenxgraph.storage.media.config"
_LAZY = {
    "MEDIA_URL_PREFIX": _BASE,
    "MediaStore": _BASE,
    "StoredMedia": _BASE,
    "media_url": _BASE,
    "stored_sha256": _BASE,
    "DocumentHandling": _CONFIG,
    "ImageHandling": _CONFIG,
    "MultimodalConfig": _CONFIG,
    "LocalMediaStore": "tenxgraph.storage.media.local",
    "InMemoryMediaStore": "tenxgraph.storage.media.memory",
    "DEFAULT_OFFLOAD_THRESHOLD": "tenxgraph.storage.media.offload",
    "PostgresMediaStore": "tenxgraph.storage.media.postgres",
    "SqliteMediaStore": "tenxgraph.storage.media.sqlite",
}

__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_OFFLOAD_THRESHOLD",
    "MEDIA_URL_PREFIX",
    "DocumentHandling",
    "ImageHandling",
    "InMemoryMediaStore",
    "LocalMediaStore",
    "MediaStore",
    "MultimodalConfig",
    "PostgresMediaStore",
    "SqliteMediaStore",
    "StoredMedia",
    "media_url",
    "stored_sha256",
]
