"""`InMemoryMediaStore`: blobs in this process's memory (the default beside an in-memory
checkpointer); gone when the process ends."""

from __future__ import annotations

from collections.abc import Iterable

from tenxgraph.storage.media.base import DEFAULT_GC_GRACE, MediaStore, StoredMedia


class InMemoryMediaStore(MediaStore):
    """Blobs in dicts. Every method runs without awaiting, so each is atomic on its loop."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._info: dict[str, StoredMedia] = {}
        self._owners: dict[str, set[str]] = {}  # sha256 -> thread ids
        self._owned: dict[str, set[str]] = {}  # thread id -> sha256s

    def __repr__(self) -> str:
        return f"InMemoryMediaStore({len(self._blobs)} blobs)"

    async def _write(self, sha256: str, data: bytes, mime_type: str, now: float) -> None:
        if sha256 not in self._blobs:
            self._blobs[sha256] = data
            self._info[sha256] = StoredMedia(sha256, len(data), mime_type, now)

    async def _read(self, sha256: str) -> bytes | None:
        return self._blobs.get(sha256)

    async def ainfo(self, sha256: str) -> StoredMedia | None:
        return self._info.get(sha256)

    async def adelete(self, sha256: str) -> bool:
        return self._drop(sha256)

    def _drop(self, sha256: str) -> bool:
        for thread_id in self._owners.pop(sha256, ()):
            self._owned.get(thread_id, set()).discard(sha256)
        self._info.pop(sha256, None)
        return self._blobs.pop(sha256, None) is not None

    async def aadd_owners(self, thread_id: str, sha256s: Iterable[str]) -> set[str]:
        missing = set()
        for sha256 in sha256s:
            if sha256 in self._blobs:  # a blob deleted meanwhile is not resurrected
                self._owners.setdefault(sha256, set()).add(thread_id)
                self._owned.setdefault(thread_id, set()).add(sha256)
            else:
                missing.add(sha256)
        return missing

    async def aowners(self, sha256: str) -> set[str]:
        return set(self._owners.get(sha256, ()))

    async def arelease_thread(self, thread_id: str) -> list[str]:
        return self.release_thread_now(thread_id)

    def release_thread_now(self, thread_id: str) -> list[str]:
        """`arelease_thread` without awaiting (for the in-memory checkpointer's evictions)."""
        deleted = []
        for sha256 in sorted(self._owned.pop(thread_id, ())):
            owners = self._owners.get(sha256)
            if owners is not None:
                owners.discard(thread_id)
                if not owners:
                    self._drop(sha256)
                    deleted.append(sha256)
        return deleted

    async def agc(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[str]:
        cutoff = self._cutoff(older_than)
        swept = sorted(
            sha
            for sha, info in self._info.items()
            if not self._owners.get(sha) and info.created_at <= cutoff
        )
        for sha256 in swept:
            self._drop(sha256)
        return swept

    async def alist(self) -> list[StoredMedia]:
        return [self._info[sha] for sha in sorted(self._info)]


__all__ = ["InMemoryMediaStore"]
