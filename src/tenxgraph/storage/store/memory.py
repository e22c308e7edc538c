"""`InMemoryStore`: items kept in this process, for tests, notebooks and one-process apps.

Values are kept as their JSON text, as the SQL stores keep them: a read gives a fresh dict
(changing it changes nothing stored), and what reads back is exactly what SQLite or
PostgreSQL would give. A lock guards the items: the sync twins run on another thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tenxgraph.storage.store._values import Namespace, join, prefix_range
from tenxgraph.storage.store.base import BaseStore, Row, VectorRow
from tenxgraph.storage.store.index import IndexConfig


class InMemoryStore(BaseStore):
    """Items in a dict of this instance, gone with it. Unbounded: for data that fits in
    memory (use `SqliteStore` to keep memories across restarts). `index`: embed items for
    `asearch(..., query=...)` (`IndexConfig`)."""

    def __init__(self, *, index: IndexConfig | None = None) -> None:
        self._set_index(index)
        self._items: dict[tuple[str, str], Row] = {}
        self._vectors: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._items)} items)"

    async def _write(
        self, namespace: str, key: str, value: str, now: float, vectors: bytes | None
    ) -> None:
        await self._write_many([(namespace, key, value, now, vectors)])

    async def _write_many(self, rows: list[tuple[str, str, str, float, bytes | None]]) -> None:
        with self._lock:  # no reader sees a part of the batch
            for namespace, key, value, now, vectors in rows:
                old = self._items.get((namespace, key))
                created = now if old is None else old[3]
                self._items[namespace, key] = (namespace, key, value, created, now)
                if vectors is None:
                    self._vectors.pop((namespace, key), None)
                else:
                    self._vectors[namespace, key] = vectors

    async def _read(self, namespace: str, key: str) -> Row | None:
        with self._lock:
            return self._items.get((namespace, key))

    async def _remove(self, namespace: str, key: str) -> None:
        with self._lock:
            self._items.pop((namespace, key), None)
            self._vectors.pop((namespace, key), None)

    async def _rows(self, prefix: Namespace, limit: int | None, offset: int) -> list[Row]:
        under = _under(prefix)
        with self._lock:
            rows = [row for row in self._items.values() if under(row[0])]
        rows.sort(key=_newest_first)
        return rows[offset:] if limit is None else rows[offset : offset + limit]

    async def _vector_rows(self, prefix: Namespace) -> list[VectorRow]:
        under = _under(prefix)
        with self._lock:
            return [
                (*self._items[place], blob)
                for place, blob in self._vectors.items()
                if under(place[0])
            ]

    async def _namespace_texts(self, prefix: Namespace) -> list[str]:
        under = _under(prefix)
        with self._lock:
            return sorted({ns for ns, _ in self._items if under(ns)})


def _newest_first(row: Row) -> tuple[float, str, str]:
    return -row[4], row[1], row[0]


def _under(prefix: Namespace) -> Callable[[str], bool]:
    """Whether a stored namespace text is `prefix` or under it, as the SQL stores' range
    says."""
    bounds = prefix_range(prefix)
    if bounds is None:
        return lambda text: True
    exact, (low, high) = join(prefix), bounds
    return lambda text: text == exact or low <= text < high


__all__ = ["InMemoryStore"]
