"""An Agent's media pre-pass: a request's stored media references become inline data (from
the running graph's media store) and the `MultimodalConfig` is applied, before the wire
conversion sees the messages (`tenxgraph.storage.media.resolve`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenxgraph.core.graph.nesting import current_run
from tenxgraph.core.llm.request import ModelRequest

if TYPE_CHECKING:
    from tenxgraph.core.graph.provider_files import FileIds
    from tenxgraph.storage.media.config import MultimodalConfig

_MEDIA_TYPES = frozenset({"image", "audio", "video", "document", "data"})


#: providers litellm sends URL media to by downloading it first: tenxgraph downloads it
#: instead, through its safe fetcher (private addresses refused), and sends it inline
DOWNLOADING = frozenset({"gemini", "vertex_ai"})


async def with_media_resolved(
    request: ModelRequest,
    config: MultimodalConfig | None,
    provider: Callable[[str], str | None] | None = None,
    memory: Callable[[], FileIds] | None = None,
) -> Any:
    """`request`, its messages' media resolved; the same request when it has none.
    `provider(model)` names the provider the request goes to, when it can be told. Media the
    config sends by provider file id is left to the request's `per_route` step
    (`provider_files`), which remembers ids in the media store, else in `memory()`."""
    if not any(
        getattr(block, "type", None) in _MEDIA_TYPES
        for message in request.messages
        for block in message.content
    ):
        return request
    from tenxgraph.storage.media.resolve import resolve_media

    run = current_run.get()
    media = None if run is None else run.program.media
    store = None if media is None else media.store
    fetch_urls = provider is not None and provider(request.model) in DOWNLOADING
    uploads = config is not None and "file_id" in (config.image_handling, config.document_handling)
    messages = await resolve_media(request.messages, store, config, fetch_urls, uploads)
    step = None
    if uploads and config is not None:
        from tenxgraph.core.graph.provider_files import ProviderFiles
        from tenxgraph.storage.media.base import ProviderFileMemory

        ids = store if store is not None else memory() if memory else ProviderFileMemory()
        step = ProviderFiles(store, config, ids)
    return dataclasses.replace(request, messages=messages, per_route=step)


def check_multimodal_config(config: Any) -> Any:
    """`Agent(multimodal_config=...)`: a `MultimodalConfig` or None."""
    if config is None:
        return None
    from tenxgraph.storage.media.config import MultimodalConfig

    if not isinstance(config, MultimodalConfig):
        raise TypeError(
            "multimodal_config must be a tenxgraph.storage.media.config.MultimodalConfig, "
            f"not {type(config).__name__}"
        )
    return config


__all__ = ["check_multimodal_config", "with_media_resolved"]
