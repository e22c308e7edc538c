"""Long-term memory: `BaseStore` and its stores, `InMemoryStore`, `SqliteStore` and
`PostgresStore`, for what outlives a thread (see `base`).

Every name is loaded on first access: importing this package imports neither sqlite3's
store nor asyncpg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

if TYPE_CHECKING:
    from tenxgraph.storage.store.base import BaseStore, Item, SearchItem
    from tenxgraph.storage.store.index import IndexConfig
    from tenxgraph.storage.store.memory import InMemoryStore
    from tenxgraph.storage.store.postgres import PostgresStore
    from tenxgraph.storage.store.sqlite import SqliteStore

_LAZY = {
    "BaseStore": "tenxgraph.storage.store.base",
    "Item": "tenxgraph.storage.store.base",
    "SearchItem": "tenxgraph.storage.store.base",
    "IndexConfig": "tenxgraph.storage.store.index",
    "InMemoryStore": "tenxgraph.storage.store.memory",
    "SqliteStore": "tenxgraph.storage.store.sqlite",
    "PostgresStore": "tenxgraph.storage.store.postgres",
}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BaseStore",
    "InMemoryStore",
    "IndexConfig",
    "Item",
    "PostgresStore",
    "SearchItem",
    "SqliteStore",
]
