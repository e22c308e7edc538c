"""`LocalMediaStore`: blobs as files in a directory.

Layout: ``<directory>/blobs/<sha[:2]>/<sha>`` holds the bytes, ``<sha>.json`` beside it
its MIME type, size and creation time, and ``<directory>/owners/<sha>/<digest of thread
id>`` marks an owning thread (``<directory>/threads/<digest>`` lists what a thread owns).
Each file is written to a temporary name then renamed, so a reader never sees half a blob.
Calls of one instance are serialised by a lock; for several processes prefer the SQL stores.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from tenxgraph.storage.media.base import DEFAULT_GC_GRACE, MediaStore, StoredMedia

T = TypeVar("T")


class LocalMediaStore(MediaStore):
    """Blobs under `directory` (created on first use)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalMediaStore({str(self.directory)!r})"

    async def _run(self, work: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work()

        return await asyncio.to_thread(locked)

    # -- paths -------------------------------------------------------------------------------

    def _blob(self, sha256: str) -> Path:
        return self.directory / "blobs" / sha256[:2] / sha256

    def _meta(self, sha256: str) -> Path:
        return self.directory / "blobs" / sha256[:2] / f"{sha256}.json"

    def _owner_dir(self, sha256: str) -> Path:
        return self.directory / "owners" / sha256

    def _thread_file(self, thread_id: str) -> Path:
        return self.directory / "threads" / _digest(thread_id)

    # -- the store ---------------------------------------------------------------------------

    async def _write(self, sha256: str, data: bytes, mime_type: str, now: float) -> None:
        def write() -> None:
            if self._meta(sha256).exists():
                return
            _atomic_write(self._blob(sha256), data)
            info = {"size_bytes": len(data), "mime_type": mime_type, "created_at": now}
            _atomic_write(self._meta(sha256), json.dumps(info).encode())  # last: the commit

        await self._run(write)

    async def _read(self, sha256: str) -> bytes | None:
        def read() -> bytes | None:
            if not self._meta(sha256).exists():
                return None
            return self._blob(sha256).read_bytes()

        return await self._run(read)

    def _info(self, sha256: str) -> StoredMedia | None:
        try:
            info = json.loads(self._meta(sha256).read_bytes())
        except FileNotFoundError:
            return None
        return StoredMedia(sha256, int(info["size_bytes"]), str(info["mime_type"]),
                           float(info["created_at"]))  # fmt: skip

    async def ainfo(self, sha256: str) -> StoredMedia | None:
        return await self._run(lambda: self._info(sha256))

    def _drop(self, sha256: str) -> bool:
        existed = self._meta(sha256).exists()
        self._meta(sha256).unlink(missing_ok=True)  # first: the blob is gone for readers
        self._blob(sha256).unlink(missing_ok=True)
        owners = self._owner_dir(sha256)
        if owners.is_dir():
            for mark in owners.iterdir():
                mark.unlink(missing_ok=True)
            owners.rmdir()
        return existed

    async def adelete(self, sha256: str) -> bool:
        return await self._run(lambda: self._drop(sha256))

    async def aadd_owners(self, thread_id: str, sha256s: Iterable[str]) -> set[str]:
        wanted = set(sha256s)

        def add() -> set[str]:
            held = sorted(sha for sha in wanted if self._meta(sha).exists())
            if not held:
                return wanted
            path = self._thread_file(thread_id)
            owned = set(_lines(path))
            for sha256 in held:
                mark = self._owner_dir(sha256) / _digest(thread_id)
                if not mark.exists():
                    _atomic_write(mark, thread_id.encode())
            if not owned.issuperset(held):
                _atomic_write(path, "\n".join(sorted(owned.union(held))).encode())
            return wanted.difference(held)

        return await self._run(add)

    async def aowners(self, sha256: str) -> set[str]:
        def owners() -> set[str]:
            folder = self._owner_dir(sha256)
            if not folder.is_dir():
                return set()
            return {mark.read_text() for mark in folder.iterdir() if not mark.name.startswith(".")}

        return await self._run(owners)

    async def arelease_thread(self, thread_id: str) -> list[str]:
        def release() -> list[str]:
            path = self._thread_file(thread_id)
            deleted = []
            for sha256 in sorted(_lines(path)):
                folder = self._owner_dir(sha256)
                (folder / _digest(thread_id)).unlink(missing_ok=True)
                unowned = folder.is_dir() and not any(folder.iterdir())
                if unowned and self._drop(sha256):
                    deleted.append(sha256)
            path.unlink(missing_ok=True)
            return deleted

        return await self._run(release)

    async def agc(self, *, older_than: float = DEFAULT_GC_GRACE) -> list[str]:
        cutoff = self._cutoff(older_than)

        def sweep() -> list[str]:
            swept = []
            for info in self._all():
                folder = self._owner_dir(info.sha256)
                owned = folder.is_dir() and any(folder.iterdir())
                if not owned and info.created_at <= cutoff and self._drop(info.sha256):
                    swept.append(info.sha256)
            return swept

        return await self._run(sweep)

    def _all(self) -> list[StoredMedia]:
        root = self.directory / "blobs"
        if not root.is_dir():
            return []
        found = (self._info(p.name[:-5]) for p in root.glob("*/*.json"))
        return sorted((i for i in found if i is not None), key=lambda i: i.sha256)

    async def alist(self) -> list[StoredMedia]:
        return await self._run(self._all)


def _digest(thread_id: str) -> str:
    """A file name for a thread id (any text): its sha256."""
    return hashlib.sha256(thread_id.encode()).hexdigest()


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line]
    except FileNotFoundError:
        return []


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


__all__ = ["LocalMediaStore"]
