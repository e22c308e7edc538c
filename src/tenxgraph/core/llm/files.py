"""Uploading media to a provider's Files API, for an Agent whose `MultimodalConfig` says
`FILE_ID` (`tenxgraph.core.graph.provider_files` decides what is uploaded and remembers the
ids). The upload goes through litellm's `acreate_file` with the call's own key and base URL.

Which blocks each provider's chat takes by an uploaded file's id (`takes_file_id`):

- OpenAI: PDF documents (uploaded with purpose ``user_data``). Chat completions takes no
  image by file id (only the Responses API does), so images stay inline.
- Anthropic: images (JPEG, PNG, GIF, WebP) and documents (PDF, plain text), through the
  Files API beta, whose header litellm adds.
- Gemini: images and documents of any type; the id is the file's URI. Gemini deletes an
  uploaded file after 48 hours: its id is used for 47 (`GEMINI_LIFETIME`), then uploaded
  again.

Any other provider (Azure, Vertex AI, Bedrock, an OpenAI-compatible server named by another
provider prefix...) has no upload here: its media is sent inline.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from tenxgraph.core import redaction
from tenxgraph.core.exceptions import MediaUploadError
from tenxgraph.core.llm.litellm_client import load_litellm, redact_detail
from tenxgraph.storage.media.base import ProviderFile

#: the providers tenxgraph uploads to, and the purpose each upload is made with
PURPOSES = {"openai": "user_data", "anthropic": "messages", "gemini": "user_data"}
#: seconds an uploaded Gemini file is used for (Gemini keeps it 48 hours)
GEMINI_LIFETIME = 47 * 3600.0
_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}
_ANTHROPIC_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_ANTHROPIC_DOCUMENTS = frozenset({"application/pdf", "text/plain"})
# the call settings an upload uses: where it goes and how it authenticates
_UPLOAD_SETTINGS = ("api_key", "api_base", "organization", "timeout")


def takes_file_id(provider: str | None, kind: str, mime_type: str | None) -> bool:
    """Whether `provider`'s chat takes a block of `kind` ("image", "document") and MIME type
    by the id of a file uploaded to its Files API (see the module docstring)."""
    if provider == "openai":
        return kind == "document" and mime_type == "application/pdf"
    if provider == "anthropic":
        allowed = _ANTHROPIC_IMAGES if kind == "image" else _ANTHROPIC_DOCUMENTS
        return kind in ("image", "document") and mime_type in allowed
    if provider == "gemini":
        return kind in ("image", "document")
    return False


def api_base_of(settings: Mapping[str, Any]) -> str:
    """The base URL a call's settings name ("" for the provider's own)."""
    return str(settings.get("api_base") or settings.get("base_url") or "")


async def upload_file(
    provider: str,
    model: str,
    data: bytes,
    mime_type: str,
    filename: str,
    settings: Mapping[str, Any],
) -> ProviderFile:
    """Upload `data` to `provider`'s Files API with the call's key and base URL (`settings`):
    the file's id and expiry. `MediaUploadError` if the provider refuses it or cannot be
    reached; its message and context hold no credential."""
    kwargs = {k: settings[k] for k in _UPLOAD_SETTINGS if settings.get(k)}
    if "api_base" not in kwargs and settings.get("base_url"):
        kwargs["api_base"] = settings["base_url"]
    litellm = load_litellm()
    try:
        made = await litellm.acreate_file(
            file=(filename, data, mime_type),
            purpose=PURPOSES[provider],
            custom_llm_provider=provider,
            max_retries=0,  # a failed upload fails the call at once (the SDKs would retry)
            **kwargs,
        )
        file_id = str(made.id)
    except Exception as exc:
        raise _upload_error(exc, provider, model, data, mime_type, dict(settings)) from exc
    expires_at = getattr(made, "expires_at", None)
    if provider == "gemini":
        expires_at = time.time() + GEMINI_LIFETIME
    return ProviderFile(file_id, float(expires_at) if expires_at else None)


def _upload_error(
    exc: Exception,
    provider: str,
    model: str,
    data: bytes,
    mime_type: str,
    settings: dict[str, Any],
) -> MediaUploadError:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    detail = redact_detail(str(getattr(exc, "message", None) or exc), settings)[:400]
    redaction.scrub_exception(exc)
    how = f"HTTP {status}" if status is not None else type(exc).__name__
    return MediaUploadError(
        f"uploading {mime_type} media ({len(data)} bytes) to {_NAMES[provider]}'s Files API "
        f"for model {model!r} failed ({how}: {detail}). Nothing was sent to the model. Check "
        "the API key and base URL the Agent uses, or send media inline instead: "
        "MultimodalConfig(image_handling=ImageHandling.BASE64, "
        "document_handling=DocumentHandling.BASE64)",
        context={
            "provider": provider,
            "model": model,
            "status_code": status,
            "sha256": hashlib.sha256(data).hexdigest(),
            "mime_type": mime_type,
            "detail": detail,
        },
    )


__all__ = ["GEMINI_LIFETIME", "PURPOSES", "api_base_of", "takes_file_id", "upload_file"]
