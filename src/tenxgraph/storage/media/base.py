"""`MediaStore`: content-addressed bytes (images, audio, documents) kept out of message rows.

A blob's key is the sha256 of its bytes, so the same bytes are stored once however many
messages name them. A message names a stored blob with a `MediaRef` of kind ``"url"`` whose
url is ``tenxgraph://media/<sha256>`` (`media_url`), with its sha256, size and MIME type.

Reference tracking: a blob is *owned* by the threads whose saved messages name it (the
graph records it when it saves a message, `aadd_owners`). Deleting a thread releases its
blobs (`arelease_thread`): those no other thread owns are deleted. Bytes put but never saved
into a thread (a `Message.with_image` never sent) have no owner; `agc(older_than=...)` sweeps
them once they are older than a grace period (a blob about to be saved is not swept).

Provider file ids: an Agent whose `MultimodalConfig` says `FILE_ID` uploads media to its
provider's Files API once and remembers the id per (provider, api base, sha256)
(`aprovider_file`, `aremember_provider_file`, `aforget_provider_file`). The SQL stores keep
them in a table of their own (`tx_media_files`); the others in this process's memory. They
are keyed by content, not by blob: deleting a blob keeps its ids (the same bytes sent again
reuse the upload).
"""

from __future__ import annotations

import hashlib
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from tenxgraph.core.exceptions import ResourceNotFoundError
from tenxgraph.core.state import MediaRef

#: the URL prefix of a blob in a media store: ``tenxgraph://media/<sha256>``
MEDIA_URL_PREFIX = "tenxgraph://media/"
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: how old (seconds) an unowned blob must be before `agc` deletes it: one day
DEFAULT_GC_GRACE = 86_400.0


@dataclass(frozen=True, slots=True)
class StoredMedia:
    """What a store knows of one blob besides its bytes."""

    sha256: str
    size_bytes: int
    mime_type: str
    created_at: float


def media_url(sha256: str) -> str:
    """The url naming a stored blob in a `MediaRef`."""
    return MEDIA_URL_PREFIX + check_sha256(sha256)


def stored_sha256(media: MediaRef | None) -> str | None:
    """The sha256 of the blob `media` names in a media store, or None (inline data, an http
    URL, a provider file id)."""
    if media is None or media.kind != "url" or media.url is None:
        return None
    url = media.url
    if not url.startswith(MEDIA_URL_PREFIX):
        return None
    return check_sha256(url[len(MEDIA_URL_PREFIX) :])


def check_sha256(sha256: str) -> str:
    """`sha256` if it is 64 lowercase hex digits; else `ValueError`."""
    if not isinstance(sha256, str) or _SHA256.fullmatch(sha256) is None:
        raise ValueError(f"not a sha256 (64 lowercase hex digits): {sha256!r}")
    return sha256


@dataclass(frozen=True, slots=True)
class ProviderFile:
    """A provider's id for bytes uploaded to its Files API, and when it expires (epoch
    seconds; None: when the provider deletes it)."""

    file_id: str
    expires_at: float | None = None


#: (provider, api base or "", sha256): how an uploaded file is remembered
FileKey = tuple[str, str, str]


class ProviderFileMemory:
    """Provider file ids in this process's memory (a dict: each call is atomic on a loop)."""

    def __init__(self) -> None:
        self._files: dict[FileKey, ProviderFile] = {}

    async def aprovider_file(
        self, provider: str, api_base: str, sha256: str
    ) -> ProviderFile | None:
        return self._files.get((provider, api_base, sha256))

    async def aremember_provider_file(
        self, provider: str, api_base: str, sha256: str, file: ProviderFile
    ) -> None:
        self._files[(provider, api_base, sha256)] = file

    async def aforget_provider_file(self, provider: str, api_base: str, sha256: str) -> None:
        self._files.pop((provider, api_base, sha256), None)


def _clock() -> float:
    return time.time()


class MediaStore(ABC):
    """Content-addressed blobs with their size and MIME type, and which threads own them.

    Stores implement the abstract methods; `aput` (hashing) and `aget` (the missing-blob
    error) are shared."""

    async def aput(self, data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
        """Store `data` (once: putting the same bytes again stores nothing) and return the
        `MediaRef` naming it: kind "url", url ``tenxgraph://media/<sha256>``, its sha256,
        size and `mime_type` (and `filename`, kept in the reference only)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"MediaStore.aput takes bytes, not {type(data).__name__}")
        if not isinstance(mime_type, str) or "/" not in mime_type:
            raise ValueError(f"mime_type must be a MIME type such as 'image/png': {mime_type!r}")
        data = bytes(data)
        sha256 = hashlib.sha256(data).hexdigest()
        await self._write(sha256, data, mime_type, _clock())
        return MediaRef(
            kind="url",
            url=MEDIA_URL_PREFIX + sha256,
            sha256=sha256,
            size_bytes=len(data),
            mime_type=mime_type,
            filename=filename,
        )

    async def aget(self, sha256: str) -> bytes:
        """The bytes of a blob; `ResourceNotFoundError` if the store does not hold it."""
        data = await self._read(check_sha256(sha256))
        if data is None:
            raise ResourceNotFoundError(
                f"{self!r} holds no media {sha256}: it was deleted (its threads were deleted, "
                "or `agc` swept it) or it was stored in another media store",
                context={"sha256": sha256},
            )
        return data

    async def ahas(self, sha256: str) -> bool:
        """Whether the store holds the blob."""
        return await self.ainfo(sha256) is not None

    # -- what each store implements ----------------------------------------------------------

    @abstractmethod
    async def _write(self, sha256: str, data: bytes, mime_type: str, now: float) -> None:
        """Keep the blob unless already kept (the first MIME type and time stay)."""

    @abstractmethod
    async def _read(self, sha256: str) -> bytes | None: ...

    @abstractmethod
    async def ainfo(self, sha256: str) -> StoredMedia | None:
        """Size, MIME type and creation time of a blob, or None."""

    @abstractmethod
    async def adelete(self, sha256: str) -> bool:
        """Delete a blob (whoever owns it) and its owners; True if it existed."""

    @abstractmethod
    async def aadd_owners(self, thread_id: str, sha256s: Iterable[str]) -> set[str]:
        """Record that `thread_id`'s messages name these blobs (idempotent); returns those it
        could not, because the store does not hold them (never put, or deleted meanwhile by
        a release or `agc`). Once owned, a blob outlives any release or sweep running at the
        same time: the SQL stores lock its row for the owning statement and the deleting one."""

    @abstractmethod
    async def aowners(self, sha256: str) -> set[str]:
        """The threads owning a blob."""

    @abstractmethod
    async def arelease_thread(self, thread_id: str) -> list[str]:
        """Forget the thread's ownerships and delete the blobs it owned that no other thread
        owns; returns their sha256s."""

    @abstractmethod
    async def agc(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[str]:
        """Delete the blobs no thread owns that were stored more than `older_than` seconds
        ago; returns their sha256s."""

    @abstractmethod
    async def alist(self) -> list[StoredMedia]:
        """Every blob's info, by sha256."""

    async def asweepable(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[StoredMedia]:
        """The blobs `agc(older_than=...)` would delete now (by sha256), deleting nothing: the
        SQL stores ask in one query, the others look at every blob."""
        cutoff = self._cutoff(older_than)
        return [
            info
            for info in await self.alist()
            if info.created_at <= cutoff and not await self.aowners(info.sha256)
        ]

    @staticmethod
    def _cutoff(older_than: float) -> float:
        """The creation time at or before which `agc(older_than=...)` sweeps."""
        return _clock() - older_than

    # -- provider file ids (see the module docstring); the SQL stores keep them in a table --

    def _file_memory(self) -> ProviderFileMemory:
        memory: ProviderFileMemory | None = getattr(self, "_provider_files", None)
        if memory is None:
            memory = self._provider_files = ProviderFileMemory()
        return memory

    async def aprovider_file(
        self, provider: str, api_base: str, sha256: str
    ) -> ProviderFile | None:
        """The id `provider` (at `api_base`, "" for its default) gave these bytes, or None."""
        return await self._file_memory().aprovider_file(provider, api_base, sha256)

    async def aremember_provider_file(
        self, provider: str, api_base: str, sha256: str, file: ProviderFile
    ) -> None:
        """Remember (or replace) the id `provider` gave these bytes."""
        await self._file_memory().aremember_provider_file(provider, api_base, sha256, file)

    async def aforget_provider_file(self, provider: str, api_base: str, sha256: str) -> None:
        """Forget an id (the provider no longer knows it)."""
        await self._file_memory().aforget_provider_file(provider, api_base, sha256)

    async def asetup(self) -> None:  # noqa: B027 - optional hook
        """Create tables or folders. Safe to call more than once."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


__all__ = [
    "DEFAULT_GC_GRACE",
    "MEDIA_URL_PREFIX",
    "FileKey",
    "MediaStore",
    "ProviderFile",
    "ProviderFileMemory",
    "StoredMedia",
    "check_sha256",
    "media_url",
    "stored_sha256",
]
