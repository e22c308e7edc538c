"""Checkpointers: `InMemoryCheckpointer` (tests, notebooks), `SqliteCheckpointer` (the embedded
default) and `PgCheckpointer` (PostgreSQL, many processes on many hosts).

Every name is loaded on first access: importing this package (or one of its small modules,
such as `lease` or `thread_ids`) imports no store, and neither aiosqlite nor asyncpg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import (
        BaseCheckpointer,
        CheckpointInfo,
        ThreadPage,
        ThreadSnapshot,
        ThreadSummary,
        Version,
    )
    from tenxgraph.storage.checkpointer.memory import InMemoryCheckpointer
    from tenxgraph.storage.checkpointer.postgres import PgCheckpointer
    from tenxgraph.storage.checkpointer.sqlite import SqliteCheckpointer

_LAZY = {
    "BaseCheckpointer": "tenxgraph.storage.checkpointer.base",
    "CheckpointInfo": "tenxgraph.storage.checkpointer.base",
    "ThreadSnapshot": "tenxgraph.storage.checkpointer.base",
    "ThreadPage": "tenxgraph.storage.checkpointer.base",
    "ThreadSummary": "tenxgraph.storage.checkpointer.base",
    "Version": "tenxgraph.storage.checkpointer.base",
    "InMemoryCheckpointer": "tenxgraph.storage.checkpointer.memory",
    "SqliteCheckpointer": "tenxgraph.storage.checkpointer.sqlite",
    "PgCheckpointer": "tenxgraph.storage.checkpointer.postgres",
}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BaseCheckpointer",
    "CheckpointInfo",
    "InMemoryCheckpointer",
    "PgCheckpointer",
    "SqliteCheckpointer",
    "ThreadPage",
    "ThreadSnapshot",
    "ThreadSummary",
    "Version",
]
